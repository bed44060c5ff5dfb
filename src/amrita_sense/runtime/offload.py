"""Run sync node bodies off the event-loop thread, cheaply.

`asyncio.to_thread` goes through `ThreadPoolExecutor.submit` and
`asyncio.wrap_future`: two futures, a work item and two callbacks per call.
This pool hands a tuple to an idle worker through a `SimpleQueue` and the
worker sets the asyncio future directly with `call_soon_threadsafe`. Workers
are daemon threads, started on demand up to `MAX_WORKERS`, so concurrent
interpreters still run their blocking nodes concurrently, as with
`asyncio.to_thread`. The body runs in a copy of the caller's context.
"""

from __future__ import annotations

import contextvars
import os
import queue
import threading
from typing import Any

MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)

_jobs: queue.SimpleQueue = queue.SimpleQueue()  # threads: thread-safe by itself
_state_lock = threading.Lock()  # threads: guards _idle, _backlog and _workers (read and written only under it)
_idle = 0  # workers waiting for a job that no submitter has claimed yet
_backlog = 0  # jobs queued while every worker was busy and the pool was full
_workers = 0


def _deliver(fut: Any, ok: bool, value: Any) -> None:
    if fut.done():
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


def _deliverable(exc: BaseException) -> BaseException:
    """What the awaiting task gets for `exc`: a future cannot hold StopIteration, so it becomes the
    RuntimeError a coroutine would raise (an inline or `async def` node gives the same)."""
    if isinstance(exc, StopIteration):
        error = RuntimeError("coroutine raised StopIteration")
        error.__cause__ = exc
        return error
    return exc


def _run_job(job: tuple) -> None:
    loop, fut, ctx, func, args, kwargs = job
    try:
        value = ctx.run(func, *args, **kwargs) if ctx is not None else func(*args)
        ok = True
    except BaseException as exc:  # delivered to the awaiting task
        value, ok = _deliverable(exc), False
    try:
        loop.call_soon_threadsafe(_deliver, fut, ok, value)
    except RuntimeError:
        pass  # the loop was closed while the body ran


def _worker() -> None:
    global _idle, _backlog
    while True:
        _run_job(_jobs.get())
        with _state_lock:
            if _backlog:
                _backlog -= 1
            else:
                _idle += 1


def _claim_worker() -> None:
    """Claim an idle worker for one job, start a new one, or record a backlog when the pool is full."""
    global _idle, _backlog, _workers
    with _state_lock:
        if _idle:
            _idle -= 1
            return
        if _workers >= MAX_WORKERS:
            _backlog += 1
            return
        _workers += 1
        name = f"amrita_sense_worker_{_workers}"
    threading.Thread(target=_worker, name=name, daemon=True).start()


async def run_in_worker(loop: Any, func: Any, args: tuple | None, kwargs: dict | None) -> Any:
    """Run `func(*args, **kwargs)` on a worker thread and await its result."""
    fut = loop.create_future()
    _claim_worker()
    _jobs.put((loop, fut, contextvars.copy_context(), func, args or (), kwargs or {}))
    return await fut


async def run_batch_in_worker(loop: Any, batch: Any) -> Any:
    """Run `batch(fut)` on a worker thread and await its result; `fut` is the future awaited
    here, so the batch sees a cancellation (`fut.done()`). The batch sets up its own contexts."""
    fut = loop.create_future()
    _claim_worker()
    _jobs.put((loop, fut, None, batch, (fut,), None))
    return await fut
