"""Burr's version of the peers' work (runs in its own environment, see `peers/__init__.py`).

Written as Burr's users write it: `@action(reads=..., writes=...)` async functions that take the
`State` and return `state.update(...)`, transitions with `when(...)` / `default` conditions; the
graph is built once (`GraphBuilder`), and each request is a new `Application` over it (built
with its entry point and initial state, no tracker, no persister), run with
`await app.arun(halt_after=[...])`. Nothing here imports Burr at module level: `build` does,
inside the worker that runs in Burr's environment.
"""

import warnings
from collections.abc import Callable
from typing import Any

TELEMETRY_OFF: dict = {}  # apache-burr has no telemetry; tracking is only what `with_tracker` adds


def telemetry() -> str:
    """How tracking stands once the library is loaded."""
    from burr import telemetry as burr_telemetry

    with warnings.catch_warnings():  # the stub that stayed behind warns that it is deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        enabled = getattr(burr_telemetry, "is_telemetry_enabled", lambda: False)()
    if enabled:
        raise RuntimeError("Burr telemetry is on")
    return "no tracker (with_tracker not called; the durable work adds a persister); Burr's telemetry is off (removed in apache-burr)"


def build(work: str, S: Any) -> Callable[[int], Any]:
    """`serve(x)`: one request of `work` (a name in `S.PEER_WORKS`) on a graph built here."""
    builders = {"peer_chain": _chain, "peer_agent": _agent, "peer_if_else": _branch}
    if work not in builders:
        raise S.Unavailable(f"{work} is not written for Burr (it has no per-action retry policy)")
    return builders[work](S)


def _serve(graph: Any, entrypoint: str, halt_after: list, result: str) -> Callable[..., Any]:
    from burr.core import ApplicationBuilder

    async def serve(**state: Any) -> Any:
        app = ApplicationBuilder().with_graph(graph).with_entrypoint(entrypoint).with_state(**state).build()
        _, _, final = await app.arun(halt_after=halt_after)
        return final[result]

    return serve


def _chain(S: Any) -> Callable[[int], Any]:
    from burr.core import State, action
    from burr.core.graph import GraphBuilder

    def make_step(k: int) -> Any:
        @action(reads=["value"], writes=["value"])
        async def step(state: State) -> State:
            return state.update(value=S.peer_mix(state["value"], k))

        return step

    names = [f"step_{k}" for k in range(S.PEER_CHAIN_NODES)]
    graph = (
        GraphBuilder()
        .with_actions(**{name: make_step(k) for k, name in enumerate(names)})
        .with_transitions(*zip(names, names[1:]))
        .build()
    )
    serve = _serve(graph, names[0], [names[-1]], "value")
    return lambda x: serve(value=x)


def _agent(S: Any) -> Callable[[int], Any]:
    from burr.core import State, action, default, when
    from burr.core.graph import GraphBuilder

    mix, iterations = S.peer_mix, S.PEER_AGENT_ITERATIONS

    @action(reads=["step"], writes=["step", "wants_tool"])
    async def model(state: State) -> State:
        step = state["step"] + 1
        return state.update(step=step, wants_tool=step < iterations)

    @action(reads=["acc", "step"], writes=["acc"])
    async def tool(state: State) -> State:
        return state.update(acc=mix(state["acc"], state["step"]))

    @action(reads=["acc", "step"], writes=["result"])
    async def finish(state: State) -> State:
        return state.update(result=mix(state["acc"], state["step"]))

    graph = (
        GraphBuilder()
        .with_actions(model=model, tool=tool, finish=finish)
        .with_transitions(("model", "tool", when(wants_tool=True)), ("model", "finish", default), ("tool", "model"))
        .build()
    )
    serve = _serve(graph, "model", ["finish"], "result")
    return lambda x: serve(step=0, acc=x, wants_tool=False)


def _branch(S: Any) -> Callable[[int], Any]:
    from burr.core import State, action, default, when
    from burr.core.graph import GraphBuilder

    @action(reads=["x"], writes=["even"])
    async def check(state: State) -> State:
        return state.update(even=state["x"] % 2 == 0)

    @action(reads=["x"], writes=["result"])
    async def half(state: State) -> State:
        return state.update(result=state["x"] // 2)

    @action(reads=["x"], writes=["result"])
    async def triple(state: State) -> State:
        return state.update(result=3 * state["x"] + 1)

    graph = (
        GraphBuilder()
        .with_actions(check=check, half=half, triple=triple)
        .with_transitions(("check", "half", when(even=True)), ("check", "triple", default))
        .build()
    )
    serve = _serve(graph, "check", ["half", "triple"], "result")
    return lambda x: serve(x=x)


# ---------------------------------------------------------------------------
# The durable work: the chain of ten actions, with a state persister


DURABLE = {work: {"sync": "a save after every action"} for work in ("durable_sqlite", "durable_postgres")}
"""The durable work written for Burr (one mode: the application saves after each action, before the next)."""


def durable(work: str, mode: str, S: Any, place: dict) -> Any:
    """Burr's durable chain as its persistence docs write it: a persister made once
    (`SQLLitePersister(db_path, table_name)` / `PostgreSQLPersister.from_values(...)`,
    `initialize()`), each request a new `Application` with its own `app_id`
    (`with_identifiers`) and `.with_state_persister(persister)`, which saves the state after every
    action; `app.run(halt_after=[...])` (the persisters are synchronous, so are the actions).
    Read back with `persister.load(partition_key, app_id)`."""
    from burr.core import ApplicationBuilder, State, action
    from burr.core.graph import GraphBuilder

    folder = S.durable_work.Folder(place, "burr")
    if work == "durable_sqlite":
        from burr.core.persistence import SQLLitePersister

        persister = SQLLitePersister(
            db_path=folder.file("burr.db"), table_name="burr_state", connect_kwargs={"check_same_thread": False}
        )
        note = f"SQLLitePersister(db_path, table_name): {S.durable_work.sqlite_settings(persister.connection)}"
    else:
        from burr.integrations.persisters.b_psycopg2 import PostgreSQLPersister

        server = S.postgres_place(place, work)
        persister = PostgreSQLPersister.from_values(
            server["dbname"], server["user"], "", server["host"], server["port"], table_name="burr_state"
        )
        note = "PostgreSQLPersister.from_values(...): one psycopg2 connection, a commit per save"
    persister.initialize()

    def make_step(k: int) -> Any:
        @action(reads=["value"], writes=["value"])
        def step(state: State) -> State:
            return state.update(value=S.peer_mix(state["value"], k))

        return step

    names = [f"step_{k}" for k in range(S.DURABLE_CHAIN_NODES)]
    graph = (
        GraphBuilder()
        .with_actions(**{name: make_step(k) for k, name in enumerate(names)})
        .with_transitions(*zip(names, names[1:]))
        .build()
    )
    new_id = S.durable_work.run_ids("burr")
    last: list = []

    async def serve(x: int) -> int:
        app_id = new_id()
        app = (
            ApplicationBuilder()
            .with_graph(graph)
            .with_entrypoint(names[0])
            .with_state(value=x)
            .with_identifiers(app_id=app_id, partition_key="bench")
            .with_state_persister(persister)
            .build()
        )
        _, _, final = app.run(halt_after=[names[-1]])
        last[:] = [app_id]
        return final["value"]

    async def stored() -> int:
        loaded = persister.load("bench", last[0])
        if loaded is None:
            raise S.CountMismatch(f"{work}: nothing stored for app {last[0]}")
        if loaded["sequence_id"] != S.DURABLE_CHAIN_NODES - 1 or loaded["position"] != names[-1]:
            raise S.CountMismatch(f"{work}: the stored state is at {loaded['position']} #{loaded['sequence_id']}")
        return loaded["state"]["value"]

    def close() -> None:
        try:
            persister.connection.close()
        finally:
            folder.remove()

    return S.DurableSystem(serve, stored, f"Burr: {note}", close)
