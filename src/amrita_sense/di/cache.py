"""Compute-once results for lifecycle dependencies shared by a scope.

A `DependencyStore` publishes a `DependencyCache` for a key *before* the value
is computed, so a second resolver of the same key waits for the first one
instead of opening the resource twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from enum import Enum
from typing import Any, Generic, TypeVar

from amrita_sense import core as _core

__all__ = ["CacheState", "DependencyCache", "DependencyStore"]

T = TypeVar("T")


class CacheState(str, Enum):
    """State of one `DependencyCache`."""

    PENDING = "PENDING"
    FINISHED = "FINISHED"


class DependencyCache(Generic[T]):
    """One result (or failure) that any number of tasks can wait for."""

    __slots__ = ("_exception", "_result", "_state", "_waiters")

    def __init__(self) -> None:
        self._state = CacheState.PENDING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._waiters: list[asyncio.Future] = []

    def done(self) -> bool:
        """True once a result or an exception was set."""
        return self._state is CacheState.FINISHED

    def result(self) -> T:
        """The value; re-raises the stored exception. `RuntimeError` while pending."""
        if self._state is not CacheState.FINISHED:
            raise RuntimeError("Result is not ready")
        if self._exception is not None:
            raise self._exception
        return self._result

    def exception(self) -> BaseException | None:
        """The stored exception, or None. `RuntimeError` while pending."""
        if self._state is not CacheState.FINISHED:
            raise RuntimeError("Result is not ready")
        return self._exception

    def set_result(self, result: T) -> None:
        self._finish()
        self._result = result
        self._wake()

    def set_exception(self, exception: BaseException) -> None:
        self._finish()
        self._exception = exception
        self._wake()

    def _finish(self) -> None:
        if self._state is not CacheState.PENDING:
            raise RuntimeError(f"Cache state invalid: {self._state}")
        self._state = CacheState.FINISHED

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def wait(self) -> T:
        """Wait until the value is set, then return it (or raise its exception)."""
        if self._state is CacheState.PENDING:
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            await fut
        return self.result()


class DependencyStore:
    """Maps a dependency key to its pending or finished `DependencyCache`."""

    __slots__ = ("_caches",)

    def __init__(self) -> None:
        self._caches: dict[Hashable, DependencyCache[Any]] = {}

    def get(self, key: Hashable) -> DependencyCache[Any] | None:
        return self._caches.get(key)

    def put(self, key: Hashable, cache: DependencyCache[Any]) -> None:
        self._caches[key] = cache

    def discard(self, key: Hashable) -> None:
        self._caches.pop(key, None)

    def clear(self) -> None:
        self._caches.clear()

    def __len__(self) -> int:
        return len(self._caches)

    async def resolve(self, key: Hashable, compute: Callable[[], Awaitable[T]], /) -> T:
        """The value for `key`, running `compute()` at most once.

        An `Exception` from `compute` is remembered and raised to every
        caller, later ones included. Any other `BaseException` (cancellation)
        is delivered to the current waiters and the entry is dropped, so a
        later caller computes again.
        """
        cache = self._caches.get(key)
        if cache is not None:
            if cache._state is CacheState.FINISHED:
                return cache.result()
            return await cache.wait()
        cache = DependencyCache()
        self._caches[key] = cache
        try:
            value = await compute()
        except Exception as exc:
            cache.set_exception(exc)
            raise
        except BaseException as exc:
            cache.set_exception(exc)
            if self._caches.get(key) is cache:
                del self._caches[key]
            raise
        cache.set_result(value)
        return value


_core.provide(DependencyStore=DependencyStore)
