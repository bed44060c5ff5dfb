"""The runs the inspector's tests look at: one store holding a run in every status.

`fill(store)` saves, through `Checkpointing` as a user's program would, a finished run, a run
halted at SUSPEND, one parked at a node's gate, one that panicked (a message full of HTML), one
with its history kept, one taken on another graph, and a finished run whose id is hostile HTML
holding a slash. `factory` (for `--graph support.inspector_programs:factory`) returns the graph
they were taken on. `fill_many(store, n)` saves n small finished runs (the benchmark's list).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from amrita_sense import SUSPEND, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import Checkpointing
from amrita_sense.node.wrapper import Node
from amrita_sense.streaming import SuspendObjectStream
from support.durable_support import abandon, park, tag

FAILING: set[str] = set()
"""Names of the nodes that raise (the graph is the same either way: the same fingerprint)."""
PANIC_MESSAGE = '<b>bad</b> & "worse" <script>alert(1)</script>'
HOSTILE_ID = '<img src=x onerror=alert(1)>/&"quoted" run'


def _step(name: str) -> Any:
    def body() -> str:
        if name in FAILING:
            raise ValueError(PANIC_MESSAGE)
        return name

    body.__name__ = body.__qualname__ = name
    return Node()(body)


A, B, C = _step("alpha"), _step("beta"), _step("gamma")
GRAPH = NodeCompose(A, SUSPEND, B, C).render()
OTHER = NodeCompose(_step("elsewhere"), _step("other")).render()


def factory() -> Any:
    """The graph every run of `fill` (but the foreign one) was taken on."""
    return GRAPH


@dataclass(frozen=True)
class Expected:
    """What the inspector must say of one filled run."""

    status: str
    position: str
    parked: str | None = None
    panic: bool = False
    history: int = 0
    drawable: bool = True


EXPECTED = {
    "finished": Expected("finished", "idle"),
    "halted": Expected("halted", "idle"),
    "parked": Expected("suspended", "gate", parked=tag("gamma")),
    "panicked": Expected("panicked", "idle", panic=True),
    "with-history": Expected("finished", "idle", history=4),
    "foreign": Expected("finished", "idle", drawable=False),
    HOSTILE_ID: Expected("finished", "idle"),
}


async def _run(store: Any, run_id: str, graph: Any, runs: int, **policy: Any) -> None:
    interp = WorkflowInterpreter(graph)
    policy.setdefault("every_nodes", None)
    interp.checkpointing = Checkpointing(store, run_id, **policy)
    for _ in range(runs):
        await interp.run()


async def _parked(store: Any, run_id: str) -> None:
    stream = SuspendObjectStream()
    interp = WorkflowInterpreter(GRAPH, object_io=stream)
    interp.checkpointing = Checkpointing(store, run_id, every_nodes=None)
    await interp.run()  # halts at SUSPEND; the next run parks at gamma's own gate
    task = await park(stream, interp.run, tag("gamma"))
    await abandon(task)


async def _panicked(store: Any, run_id: str) -> None:
    FAILING.add("alpha")
    try:
        await _run(store, run_id, GRAPH, 1)
    except ValueError:
        pass
    finally:
        FAILING.discard("alpha")


async def _fill(store: Any) -> None:
    await _run(store, "finished", GRAPH, 2)
    await _run(store, "halted", GRAPH, 1)
    await _parked(store, "parked")
    await _panicked(store, "panicked")
    await _run(store, "with-history", GRAPH, 2, every_nodes=1, history=True)
    await _run(store, "foreign", OTHER, 1)
    await _run(store, HOSTILE_ID, GRAPH, 2)


def fill(store: Any) -> dict[str, Expected]:
    """Save the runs of `EXPECTED` into `store` (a synchronous store); `EXPECTED`."""
    asyncio.run(_fill(store))
    return EXPECTED


def fill_many(store: Any, count: int) -> None:
    """`count` finished runs `run-00000`...: each the two saves of a run through SUSPEND."""

    async def go() -> None:
        for index in range(count):
            await _run(store, f"run-{index:05d}", GRAPH, 2)

    asyncio.run(go())
