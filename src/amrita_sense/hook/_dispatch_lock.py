"""The per-event-type dispatch lock."""

from __future__ import annotations

import asyncio
import sys
from collections import deque
from types import CodeType


class DispatchLock:
    """A FIFO async lock that serialises the dispatches of one event type.

    Taking a free lock is one field write (`try_take`); `release` hands the
    lock straight to the first waiter. Futures are created on the running loop
    only when someone has to wait, so one lock serves any event loop.

    A dispatch that triggers the same event type again from inside itself
    (same task) would wait for itself forever; `acquire` detects it by finding
    a frame of `holder_codes` that holds this lock on the current call stack,
    and raises `RuntimeError` instead.
    """

    __slots__ = ("__weakref__", "_locked", "_waiters")

    holder_codes: set[CodeType] = set()

    def __init__(self) -> None:
        self._locked = False
        self._waiters: deque[asyncio.Future] = deque()

    def locked(self) -> bool:
        return self._locked

    def try_take(self) -> bool:
        if self._locked:
            return False
        self._locked = True
        return True

    async def acquire(self) -> bool:
        if not self._locked:
            self._locked = True
            return True
        if self._held_by_caller():
            raise RuntimeError(
                "an event of this type is already being dispatched by the current task; "
                "triggering it again from its own handler would wait forever"
            )
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except BaseException:
            self._abandon(fut)
            raise
        return True

    def _held_by_caller(self) -> bool:
        frame = sys._getframe(2).f_back  # skip acquire() and the frame asking for the lock
        codes = self.holder_codes
        while frame is not None:
            if frame.f_code in codes and frame.f_locals.get("lock") is self:
                return True
            frame = frame.f_back
        return False

    def _abandon(self, fut: asyncio.Future) -> None:
        if fut.done() and not fut.cancelled():
            self.release()
            return
        try:
            self._waiters.remove(fut)
        except ValueError:
            pass

    def release(self) -> None:
        waiters = self._waiters
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(True)
                return
        self._locked = False

    async def __aenter__(self) -> DispatchLock:
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()
