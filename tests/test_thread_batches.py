"""Consecutive default `@Node()` sync nodes run as one worker-thread batch, with the behaviour of one
hand-off per node: off the loop thread, in the caller's context, one at a time, in order; suspends,
injections, stops and cancellation take effect at the next node boundary; an exception in the middle
of a batch is that node's exception."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from amrita_sense import Node, NodeCompose, PointerVector, WorkflowInterpreter
from amrita_sense.runtime import offload
from amrita_sense.streaming import SuspendObjectStream

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")
HOLD = 5.0


class Chain:
    """`n` worker-thread nodes that log what they see; node `hold` waits for `release`."""

    def __init__(self, n: int, hold: int | None = None, fail: int | None = None):
        self.log: list[tuple] = []
        self.reached = threading.Event()
        self.release = threading.Event()
        self.active = 0
        self.most_active = 0
        self._count = threading.Lock()
        self.nodes = [self._node(i, hold, fail) for i in range(n)]

    def _node(self, i: int, hold: int | None, fail: int | None):
        def body(pc: WorkflowInterpreter):
            with self._count:
                self.active += 1
                self.most_active = max(self.most_active, self.active)
            try:
                self.log.append((i, threading.get_ident(), request_id.get(), list(pc._pointer)))
                request_id.set(f"changed by {i}")
                if i == hold:
                    self.reached.set()
                    assert self.release.wait(HOLD)
                if i == fail:
                    raise ValueError(f"node {i}")
                time.sleep(0.0005)  # long enough for the loop to get a turn
                return i
            finally:
                with self._count:
                    self.active -= 1

        body.__name__ = f"step_{i}"
        return Node()(body)

    async def warm(self, graph) -> None:
        """Run `graph` once (the first run makes the shared plans a batch needs), then reset."""
        self.release.set()
        await WorkflowInterpreter(graph).run()
        self.log.clear()
        self.reached.clear()
        self.release.clear()

    async def started(self, graph, stream=None) -> tuple[WorkflowInterpreter, asyncio.Task]:
        """After a warm-up: a new interpreter's run of `graph` in a task, once it holds at `hold`."""
        await self.warm(graph)
        interp = WorkflowInterpreter(graph, stream)
        run = asyncio.create_task(interp.run())
        await self.wait_reached()
        return interp, run

    @property
    def ran(self) -> list[int]:
        return [entry[0] for entry in self.log]

    async def wait_reached(self) -> None:
        deadline = time.monotonic() + HOLD
        while not self.reached.is_set():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.001)


@pytest.fixture
def handoffs(monkeypatch):
    """Counts the hand-offs to worker threads."""
    count = [0]
    real = offload._claim_worker

    def counting():
        count[0] += 1
        real()

    monkeypatch.setattr(offload, "_claim_worker", counting)
    return count


async def settle(rounds: int = 5) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_a_batch_runs_off_the_loop_in_order_one_at_a_time_in_fresh_caller_contexts(handoffs):
    chain = Chain(6)
    graph = NodeCompose(*chain.nodes).render()
    request_id.set("req-1")
    await chain.warm(graph)
    handoffs[0] = 0
    await WorkflowInterpreter(graph).run()
    loop_thread = threading.get_ident()
    assert chain.ran == [0, 1, 2, 3, 4, 5]
    assert all(thread != loop_thread for _, thread, _, _ in chain.log)
    assert [seen for _, _, seen, _ in chain.log] == ["req-1"] * 6
    assert [pointer for _, _, _, pointer in chain.log] == [[i] for i in range(6)]
    assert chain.most_active == 1
    assert handoffs[0] == 1
    assert request_id.get() == "req-1"


@pytest.mark.asyncio
async def test_a_batch_stops_at_a_node_that_is_not_a_thread_node(handoffs):
    chain = Chain(4)
    seen = []

    @Node(wrap_to_async=False)
    def inline(pc: WorkflowInterpreter):
        seen.append(threading.get_ident())

    graph = NodeCompose(chain.nodes[0], chain.nodes[1], inline, chain.nodes[2], chain.nodes[3]).render()
    await chain.warm(graph)
    handoffs[0] = 0
    await WorkflowInterpreter(graph).run()
    assert seen == [threading.get_ident()] * 2
    assert handoffs[0] == 2


@pytest.mark.asyncio
async def test_a_suspend_requested_during_a_batch_parks_before_the_next_node():
    chain = Chain(5, hold=1)
    graph = NodeCompose(*chain.nodes).render()
    stream = SuspendObjectStream()
    interp, run = await chain.started(graph, stream)
    suspended = asyncio.create_task(stream.wait_to_suspend())
    await settle()
    chain.release.set()
    await asyncio.wait_for(suspended, HOLD)
    assert chain.ran == [0, 1]
    assert list(interp._pointer) == [2]
    stream.resume()
    await asyncio.wait_for(run, HOLD)
    assert chain.ran == [0, 1, 2, 3, 4]


@pytest.mark.asyncio
async def test_an_injection_during_a_batch_runs_at_the_next_node_boundary():
    chain = Chain(4, hold=1)
    injected = []

    @Node(wrap_to_async=False)
    def target(pc: WorkflowInterpreter):
        injected.append((list(chain.ran), list(pc._ret_addr_stack.stack[-1])))
        return "injected"

    @Node(wrap_to_async=False)
    def skip(pc: WorkflowInterpreter):
        pc.jump_offset(2)

    @Node(wrap_to_async=False)
    def final():
        pass

    graph = NodeCompose(*chain.nodes, skip, target, final).render()
    interp, run = await chain.started(graph)
    injection = asyncio.create_task(interp.call_sub(PointerVector([5]), interrupt=True))
    await settle()
    chain.release.set()
    assert await asyncio.wait_for(injection, HOLD) == "injected"
    await asyncio.wait_for(run, HOLD)
    assert injected == [([0, 1], [2])]
    assert chain.ran == [0, 1, 2, 3]


@pytest.mark.asyncio
async def test_terminate_during_a_batch_stops_before_the_next_node():
    chain = Chain(5, hold=2)
    graph = NodeCompose(*chain.nodes).render()
    interp, run = await chain.started(graph)
    stopping = asyncio.create_task(interp.terminate(eol=False))
    await settle()
    chain.release.set()
    await asyncio.wait_for(stopping, HOLD)
    await asyncio.wait_for(run, HOLD)
    assert chain.ran == [0, 1, 2]
    assert not interp.is_running


@pytest.mark.asyncio
async def test_cancelling_the_run_during_a_batch_stops_before_the_next_node():
    chain = Chain(5, hold=1)
    graph = NodeCompose(*chain.nodes).render()
    interp, run = await chain.started(graph)
    run.cancel()
    chain.release.set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(run, HOLD)
    await asyncio.sleep(0.05)  # the worker finishes the node it was running, then nothing more
    assert chain.ran == [0, 1]
    assert not interp.is_running and not interp._interpret_lock.locked()
    chain.log.clear()
    chain.release.set()
    await interp.run()  # reusable: resumes where the cancelled run stopped
    assert chain.ran[-1] == 4


@pytest.mark.asyncio
async def test_an_exception_in_the_middle_of_a_batch_is_that_nodes_panic():
    chain = Chain(5, fail=2)
    graph = NodeCompose(*chain.nodes).render()
    with pytest.raises(ValueError, match="node 2"):
        await WorkflowInterpreter(graph).run()
    chain.log.clear()
    interp = WorkflowInterpreter(graph)
    with pytest.raises(ValueError, match="node 2"):
        await interp.run()
    assert chain.ran == [0, 1, 2]
    assert list(interp._pointer) == [2]
    assert isinstance(interp.get_exception(), ValueError)


@pytest.mark.asyncio
async def test_a_pass_through_exception_in_the_middle_of_a_batch_ends_the_run_as_without_batching():
    from amrita_sense.exceptions import InterruptNotice

    chain = Chain(3)
    stops = []

    @Node()
    def stop(pc: WorkflowInterpreter):
        stops.append(threading.get_ident())
        raise InterruptNotice("stop here")

    graph = NodeCompose(chain.nodes[0], stop, chain.nodes[1], chain.nodes[2]).render()
    for _ in range(2):
        chain.log.clear()
        interp = WorkflowInterpreter(graph)
        await interp.run()
        assert chain.ran == [0]
        assert interp.get_exception() is None and list(interp._pointer) == []
    assert threading.get_ident() not in stops


@pytest.mark.asyncio
async def test_a_jump_from_a_batched_node_is_followed():
    seen = []

    @Node()
    def first(pc: WorkflowInterpreter):
        seen.append("first")
        pc.jump_offset(2)

    @Node()
    def skipped():
        seen.append("skipped")

    @Node()
    def last():
        seen.append("last")

    graph = NodeCompose(first, skipped, last).render()
    for _ in range(2):
        await WorkflowInterpreter(graph).run()
    assert seen == ["first", "last"] * 2
