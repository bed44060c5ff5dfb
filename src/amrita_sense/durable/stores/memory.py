"""`MemoryCheckpointStore`: checkpoints in a dictionary, for one process (tests, examples)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from amrita_sense.durable.errors import CheckpointNotFound
from amrita_sense.durable.snapshots.format import read_header
from amrita_sense.durable.stores.base import (
    SWEEP_BATCH,
    Checkpoint,
    CheckpointRecord,
    _check_batch,
    _check_expected,
    _check_expiry,
    _check_retention,
    _check_run_id,
    _check_version,
    _conflict,
    _fork_conflict,
    _forked_from,
    _version_not_kept,
)
from amrita_sense.durable.stores.paging import CheckpointPage, check_page, page_of


class MemoryCheckpointStore:
    """Checkpoints in a dictionary: the same protocol and rules as `SQLiteCheckpointStore`, one process only."""

    def __init__(
        self,
        *,
        history_limit: int | None = None,
        history_max_age: float | None = None,
        run_ttl: float | None = None,
        on_expiry: str = "delete",
    ) -> None:
        self.history_limit, self.history_max_age = _check_retention(history_limit, history_max_age)
        self.run_ttl, self.on_expiry = _check_expiry(run_ttl, on_expiry)
        self._runs: dict[str, Checkpoint] = {}
        self._history: dict[str, list[Checkpoint]] = {}
        # threads: guards the store. Reentrant on purpose, though nothing here re-enters it: a
        # KeyboardInterrupt from a signal can land right after `with self._lock:` acquired and before
        # its block (PEP 419; Python 3.14 lands there), and the thread that leaked it can still save.
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"MemoryCheckpointStore({len(self._runs)} runs)"

    def save(
        self, run_id: str, data: bytes, *, expected_version: int | None = None, history: bool = False
    ) -> CheckpointRecord:
        _check_run_id(run_id)
        _check_expected(expected_version)
        header = read_header(data)
        now = time.time()
        with self._lock:
            previous = self._runs.get(run_id)
            current = previous.record.version if previous is not None else 0
            if expected_version is not None and expected_version != current:
                raise _conflict(run_id, expected_version, current)
            created, forked = (previous.record.created_at, previous.record.forked_from) if previous else (now, None)
            record = CheckpointRecord(
                run_id, current + 1, header.status, header.fingerprint, len(data), created, now, forked
            )
            self._write(Checkpoint(record, bytes(data)), history)
        return record

    def _write(self, checkpoint: Checkpoint, history: bool) -> None:
        run_id = checkpoint.record.run_id
        self._runs[run_id] = checkpoint
        if history:
            self._history.setdefault(run_id, []).append(checkpoint)
            self._apply_retention(run_id, checkpoint.record.updated_at)

    def _apply_retention(self, run_id: str, now: float) -> int:
        entries = self._history.get(run_id, [])
        kept = entries
        if self.history_max_age is not None:
            kept = [e for e in kept if e.record.updated_at >= now - self.history_max_age]
        if self.history_limit is not None:
            kept = kept[-self.history_limit :]
        if entries:
            self._history[run_id] = kept
        return len(entries) - len(kept)

    def load(self, run_id: str, *, version: int | None = None) -> Checkpoint:
        _check_run_id(run_id)
        _check_version(version)
        with self._lock:
            found = self._runs.get(run_id)
            if found is None:
                raise CheckpointNotFound(f"no checkpoint for run {run_id!r}")
            if version is None or found.record.version == version:
                return found
            entry = next((e for e in self._history.get(run_id, ()) if e.record.version == version), None)
        if entry is None:
            raise _version_not_kept(run_id, version)
        return Checkpoint(replace(entry.record, created_at=found.record.created_at), entry.data)

    def history(self, run_id: str) -> list[CheckpointRecord]:
        _check_run_id(run_id)
        with self._lock:
            if run_id not in self._runs:
                raise CheckpointNotFound(f"no checkpoint for run {run_id!r}")
            return [entry.record for entry in self._history.get(run_id, ())]

    def fork(self, run_id: str, version: int, new_run_id: str) -> CheckpointRecord:
        _check_run_id(new_run_id)
        if _check_version(version) is None:
            raise ValueError("fork needs the version of the checkpoint to start from")
        source = self.load(run_id, version=version)
        now = time.time()
        record = replace(
            source.record,
            run_id=new_run_id,
            version=1,
            created_at=now,
            updated_at=now,
            forked_from=_forked_from(run_id, version),
        )
        with self._lock:
            if new_run_id in self._runs:
                raise _fork_conflict(new_run_id, self._runs[new_run_id].record.version)
            self._write(Checkpoint(record, source.data), history=True)
        return record

    def prune(self, run_id: str | None = None) -> int:
        now = time.time()
        with self._lock:
            runs = [_check_run_id(run_id)] if run_id is not None else list(self._history)
            return sum(self._apply_retention(run, now) for run in runs)

    def sweep(self, *, batch_size: int = SWEEP_BATCH) -> int:
        """Expire the runs whose last save is `run_ttl` seconds old or older (see `SQLiteCheckpointStore.sweep`)."""
        _check_batch(batch_size)
        if self.run_ttl is None:
            return 0
        cutoff, expired = time.time() - self.run_ttl, 0
        while True:
            with self._lock:
                runs = [run for run, c in self._runs.items() if c.record.updated_at < cutoff and self._expires(run)]
                for run in runs[:batch_size]:
                    self._history.pop(run, None)
                    if self.on_expiry == "delete":
                        del self._runs[run]
            expired += min(len(runs), batch_size)
            if len(runs) <= batch_size:
                return expired

    def _expires(self, run_id: str) -> bool:
        return self.on_expiry == "delete" or bool(self._history.get(run_id))

    def list(self, *, status: str | None = None) -> list[CheckpointRecord]:
        with self._lock:
            records = [c.record for _, c in sorted(self._runs.items())]
        return [r for r in records if status is None or r.status == status]

    def list_page(
        self, *, status: str | None = None, sort: str = "updated", order: str = "desc", offset: int = 0, limit: int = 50
    ) -> CheckpointPage:
        """One sorted page of `list(status=status)` (`amrita_sense.durable.stores.paging`)."""
        check_page(status, sort, order, offset, limit)
        return page_of(self.list(status=status), sort, order, offset, limit)

    def delete(self, run_id: str, *, expected_version: int | None = None) -> bool:
        _check_run_id(run_id)
        _check_expected(expected_version)
        with self._lock:
            previous = self._runs.get(run_id)
            current = previous.record.version if previous is not None else 0
            if expected_version is not None and expected_version != current:
                raise _conflict(run_id, expected_version, current)
            self._history.pop(run_id, None)
            return self._runs.pop(run_id, None) is not None
