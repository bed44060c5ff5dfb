"""pydantic-graph's version of the durable work (runs in its own environment, see `peers/__init__.py`).

pydantic-graph 2.x (the `pydantic-graph` peer) has no state persistence; 1.x, its last line with it,
runs the durable work here. Written as its persistence docs write it: `BaseNode` dataclasses whose
`async run(ctx)` returns the next node (the last returns `End(value)`), the state a dataclass in
`ctx.state`, a `Graph(nodes=...)` made once; each request is one `await graph.run(Step0(),
state=..., persistence=FileStatePersistence(Path(f"{run_id}.json")))`, a new file per run (as its
docs advise), which snapshots the state and the next node before each node runs and the end after
it. Read back with `persistence.load_all()`. No SQLite or Postgres persistence ships with it: the
table shows it in a column of its own. Nothing here imports pydantic-graph at module level.
"""

import dataclasses
import importlib.util
import warnings
from collections.abc import Callable
from typing import Any

TELEMETRY_OFF: dict = {}  # instrumentation goes through logfire-api, a no-op unless logfire is installed

DURABLE = {"durable_file": {"sync": "a snapshot before each node"}}
"""The durable work written for pydantic-graph 1.x (one mode: each snapshot written before the node runs)."""


@dataclasses.dataclass
class ChainState:
    value: int


def telemetry() -> str:
    """How instrumentation stands once the library is loaded (raises if logfire is there)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pydantic_graph  # noqa: F401 - loads logfire-api the way the library does

    if importlib.util.find_spec("logfire") is not None:
        raise RuntimeError("logfire is installed in this environment")
    return "logfire not installed and not configured: logfire-api's spans are no-ops"


def build(work: str, S: Any) -> Callable[[int], Any]:
    raise S.Unavailable(f"{work} is not written for pydantic-graph 1.x (the pydantic-graph peer, 2.x, runs it)")


def _graph(S: Any) -> tuple:
    """The chain's ten node classes (the last ends the run with the value) and the graph."""
    with warnings.catch_warnings():  # 1.x warns that the BaseNode API goes in 2.x (why it is pinned)
        warnings.simplefilter("ignore")
        from pydantic_graph import BaseNode, End, Graph, GraphRunContext

    classes: list = []
    after: Any = None
    for k in reversed(range(S.DURABLE_CHAIN_NODES)):

        def make_run(k: int, after: Any) -> Any:
            async def run(self: Any, ctx: Any) -> Any:
                ctx.state.value = S.peer_mix(ctx.state.value, k)
                return after() if after is not None else End(ctx.state.value)

            run.__annotations__ = {
                "ctx": GraphRunContext[ChainState],
                "return": after if after is not None else End[int],
            }
            return run

        cls = dataclasses.make_dataclass(
            f"Step{k}", [], bases=(BaseNode[ChainState, None, int],), namespace={"run": make_run(k, after)}
        )
        cls.__module__ = __name__
        classes.insert(0, cls)
        after = cls
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = Graph(nodes=classes, state_type=ChainState, run_end_type=int)
    return classes, graph


def durable(work: str, mode: str, S: Any, place: dict) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pydantic_graph import End
        from pydantic_graph.persistence.file import FileStatePersistence

    classes, graph = _graph(S)
    folder = S.durable_work.Folder(place, "pydantic-graph")
    new_id = S.durable_work.run_ids("pg")
    last: list = []

    async def serve(x: int) -> int:
        from pathlib import Path

        persistence = FileStatePersistence(Path(folder.file(f"{new_id()}.json")))
        result = await graph.run(classes[0](), state=ChainState(x), persistence=persistence)
        last[:] = [persistence]
        return result.output

    async def stored() -> int:
        snapshots = await last[0].load_all()
        if len(snapshots) != S.DURABLE_CHAIN_NODES + 1 or snapshots[-1].kind != "end":
            raise S.CountMismatch(f"{work}: {len(snapshots)} snapshots stored, the last a {snapshots[-1].kind!r} one")
        end = snapshots[-1].result
        if not isinstance(end, End):
            raise S.CountMismatch(f"{work}: the last snapshot holds {end!r}")
        return end.data

    note = "FileStatePersistence: a JSON file per run, rewritten whole at each snapshot (no fsync)"
    return S.DurableSystem(serve, stored, f"pydantic-graph: {note}", folder.remove)
