"""The interpreter lock: task-owned, not reentrant, FIFO, safe under cancellation."""

from __future__ import annotations

import asyncio

import pytest

from amrita_sense import Node, WorkflowInterpreter


def make_interp() -> WorkflowInterpreter:
    @Node(wrap_to_async=False)
    def a():
        return None

    return WorkflowInterpreter((a >> a).render())


@pytest.mark.asyncio
async def test_acquire_release_and_ownership():
    lock = make_interp()._interpret_lock
    assert not lock.locked() and not lock.async_owned()
    assert await lock.async_acquire() is True
    assert lock.locked() and lock.async_owned()
    lock.async_release()
    assert not lock.locked() and not lock.async_owned()


@pytest.mark.asyncio
async def test_async_with_and_the_short_names():
    lock = make_interp()._interpret_lock
    async with lock:
        assert lock.async_owned()
    assert not lock.locked()
    await lock.acquire()
    assert lock.async_owned()
    lock.release()
    assert not lock.locked()


@pytest.mark.asyncio
async def test_ownership_belongs_to_the_task():
    lock = make_interp()._interpret_lock
    async with lock:
        seen = await asyncio.create_task(_owned(lock))
        assert seen is False
        assert lock.async_owned()


async def _owned(lock) -> bool:
    return lock.async_owned()


@pytest.mark.asyncio
async def test_lock_is_not_reentrant():
    lock = make_interp()._interpret_lock
    async with lock:
        with pytest.raises(RuntimeError, match="already holding"):
            await lock.async_acquire()
        assert lock.async_owned()
    assert not lock.locked()


@pytest.mark.asyncio
async def test_non_blocking_acquire_on_a_held_lock():
    lock = make_interp()._interpret_lock
    async with lock:
        assert await asyncio.create_task(lock.async_acquire(blocking=False)) is False
    assert not lock.locked()


@pytest.mark.asyncio
async def test_waiters_get_the_lock_in_arrival_order():
    lock = make_interp()._interpret_lock
    order: list[int] = []

    async def contender(i: int) -> None:
        async with lock:
            order.append(i)
            await asyncio.sleep(0)

    await lock.async_acquire()
    tasks = [asyncio.create_task(contender(i)) for i in range(20)]
    await asyncio.sleep(0)
    lock.async_release()
    await asyncio.gather(*tasks)
    assert order == list(range(20))
    assert not lock.locked()


@pytest.mark.asyncio
async def test_release_hands_over_before_the_releaser_can_retake():
    lock = make_interp()._interpret_lock
    order: list[str] = []

    async def waiter() -> None:
        async with lock:
            order.append("waiter")

    await lock.async_acquire()
    task = asyncio.create_task(waiter())
    await asyncio.sleep(0)
    lock.async_release()
    await lock.async_acquire()  # queues behind the waiter
    order.append("releaser again")
    lock.async_release()
    await task
    assert order == ["waiter", "releaser again"]


def holder(lock, got: list[str]):
    """`contender(name)`: take `lock`, record `name`, release."""

    async def contender(name: str) -> None:
        async with lock:
            got.append(name)

    return contender


@pytest.mark.asyncio
async def test_a_cancelled_waiter_does_not_leak_the_lock():
    lock = make_interp()._interpret_lock
    got: list[str] = []
    contender = holder(lock, got)

    await lock.async_acquire()
    doomed = asyncio.create_task(contender("doomed"))
    patient = asyncio.create_task(contender("patient"))
    await asyncio.sleep(0)
    doomed.cancel()
    await asyncio.sleep(0)
    lock.async_release()
    await patient
    with pytest.raises(asyncio.CancelledError):
        await doomed
    assert got == ["patient"]
    assert not lock.locked()


@pytest.mark.asyncio
async def test_cancelled_after_the_handover_passes_the_lock_on():
    lock = make_interp()._interpret_lock
    got: list[str] = []
    contender = holder(lock, got)

    await lock.async_acquire()
    first = asyncio.create_task(contender("first"))
    second = asyncio.create_task(contender("second"))
    await asyncio.sleep(0)
    lock.async_release()  # hands the lock to `first`, which has not resumed yet
    first.cancel()
    await asyncio.gather(first, second, return_exceptions=True)
    assert got == ["second"]
    assert not lock.locked()


@pytest.mark.asyncio
async def test_timeout_while_waiting():
    lock = make_interp()._interpret_lock
    await lock.async_acquire()
    with pytest.raises((TimeoutError, asyncio.TimeoutError)):
        await asyncio.create_task(lock.async_acquire(timeout=0.01))
    lock.async_release()
    assert not lock.locked()
    async with lock:
        pass


@pytest.mark.asyncio
async def test_a_running_node_holds_the_lock():
    seen: list = []

    @Node()
    async def probe(pc: WorkflowInterpreter):
        seen.append((pc._interpret_lock.async_owned(), pc._interpret_lock.locked()))

    @Node()
    def threaded(pc: WorkflowInterpreter):
        seen.append(pc._interpret_lock.locked())

    interp = WorkflowInterpreter((probe >> threaded).render())
    await interp.run()
    assert seen == [(True, True), True]
    assert not interp._interpret_lock.locked()
