"""`SuspendObjectStream`: cooperative suspend/resume gates plus two bounded object channels.

The workflow is the *producer*, the code driving it is the *consumer*.

Suspension is state held by the stream's gate (`_suspend_flag`, the core's
`StreamGate`, compiled with the core). `wait_to_suspend(*tags)` records a
request; the producer parks at the next gate (`_wait_for_continue(tag)`) whose
tag matches, which wakes the requester; `resume()` releases every parked gate.
While a request is outstanding `_suspend_flag.pending` is True, and that flag is
all the interpreter's step loop looks at, so an idle stream costs one field read
per step.

Channels: producer to consumer (`yield_response` / `push_object`, read with
`get_response_generator()` or a callback) and consumer to producer
(`send_to_producer`, read with `get_producer_input_generator()`).

Everything here is safe to share between threads and event loops: state sits
behind thread locks (the gate's its own), every future belongs to the loop that awaits it, and
a future owned by another loop is resolved through `call_soon_threadsafe`.
Only the standard library is used.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import threading
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable, Coroutine
from functools import wraps
from threading import get_ident
from typing import Any, Final, Generic, TypeAlias, TypeVar

from amrita_sense import core as _core
from amrita_sense.core import StreamGate
from amrita_sense.core import settle as _settle
from amrita_sense.core import wake as _wake
from amrita_sense.exceptions import InvalidOperand, StreamStateError

ObjectTypeT = TypeVar("ObjectTypeT")

CALLBACK_TYPE: TypeAlias = Callable[[ObjectTypeT], Awaitable[Any]]
"""An async one-argument callback (a sync callable is accepted too)."""

SUSPEND_ON_YIELD: Final = "SuspendObjectStream::yield_response"
"""Gate tag checked by `SuspendObjectStream.yield_response`."""

SUSPEND_ON_PUSH: Final = "SuspendObjectStream::push_response"
"""Gate tag checked by `SuspendObjectStream.push_object`."""

# ----- futures shared across threads and loops ---------------------------------------

_TIMED_OUT = object()
_END = object()
_NOTHING = object()

# How a parked caller was served. A writer let in while others were queued is QUEUED: its item
# waits in the queue, where a cancelled writer can still take it back.
_WAITING, _SERVED, _CLOSED, _BROKEN, _QUEUED = 0, 1, 2, 3, 4


def _remove_identical(items: deque[Any], item: Any) -> bool:
    """Remove the last occurrence of `item` itself (not an equal one) from `items`."""
    for index in range(len(items) - 1, -1, -1):
        if items[index] is item:
            del items[index]
            return True
    return False


def _cancel_at_next_await(exc: asyncio.CancelledError) -> None:
    """A send completed before its cancellation reached it: request the cancellation again, so the
    task sees it at its next await (the count of requests stays the same)."""
    task = asyncio.current_task()
    if task is None:
        return
    uncancel = getattr(task, "uncancel", None)  # Python 3.11+
    if uncancel is not None:
        uncancel()
    task.cancel(exc.args[0] if exc.args else None)


async def _wait(fut: asyncio.Future, timeout: float | None) -> bool:
    """Await `fut`; False if `timeout` seconds passed first (the future then holds `_TIMED_OUT`)."""
    if timeout is None:
        await fut
        return True
    handle = fut.get_loop().call_later(timeout, _settle, fut, _TIMED_OUT)
    try:
        return await fut is not _TIMED_OUT
    finally:
        handle.cancel()


class _Waiter:
    """One parked caller: its future and thread, the item it hands over or receives, how it was served."""

    __slots__ = ("fut", "item", "owner", "state")

    def __init__(self, item: Any = None) -> None:
        self.fut = asyncio.get_running_loop().create_future()
        self.owner = get_ident()
        self.item = item
        self.state = _WAITING

    def wake(self, state: int) -> None:
        self.state = state
        _wake(self.fut, self.owner)


class _Mutex:
    """A FIFO async lock that tasks on any thread or event loop can share."""

    __slots__ = ("_guard", "_held", "_waiters")

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._held = False
        self._waiters: deque[_Waiter] = deque()

    async def __aenter__(self) -> None:
        with self._guard:
            if not self._held:
                self._held = True
                return
            entry = _Waiter()
            self._waiters.append(entry)
        try:
            await entry.fut
        except BaseException:
            with self._guard:
                owned = entry.state == _SERVED
                if not owned:
                    self._waiters.remove(entry)
            if owned:
                self._release()
            raise

    async def __aexit__(self, *exc_info: Any) -> None:
        self._release()

    def _release(self) -> None:
        with self._guard:
            if not self._waiters:
                self._held = False
                return
            self._waiters.popleft().wake(_SERVED)


class _Channel:
    """A bounded FIFO of objects with a single reader, usable from any thread and event loop.

    `done` means no more items are accepted; what is already queued is still
    delivered, then the reader sees the end. When the reader goes away
    (`detach_reader`) queued items are dropped and blocked writers fail.
    A size of 0 makes every put wait for the reader (a rendezvous).
    """

    __slots__ = ("_closed_message", "_getters", "_guard", "_items", "_putters", "_reader_gone", "_size", "done")

    def __init__(self, size: float, closed_message: str) -> None:
        self._guard = threading.Lock()
        self._items: deque[Any] = deque()
        self._size = size
        self._getters: deque[_Waiter] = deque()
        self._putters: deque[_Waiter] = deque()
        self._closed_message = closed_message
        self._reader_gone = False
        self.done = False

    async def put(self, item: Any, timeout: float | None) -> None:
        """Queue `item`, waiting up to `timeout` seconds for room (`TimeoutError` after that)."""
        with self._guard:
            if self.done:
                raise StreamStateError(self._closed_message)
            if self._getters:
                getter = self._getters.popleft()
                getter.item = item
                getter.wake(_SERVED)
                return
            if len(self._items) < self._size:
                self._items.append(item)
                return
            entry = _Waiter(item)
            self._putters.append(entry)
        try:
            in_time = await _wait(entry.fut, timeout)
        except asyncio.CancelledError as exc:
            if self._take_back(entry):
                raise
            _cancel_at_next_await(exc)  # delivered: the send returns; the cancellation is not lost
            return
        except BaseException:
            self._withdraw(self._putters, entry)
            raise
        entry.item = None
        if not in_time and self._withdraw(self._putters, entry):
            raise TimeoutError(f"the queue stayed full for {timeout} seconds")
        if entry.state == _BROKEN:
            raise StreamStateError(self._closed_message)

    async def get(self) -> Any:
        """The next item, or `_END` once the channel is done and drained."""
        with self._guard:
            item = self._take()
            if item is not _NOTHING:
                return item
            if self.done:
                return _END
            entry = _Waiter()
            self._getters.append(entry)
        try:
            await entry.fut
        except BaseException:
            with self._guard:
                if entry.state == _SERVED:  # handed an item just as we were cancelled: keep it
                    self._items.appendleft(entry.item)
                elif entry.state == _WAITING:
                    self._getters.remove(entry)
            raise
        return entry.item if entry.state == _SERVED else _END

    def take_all(self) -> list[Any]:
        """Everything queued right now, without waiting."""
        with self._guard:
            items = []
            while (item := self._take()) is not _NOTHING:
                items.append(item)
            return items

    def close(self) -> None:
        """Accept nothing more; the reader gets what is queued, then the end."""
        with self._guard:
            self.done = True
            self._fail_all(self._getters, _CLOSED)

    def set_done(self, done: bool) -> None:
        """`close()` for True; for False accept items again, unless the reader has gone."""
        if done:
            self.close()
            return
        with self._guard:
            self.done = self._reader_gone

    def detach_reader(self) -> None:
        """The reader has gone: drop the queue and fail blocked and later writers."""
        with self._guard:
            self._reader_gone = True
            self.done = True
            self._items.clear()
            self._fail_all(self._putters, _BROKEN)
            self._fail_all(self._getters, _CLOSED)

    def __len__(self) -> int:
        return len(self._items)

    def _take(self) -> Any:
        """Pop the next item and let one blocked writer in (lock held)."""
        if self._items:
            item = self._items.popleft()
            self._admit_writer()
            return item
        if not self._putters:
            return _NOTHING
        putter = self._putters.popleft()
        item, putter.item = putter.item, None
        putter.wake(_SERVED)
        return item

    def _admit_writer(self) -> None:
        """Queue the first blocked writer's item if there is room (lock held)."""
        if self._putters and len(self._items) < self._size:
            putter = self._putters.popleft()
            self._items.append(putter.item)
            putter.wake(_QUEUED)

    def _take_back(self, entry: _Waiter) -> bool:
        """A cancelled writer's send: withdraw it if the reader does not have its item yet (still
        waiting, or queued and unread). False when the item was delivered."""
        with self._guard:
            if entry.state == _WAITING:
                self._putters.remove(entry)
                return True
            if entry.state == _QUEUED and _remove_identical(self._items, entry.item):
                self._admit_writer()
                return True
            return entry.state == _BROKEN

    def _withdraw(self, waiters: deque[_Waiter], entry: _Waiter) -> bool:
        """Remove a still-waiting entry; False if it was already served or failed."""
        with self._guard:
            if entry.state != _WAITING:
                return False
            waiters.remove(entry)
            return True

    @staticmethod
    def _fail_all(waiters: deque[_Waiter], state: int) -> None:
        while waiters:
            waiters.popleft().wake(state)


async def _items_of(channel: _Channel) -> AsyncGenerator[Any, None]:
    try:
        while (item := await channel.get()) is not _END:
            yield item
    finally:
        channel.detach_reader()


class _Reader(AsyncGenerator[Any, None]):
    """The single reader of a channel: an async generator over its items that detaches the reader
    when it ends, is closed or is dropped, also before its first read (a plain async generator runs
    no code then, so writers would keep waiting for a reader that never comes)."""

    __slots__ = ("_channel", "_items")

    def __init__(self, channel: _Channel) -> None:
        self._channel = channel
        self._items = _items_of(channel)

    def __aiter__(self) -> _Reader:
        return self

    def __anext__(self) -> Coroutine[Any, Any, Any]:
        return self._items.__anext__()

    def asend(self, value: Any) -> Coroutine[Any, Any, Any]:
        return self._items.asend(value)

    def athrow(self, *args: Any) -> Coroutine[Any, Any, Any]:
        return self._items.athrow(*args)

    async def aclose(self) -> None:
        try:
            await self._items.aclose()
        finally:
            self._channel.detach_reader()

    def __del__(self) -> None:
        self._channel.detach_reader()


# ----- argument checks and helpers ------------------------------------------------------


def _check_tag(tag: Any) -> None:
    if not isinstance(tag, str):
        raise InvalidOperand(f"suspend tags must be strings, got {type(tag).__name__}")


def _check_timeout(timeout: Any, what: str) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise InvalidOperand(f"{what} must be a number of seconds or None, got {type(timeout).__name__}")
    if math.isnan(timeout):
        raise ValueError(f"{what} must not be NaN")
    return None if timeout == math.inf else timeout


def _check_queue_size(size: Any) -> float:
    if size != math.inf and (isinstance(size, bool) or not isinstance(size, int)):
        raise ValueError("queue_size must be an integer or math.inf")
    if size < 0:
        raise ValueError("queue_size cannot be negative")
    return size


def _check_callback(func: Any, what: str, optional: bool = True) -> None:
    if not (callable(func) or (optional and func is None)):
        raise InvalidOperand(f"{what} must be callable, got {type(func).__name__}")


def _name_of(func: Any) -> str:
    return getattr(func, "__name__", None) or repr(func)


def _find_stream(args: tuple, kwargs: dict) -> SuspendObjectStream | None:
    for value in args:
        if isinstance(value, SuspendObjectStream):
            return value
    for value in kwargs.values():
        if isinstance(value, SuspendObjectStream):
            return value
    return None


async def _deliver(callback: Callable[[Any], Any], obj: Any) -> None:
    result = callback(obj)
    if inspect.isawaitable(result):
        await result


class SuspendObjectStream(Generic[ObjectTypeT]):
    """A producer/consumer stream with a cooperative suspend/resume gate.

    Args:
        queue_size: capacity of each channel (an int >= 0, or `math.inf`).
        queue_timeout: seconds a send may wait for room before `TimeoutError`
            (None waits forever).
        callback: receives every `yield_response` value instead of the queue.
        receive_callback: receives every `push_object` value instead of the queue.

    The stream may be shared by an interpreter and its sub-interpreters, and
    used from other threads and event loops.
    """

    def __init__(
        self,
        /,
        queue_size: int = 45,
        queue_timeout: float | None = 10.0,
        callback: CALLBACK_TYPE | None = None,
        receive_callback: CALLBACK_TYPE | None = None,
    ) -> None:
        size = _check_queue_size(queue_size)
        self._q_tout = _check_timeout(queue_timeout, "queue_timeout")
        _check_callback(callback, "callback")
        _check_callback(receive_callback, "receive_callback")
        #: The suspend gate's state (the compiled core's `StreamGate`): the interpreter's step loop
        #: reads only its flag, `pending`, True while a request is outstanding.
        self._suspend_flag = StreamGate(self._gates_by_tags)
        self._state_lock = threading.Lock()
        self._forward = _Channel(size, "Queue is closed.")
        self._reverse = _Channel(size, "Reverse queue is closed.")
        self._callback_fun = callback
        self._callback_lock = _Mutex()
        self._callback_fun_sending = receive_callback
        self._callback_sending_lock = _Mutex()
        self._has_consumer = False
        self._has_producer_input_consumer = False

    _output_watchers: list[Callable[[bool], None]] | None = None
    """The time limits of running policy nodes (`amrita_sense.policies`): each is called with False
    when output is sent, with True when a gate of this stream parks and with False when it resumes.
    None when there are none: the only cost to a stream without them is this test."""

    def _watch_output(self, watcher: Callable[[bool], None]) -> None:
        if self._output_watchers is None:
            self._output_watchers = [watcher]
        else:
            self._output_watchers.append(watcher)

    def _unwatch_output(self, watcher: Callable[[bool], None]) -> None:
        watchers = self._output_watchers
        if watchers is not None and watcher in watchers:
            watchers.remove(watcher)
            if not watchers:
                self._output_watchers = None

    def _tell_watchers(self, held: bool) -> None:
        for watcher in tuple(self._output_watchers or ()):
            watcher(held)

    def __repr__(self) -> str:
        parked = len(self._suspend_flag.parked or ())
        return (
            f"<{type(self).__name__} pending={bool(self._suspend_flag.pending)} parked={parked} "
            f"queued={len(self._forward)} done={self._forward.done}>"
        )

    # ----- decorators -----------------------------------------------------------------

    @staticmethod
    def suspend(func: Callable[..., Awaitable[Any]], tag: str | None = None) -> Callable[..., Awaitable[Any]]:
        """Make a coroutine function pass a gate before its body runs.

        The gate belongs to the first `SuspendObjectStream` among the call's
        positional arguments, then its keyword arguments, and uses `tag`
        (a gate without a tag parks only for requests without a tag filter).

        Raises:
            TypeError: `func` is not a coroutine function, or (at call time)
                no stream was passed.
        """
        if not inspect.iscoroutinefunction(func):
            raise TypeError(f"{_name_of(func)} is not a coroutine function.")
        if tag is not None:
            _check_tag(tag)

        @wraps(func)
        async def gated(*args: Any, **kwargs: Any) -> Any:
            stream = _find_stream(args, kwargs)
            if stream is None:
                raise TypeError(
                    f"No SuspendObjectStream parameter found in function '{_name_of(func)}'. "
                    f"Args types: {[type(a).__name__ for a in args]}, Kwargs keys: {list(kwargs)}"
                )
            await stream._wait_for_continue(tag)
            return await func(*args, **kwargs)

        return gated

    @staticmethod
    def suspend_with_tag(tag: str) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]]:
        """Decorator-factory form of `suspend`: `@SuspendObjectStream.suspend_with_tag("my-tag")`."""
        _check_tag(tag)
        return lambda func: SuspendObjectStream.suspend(func, tag)

    # ----- suspend / resume ---------------------------------------------------------------

    async def wait_to_suspend(self, *tags: str, timeout: float | None = None) -> None:
        """Ask the producer to park, and return once some gate has parked.

        With `tags`, only gates with one of those tags park; without, every
        gate does. The request may be made before, during or after a run
        starts: it stays pending until a gate takes it. All gates that reach a
        matching point while it is pending park together; `resume()` releases
        them. The request is cleared when this call returns or raises; if the
        call is cancelled, gates that parked for it are released as well.

        Raises:
            StreamStateError: another request is still pending.
            TimeoutError: no gate parked within `timeout` seconds.
            TypeError: a tag is not a string, or `timeout` is not a number.
        """
        for tag in tags:
            if type(tag) is not str:
                _check_tag(tag)
        if timeout is not None:
            timeout = _check_timeout(timeout, "timeout")
        gate = self._suspend_flag
        request = gate.post(tags)
        if request is None:
            raise StreamStateError("Already waiting for suspend!")
        try:
            if timeout is None:
                await request
            elif not await _wait(request, timeout) and not gate.taken(request):
                # (a gate may have parked just as time ran out)
                raise TimeoutError(f"the producer did not reach a matching gate within {timeout} seconds")
        except BaseException:
            gate.withdraw(request, True)
            raise
        gate.clear_answered(request)

    _gates_by_tags = True
    """Whether this class's gates park by the request's tag filter alone: its gate methods are
    `SuspendObjectStream`'s own (set for each subclass as it is made)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._gates_by_tags = (
            cls._wait_for_continue is SuspendObjectStream._wait_for_continue
            and cls._request_to_park_for is SuspendObjectStream._request_to_park_for
        )

    def resume(self) -> None:
        """Release every parked gate. With nothing parked this does nothing.

        Safe to call from any thread.
        """
        self._suspend_flag.resume()

    async def _wait_for_continue(self, tag: str | None = None) -> bool:
        """The gate: park here if a pending request matches `tag`, until `resume()`.

        Returns True only if it actually parked. (An interpreter whose stream's gate methods are
        these awaits `self._suspend_flag.wait(self, tag)` itself, as this does.)
        """
        return await self._suspend_flag.wait(self, tag)

    def _request_to_park_for(self, tag: str | None) -> asyncio.Future | None:
        """The pending request a gate tagged `tag` parks for, or None (called with the gate's lock held)."""
        return self._suspend_flag.request_for(tag)

    def _would_park(self, tag: str | None = None) -> bool:
        """Whether `_wait_for_continue(tag)` called now would park (the checkpointer asks before it saves)."""
        return self._suspend_flag.would_park(self, tag)

    # ----- producer to consumer ------------------------------------------------------------

    async def push_object(self, obj: ObjectTypeT) -> None:
        """Send `obj` to the consumer (gate tag `SUSPEND_ON_PUSH`).

        It goes to the push callback if one is set, else to the forward queue.

        Raises:
            StreamStateError: the queue is done and there is no push callback.
            TimeoutError: the queue stayed full for `queue_timeout` seconds.
        """
        if self._suspend_flag.pending:
            await self._wait_for_continue(SUSPEND_ON_PUSH)
        if self._output_watchers is not None:
            self._tell_watchers(False)
        callback = self._callback_fun_sending
        if callback is None:
            await self._put_to_queue(obj)
            return
        async with self._callback_sending_lock:
            await _deliver(callback, obj)

    async def yield_response(self, response: ObjectTypeT) -> None:
        """Send a response chunk to the consumer (gate tag `SUSPEND_ON_YIELD`).

        It goes to the response callback if one is set (even after
        `set_queue_done`), else to the forward queue.

        Raises:
            StreamStateError: the queue is done and there is no response callback.
            TimeoutError: the queue stayed full for `queue_timeout` seconds.
        """
        if self._suspend_flag.pending:
            await self._wait_for_continue(SUSPEND_ON_YIELD)
        if self._output_watchers is not None:
            self._tell_watchers(False)
        callback = self._callback_fun
        if callback is None:
            await self._put_to_queue(response)
            return
        async with self._callback_lock:
            await _deliver(callback, response)

    async def yield_response_iteration(self, iterator: AsyncIterable[ObjectTypeT]) -> None:
        """`yield_response` every item of an async iterable, in order."""
        async for chunk in iterator:
            await self.yield_response(chunk)

    def get_response_generator(self) -> AsyncGenerator[ObjectTypeT, None]:
        """The consumer's async generator over the forward queue (obtainable once).

        It ends after `set_queue_done()` once the queue is drained. When it
        ends or is closed, the queue is done: later sends raise
        `StreamStateError` and anything still queued is dropped.

        Raises:
            StreamStateError: a generator was already handed out, or a response
                callback is set.
        """
        with self._state_lock:
            if self._has_consumer or self._callback_fun is not None:
                raise StreamStateError("Response is already being consumed.")
            self._has_consumer = True
        return self._read(self._forward)

    async def set_queue_done(self) -> None:
        """Mark the forward queue done (idempotent); the consumer's generator ends once drained."""
        self._forward.close()

    def queue_closed(self) -> bool:
        """True once the forward queue is done."""
        return self._forward.done

    @property
    def _queue_done(self) -> bool:
        """True once the forward queue is done. Assigning True marks it done as `set_queue_done()`
        does (AmritaCore assigns it when `set_queue_done()` timed out on 1.1.3); False opens it
        again for senders while its reader is still there."""
        return self._forward.done

    @_queue_done.setter
    def _queue_done(self, done: bool) -> None:
        self._forward.set_done(done)

    async def _put_to_queue(self, item: Any) -> None:
        """Queue `item` for the consumer, past the suspend gate and the callbacks, waiting up to
        `queue_timeout` seconds for room (`TimeoutError`; `StreamStateError` once the queue is
        done or its reader has gone). `push_object` and `yield_response` send through it."""
        await self._forward.put(item, self._q_tout)

    # ----- consumer to producer ----------------------------------------------------------------

    async def send_to_producer(self, obj: ObjectTypeT) -> None:
        """Send `obj` back to the producer.

        Raises:
            StreamStateError: `send_done_to_producer()` was called, or the
                producer's input generator has ended (fails at once).
            TimeoutError: the reverse queue stayed full for `queue_timeout` seconds.
        """
        await self._peer_put_to_queue(obj)

    async def _peer_put_to_queue(self, item: Any) -> None:
        """Queue `item` for the producer (the reverse channel), as `_put_to_queue` does for the
        consumer; `send_to_producer` sends through it."""
        await self._reverse.put(item, self._q_tout)

    async def send_done_to_producer(self) -> None:
        """Close the reverse channel (idempotent); the producer's generator ends once drained."""
        self._reverse.close()

    def get_producer_input_generator(self) -> AsyncGenerator[ObjectTypeT, None]:
        """The producer's async generator over what the consumer sent (obtainable once).

        Raises:
            StreamStateError: a generator was already handed out.
        """
        with self._state_lock:
            if self._has_producer_input_consumer:
                raise StreamStateError("Producer input is already being consumed.")
            self._has_producer_input_consumer = True
        return self._read(self._reverse)

    def drain_producer_input(self) -> list[ObjectTypeT]:
        """Take everything the consumer has sent so far, without waiting (an extension to 1.1.3).

        This is how a workflow picks up peer messages at a step boundary.

        Raises:
            StreamStateError: a producer input generator was handed out.
        """
        with self._state_lock:
            if self._has_producer_input_consumer:
                raise StreamStateError("Producer input is already being consumed.")
        return self._reverse.take_all()

    @property
    def _peer_done(self) -> bool:
        """True once the reverse channel is done; assignable like `_queue_done`."""
        return self._reverse.done

    @_peer_done.setter
    def _peer_done(self, done: bool) -> None:
        self._reverse.set_done(done)

    @staticmethod
    def _read(channel: _Channel) -> AsyncGenerator[Any, None]:
        return _Reader(channel)

    # ----- callbacks -----------------------------------------------------------------------------

    def set_callback_func(self, func: CALLBACK_TYPE) -> None:
        """Send every `yield_response` value to `func` instead of the queue. Settable once.

        Raises:
            StreamStateError: a response callback is already set, or a response
                generator was handed out.
            TypeError: `func` is not callable.
        """
        _check_callback(func, "callback", optional=False)
        with self._state_lock:
            if self._callback_fun is not None:
                raise StreamStateError("The callback function of this chat object has already been set!")
            if self._has_consumer:
                raise StreamStateError("Response is already being consumed.")
            self._callback_fun = func

    def set_callback_fun_sending(self, func: CALLBACK_TYPE) -> None:
        """Send every `push_object` value to `func` instead of the queue. Settable once.

        Raises:
            StreamStateError: a push callback is already set.
            TypeError: `func` is not callable.
        """
        _check_callback(func, "receive_callback", optional=False)
        with self._state_lock:
            if self._callback_fun_sending is not None:
                raise StreamStateError("The callback function for sending-side responses has already been set!")
            self._callback_fun_sending = func


__all__ = ["CALLBACK_TYPE", "SUSPEND_ON_PUSH", "SUSPEND_ON_YIELD", "SuspendObjectStream"]

_core.provide(SuspendObjectStream=SuspendObjectStream)
