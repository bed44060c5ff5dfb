"""Fan-out: one run of a workflow per input, a bounded number at a time, results as they come.

    for result in workflow.map(inputs):                 # in input order
    for result in workflow.map(inputs, ordered=False):  # as they complete
    async for result in workflow.amap(inputs):          # from an event loop

Back-pressure: at most `max_in_flight` runs (default: the pool's capacity) are
submitted and not yet taken by the caller (`chunk_size` > 1 sends that many
runs to a worker in one call, see `RemoteWorkflow.submit_batch`: for short runs); the next input is read from the
iterable (which may be a generator of unknown length) only when a result was
taken. Closing the iterator early (`break`, an exception) cancels the runs in
flight. A run that did not finish raises its `RunFailed` where its result would
come (the runs in flight are cancelled then); `outcomes=True` yields every
`RunOutcome` instead and never raises for a run.

Progress: `progress=True` draws a bar on stderr when it is a terminal (tqdm if
it is installed, else one line of text), nothing otherwise; a callable
receives `(done, total, failed)` after every run (total is None for an input of
unknown length).
"""

from __future__ import annotations

import asyncio
import itertools
import queue
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any


def map_runs(
    workflow: Any,
    inputs: Iterable[Any],
    *,
    ordered: bool,
    max_in_flight: int | None,
    chunk_size: int,
    progress: Any,
    outcomes: bool,
) -> Iterator[Any]:
    window, chunk = _window(workflow, max_in_flight, chunk_size)
    return _map(workflow, inputs, ordered, window, chunk, make_progress(progress, _length(inputs)), outcomes)


def _map(
    workflow: Any, inputs: Iterable[Any], ordered: bool, window: int, chunk: int, bar: Any, outcomes: bool
) -> Iterator[Any]:
    source = iter(inputs)
    pending: deque[Any] = deque()
    finished: queue.SimpleQueue[Any] = queue.SimpleQueue()
    try:
        while True:
            _fill(workflow, source, pending, window, chunk, None if ordered else finished.put)
            if not pending:
                return
            if ordered:
                handle = pending.popleft()
            else:
                handle = finished.get()
                pending.remove(handle)
            outcome = handle.outcome()
            bar.update(outcome)
            yield outcome if outcomes else outcome.unwrap()
    finally:
        _cancel_all(pending)
        bar.close()


async def amap_runs(
    workflow: Any,
    inputs: Iterable[Any],
    *,
    ordered: bool,
    max_in_flight: int | None,
    chunk_size: int,
    progress: Any,
    outcomes: bool,
) -> AsyncIterator[Any]:
    """The async form of `map_runs` (the handles resolve on the caller's loop)."""
    window, chunk = _window(workflow, max_in_flight, chunk_size)
    bar = make_progress(progress, _length(inputs))
    source = iter(inputs)
    pending: deque[Any] = deque()
    loop = asyncio.get_running_loop()
    finished: asyncio.Queue[Any] = asyncio.Queue()

    def on_done(handle: Any) -> None:
        loop.call_soon_threadsafe(finished.put_nowait, handle)

    try:
        while True:
            _fill(workflow, source, pending, window, chunk, None if ordered else on_done)
            if not pending:
                return
            if ordered:
                handle = pending.popleft()
            else:
                handle = await finished.get()
                pending.remove(handle)
            outcome = await handle.aoutcome()
            bar.update(outcome)
            yield outcome if outcomes else outcome.unwrap()
    finally:
        _cancel_all(pending)
        bar.close()


def _window(workflow: Any, max_in_flight: int | None, chunk_size: int) -> tuple[int, int]:
    """(runs in flight at most, runs per batch)."""
    if max_in_flight is not None and (type(max_in_flight) is not int or max_in_flight < 1):
        raise ValueError(f"max_in_flight must be None or an int >= 1, not {max_in_flight!r}")
    if type(chunk_size) is not int or not 1 <= chunk_size <= workflow.pool.runs_per_worker:
        raise ValueError(f"chunk_size must be an int from 1 to runs_per_worker, not {chunk_size!r}")
    window = workflow.pool.capacity if max_in_flight is None else max_in_flight
    return window, min(chunk_size, window)


def _length(inputs: Iterable[Any]) -> int | None:
    try:
        return len(inputs)  # type: ignore[arg-type]
    except TypeError:
        return None


def _fill(workflow: Any, source: Iterator[Any], pending: deque, window: int, chunk: int, on_done: Any) -> None:
    """Submit runs, `chunk` at a time, while a whole chunk fits in `window` (or nothing is pending)."""
    while window - len(pending) >= chunk or not pending:
        values = list(itertools.islice(source, chunk))
        if not values:
            return
        handles = workflow.submit_batch(values) if len(values) > 1 else [workflow.submit(values[0])]
        pending.extend(handles)
        if on_done is not None:
            for handle in handles:
                handle.add_done_callback(on_done)


def _cancel_all(handles: Iterable[Any]) -> None:
    for handle in handles:
        if not handle.done():
            handle.cancel()


# ----- progress ------------------------------------------------------------------------------------


class _NoProgress:
    def update(self, outcome: Any) -> None:
        pass

    def close(self) -> None:
        pass


class _Counted:
    """Counts runs; subclasses show the counts."""

    def __init__(self, total: int | None) -> None:
        self.total = total
        self.done = 0
        self.failed = 0

    def update(self, outcome: Any) -> None:
        self.done += 1
        self.failed += not outcome.ok
        self.show()

    def show(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _CallbackProgress(_Counted):
    def __init__(self, total: int | None, callback: Any) -> None:
        super().__init__(total)
        self._callback = callback

    def show(self) -> None:
        self._callback(self.done, self.total, self.failed)


class _TextProgress(_Counted):
    """One line on stderr, redrawn at most ten times a second."""

    def __init__(self, total: int | None, stream: Any) -> None:
        super().__init__(total)
        self._stream = stream
        self._started = self._drawn = time.monotonic()

    def show(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._drawn < 0.1 and self.done != self.total:
            return
        self._drawn = now
        rate = self.done / max(now - self._started, 1e-9)
        of = f"/{self.total}" if self.total is not None else ""
        failed = f", {self.failed} failed" if self.failed else ""
        self._stream.write(f"\r{self.done}{of} runs, {rate:.1f}/s{failed}  ")
        self._stream.flush()

    def close(self) -> None:
        self.show(force=True)
        self._stream.write("\n")
        self._stream.flush()


class _TqdmProgress(_Counted):
    def __init__(self, total: int | None, tqdm: Any) -> None:
        super().__init__(total)
        self._bar = tqdm(total=total, unit="run", file=sys.stderr)

    def show(self) -> None:
        self._bar.update(1)
        if self.failed:
            self._bar.set_postfix(failed=self.failed, refresh=False)

    def close(self) -> None:
        self._bar.close()


def make_progress(progress: Any, total: int | None) -> Any:
    """The progress display `progress` asks for (see the module docstring)."""
    if callable(progress):
        return _CallbackProgress(total, progress)
    if not progress or not sys.stderr.isatty():
        return _NoProgress()
    try:
        from tqdm import tqdm  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return _TextProgress(total, sys.stderr)
    return _TqdmProgress(total, tqdm)


__all__ = ["amap_runs", "make_progress", "map_runs"]
