"""One rendered graph shared by many threads, each with its own event loop (the thread model of the
README): 8 threads run 1,000 interpreters over one graph rendered before they start, with the GIL
switching as often as it can, and every run's trace equals the one the same run gave serially.

The graph mixes what a run can do without parking: inline sync nodes, `async def` nodes, worker-thread
(`wrap_to_async`) nodes, IF / ELSE, WHILE, a subroutine (FN / CALL / RET), Try / CATCH, and injection:
each run gets its own `RunCtx` through `extra_kwargs`, plus `Depends` providers (one per call, one
`use_cache`). Nothing in a trace depends on timing, so the traces are deterministic per seed.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from amrita_sense import CALL, IF, WHILE, Node, NodeCompose, Try, WorkflowInterpreter
from amrita_sense.hook._dispatch_lock import DispatchLock
from amrita_sense.hook.matcher import Depends
from amrita_sense.instructions import FN

THREADS = 8
RUNS_PER_THREAD = 125
RUNS = THREADS * RUNS_PER_THREAD
CONCURRENT_PER_LOOP = 25  # runs in flight at once on one thread's loop
GUARD = 120.0  # seconds: turns a hang into a failure; never reached when the code is right


class RunCtx:
    """What one run's nodes see (injected by name and type from `extra_kwargs`)."""

    __slots__ = ("loops", "seed", "trace")

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.trace: list[tuple] = []
        self.loops = 0


inline = Node(wrap_to_async=False)


def doubled(ctx: RunCtx) -> int:
    return ctx.seed * 2


def label(ctx: RunCtx) -> str:
    return f"run-{ctx.seed}"


@inline
def start(ctx: RunCtx) -> None:
    ctx.trace.append(("start", ctx.seed))


@Node()
async def fetch(ctx: RunCtx) -> None:
    await asyncio.sleep(0)
    ctx.trace.append(("fetch", ctx.seed % 7))


@Node()  # a worker-thread node
def crunch(ctx: RunCtx, twice: int = Depends(doubled)) -> None:
    ctx.trace.append(("crunch", sum(range(ctx.seed % 50)), twice))


@inline
def is_even(ctx: RunCtx) -> bool:
    return ctx.seed % 2 == 0


@inline
def even(ctx: RunCtx) -> None:
    ctx.trace.append(("even",))


@Node()
async def odd(ctx: RunCtx) -> None:
    ctx.trace.append(("odd",))


@inline
def more(ctx: RunCtx) -> bool:
    return ctx.loops < ctx.seed % 4


@Node()
def loop_body(ctx: RunCtx) -> None:  # a worker-thread node in a loop body
    ctx.loops += 1
    ctx.trace.append(("loop", ctx.loops))


@inline
def sub_first(ctx: RunCtx, name: str = Depends(label, use_cache=True)) -> None:
    ctx.trace.append(("sub", name))


@Node()
async def sub_second(ctx: RunCtx, name: str = Depends(label, use_cache=True)) -> None:
    await asyncio.sleep(0)
    ctx.trace.append(("sub2", name))


@inline
def risky(ctx: RunCtx) -> None:
    if ctx.seed % 3 == 0:
        raise ValueError(ctx.seed)
    ctx.trace.append(("safe",))


@inline
def handler(ctx: RunCtx, exc_val: ValueError) -> None:
    ctx.trace.append(("caught", exc_val.args[0]))


@Node()
async def finish(ctx: RunCtx) -> None:
    ctx.trace.append(("end", len(ctx.trace)))


def shared_graph() -> Any:
    return NodeCompose(
        start,
        fetch,
        crunch,
        IF(is_even, even).ELSE(odd),
        WHILE(more).ACTION(loop_body),
        FN("sub", NodeCompose(sub_first, sub_second)),
        CALL("sub"),
        Try(risky).CATCH(ValueError, handler),
        finish,
    ).render()


async def one_run(graph: Any, seed: int) -> list[tuple]:
    ctx = RunCtx(seed)
    await WorkflowInterpreter(graph, extra_kwargs={"ctx": ctx}).run()
    return ctx.trace


async def serial_traces(graph: Any) -> list[list[tuple]]:
    return [await one_run(graph, seed) for seed in range(RUNS)]


async def thread_share(graph: Any, seeds: range, traces: dict, failures: list) -> None:
    for at in range(seeds.start, seeds.stop, CONCURRENT_PER_LOOP):
        batch = range(at, min(at + CONCURRENT_PER_LOOP, seeds.stop))
        results = await asyncio.gather(*(one_run(graph, seed) for seed in batch), return_exceptions=True)
        for seed, result in zip(batch, results):
            if isinstance(result, BaseException):
                failures.append((seed, repr(result)))
            else:
                traces[seed] = result


def run_in_threads(graph: Any, new_loop: Callable[[], asyncio.AbstractEventLoop]) -> tuple[dict, list]:
    traces: dict[int, list[tuple]] = {}
    failures: list[tuple] = []
    barrier = threading.Barrier(THREADS)

    def worker(index: int) -> None:
        loop = new_loop()
        try:
            barrier.wait(GUARD)
            seeds = range(index * RUNS_PER_THREAD, (index + 1) * RUNS_PER_THREAD)
            loop.run_until_complete(asyncio.wait_for(thread_share(graph, seeds, traces, failures), GUARD))
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append((f"thread {index}", repr(exc)))
        finally:
            loop.close()

    threads = [threading.Thread(target=worker, args=(i,), name=f"stress-{i}") for i in range(THREADS)]
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(GUARD)
    finally:
        sys.setswitchinterval(previous)
    assert not any(thread.is_alive() for thread in threads), "a thread did not finish"
    return traces, failures


def loop_kinds() -> list[Any]:
    kinds = [pytest.param(asyncio.new_event_loop, id="asyncio")]
    try:
        import uvloop
    except ImportError:
        return kinds
    return [*kinds, pytest.param(uvloop.new_event_loop, id="uvloop")]


def test_traces_are_deterministic_per_seed():
    graph = shared_graph()
    first = asyncio.run(one_run(graph, 6))
    assert first == [
        ("start", 6),
        ("fetch", 6),
        ("crunch", sum(range(6)), 12),
        ("even",),
        ("loop", 1),
        ("loop", 2),
        ("sub", "run-6"),
        ("sub2", "run-6"),
        ("caught", 6),
        ("end", 9),
    ]
    assert asyncio.run(one_run(graph, 7))[3:5] == [("odd",), ("loop", 1)]


@pytest.mark.parametrize("new_loop", loop_kinds())
def test_one_graph_many_threads_many_loops(new_loop):
    graph = shared_graph()  # rendered once, before any thread starts
    expected = asyncio.run(serial_traces(graph))
    traces, failures = run_in_threads(graph, new_loop)
    assert failures == []
    assert len(traces) == RUNS
    wrong = [seed for seed in range(RUNS) if traces[seed] != expected[seed]]
    assert wrong == [], f"{len(wrong)} runs traced differently from their serial run, first {wrong[:5]}"


def test_dispatch_lock_hands_over_to_another_threads_loop():
    """One event type's dispatch lock, waited on from another thread's loop, is handed over there."""
    lock = DispatchLock()
    assert lock.try_take()
    waiting, got = threading.Event(), []

    async def wait_for_it() -> None:
        pending = asyncio.ensure_future(lock.acquire())
        while not lock._waiters:
            await asyncio.sleep(0)
        waiting.set()
        got.append(await asyncio.wait_for(pending, GUARD))
        lock.release()

    other = threading.Thread(target=asyncio.run, args=(wait_for_it(),))
    other.start()
    assert waiting.wait(GUARD)

    async def release_here() -> None:  # released on this thread's loop, not the waiter's
        lock.release()

    asyncio.run(release_here())
    other.join(GUARD)
    assert got == [True]
    assert lock.try_take()
