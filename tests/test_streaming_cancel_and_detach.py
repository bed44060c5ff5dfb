"""Streams (issue 14): readers that go away early, and senders cancelled at the hand-over.

Rule for a cancelled send: a send that delivered its item returns (the cancellation is requested
again, so the task sees it at its next await); a send that raises CancelledError delivered nothing
(an item still waiting in the queue is taken back).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncGenerator

import pytest

from amrita_sense import StreamStateError
from amrita_sense.streaming import SuspendObjectStream

GUARD = 5.0  # seconds: turns a hang into a failure; never reached when the code is right


async def guarded(awaitable):
    return await asyncio.wait_for(awaitable, GUARD)


async def _drain(gen) -> list:
    return [item async for item in gen]


READERS = [
    ("get_response_generator", "yield_response"),
    ("get_response_generator", "push_object"),
    ("get_producer_input_generator", "send_to_producer"),
]

# ----- a reader closed or dropped before its first read -----------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(("reader", "send"), READERS)
async def test_a_reader_closed_before_its_first_read_detaches(reader, send):
    stream = SuspendObjectStream(queue_size=1, queue_timeout=None)
    await getattr(stream, send)("queued")
    blocked = asyncio.ensure_future(getattr(stream, send)("blocked"))
    await asyncio.sleep(0)
    gen = getattr(stream, reader)()
    assert isinstance(gen, AsyncGenerator)
    await gen.aclose()
    with pytest.raises(StreamStateError):
        await guarded(blocked)
    with pytest.raises(StreamStateError):
        await guarded(getattr(stream, send)("later"))


@pytest.mark.asyncio
@pytest.mark.parametrize(("reader", "send"), READERS)
async def test_a_reader_dropped_unread_detaches(reader, send):
    stream = SuspendObjectStream(queue_size=1, queue_timeout=None)
    getattr(stream, reader)()
    gc.collect()
    with pytest.raises(StreamStateError):
        await guarded(getattr(stream, send)("nobody reads this"))


@pytest.mark.asyncio
async def test_a_reader_still_reads_everything_and_ends():
    stream = SuspendObjectStream(queue_size=2)
    gen = stream.get_response_generator()
    await stream.yield_response(1)
    await stream.yield_response(2)
    assert await gen.__anext__() == 1
    assert await gen.asend(None) == 2
    await stream.set_queue_done()
    with pytest.raises(StopAsyncIteration):
        await gen.__anext__()
    with pytest.raises(StreamStateError):
        await stream.yield_response(3)


@pytest.mark.asyncio
async def test_a_reader_closed_mid_stream_detaches():
    stream = SuspendObjectStream(queue_size=4)
    for item in "abc":
        await stream.yield_response(item)
    gen = stream.get_response_generator()
    assert await gen.__anext__() == "a"
    await gen.aclose()
    with pytest.raises(StreamStateError):
        await stream.yield_response("d")


# ----- a sender cancelled as a reader takes its item --------------------------------------------------------


async def _full_queue() -> SuspendObjectStream:
    """A stream whose forward queue (one slot, no timeout) already holds "first"."""
    stream = SuspendObjectStream(queue_size=1, queue_timeout=None)
    await stream.yield_response("first")
    return stream


async def _blocked_sender(stream: SuspendObjectStream, item, events: list) -> asyncio.Task:
    async def send():
        await stream.yield_response(item)
        events.append("returned")
        await asyncio.sleep(0)
        events.append("ran on")

    task = asyncio.ensure_future(send())
    await asyncio.sleep(0)
    assert not task.done() and events == []
    return task


@pytest.mark.asyncio
async def test_a_send_cancelled_while_its_item_waits_in_the_queue_takes_it_back():
    stream = await _full_queue()
    events: list = []
    sender = await _blocked_sender(stream, "second", events)
    gen = stream.get_response_generator()
    assert await gen.__anext__() == "first"  # lets "second" into the queue
    sender.cancel()
    with pytest.raises(asyncio.CancelledError):
        await guarded(sender)
    assert events == []
    await guarded(stream.yield_response("third"))  # the freed room is usable again
    await stream.set_queue_done()
    assert await guarded(_drain(gen)) == ["third"]


@pytest.mark.asyncio
async def test_a_cancelled_send_frees_its_room_for_the_next_blocked_sender():
    stream = await _full_queue()
    cancelled_events: list = []
    cancelled = await _blocked_sender(stream, "second", cancelled_events)
    waiting = asyncio.ensure_future(stream.yield_response("third"))
    await asyncio.sleep(0)
    gen = stream.get_response_generator()
    assert await gen.__anext__() == "first"
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await guarded(cancelled)
    await guarded(waiting)
    assert await guarded(gen.__anext__()) == "third"


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [0, 1])
async def test_a_send_whose_item_was_read_returns_and_is_cancelled_at_its_next_await(size):
    stream = SuspendObjectStream(queue_size=size, queue_timeout=None)
    if size:
        await stream.yield_response("first")
    events: list = []
    sender = await _blocked_sender(stream, "second", events)
    gen = stream.get_response_generator()
    if size:
        assert await gen.__anext__() == "first"
        assert await gen.__anext__() == "second"  # already in the queue: read at once
    else:
        assert await gen.__anext__() == "second"  # handed over directly
    sender.cancel("stop")
    with pytest.raises(asyncio.CancelledError):
        await guarded(sender)
    assert events == ["returned"]
    await stream.set_queue_done()
    assert await guarded(_drain(gen)) == []


@pytest.mark.asyncio
async def test_a_send_cancelled_before_any_reader_came_delivers_nothing():
    stream = await _full_queue()
    events: list = []
    sender = await _blocked_sender(stream, "second", events)
    sender.cancel()
    with pytest.raises(asyncio.CancelledError):
        await guarded(sender)
    await stream.set_queue_done()
    assert await guarded(_drain(stream.get_response_generator())) == ["first"]
