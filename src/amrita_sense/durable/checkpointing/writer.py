"""The saves of a run in `durability="async"`: written while the next nodes run.

A run hands each snapshot to its `SaveWriter` and goes on. The writer writes them in the order
they were taken, one at a time; a snapshot handed over while another is being written waits in
the writer's one slot, and a newer one replaces it there (the newer state includes everything the
replaced one had). `flush()` waits until every snapshot handed over is written, and raises the
first failure: the run calls it before it parks and when it ends (dropping the snapshot still
waiting, which the run's own final save supersedes), so `run()` never returns before its last save
is durable. After a failure the writer writes nothing more; every later `submit` and
`flush` raises that failure again.

A store whose `save` is a coroutine function is awaited in a task of the run's loop; a blocking
store (SQLite, the threaded Postgres store) is called in a worker thread, so that its write and
the run's next nodes overlap.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


class SaveWriter:
    """Writes one run's snapshots in order, one in flight, the newest one waiting (see the module)."""

    __slots__ = ("_failure", "_queued", "_task", "_write")

    def __init__(self, write: Callable[[Any], Awaitable[Any]]) -> None:
        self._write = write
        self._queued: Any = None
        self._task: asyncio.Task | None = None
        self._failure: BaseException | None = None

    @property
    def busy(self) -> bool:
        """A snapshot is being written or waits."""
        return self._task is not None and not self._task.done()

    def submit(self, item: Any) -> None:
        """Hand over a snapshot (it replaces one still waiting); raises an earlier failure. `item` is
        what the writing function takes (the snapshot and what it reports with it)."""
        self.raise_failure()
        self._queued = item
        if not self.busy:
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def flush(self, superseded: bool = False) -> None:
        """Wait until every snapshot handed over is written; raises the first failure. With
        `superseded`, the snapshot still waiting is dropped first: the caller writes a newer one
        itself next (it includes everything the dropped one had), one write fewer."""
        if superseded:
            self._queued = None
        while self.busy:
            task = self._task
            assert task is not None
            # shield: a cancelled run stops waiting, the write it started still ends (never torn)
            await asyncio.shield(task)
        self.raise_failure()

    def raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    async def _drain(self) -> None:
        while self._queued is not None and self._failure is None:
            data, self._queued = self._queued, None
            try:
                await self._write(data)
            except Exception as exc:  # kept for the run: it raises it where it waits
                self._failure = exc
                self._queued = None
