"""SuspendObjectStream (stub: the streaming issue owns this module)."""

from __future__ import annotations

import asyncio
from typing import Any, Generic, TypeVar

from amrita_sense._core import SuspendFlag
from amrita_sense.exceptions import StreamStateError

T = TypeVar("T")


class SuspendObjectStream(Generic[T]):
    def __init__(self, queue_size: int = 45, queue_timeout: float | None = 10.0, callback=None, receive_callback=None):
        self._suspend_flag = SuspendFlag()
        self._tags: tuple = ()
        self._request: asyncio.Future | None = None
        self._resume: asyncio.Future | None = None

    async def wait_to_suspend(self, *tags: str, timeout: float | None = None) -> None:
        if self._request is not None:
            raise StreamStateError("Already waiting for suspend!")
        self._tags = tags
        self._request = asyncio.get_running_loop().create_future()
        self._suspend_flag.pending = True
        try:
            await asyncio.wait_for(asyncio.shield(self._request), timeout)
        finally:
            self._request = None
            self._tags = ()
            self._suspend_flag.pending = False

    def resume(self) -> None:
        if self._resume is not None and not self._resume.done():
            self._resume.set_result(None)
        self._resume = None

    async def _wait_for_continue(self, tag: str | None = None) -> bool:
        request = self._request
        if request is None or (self._tags and tag not in self._tags):
            return False
        if self._resume is None:
            self._resume = asyncio.get_running_loop().create_future()
        resume = self._resume
        if not request.done():
            request.set_result(None)
        await resume
        return True
