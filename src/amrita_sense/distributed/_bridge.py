"""The pool's own event loop (a daemon thread) and the answers it hands to callers on any thread.

Every piece of driver-side state (runs, workers, slots) is touched only from
this loop, so none of it needs a lock; synchronous callers block on a
`concurrent.futures.Future`, asynchronous ones await it through
`asyncio.wrap_future` on their own loop (asyncio or uvloop alike).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

from amrita_sense.distributed.errors import PoolClosed

T = TypeVar("T")


class PoolLoop:
    """An event loop running in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()
        self._ready.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def on_loop(self) -> bool:
        return threading.get_ident() == self.thread.ident

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the loop; its future (thread-safe)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, func: Any, *args: Any) -> None:
        """Call `func(*args)` on the loop soon."""
        self.loop.call_soon_threadsafe(func, *args)

    def stop(self) -> None:
        """Stop the loop (after what it is running now) and wait for its thread."""
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            if not self.on_loop():
                self.thread.join()


def _closed() -> Exception:

    return PoolClosed("the pool was closed before the request was answered")


def wait_for(future: concurrent.futures.Future[T], timeout: float | None, bridge: PoolLoop) -> T:
    """`future.result(timeout)`, refused on the pool's own thread (it would wait for itself)."""
    if bridge.on_loop():
        raise RuntimeError("a blocking call on the pool's own thread would wait forever: await the reply instead")
    try:
        return future.result(timeout)
    except concurrent.futures.CancelledError:
        raise _closed() from None
    except concurrent.futures.TimeoutError:
        raise TimeoutError(f"no answer within {timeout} seconds") from None


async def wait_async(future: concurrent.futures.Future[T]) -> T:
    """Await `future` on the caller's loop; `PoolClosed` when the pool dropped it."""
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        if future.cancelled():
            raise _closed() from None
        raise


class Reply(Generic[T]):
    """The answer to a request: `await reply`, or `reply.wait(timeout)` from synchronous code.

    The request is made whether or not anyone waits for it. A run's requests
    reach its worker in the order they were made (a cancel overtakes them).
    """

    __slots__ = ("_bridge", "_future")

    def __init__(self, future: concurrent.futures.Future[T], bridge: PoolLoop) -> None:
        self._future = future
        self._bridge = bridge

    def __await__(self) -> Any:
        return wait_async(self._future).__await__()

    def wait(self, timeout: float | None = None) -> T:
        """Block until the answer comes (`TimeoutError` after `timeout` seconds); raises what the request raised."""
        return wait_for(self._future, timeout, self._bridge)

    def done(self) -> bool:
        return self._future.done()

    def __repr__(self) -> str:
        return f"<Reply {'done' if self._future.done() else 'pending'}>"


__all__ = ["PoolLoop", "Reply", "wait_async", "wait_for"]
