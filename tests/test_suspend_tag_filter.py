"""A request's tag filter on the stream's core flag (`SuspendFlag.tags`): the step loop does not call
a gate whose tag the filter excludes (it would neither park nor save), unless the stream's class
has gate methods of its own, which then see every gate as before."""

from __future__ import annotations

import asyncio

import pytest

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.runtime.workflow import PC_CHECKPOINT
from amrita_sense.streaming import SuspendObjectStream

GUARD = 10.0  # seconds: turns a hang into a failure; never reached when the code is right


class SeeingStream(SuspendObjectStream):
    """A stream whose gate records every tag it is called with."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list = []

    async def _wait_for_continue(self, tag: str | None = None) -> bool:
        self.seen.append(tag)
        return await super()._wait_for_continue(tag)


def _step(log: list, i: int):
    def body() -> None:
        log.append(i)

    body.__name__ = body.__qualname__ = f"step{i}"
    return Node(wrap_to_async=False)(body)


def _graph(log: list, n: int = 3):
    return NodeCompose(*[_step(log, i) for i in range(n)]).render()


async def _start_parked(interp: WorkflowInterpreter, stream: SuspendObjectStream, tag: str) -> asyncio.Future:
    """Ask to park at `tag` first, then start the run; return it once it parked."""
    waiter = asyncio.ensure_future(stream.wait_to_suspend(tag))
    run = asyncio.ensure_future(interp.run())
    await asyncio.wait_for(waiter, GUARD)
    return run


@pytest.mark.asyncio
async def test_the_flag_holds_the_request_filter_only_for_a_stream_whose_gates_are_its_classs():
    plain, seeing = SuspendObjectStream(), SeeingStream()
    assert SuspendObjectStream._gates_by_tags and not SeeingStream._gates_by_tags
    assert plain._suspend_flag.tags is None
    for stream, expected in ((plain, ("a", "b")), (seeing, None)):
        task = asyncio.ensure_future(stream.wait_to_suspend("a", "b"))
        await asyncio.sleep(0)
        assert stream._suspend_flag.pending and stream._suspend_flag.tags == expected
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not stream._suspend_flag.pending


@pytest.mark.asyncio
async def test_round_trips_at_the_checkpoint_gate_run_one_node_each():
    log: list = []
    stream = SuspendObjectStream()
    interp = WorkflowInterpreter(_graph(log, 4), stream)
    run = await _start_parked(interp, stream, PC_CHECKPOINT)
    assert log == [] and interp._parked_tag == PC_CHECKPOINT
    for expected in ([0], [0, 1], [0, 1, 2]):
        stream.resume()
        await stream.wait_to_suspend(PC_CHECKPOINT)  # asks before the run resumes
        assert log == expected and interp._parked_tag == PC_CHECKPOINT
    stream.resume()
    await asyncio.wait_for(run, GUARD)
    assert log == [0, 1, 2, 3] and interp._parked_tag is None


@pytest.mark.asyncio
async def test_a_node_tag_request_parks_at_that_node_only():
    log: list = []
    stream = SuspendObjectStream()
    interp = WorkflowInterpreter(_graph(log, 3), stream)
    run = await _start_parked(interp, stream, "NodeSuspend::step1")
    assert log == [0] and interp._parked_tag == "NodeSuspend::step1"
    stream.resume()
    await asyncio.wait_for(run, GUARD)
    assert log == [0, 1, 2]


@pytest.mark.asyncio
async def test_a_stream_with_its_own_gate_still_sees_every_gate():
    log: list = []
    stream = SeeingStream()
    interp = WorkflowInterpreter(_graph(log, 2), stream)
    run = await _start_parked(interp, stream, PC_CHECKPOINT)
    stream.resume()
    await stream.wait_to_suspend(PC_CHECKPOINT)  # asks before the run resumes
    stream.resume()
    await asyncio.wait_for(run, GUARD)
    assert log == [0, 1]
    assert stream.seen == [
        PC_CHECKPOINT,  # parks before step0
        "NodeSuspend::step0",  # called although the filter excludes it
        PC_CHECKPOINT,  # parks before step1; no request left after it: no gate is called
    ]


class PickyStream(SuspendObjectStream):
    """A stream whose gates park only at the tag it picks, whatever the request's filter."""

    def _request_to_park_for(self, tag: str | None) -> asyncio.Future | None:
        return super()._request_to_park_for(tag) if tag == "picked" else None


@pytest.mark.asyncio
async def test_a_streams_own_request_to_park_for_decides_which_gates_park():
    stream = PickyStream()
    assert not PickyStream._gates_by_tags
    waiter = asyncio.ensure_future(stream.wait_to_suspend())
    await asyncio.sleep(0)
    assert await stream._wait_for_continue("other") is False
    assert not stream._would_park("other") and stream._would_park("picked")
    gate = asyncio.ensure_future(stream._wait_for_continue("picked"))
    await asyncio.wait_for(waiter, GUARD)
    assert not gate.done()
    stream.resume()
    assert await asyncio.wait_for(gate, GUARD) is True


@pytest.mark.asyncio
async def test_a_run_on_a_stream_that_picks_its_gates_passes_the_others():
    log: list = []
    stream = PickyStream()
    waiter = asyncio.ensure_future(stream.wait_to_suspend())  # no filter: every gate, as far as it goes
    await asyncio.sleep(0)
    await asyncio.wait_for(WorkflowInterpreter(_graph(log, 3), stream).run(), GUARD)
    assert log == [0, 1, 2] and not waiter.done()  # no gate of the run was the picked one
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
