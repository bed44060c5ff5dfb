"""LangGraph's version of the peers' work (runs in its own environment, see `peers/__init__.py`).

Written as LangGraph's users write it: a `StateGraph` over a `TypedDict` state, `async def` nodes
that return the keys they update, plain and conditional edges; compiled once, without a
checkpointer; each request is one `await graph.ainvoke(input)`. Nothing here imports LangGraph
at module level: `build` does, inside the worker that runs in LangGraph's environment.
"""

from collections.abc import Callable
from typing import Any, TypedDict

# LangSmith tracing off (both of its variable namespaces), set before langchain-core is imported.
TELEMETRY_OFF = {
    "LANGSMITH_TRACING": "false",
    "LANGSMITH_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}


class ChainState(TypedDict):
    value: int


class AgentState(TypedDict, total=False):
    step: int
    acc: int
    wants_tool: bool
    result: int


class BranchState(TypedDict, total=False):
    x: int
    result: int


def telemetry() -> str:
    """How tracing stands once the library is loaded (raises if it is on)."""
    from langsmith.utils import tracing_is_enabled

    if tracing_is_enabled():
        raise RuntimeError("LangSmith tracing is on")
    return "LangSmith tracing off (LANGSMITH_TRACING / LANGCHAIN_TRACING_V2 = false; tracing_is_enabled() is False)"


def build(work: str, S: Any) -> Callable[[int], Any]:
    """`serve(x)`: one request of `work` (a name in `S.PEER_WORKS`) on a graph compiled here."""
    return {"peer_chain": _chain, "peer_agent": _agent, "peer_if_else": _branch, "peer_retry": _retry}[work](S)


def _chain_step(mix: Callable[[int, int], int], k: int) -> Callable[[ChainState], Any]:
    async def step(state: ChainState) -> dict[str, int]:
        return {"value": mix(state["value"], k)}

    return step


def _chain(S: Any) -> Callable[[int], Any]:
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(ChainState)
    previous = START
    for k in range(S.PEER_CHAIN_NODES):
        builder.add_node(f"step_{k}", _chain_step(S.peer_mix, k))
        builder.add_edge(previous, f"step_{k}")
        previous = f"step_{k}"
    builder.add_edge(previous, END)
    graph = builder.compile()

    async def serve(x: int) -> int:
        return (await graph.ainvoke({"value": x}))["value"]

    return serve


def _agent(S: Any) -> Callable[[int], Any]:
    from langgraph.graph import END, START, StateGraph

    mix, iterations = S.peer_mix, S.PEER_AGENT_ITERATIONS

    async def model(state: AgentState) -> dict[str, Any]:
        step = state["step"] + 1
        return {"step": step, "wants_tool": step < iterations}

    def route(state: AgentState) -> str:
        return "tool" if state["wants_tool"] else "finish"

    async def tool(state: AgentState) -> dict[str, int]:
        return {"acc": mix(state["acc"], state["step"])}

    async def finish(state: AgentState) -> dict[str, int]:
        return {"result": mix(state["acc"], state["step"])}

    builder = StateGraph(AgentState)
    builder.add_node("model", model)
    builder.add_node("tool", tool)
    builder.add_node("finish", finish)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, ["tool", "finish"])
    builder.add_edge("tool", "model")
    builder.add_edge("finish", END)
    graph = builder.compile()

    async def serve(x: int) -> int:
        return (await graph.ainvoke({"step": 0, "acc": x}))["result"]

    return serve


def _branch(S: Any) -> Callable[[int], Any]:
    from langgraph.graph import END, START, StateGraph

    def is_even(state: BranchState) -> str:
        return "half" if state["x"] % 2 == 0 else "triple"

    async def half(state: BranchState) -> dict[str, int]:
        return {"result": state["x"] // 2}

    async def triple(state: BranchState) -> dict[str, int]:
        return {"result": 3 * state["x"] + 1}

    builder = StateGraph(BranchState)
    builder.add_node("half", half)
    builder.add_node("triple", triple)
    builder.add_conditional_edges(START, is_even, ["half", "triple"])
    builder.add_edge("half", END)
    builder.add_edge("triple", END)
    graph = builder.compile()

    async def serve(x: int) -> int:
        return (await graph.ainvoke({"x": x}))["result"]

    return serve


def _retry(S: Any) -> Callable[[int], Any]:
    """One node with LangGraph's retry policy (two attempts, no backoff, only the transient error)."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import RetryPolicy

    call = S.peer_flaky_call()

    async def flaky(state: ChainState) -> dict[str, int]:
        return {"value": call(state["value"])}

    builder = StateGraph(ChainState)
    policy = RetryPolicy(max_attempts=2, initial_interval=0.0, jitter=False, retry_on=S.PeerTransient)
    builder.add_node("flaky", flaky, retry_policy=policy)
    builder.add_edge(START, "flaky")
    builder.add_edge("flaky", END)
    graph = builder.compile()

    async def serve(x: int) -> int:
        return (await graph.ainvoke({"value": x}))["value"]

    return serve


# ---------------------------------------------------------------------------
# The durable work: the same chain of ten nodes, compiled with a checkpointer


DURABLE = {
    work: {"sync": 'durability="sync"', "async": 'durability="async" (default)'}
    for work in ("durable_sqlite", "durable_postgres")
}
"""The durable work written for LangGraph, and its durability modes (`invoke(..., durability=...)`)."""


def _durable_step(mix: Callable[[int, int], int], k: int) -> Callable[[ChainState], Any]:
    def step(state: ChainState) -> dict[str, int]:
        return {"value": mix(state["value"], k)}

    return step


def durable(work: str, mode: str, S: Any, place: dict) -> Any:
    """LangGraph's durable chain as its persistence docs write it: `SqliteSaver` /
    `PostgresSaver` (`from_conn_string`, `setup()`), the graph compiled with it, each request
    `graph.invoke(input, {"configurable": {"thread_id": ...}}, durability=mode)` on a new thread id
    (the savers are synchronous, so are the nodes and the call); read back with `graph.get_state`."""
    import contextlib

    from langgraph.graph import END, START, StateGraph

    stack = contextlib.ExitStack()
    folder = S.durable_work.Folder(place, "langgraph")
    stack.callback(folder.remove)
    if work == "durable_sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver = stack.enter_context(SqliteSaver.from_conn_string(folder.file("checkpoints.sqlite")))
        saver.setup()
        note = f"SqliteSaver.from_conn_string(path): {S.durable_work.sqlite_settings(saver.conn)}"
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        server = S.postgres_place(place, work)
        saver = stack.enter_context(PostgresSaver.from_conn_string(server["url"]))
        saver.setup()
        note = "PostgresSaver.from_conn_string(url): one connection, autocommit (its docs' setup)"
    builder = StateGraph(ChainState)
    previous = START
    for k in range(S.DURABLE_CHAIN_NODES):
        builder.add_node(f"step_{k}", _durable_step(S.peer_mix, k))
        builder.add_edge(previous, f"step_{k}")
        previous = f"step_{k}"
    builder.add_edge(previous, END)
    graph = builder.compile(checkpointer=saver)
    new_id = S.durable_work.run_ids("langgraph")
    last: list = []

    async def serve(x: int) -> int:
        config = {"configurable": {"thread_id": new_id()}}
        result = graph.invoke({"value": x}, config, durability=mode)["value"]
        last[:] = [config]
        return result

    async def stored() -> int:
        config = last[0]
        state = graph.get_state(config)
        if state.next:
            raise S.CountMismatch(f"{work}: the stored thread still has {state.next} to run")
        saved = len(list(saver.list(config)))
        if saved < S.DURABLE_CHAIN_NODES:
            raise S.CountMismatch(f"{work}: {saved} checkpoints stored for {S.DURABLE_CHAIN_NODES} nodes")
        return state.values["value"]

    return S.DurableSystem(serve, stored, f"LangGraph: {note}", stack.close)
