"""The per-event-type dispatch lock."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections import deque
from types import CodeType

_GUARD = threading.Lock()
"""threads: guards `_locked` and `_waiters` of every DispatchLock (one lock for all: held for a few
field reads and writes, never across an await or a call out). The loops of several threads can
dispatch one event type: the take, the hand-off and the release are check-then-act on shared fields."""


class DispatchLock:
    """A FIFO async lock that serialises the dispatches of one event type.

    Taking a free lock is one field write under `_GUARD` (`try_take`); `release`
    hands the lock straight to the first waiter. Futures are created on the
    running loop only when someone has to wait, so one lock serves any event
    loop: a waiter of another thread's loop is woken through that loop
    (`call_soon_threadsafe`), never by setting its future from here.

    A dispatch that triggers the same event type again from inside itself
    (same task) would wait for itself forever; `acquire` detects it by finding
    a frame of `holder_codes` that holds this lock on the current call stack,
    and raises `RuntimeError` instead.
    """

    __slots__ = ("__weakref__", "_locked", "_waiters")

    holder_codes: set[CodeType] = set()
    # threads: immutable once published (filled at import of hook.matcher, then only read)

    def __init__(self) -> None:
        self._locked = False
        self._waiters: deque[asyncio.Future] = deque()

    def locked(self) -> bool:
        return self._locked

    def try_take(self) -> bool:
        with _GUARD:
            if self._locked:
                return False
            self._locked = True
            return True

    async def acquire(self) -> bool:
        loop = asyncio.get_running_loop()
        with _GUARD:
            if not self._locked:
                self._locked = True
                return True
            fut = loop.create_future()
            self._waiters.append(fut)  # queued before the guard is let go: no release can miss it
        if self._held_by_caller():
            self._abandon(fut)
            raise RuntimeError(
                "an event of this type is already being dispatched by the current task; "
                "triggering it again from its own handler would wait forever"
            )
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
        with _GUARD:
            try:
                self._waiters.remove(fut)
            except ValueError:
                pass

    def release(self) -> None:
        """Hand the lock to the first waiter still waiting, or free it."""
        waiters = self._waiters
        while True:
            with _GUARD:
                if not waiters:
                    self._locked = False
                    return
                fut = waiters.popleft()
            if fut.done():  # cancelled: its task gives up without the lock
                continue
            loop = fut.get_loop()
            if loop is asyncio._get_running_loop():
                fut.set_result(True)
                return
            try:
                loop.call_soon_threadsafe(self._wake, fut)
                return
            except RuntimeError:  # that loop is closed: nobody waits on it any more
                continue

    def _wake(self, fut: asyncio.Future) -> None:
        """On the waiter's own loop: give it the lock, or pass the lock on if it was cancelled meanwhile."""
        if fut.done():
            self.release()
        else:
            fut.set_result(True)

    async def __aenter__(self) -> DispatchLock:
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()
