"""One `SuspendObjectStream` used from several threads and event loops at once."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.runtime.workflow import PC_CHECKPOINT
from amrita_sense.streaming import SuspendObjectStream
from support.dual import Recorder

GUARD = 10.0  # seconds: turns a hang into a failure; never reached when the code is right


def _new_loop_like_this_one() -> asyncio.AbstractEventLoop:
    if type(asyncio.get_running_loop()).__module__.startswith("uvloop"):
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


@contextlib.asynccontextmanager
async def loop_in_thread() -> AsyncIterator[asyncio.AbstractEventLoop]:
    """An event loop of the running loop's kind, running in its own thread."""
    loop = _new_loop_like_this_one()
    thread = threading.Thread(target=loop.run_forever, name="other-loop", daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join, GUARD)
        loop.close()


def on(loop: asyncio.AbstractEventLoop, coro: Coroutine) -> asyncio.Future:
    """Run `coro` on `loop` (another thread) and get an awaitable for its result here."""
    return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


async def until(condition: Callable[[], bool]) -> None:
    """Wait for something another thread does (bounded by GUARD)."""

    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.001)

    await asyncio.wait_for(poll(), GUARD)


# ----- channels ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_consumer_on_another_loop_reads_every_response_in_order():
    stream = SuspendObjectStream(queue_size=4, queue_timeout=GUARD)

    async def consume() -> list:
        return [item async for item in stream.get_response_generator()]

    async with loop_in_thread() as other:
        consumer = on(other, consume())
        for i in range(300):
            await stream.yield_response(i)
        await stream.set_queue_done()
        assert await asyncio.wait_for(consumer, GUARD) == list(range(300))


@pytest.mark.asyncio
async def test_the_reverse_channel_across_loops():
    stream = SuspendObjectStream(queue_size=2, queue_timeout=GUARD)

    async def send() -> None:
        for i in range(100):
            await stream.send_to_producer(i)
        await stream.send_done_to_producer()

    async with loop_in_thread() as other:
        sender = on(other, send())
        received = [item async for item in stream.get_producer_input_generator()]
        await asyncio.wait_for(sender, GUARD)
    assert received == list(range(100))


@pytest.mark.asyncio
async def test_many_producer_threads_one_consumer():
    stream = SuspendObjectStream(queue_size=8, queue_timeout=GUARD)
    producers, per_producer = 4, 250

    async def produce(index: int) -> None:
        for i in range(per_producer):
            await stream.push_object((index, i))

    def produce_on_own_loop(index: int) -> None:
        asyncio.run(produce(index))

    threads = [threading.Thread(target=produce_on_own_loop, args=(k,)) for k in range(producers)]
    for thread in threads:
        thread.start()
    responses = stream.get_response_generator()
    received = [await asyncio.wait_for(responses.__anext__(), GUARD) for _ in range(producers * per_producer)]
    for thread in threads:
        await asyncio.to_thread(thread.join, GUARD)
    await responses.aclose()
    for k in range(producers):
        assert [i for (index, i) in received if index == k] == list(range(per_producer))


@pytest.mark.asyncio
async def test_a_callback_is_never_entered_twice_at_once_across_loops():
    guard = threading.Lock()
    active, peak, seen = [0], [0], []

    async def callback(obj: Any) -> None:
        with guard:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        await asyncio.sleep(0.0005)
        with guard:
            seen.append(obj)
            active[0] -= 1

    stream = SuspendObjectStream(callback=callback)

    async def produce(index: int) -> None:
        for i in range(30):
            await stream.yield_response((index, i))

    threads = [threading.Thread(target=asyncio.run, args=(produce(k),)) for k in range(3)]
    for thread in threads:
        thread.start()
    await produce(3)
    for thread in threads:
        await asyncio.to_thread(thread.join, GUARD)
    assert peak[0] == 1
    assert len(seen) == 120


# ----- the gate -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_request_from_another_loop_parks_a_gate_here():
    stream = SuspendObjectStream()

    async def request_then_resume() -> bool:
        await stream.wait_to_suspend("t")
        stream.resume()
        return True

    async with loop_in_thread() as other:
        requester = on(other, request_then_resume())
        await until(lambda: stream._suspend_flag.pending)
        assert await asyncio.wait_for(stream._wait_for_continue("t"), GUARD) is True
        assert await asyncio.wait_for(requester, GUARD)
    assert not stream._suspend_flag.pending


@pytest.mark.asyncio
async def test_resume_from_a_thread_without_a_loop():
    stream = SuspendObjectStream()
    waiter = asyncio.create_task(stream.wait_to_suspend())
    await asyncio.sleep(0)
    gate = asyncio.create_task(stream._wait_for_continue("t"))
    await waiter
    thread = threading.Thread(target=stream.resume)
    thread.start()
    thread.join(GUARD)
    assert await asyncio.wait_for(gate, GUARD) is True


@pytest.mark.asyncio
async def test_gates_on_several_loops_park_in_one_wave_and_resume_together():
    stream = SuspendObjectStream()
    waiter = asyncio.create_task(stream.wait_to_suspend("t"))
    await asyncio.sleep(0)
    async with loop_in_thread() as first, loop_in_thread() as second:
        remote = [on(first, stream._wait_for_continue("t")), on(second, stream._wait_for_continue("t"))]
        await asyncio.wait_for(waiter, GUARD)
        # each remote gate either joined the wave or came after the request was spent
        await until(lambda: len(stream._suspend_flag.parked or ()) + sum(f.done() for f in remote) == 2)
        parked = len(stream._suspend_flag.parked or ())
        assert parked >= 1
        assert await stream._wait_for_continue("t") is False  # the request is spent
        stream.resume()
        results = await asyncio.wait_for(asyncio.gather(*remote), GUARD)
    assert results.count(True) == parked


# ----- interpreters -------------------------------------------------------------------------------


async def single_step(stream: SuspendObjectStream, start: Callable[[], Any], look: Callable[[], Any]) -> list:
    """Request a park at the checkpoint, `start()` the run, then step it one checkpoint per resume."""
    seen = []
    waiter = asyncio.ensure_future(stream.wait_to_suspend(PC_CHECKPOINT))
    await asyncio.sleep(0)  # registered before the run starts
    run = start()
    while True:
        await asyncio.wait_for(asyncio.wait({waiter, run}, return_when=asyncio.FIRST_COMPLETED), GUARD)
        if not waiter.done():
            waiter.cancel()
            run.result()
            return seen
        seen.append(look())
        waiter = asyncio.ensure_future(stream.wait_to_suspend(PC_CHECKPOINT))
        await asyncio.sleep(0)  # registered before the producer moves on
        stream.resume()


@pytest.mark.asyncio
async def test_stepping_here_a_run_on_another_loop():
    rec = Recorder()
    interp = WorkflowInterpreter((rec.act("a") >> rec.act("b") >> rec.act("c")).render())

    def look() -> tuple:
        return list(interp._pointer), list(rec.trace)

    async with loop_in_thread() as other:
        seen = await single_step(interp.object_io, lambda: on(other, interp.run()), look)
    assert seen == [([0], []), ([1], ["a"]), ([2], ["a", "b"])]
    assert rec.trace == ["a", "b", "c"]


@pytest.mark.asyncio
async def test_a_debugger_on_another_loop_steps_a_run_here():
    rec = Recorder()
    interp = WorkflowInterpreter((rec.act("a") >> rec.act("b") >> rec.act("c")).render())
    stream = interp.object_io
    run_over: concurrent.futures.Future = concurrent.futures.Future()
    go = threading.Event()

    def look() -> tuple:
        return list(interp._pointer), list(rec.trace)

    def start() -> asyncio.Future:
        go.set()  # the run starts here, on the test's loop
        return asyncio.wrap_future(run_over)

    async with loop_in_thread() as other:
        debug = on(other, single_step(stream, start, look))
        await asyncio.to_thread(go.wait, GUARD)
        try:
            await asyncio.wait_for(interp.run(), GUARD)
        finally:
            run_over.set_result(None)
        seen = await asyncio.wait_for(debug, GUARD)
    assert seen == [([0], []), ([1], ["a"]), ([2], ["a", "b"])]
    assert rec.trace == ["a", "b", "c"]


@pytest.mark.asyncio
async def test_a_child_run_on_another_thread_parks_on_the_parent_stream():
    rec = Recorder()
    sub = (rec.act("x") >> rec.act("y")).render()

    @Node()
    async def n_spawn(pc: WorkflowInterpreter):
        child = pc.fork_interpreter(sub)
        assert child.object_io is pc.object_io
        await asyncio.to_thread(asyncio.run, child.run())

    interp = WorkflowInterpreter(NodeCompose(rec.act("a"), n_spawn, rec.act("b")).render())
    stream = interp.object_io
    waiter = asyncio.create_task(stream.wait_to_suspend("NodeSuspend::n_y"))
    await asyncio.sleep(0)
    run = asyncio.create_task(interp.run())
    await asyncio.wait_for(waiter, GUARD)
    assert rec.trace == ["a", "x"]
    (child,) = interp.sub_interpreters.values()
    assert list(child._pointer) == [1]
    stream.resume()
    await asyncio.wait_for(run, GUARD)
    assert rec.trace == ["a", "x", "y", "b"]


def _branching(kind: str, cond: Any, body: Any) -> Any:
    from amrita_sense.instructions import IF, WHILE
    from amrita_sense.instructions.native import NATIVE_IF

    return {
        "IF": lambda: IF(cond, body),
        "NATIVE_IF": lambda: NATIVE_IF(cond, body),
        "WHILE": lambda: WHILE(cond).ACTION(body),
    }[kind]()


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["IF", "NATIVE_IF", "WHILE"])
async def test_a_request_arriving_while_a_condition_runs_parks_after_the_instruction(kind):
    interp_box: list[WorkflowInterpreter] = []
    asked: list[asyncio.Future] = []
    trace: list[str] = []

    async def request_then_resume() -> None:
        await interp_box[0].object_io.wait_to_suspend(PC_CHECKPOINT)
        trace.append("parked")
        interp_box[0].object_io.resume()

    def cond() -> bool:
        trace.append("cond")
        if not asked:  # the request arrives from another thread while this node runs
            asked.append(on(other, request_then_resume()))
            deadline = time.monotonic() + GUARD
            while not interp_box[0].object_io._suspend_flag.pending and time.monotonic() < deadline:
                time.sleep(0.001)
            return True
        return False

    def body() -> None:
        trace.append("body")

    graph = NodeCompose(
        _branching(kind, Node(wrap_to_async=False)(cond), Node(wrap_to_async=False)(body)),
        Node(wrap_to_async=False)(lambda: trace.append("after")),
    ).render()
    interp_box.append(WorkflowInterpreter(graph))
    async with loop_in_thread() as other:
        await asyncio.wait_for(interp_box[0].run(), GUARD)
        await asyncio.wait_for(asked[0], GUARD)
    assert trace[:2] == ["cond", "body"]
    assert trace.count("parked") == 1 and trace[-1] == "after"
