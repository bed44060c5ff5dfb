"""The suspend/resume gate of `SuspendObjectStream`, on its own (no interpreter)."""

from __future__ import annotations

import asyncio

import pytest

from amrita_sense import StreamStateError
from amrita_sense._core import SuspendFlag
from amrita_sense.streaming import SuspendObjectStream


async def settle(rounds: int = 5) -> None:
    """Let every ready task run a few turns."""
    for _ in range(rounds):
        await asyncio.sleep(0)


async def requested(stream: SuspendObjectStream, *tags: str) -> asyncio.Task:
    """Start `wait_to_suspend(*tags)` in a task and return once the request is registered."""
    task = asyncio.create_task(stream.wait_to_suspend(*tags))
    await asyncio.sleep(0)
    assert stream._suspend_flag.pending
    return task


# ----- the pending flag ----------------------------------------------------------------------


def test_every_stream_has_its_own_core_flag():
    first, second = SuspendObjectStream(), SuspendObjectStream()
    assert isinstance(first._suspend_flag, SuspendFlag)
    assert first._suspend_flag is not second._suspend_flag
    assert not first._suspend_flag.pending


def test_the_stream_is_generic_over_its_object_type():
    stream = SuspendObjectStream[int](queue_size=3)
    assert isinstance(stream, SuspendObjectStream)
    assert not stream._suspend_flag.pending


@pytest.mark.asyncio
async def test_an_idle_gate_does_not_park():
    stream = SuspendObjectStream()
    assert await stream._wait_for_continue("anything") is False
    assert await stream._wait_for_continue() is False


@pytest.mark.asyncio
async def test_pending_lasts_from_the_request_until_the_requester_is_woken():
    stream = SuspendObjectStream()
    waiter = await requested(stream)
    gate = asyncio.create_task(stream._wait_for_continue("t"))
    await waiter
    assert not stream._suspend_flag.pending
    assert not gate.done()
    stream.resume()
    assert await gate is True


@pytest.mark.asyncio
async def test_the_parked_gate_waits_for_resume_only():
    stream = SuspendObjectStream()
    waiter = await requested(stream)
    gate = asyncio.create_task(stream._wait_for_continue("t"))
    await waiter
    await settle()
    assert not gate.done()
    stream.resume()
    await settle()
    assert gate.result() is True


# ----- tag filters ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_only_gates_with_a_requested_tag_park():
    stream = SuspendObjectStream()
    waiter = await requested(stream, "a", "b")
    assert await stream._wait_for_continue("c") is False
    assert await stream._wait_for_continue(None) is False
    assert not waiter.done()
    gate = asyncio.create_task(stream._wait_for_continue("b"))
    await waiter
    stream.resume()
    assert await gate is True


@pytest.mark.asyncio
async def test_a_request_without_tags_parks_an_untagged_gate():
    stream = SuspendObjectStream()
    waiter = await requested(stream)
    gate = asyncio.create_task(stream._wait_for_continue())
    await waiter
    stream.resume()
    assert await gate is True


@pytest.mark.asyncio
async def test_tags_must_be_strings():
    stream = SuspendObjectStream()
    with pytest.raises(TypeError, match="strings"):
        await stream.wait_to_suspend(["a", "b"])
    with pytest.raises(TypeError, match="strings"):
        await stream.wait_to_suspend("a", None)
    assert not stream._suspend_flag.pending


@pytest.mark.asyncio
async def test_timeout_must_be_a_number():
    stream = SuspendObjectStream()
    with pytest.raises(TypeError, match="timeout"):
        await stream.wait_to_suspend(timeout="1")
    assert not stream._suspend_flag.pending


# ----- one request at a time -----------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_second_request_while_one_is_pending_is_refused():
    stream = SuspendObjectStream()
    waiter = await requested(stream, "t")
    with pytest.raises(StreamStateError, match="Already waiting for suspend!"):
        await stream.wait_to_suspend("t")
    assert stream._suspend_flag.pending
    gate = asyncio.create_task(stream._wait_for_continue("t"))
    await waiter
    stream.resume()
    assert await gate is True


@pytest.mark.asyncio
async def test_a_new_request_may_replace_one_that_already_fired():
    stream = SuspendObjectStream()
    first = await requested(stream)
    gate = asyncio.create_task(stream._wait_for_continue("t"))
    second = asyncio.create_task(stream.wait_to_suspend())
    await first  # the gate fired the first request, then the second one registered
    assert not second.done()
    assert stream._suspend_flag.pending
    late_gate = asyncio.create_task(stream._wait_for_continue("t"))
    await second
    assert not stream._suspend_flag.pending
    stream.resume()
    assert await gate is True and await late_gate is True


@pytest.mark.asyncio
async def test_a_request_times_out_when_no_gate_comes():
    stream = SuspendObjectStream()
    with pytest.raises(TimeoutError):
        await stream.wait_to_suspend("t", timeout=0.01)
    assert not stream._suspend_flag.pending
    assert await stream._wait_for_continue("t") is False
    waiter = await requested(stream, "t")  # a fresh request is accepted
    gate = asyncio.create_task(stream._wait_for_continue("t"))
    await waiter
    stream.resume()
    assert await gate is True


@pytest.mark.asyncio
async def test_a_cancelled_request_is_withdrawn():
    stream = SuspendObjectStream()
    waiter = await requested(stream)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert not stream._suspend_flag.pending
    assert await stream._wait_for_continue("t") is False


@pytest.mark.asyncio
async def test_cancelling_a_request_that_already_parked_a_gate_releases_it():
    stream = SuspendObjectStream()
    waiter = await requested(stream)
    gate = asyncio.create_task(stream._wait_for_continue("t"))
    await asyncio.sleep(0)  # the gate parks and wakes the requester...
    assert stream._suspend_flag.parked
    waiter.cancel()  # ...which is cancelled before it runs: nobody would resume the gate
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert await asyncio.wait_for(gate, 5) is True
    assert not stream._suspend_flag.pending and stream._suspend_flag.parked is None


@pytest.mark.asyncio
async def test_a_gate_does_not_park_for_a_requester_that_is_gone():
    stream = SuspendObjectStream()
    waiter = await requested(stream)
    waiter.cancel()  # not yet delivered: the request is still registered
    assert stream._suspend_flag.pending
    assert await stream._wait_for_continue("t") is False
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert not stream._suspend_flag.pending


@pytest.mark.asyncio
async def test_cancelling_a_later_request_keeps_an_earlier_wave_parked():
    stream = SuspendObjectStream()
    first = await requested(stream)
    gate = asyncio.create_task(stream._wait_for_continue("t"))
    await first
    second = await requested(stream)
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    await settle()
    assert not gate.done()  # still parked for the first requester, who has not resumed yet
    stream.resume()
    assert await gate is True


# ----- resume --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_resume_with_nothing_parked_does_nothing_and_is_not_remembered():
    stream = SuspendObjectStream()
    stream.resume()
    stream.resume()
    waiter = await requested(stream)
    gate = asyncio.create_task(stream._wait_for_continue("t"))
    await waiter
    await settle()
    assert not gate.done()  # an earlier resume() does not pre-release a later park
    stream.resume()
    assert await gate is True


@pytest.mark.asyncio
async def test_one_request_parks_one_wave_and_resume_releases_all_of_it():
    stream = SuspendObjectStream()
    waiter = await requested(stream, "t")
    gates = [asyncio.create_task(stream._wait_for_continue("t")) for _ in range(3)]
    await waiter  # the gates were scheduled before the woken requester, so all three joined
    assert len(stream._suspend_flag.parked) == 3
    assert await stream._wait_for_continue("t") is False  # the request is spent
    stream.resume()
    assert await asyncio.gather(*gates) == [True, True, True]
    assert stream._suspend_flag.parked is None


@pytest.mark.asyncio
async def test_a_cancelled_gate_leaves_the_wave():
    stream = SuspendObjectStream()
    waiter = await requested(stream)
    leaving = asyncio.create_task(stream._wait_for_continue("a"))
    staying = asyncio.create_task(stream._wait_for_continue("b"))
    await waiter
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert len(stream._suspend_flag.parked) == 1
    stream.resume()
    assert await staying is True


@pytest.mark.asyncio
async def test_request_resume_request_drives_a_producer_one_gate_at_a_time():
    stream = SuspendObjectStream()
    passed: list[int] = []

    async def producer():
        for i in range(5):
            await stream._wait_for_continue("step")
            passed.append(i)

    seen = []
    await requested(stream, "step")  # released below, after the producer parks
    task = asyncio.create_task(producer())
    await settle()
    for _ in range(4):
        seen.append(list(passed))
        stream.resume()
        await stream.wait_to_suspend("step")
    seen.append(list(passed))
    stream.resume()
    await task
    assert seen == [[], [0], [0, 1], [0, 1, 2], [0, 1, 2, 3]]
    assert passed == [0, 1, 2, 3, 4]


# ----- the suspend decorators ----------------------------------------------------------------


@pytest.mark.asyncio
async def test_suspend_decorator_gates_on_the_first_stream_argument():
    stream, other = SuspendObjectStream(), SuspendObjectStream()

    @SuspendObjectStream.suspend
    async def work(x: int, io: SuspendObjectStream, spare: SuspendObjectStream) -> int:
        return x * 2

    assert work.__name__ == "work"
    waiter = await requested(stream)
    call = asyncio.create_task(work(21, stream, other))
    await waiter
    assert not call.done()
    stream.resume()
    assert await call == 42
    assert await work(1, io=other, spare=stream) == 2  # found among keywords; `other` is idle


@pytest.mark.asyncio
async def test_suspend_with_tag_parks_only_for_that_tag():
    stream = SuspendObjectStream()

    @SuspendObjectStream.suspend_with_tag("mine")
    async def work(io: SuspendObjectStream) -> str:
        return "done"

    waiter = await requested(stream, "other")
    assert await work(stream) == "done"
    waiter.cancel()
    waiter = await requested(stream, "mine")
    call = asyncio.create_task(work(stream))
    await waiter
    stream.resume()
    assert await call == "done"


async def untagged_work(io: SuspendObjectStream) -> str:
    return "ok"


@pytest.mark.asyncio
async def test_an_untagged_decorated_call_parks_only_for_unfiltered_requests():
    stream = SuspendObjectStream()
    work = SuspendObjectStream.suspend(untagged_work)
    waiter = await requested(stream, "some-tag")
    assert await work(stream) == "ok"
    waiter.cancel()
    waiter = await requested(stream)
    call = asyncio.create_task(work(stream))
    await waiter
    assert not call.done()
    stream.resume()
    assert await call == "ok"


@pytest.mark.asyncio
async def test_suspend_decorator_bad_input():
    def sync(io):
        return io

    with pytest.raises(TypeError, match="not a coroutine function"):
        SuspendObjectStream.suspend(sync)
    with pytest.raises(TypeError, match="strings"):
        SuspendObjectStream.suspend_with_tag(42)

    @SuspendObjectStream.suspend
    async def needs_stream(x):
        return x

    with pytest.raises(TypeError, match="No SuspendObjectStream parameter found"):
        await needs_stream(1)


class ChatLike(SuspendObjectStream[str]):
    """A stream subclass whose own methods are gated, the way a chat object uses it."""

    def __init__(self) -> None:
        super().__init__(queue_size=4)
        self.steps: list[str] = []

    @SuspendObjectStream.suspend_with_tag("ChatLike::step")
    async def step(self, text: str) -> None:
        self.steps.append(text)
        await self.yield_response(text)


@pytest.mark.asyncio
async def test_a_subclass_gates_its_own_methods():
    chat = ChatLike()
    waiter = await requested(chat, "ChatLike::step")
    call = asyncio.create_task(chat.step("hello"))
    await waiter
    assert chat.steps == []
    chat.resume()
    await call
    await chat.set_queue_done()
    assert [item async for item in chat.get_response_generator()] == ["hello"]


def test_a_stream_is_always_truthy():
    # interpreters pick a stream with `given or default`: an empty stream must not look false
    stream = SuspendObjectStream(queue_size=0)
    assert bool(stream)
    assert "pending=False" in repr(stream)
