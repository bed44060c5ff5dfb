"""`amrita_sense.di`: lifecycle scopes and compute-once stores (rule 80)."""

from __future__ import annotations

import asyncio
from contextlib import contextmanager

import pytest

import amrita_sense.di as di
from amrita_sense.di import CacheState, DependencyCache, DependencyStore, LifecycleScope, Scope, lift_sync_context


def test_package_surface():
    assert sorted(di.__all__) == [
        "CacheState",
        "DependencyCache",
        "DependencyStore",
        "LifecycleScope",
        "Scope",
        "lift_sync_context",
    ]
    assert [s.value for s in Scope] == ["call", "dispatch", "workflow"]
    assert Scope("call") is Scope.CALL and Scope.WORKFLOW == "workflow"
    assert [s.value for s in CacheState] == ["PENDING", "FINISHED"]


def opener(log: list, name: str):
    @contextmanager
    def cm():
        log.append(f"open {name}")
        try:
            yield name
        finally:
            log.append(f"close {name}")

    return lambda: lift_sync_context(cm())


@pytest.mark.asyncio
async def test_acquire_enters_once_per_key_and_closes_in_reverse():
    log = []
    scope = LifecycleScope(Scope.WORKFLOW)
    assert scope.active and not scope.closed
    assert await scope.acquire("a", opener(log, "a")) == "a"
    assert await scope.acquire("b", opener(log, "b")) == "b"
    assert await scope.acquire("a", opener(log, "again")) == "a"
    assert log == ["open a", "open b"]
    await scope.aclose()
    assert log == ["open a", "open b", "close b", "close a"]
    assert scope.closed and not scope.active
    await scope.aclose()
    assert log.count("close a") == 1


@pytest.mark.asyncio
async def test_acquire_after_close_raises():
    scope = LifecycleScope("call")
    await scope.aclose()
    with pytest.raises(RuntimeError, match="call"):
        await scope.acquire("k", opener([], "k"))
    with pytest.raises(RuntimeError):
        async with scope:
            pass


@pytest.mark.asyncio
async def test_scope_as_async_context_manager_closes_on_error():
    log = []
    with pytest.raises(ValueError):
        async with LifecycleScope(Scope.DISPATCH) as scope:
            await scope.acquire("x", opener(log, "x"))
            raise ValueError()
    assert log == ["open x", "close x"]
    assert scope.closed


def test_scope_requires_a_known_name():
    with pytest.raises(ValueError):
        LifecycleScope("forever")


@pytest.mark.asyncio
async def test_lift_sync_context_propagates_exceptions_to_the_sync_manager():
    seen = []

    @contextmanager
    def cm():
        try:
            yield 1
        except KeyError as exc:
            seen.append(exc)
            raise

    with pytest.raises(KeyError):
        async with lift_sync_context(cm()) as value:
            assert value == 1
            raise KeyError("k")
    assert len(seen) == 1


@pytest.mark.asyncio
async def test_store_computes_once_for_concurrent_callers():
    store = DependencyStore()
    calls = []
    gate = asyncio.Event()

    async def compute():
        calls.append(1)
        await gate.wait()
        return "value"

    first = asyncio.create_task(store.resolve("k", compute))
    second = asyncio.create_task(store.resolve("k", compute))
    await asyncio.sleep(0)
    gate.set()
    assert await asyncio.gather(first, second) == ["value", "value"]
    assert calls == [1]
    assert await store.resolve("k", compute) == "value"
    assert store.get("k").done()


@pytest.mark.asyncio
async def test_store_remembers_an_exception():
    store = DependencyStore()
    calls = []

    async def compute():
        calls.append(1)
        raise ValueError("once")

    for _ in range(2):
        with pytest.raises(ValueError):
            await store.resolve("k", compute)
    assert calls == [1]
    assert isinstance(store.get("k").exception(), ValueError)


@pytest.mark.asyncio
async def test_store_drops_an_entry_after_a_base_exception_but_wakes_waiters():
    store = DependencyStore()
    gate = asyncio.Event()

    async def cancelled():
        await gate.wait()
        raise asyncio.CancelledError()

    first = asyncio.create_task(store.resolve("k", cancelled))
    await asyncio.sleep(0)
    waiter = asyncio.create_task(store.resolve("k", cancelled))
    await asyncio.sleep(0)
    gate.set()
    for task in (first, waiter):
        with pytest.raises(asyncio.CancelledError):
            await task
    assert store.get("k") is None

    async def fine():
        return 5

    assert await store.resolve("k", fine) == 5


def test_store_mapping_helpers():
    store = DependencyStore()
    cache = DependencyCache()
    store.put("k", cache)
    assert store.get("k") is cache
    store.discard("k")
    store.discard("missing")
    assert store.get("k") is None
    store.put("a", DependencyCache())
    store.clear()
    assert store.get("a") is None


@pytest.mark.asyncio
async def test_dependency_cache_states():
    cache = DependencyCache()
    assert not cache.done()
    with pytest.raises(RuntimeError):
        cache.result()
    with pytest.raises(RuntimeError):
        cache.exception()
    waiter = asyncio.create_task(cache.wait())
    await asyncio.sleep(0)
    cache.set_result(3)
    assert await waiter == 3
    assert cache.done() and cache.result() == 3 and cache.exception() is None
    with pytest.raises(RuntimeError):
        cache.set_result(4)
    failed = DependencyCache()
    failed.set_exception(KeyError("x"))
    with pytest.raises(KeyError):
        await failed.wait()
    with pytest.raises(RuntimeError):
        failed.set_exception(KeyError("y"))
