"""The per-event-type dispatch lock."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections import deque
from types import CodeType

_GUARD = threading.Lock()
"""threads: guards the queue of waiters (`_waiters`) of every DispatchLock against the check-then-act of a
waiter queueing itself and a holder handing the lock over (one lock for all: held for a few field reads
and writes, never across an await or a call out). Taken only on the contended path: a take of a free lock
and the release of a lock nobody waits for never take it (see `DispatchLock`)."""


class DispatchLock:
    """A FIFO async lock that serialises the dispatches of one event type.

    Held means `_held` (a `threading.Lock`) is acquired. Taking a free lock is one
    non-blocking acquire of `_held` (`try_take`): an atomic test-and-set in every
    build, free-threaded included, so the uncontended take, from any thread,
    needs no guard. `release` with nobody queued is one release of `_held`;
    with waiters it hands the lock straight to the first one (`_held` stays
    acquired: ownership moves, nobody can barge in). Futures are created on the
    running loop only when someone has to wait, so one lock serves any event
    loop: a waiter of another thread's loop is woken through that loop
    (`call_soon_threadsafe`), never by setting its future from here.

    threads: a waiter queues itself (under `_GUARD`), then tries the take again;
    a releaser that saw no waiter frees `_held`, then looks at the queue again.
    Either the waiter's second try comes after the free (it takes the lock, or
    whoever took it first will see the waiter when it releases), or the
    releaser's second look comes after the queueing (it takes the lock back and
    hands it over): no waiter is left waiting on a free lock. A dispatch arriving
    in that window may take the lock ahead of such a waiter; the waiters queued
    before a release are always served in their order.

    A dispatch that triggers the same event type again from inside itself
    (same task) would wait for itself forever; `acquire` detects it by finding
    a frame of `holder_codes` that holds this lock on the current call stack,
    and raises `RuntimeError` instead.
    """

    __slots__ = ("__weakref__", "_held", "_waiters")

    holder_codes: set[CodeType] = set()
    # threads: immutable once published (filled at import of hook.matcher, then only read)

    def __init__(self) -> None:
        self._held = threading.Lock()
        self._waiters: deque[asyncio.Future] = deque()

    def try_take(self) -> bool:
        """Take the lock if it is free (without waiting); whether it did."""
        return self._held.acquire(False)

    def locked(self) -> bool:
        return self._held.locked()

    async def acquire(self) -> bool:
        if self._held.acquire(False):
            return True
        fut = asyncio.get_running_loop().create_future()
        with _GUARD:
            self._waiters.append(fut)
        if self._held.acquire(False):  # freed meanwhile (see the class): ours, unless handed to `fut` too
            self._withdraw(fut)
            return True
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

    def _withdraw(self, fut: asyncio.Future) -> None:
        """Unqueue `fut` after its task took the lock by itself."""
        with _GUARD:
            try:
                self._waiters.remove(fut)
                return
            except ValueError:
                pass
        # A releaser popped `fut` before its own re-take succeeded: impossible, since we hold `_held`
        # and a releaser only pops a waiter while it holds `_held` (it hands over, never frees then).
        raise AssertionError("a dispatch lock waiter was handed a lock its task had taken")  # pragma: no cover

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
        if not self._waiters:
            self._held.release()
            if not self._waiters or not self._held.acquire(False):
                return  # nobody queued, or whoever took the lock back serves them
        while not self._hand_over():
            self._held.release()
            if not self._waiters or not self._held.acquire(False):
                return

    def _hand_over(self) -> bool:
        """Give the held lock to the first waiter still waiting; False when none is (the lock still held)."""
        waiters = self._waiters
        while True:
            with _GUARD:
                if not waiters:
                    return False
                fut = waiters.popleft()
            if fut.done():  # cancelled: its task gives up without the lock
                continue
            loop = fut.get_loop()
            if loop is asyncio._get_running_loop():
                fut.set_result(True)
                return True
            try:
                loop.call_soon_threadsafe(self._wake, fut)
                return True
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
