"""The two channels of `SuspendObjectStream`: producer to consumer, consumer to producer."""

from __future__ import annotations

import asyncio
import math

import pytest

from amrita_sense import StreamStateError
from amrita_sense.streaming import SUSPEND_ON_PUSH, SUSPEND_ON_YIELD, SuspendObjectStream

GUARD = 5.0  # seconds: turns a hang into a failure; never reached when the code is right


async def guarded(awaitable):
    return await asyncio.wait_for(awaitable, GUARD)


async def collect(gen) -> list:
    return [item async for item in gen]


# ----- construction ----------------------------------------------------------------------------


def test_constants():
    assert SUSPEND_ON_YIELD == "SuspendObjectStream::yield_response"
    assert SUSPEND_ON_PUSH == "SuspendObjectStream::push_response"


@pytest.mark.parametrize("size", [-1, 1.5, "3", None])
def test_bad_queue_size_is_refused(size):
    with pytest.raises(ValueError, match="queue_size"):
        SuspendObjectStream(queue_size=size)


def test_bad_queue_timeout_and_callbacks_are_refused():
    with pytest.raises(TypeError, match="queue_timeout"):
        SuspendObjectStream(queue_timeout="soon")
    with pytest.raises(ValueError, match="NaN"):
        SuspendObjectStream(queue_timeout=math.nan)
    with pytest.raises(TypeError, match="callback"):
        SuspendObjectStream(callback=42)
    with pytest.raises(TypeError, match="receive_callback"):
        SuspendObjectStream(receive_callback="x")


# ----- producer to consumer ---------------------------------------------------------------------


@pytest.mark.asyncio
async def test_yield_and_push_share_one_queue_in_order():
    stream = SuspendObjectStream[str]()
    await stream.yield_response("a")
    await stream.push_object("b")
    await stream.yield_response_iteration(_agen("c", "d"))
    await stream.set_queue_done()
    assert await guarded(collect(stream.get_response_generator())) == ["a", "b", "c", "d"]


async def _agen(*items):
    for item in items:
        yield item


@pytest.mark.asyncio
async def test_queue_done_is_idempotent_and_refuses_later_sends():
    stream = SuspendObjectStream()
    assert not stream.queue_closed()
    await stream.set_queue_done()
    await stream.set_queue_done()
    assert stream.queue_closed()
    with pytest.raises(StreamStateError, match="Queue is closed."):
        await stream.yield_response(1)
    with pytest.raises(StreamStateError, match="Queue is closed."):
        await stream.push_object(1)


@pytest.mark.asyncio
async def test_reading_a_closed_queue_ends_at_once():
    stream = SuspendObjectStream()
    await stream.set_queue_done()
    assert await guarded(collect(stream.get_response_generator())) == []


@pytest.mark.asyncio
async def test_the_consumer_reads_while_the_producer_sends():
    stream = SuspendObjectStream(queue_size=2, queue_timeout=None)

    async def produce():
        for i in range(20):
            await stream.yield_response(i)
        await stream.set_queue_done()

    producer = asyncio.create_task(produce())
    assert await guarded(collect(stream.get_response_generator())) == list(range(20))
    await producer


@pytest.mark.asyncio
async def test_a_full_queue_raises_timeout_after_queue_timeout():
    stream = SuspendObjectStream(queue_size=1, queue_timeout=0.01)
    await stream.yield_response("kept")
    with pytest.raises(TimeoutError):
        await stream.yield_response("refused")
    await stream.set_queue_done()
    assert await guarded(collect(stream.get_response_generator())) == ["kept"]


@pytest.mark.asyncio
async def test_a_zero_sized_queue_hands_each_item_to_the_waiting_reader():
    stream = SuspendObjectStream(queue_size=0, queue_timeout=None)
    responses = stream.get_response_generator()
    sender = asyncio.create_task(stream.yield_response("x"))
    await asyncio.sleep(0)
    assert not sender.done()  # nobody is reading yet
    assert await guarded(responses.__anext__()) == "x"
    await guarded(sender)
    reader = asyncio.create_task(responses.__anext__())
    await asyncio.sleep(0)
    await stream.push_object("y")  # the reader is waiting: no buffer needed
    assert await guarded(reader) == "y"
    await responses.aclose()


@pytest.mark.asyncio
async def test_closing_the_generator_closes_the_queue_and_fails_blocked_senders_at_once():
    stream = SuspendObjectStream(queue_size=1, queue_timeout=None)
    responses = stream.get_response_generator()
    await stream.yield_response(1)
    assert await responses.__anext__() == 1
    await stream.yield_response(2)
    blocked = asyncio.create_task(stream.yield_response(3))
    await asyncio.sleep(0)
    await responses.aclose()
    with pytest.raises(StreamStateError, match="Queue is closed."):
        await guarded(blocked)
    assert stream.queue_closed()
    with pytest.raises(StreamStateError):
        await stream.push_object(4)


@pytest.mark.asyncio
async def test_items_queued_before_done_are_still_delivered_even_from_blocked_senders():
    stream = SuspendObjectStream(queue_size=1, queue_timeout=None)
    await stream.yield_response(1)
    blocked = asyncio.create_task(stream.yield_response(2))
    await asyncio.sleep(0)
    await stream.set_queue_done()  # takes no queue slot: does not wait
    assert await guarded(collect(stream.get_response_generator())) == [1, 2]
    await blocked


@pytest.mark.asyncio
async def test_a_cancelled_reader_loses_nothing():
    stream = SuspendObjectStream(queue_size=1, queue_timeout=None)
    reader = asyncio.create_task(stream._forward.get())
    await asyncio.sleep(0)
    await stream.yield_response("handed over")  # handed to the waiting reader...
    reader.cancel()  # ...which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await reader
    await stream.set_queue_done()
    assert await guarded(collect(stream.get_response_generator())) == ["handed over"]


# ----- one consumer per direction ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_one_response_generator_only():
    stream = SuspendObjectStream()
    stream.get_response_generator()
    with pytest.raises(StreamStateError, match="already being consumed"):
        stream.get_response_generator()
    with pytest.raises(StreamStateError, match="already being consumed"):
        stream.set_callback_func(_noop)


@pytest.mark.asyncio
async def test_a_response_callback_excludes_the_generator():
    stream = SuspendObjectStream(callback=_noop)
    with pytest.raises(StreamStateError, match="already being consumed"):
        stream.get_response_generator()
    with pytest.raises(StreamStateError, match="has already been set"):
        stream.set_callback_func(_noop)


async def _noop(_obj):
    return None


@pytest.mark.asyncio
async def test_one_producer_input_generator_only():
    stream = SuspendObjectStream()
    stream.get_producer_input_generator()
    with pytest.raises(StreamStateError, match="already being consumed"):
        stream.get_producer_input_generator()
    with pytest.raises(StreamStateError, match="already being consumed"):
        stream.drain_producer_input()


# ----- callbacks ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_callbacks_take_the_values_instead_of_the_queue():
    yielded, pushed = [], []

    async def on_yield(obj):
        yielded.append(obj)

    stream = SuspendObjectStream(receive_callback=pushed.append)  # a sync callback is accepted
    stream.set_callback_func(on_yield)
    await stream.yield_response("y1")
    await stream.push_object("p1")
    await stream.set_queue_done()
    await stream.yield_response("y2")  # callbacks still receive after done
    await stream.push_object("p2")
    assert (yielded, pushed) == (["y1", "y2"], ["p1", "p2"])
    with pytest.raises(StreamStateError, match="has already been set"):
        stream.set_callback_fun_sending(pushed.append)
    assert len(stream._forward) == 0


@pytest.mark.asyncio
async def test_a_push_callback_leaves_yields_to_the_generator():
    pushed = []
    stream = SuspendObjectStream()
    stream.set_callback_fun_sending(pushed.append)
    await stream.push_object("p")
    await stream.yield_response("y")
    await stream.set_queue_done()
    assert await guarded(collect(stream.get_response_generator())) == ["y"]
    assert pushed == ["p"]


@pytest.mark.asyncio
async def test_callback_calls_do_not_overlap():
    active, peak, seen = [0], [0], []

    async def slow(obj):
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        seen.append(obj)
        active[0] -= 1

    stream = SuspendObjectStream(callback=slow)
    await asyncio.gather(*(stream.yield_response(i) for i in range(10)))
    assert peak[0] == 1
    assert sorted(seen) == list(range(10))


def test_bad_callbacks_are_refused_when_set():
    stream = SuspendObjectStream()
    with pytest.raises(TypeError, match="callable"):
        stream.set_callback_func(None)
    with pytest.raises(TypeError, match="callable"):
        stream.set_callback_fun_sending(3)


@pytest.mark.asyncio
async def test_a_failing_callback_raises_to_the_producer_and_frees_the_lock():
    calls = []

    async def picky(obj):
        calls.append(obj)
        if obj == "bad":
            raise ValueError("no thanks")

    stream = SuspendObjectStream(callback=picky)
    with pytest.raises(ValueError, match="no thanks"):
        await stream.yield_response("bad")
    await guarded(stream.yield_response("good"))
    assert calls == ["bad", "good"]


# ----- consumer to producer -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_producer_reads_what_the_consumer_sends_until_done():
    stream = SuspendObjectStream()
    inputs = stream.get_producer_input_generator()
    reader = asyncio.create_task(collect(inputs))
    await stream.send_to_producer("hello")
    await stream.send_to_producer("again")
    await stream.send_done_to_producer()
    await stream.send_done_to_producer()
    assert await guarded(reader) == ["hello", "again"]


@pytest.mark.asyncio
async def test_sending_after_done_fails_at_once_even_on_a_full_queue():
    stream = SuspendObjectStream(queue_size=1, queue_timeout=None)
    await stream.send_to_producer("fills the queue")
    await stream.send_done_to_producer()  # no queue slot needed
    with pytest.raises(StreamStateError, match="Reverse queue is closed."):
        await guarded(stream.send_to_producer("late"))
    assert await guarded(collect(stream.get_producer_input_generator())) == ["fills the queue"]


@pytest.mark.asyncio
async def test_sending_after_the_producer_stopped_reading_fails():
    stream = SuspendObjectStream()
    inputs = stream.get_producer_input_generator()
    await stream.send_to_producer(1)
    assert await inputs.__anext__() == 1
    await inputs.aclose()
    with pytest.raises(StreamStateError, match="Reverse queue is closed."):
        await stream.send_to_producer(2)


@pytest.mark.asyncio
async def test_a_full_reverse_queue_times_out():
    stream = SuspendObjectStream(queue_size=1, queue_timeout=0.01)
    await stream.send_to_producer(1)
    with pytest.raises(TimeoutError):
        await stream.send_to_producer(2)


@pytest.mark.asyncio
async def test_drain_takes_everything_sent_so_far_without_waiting():
    stream = SuspendObjectStream(queue_size=2, queue_timeout=None)
    assert stream.drain_producer_input() == []
    await stream.send_to_producer("a")
    await stream.send_to_producer("b")
    blocked = asyncio.create_task(stream.send_to_producer("c"))
    await asyncio.sleep(0)
    assert stream.drain_producer_input() == ["a", "b", "c"]
    await guarded(blocked)
    assert stream.drain_producer_input() == []


# ----- suspension on the channels -------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(("tag", "send"), [(SUSPEND_ON_YIELD, "yield_response"), (SUSPEND_ON_PUSH, "push_object")])
async def test_a_send_parks_before_the_value_is_queued(tag, send):
    stream = SuspendObjectStream()
    other = "push_object" if send == "yield_response" else "yield_response"
    waiter = asyncio.create_task(stream.wait_to_suspend(tag))
    await asyncio.sleep(0)
    await getattr(stream, other)("not gated")  # the other tag does not match
    sender = asyncio.create_task(getattr(stream, send)("gated"))
    await guarded(waiter)
    assert len(stream._forward) == 1
    stream.resume()
    await guarded(sender)
    await stream.set_queue_done()
    assert await guarded(collect(stream.get_response_generator())) == ["not gated", "gated"]


@pytest.mark.asyncio
async def test_an_unbounded_queue_and_no_timeout():
    stream = SuspendObjectStream(queue_size=math.inf, queue_timeout=math.inf)
    for i in range(1000):
        await stream.yield_response(i)
    await stream.set_queue_done()
    assert await guarded(collect(stream.get_response_generator())) == list(range(1000))
