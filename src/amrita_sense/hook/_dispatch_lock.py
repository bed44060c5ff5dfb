"""The per-event-type dispatch lock."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any


class DispatchLock:
    """A FIFO async lock that serialises the dispatches of one event type.

    Taking a free lock does not suspend. `release` hands the lock straight to
    the first waiter. Futures are created on the running loop only when
    someone has to wait, so one lock serves any event loop. A task that
    dispatches the same event type again from inside its own dispatch gets
    `RuntimeError` instead of waiting for itself forever.
    """

    __slots__ = ("__weakref__", "_locked", "_owner", "_waiters")

    def __init__(self) -> None:
        self._locked = False
        self._owner: Any = None
        self._waiters: deque[tuple[asyncio.Future, Any]] = deque()

    def locked(self) -> bool:
        return self._locked

    async def acquire(self) -> bool:
        task = asyncio.current_task()
        if not self._locked:
            self._locked = True
            self._owner = task
            return True
        if task is not None and task is self._owner:
            raise RuntimeError("an event of this type is already being dispatched by the current task")
        entry = (asyncio.get_running_loop().create_future(), task)
        self._waiters.append(entry)
        try:
            await entry[0]
        except BaseException:
            self._abandon(entry)
            raise
        return True

    def _abandon(self, entry: tuple[asyncio.Future, Any]) -> None:
        fut = entry[0]
        if fut.done() and not fut.cancelled():
            self.release()
            return
        try:
            self._waiters.remove(entry)
        except ValueError:
            pass

    def release(self) -> None:
        waiters = self._waiters
        while waiters:
            fut, task = waiters.popleft()
            if not fut.done():
                self._owner = task
                fut.set_result(True)
                return
        self._locked = False
        self._owner = None

    async def __aenter__(self) -> DispatchLock:
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()
