"""The private stream helpers dependants use: `_put_to_queue`, `_peer_put_to_queue` and
assignable `_queue_done` / `_peer_done` (AmritaCore assigns `_queue_done = True` when
`set_queue_done()` timed out on 1.1.3)."""

from __future__ import annotations

import asyncio

import pytest

from amrita_sense import StreamStateError
from amrita_sense.streaming import SuspendObjectStream

GUARD = 5.0  # seconds: turns a hang into a failure; never reached when the code is right


async def guarded(awaitable):
    return await asyncio.wait_for(awaitable, GUARD)


async def take(gen, n: int) -> list:
    return [await guarded(gen.__anext__()) for _ in range(n)]


@pytest.mark.asyncio
async def test_put_to_queue_reaches_the_consumer_past_a_pending_suspend_request():
    stream = SuspendObjectStream()
    responses = stream.get_response_generator()
    request = asyncio.ensure_future(stream.wait_to_suspend())
    await asyncio.sleep(0)
    await guarded(stream._put_to_queue("direct"))
    assert await take(responses, 1) == ["direct"] and not request.done()
    request.cancel()


@pytest.mark.asyncio
async def test_put_to_queue_waits_for_room_then_times_out():
    stream = SuspendObjectStream(queue_size=1, queue_timeout=0.05)
    await stream._put_to_queue("first")
    with pytest.raises(TimeoutError):
        await guarded(stream._put_to_queue("second"))


@pytest.mark.asyncio
async def test_yield_response_and_push_object_send_through_put_to_queue(monkeypatch):
    stream = SuspendObjectStream()
    sent = []

    async def record(item):
        sent.append(item)

    monkeypatch.setattr(stream, "_put_to_queue", record)
    await stream.yield_response("chunk")
    await stream.push_object("prompt")
    assert sent == ["chunk", "prompt"]


@pytest.mark.asyncio
async def test_peer_put_to_queue_reaches_the_producer_and_send_to_producer_uses_it(monkeypatch):
    stream = SuspendObjectStream()
    inputs = stream.get_producer_input_generator()
    await stream._peer_put_to_queue("peer")
    assert await take(inputs, 1) == ["peer"]
    sent = []

    async def record(item):
        sent.append(item)

    monkeypatch.setattr(stream, "_peer_put_to_queue", record)
    await stream.send_to_producer("again")
    assert sent == ["again"]


@pytest.mark.asyncio
async def test_assigning_queue_done_closes_the_queue_as_set_queue_done_does():
    stream = SuspendObjectStream()
    responses = stream.get_response_generator()
    await stream.yield_response("before")
    stream._queue_done = True
    assert stream.queue_closed() and stream._queue_done
    with pytest.raises(StreamStateError, match="Queue is closed."):
        await stream.yield_response("after")
    assert [item async for item in responses] == ["before"]


@pytest.mark.asyncio
async def test_queue_done_can_be_cleared_while_the_reader_is_there():
    stream = SuspendObjectStream()
    stream._queue_done = True
    stream._queue_done = False
    assert not stream.queue_closed()
    await stream.yield_response("again")
    assert await take(stream.get_response_generator(), 1) == ["again"]


@pytest.mark.asyncio
async def test_a_queue_whose_reader_has_gone_stays_done():
    stream = SuspendObjectStream()
    responses = stream.get_response_generator()
    await stream.yield_response("read")
    assert await take(responses, 1) == ["read"]
    await responses.aclose()
    stream._queue_done = False
    assert stream.queue_closed()
    with pytest.raises(StreamStateError):
        await stream._put_to_queue("lost")


@pytest.mark.asyncio
async def test_assigning_peer_done_closes_the_reverse_channel():
    stream = SuspendObjectStream()
    stream._peer_done = True
    with pytest.raises(StreamStateError, match="Reverse queue is closed."):
        await stream.send_to_producer("late")
    stream._peer_done = False
    await stream.send_to_producer("late")
    assert stream.drain_producer_input() == ["late"]
