"""Checkpoint stores: where snapshots are kept by run id.

`CheckpointStore` is the protocol the engine uses (`save` / `load` / `list` /
`delete`); a backend implements these four methods, synchronously or as
coroutines (the checkpointer awaits what they return when it is awaitable), and
nothing in the engine changes. Three backends ship: `SQLiteCheckpointStore`,
the embedded default, `MemoryCheckpointStore`, for one process, and (extra
`[postgres]`) `PostgresCheckpointStore` / `AsyncPostgresCheckpointStore`.

A store keeps the latest checkpoint of each run with a version number that
grows by one per save. `save(..., expected_version=n)` saves only if the stored
version is still `n` (0: the run id must be new) and raises
`CheckpointConflict` otherwise, so two processes can never both believe they
own a run: the one that lost finds out at its next save.

History (`HistoryStore`, every shipped store): `save(..., history=True)` also
appends the checkpoint to the run's history, which `history(run_id)` lists
oldest first and `load(run_id, version=V)` reads; `fork(run_id, V, new_id)`
starts a new run from an entry and leaves the source untouched. Retention
(`history_limit` entries per run, `history_max_age` seconds) is applied at each
history save and by `prune()`; it never touches a run's latest checkpoint.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from amrita_sense.durable.errors import (
    CheckpointConflict,
    CheckpointError,
    CheckpointNotFound,
    CorruptSnapshot,
    SnapshotFormatError,
)
from amrita_sense.durable.format import read_header


@dataclass(frozen=True)
class CheckpointRecord:
    """What a store knows about one checkpoint of a run (the snapshot's status and graph fingerprint)."""

    run_id: str
    version: int
    status: str
    fingerprint: str
    size: int
    created_at: float
    """When the run's first checkpoint was saved (seconds since the epoch)."""
    updated_at: float
    """When this checkpoint was saved."""
    forked_from: str | None = None
    """`"<run id>@<version>"` of the history entry this run was forked from (`fork`), else None."""


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint: its record and the snapshot bytes."""

    record: CheckpointRecord
    data: bytes


@runtime_checkable
class CheckpointStore(Protocol):
    """The four operations the engine needs from a checkpoint backend (sync or async)."""

    def save(self, run_id: str, data: bytes, *, expected_version: int | None = None) -> CheckpointRecord:
        """Store `data` as the run's latest checkpoint; with `expected_version`, only over that version."""
        ...

    def load(self, run_id: str) -> Checkpoint:
        """The run's latest checkpoint; `CheckpointNotFound` when there is none."""
        ...

    def list(self, *, status: str | None = None) -> list[CheckpointRecord]:
        """The latest checkpoint record of every run (only those with `status`, when given)."""
        ...

    def delete(self, run_id: str, *, expected_version: int | None = None) -> bool:
        """Forget the run (and its history); False when it was not stored. `CheckpointConflict` on a
        version mismatch."""
        ...


@runtime_checkable
class HistoryStore(CheckpointStore, Protocol):
    """A store that can keep every checkpoint of a run (`Checkpointing(..., history=True)` needs one)."""

    def save(
        self, run_id: str, data: bytes, *, expected_version: int | None = None, history: bool = False
    ) -> CheckpointRecord:
        """As `CheckpointStore.save`; with `history`, the checkpoint is also appended to the run's history."""
        ...

    def load(self, run_id: str, *, version: int | None = None) -> Checkpoint:
        """The latest checkpoint, or the one of `version` (the latest or a kept history entry)."""
        ...

    def history(self, run_id: str) -> list[CheckpointRecord]:
        """The run's kept history entries, oldest first ([] when it has none)."""
        ...

    def fork(self, run_id: str, version: int, new_run_id: str) -> CheckpointRecord:
        """Start `new_run_id` (version 1, first history entry) from `run_id`'s checkpoint `version`."""
        ...

    def prune(self, run_id: str | None = None) -> int:
        """Apply the retention now (to one run or every run); the number of entries removed."""
        ...


HISTORY_METHODS = ("history", "fork", "prune")


def _check_run_id(run_id: Any) -> str:
    if not isinstance(run_id, str) or not run_id or len(run_id) > 512:
        raise ValueError(f"a run id is a non-empty string of at most 512 characters, not {run_id!r:.60}")
    return run_id


def _check_expected(expected: Any) -> int | None:
    if expected is not None and (type(expected) is not int or expected < 0):
        raise ValueError(f"expected_version is None or a non-negative int, not {expected!r}")
    return expected


def _check_version(version: Any) -> int | None:
    if version is not None and (type(version) is not int or version < 1):
        raise ValueError(f"version is None or a positive int, not {version!r}")
    return version


def _check_retention(history_limit: Any, history_max_age: Any) -> tuple[int | None, float | None]:
    if history_limit is not None and (type(history_limit) is not int or history_limit < 1):
        raise ValueError(f"history_limit is None or an int >= 1 (entries kept per run), not {history_limit!r}")
    if history_max_age is not None and (
        isinstance(history_max_age, bool) or not isinstance(history_max_age, (int, float)) or not history_max_age > 0
    ):
        raise ValueError(f"history_max_age is None or a positive number of seconds, not {history_max_age!r}")
    return history_limit, None if history_max_age is None else float(history_max_age)


def _conflict(run_id: str, expected: int, current: int) -> CheckpointConflict:
    found = f"version {current}" if current else "no checkpoint"
    return CheckpointConflict(f"run {run_id!r}: expected version {expected}, the store has {found}")


def _fork_conflict(new_run_id: str, current: int) -> CheckpointConflict:
    return CheckpointConflict(f"cannot fork into run {new_run_id!r}: the store has version {current} of it")


def _version_not_kept(run_id: str, version: int, where: str = "") -> CheckpointNotFound:
    return CheckpointNotFound(f"run {run_id!r} has no kept checkpoint of version {version}{where}")


def _forked_from(run_id: str, version: int) -> str:
    return f"{run_id}@{version}"


def _checked_data(run_id: str, version: int, data: Any, where: str = "") -> bytes:
    """The stored bytes of a checkpoint, or `CorruptSnapshot` naming the run when they are not one."""
    try:
        read_header(bytes(data))
    except (TypeError, SnapshotFormatError) as exc:
        raise CorruptSnapshot(
            f"the stored checkpoint of run {run_id!r}, version {version}{where}, is damaged: {exc}"
        ) from exc
    return bytes(data)


_SCHEMA_VERSION = 2
"""1: the latest checkpoint per run; 2: `forked_from`, and the history table."""
_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS sense_checkpoints (
    run_id      TEXT PRIMARY KEY,
    version     INTEGER NOT NULL,
    status      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    data        BLOB NOT NULL,
    forked_from TEXT
)""",
    """
CREATE TABLE IF NOT EXISTS sense_history (
    run_id      TEXT NOT NULL,
    version     INTEGER NOT NULL,
    status      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    saved_at    REAL NOT NULL,
    data        BLOB NOT NULL,
    PRIMARY KEY (run_id, version)
) WITHOUT ROWID""",
)
_COLUMNS = "run_id, version, status, fingerprint, length(data), created_at, updated_at, forked_from"
_HISTORY_COLUMNS = (
    "h.run_id, h.version, h.status, h.fingerprint, length(h.data), c.created_at, h.saved_at, c.forked_from"
)


class SQLiteCheckpointStore:
    """Checkpoints in an SQLite database file (standard library `sqlite3`, no server).

    The database runs in WAL mode, so readers never block the writer; every
    write is one `BEGIN IMMEDIATE` transaction (several processes and threads
    may write the same file: a writer waits up to `timeout` seconds for the
    lock). `synchronous="NORMAL"` (the default) survives a killed process; use
    "FULL" to survive a power loss as well. Snapshots are checked (framing and
    checksum) before they are written, so the store never holds a damaged one.
    `history_limit` / `history_max_age` bound the history kept per run.

    The store versions its schema (`PRAGMA user_version`): a file written by
    an older release is upgraded in place, one written by a newer release is
    refused. One instance may be shared by the threads of a process; after
    `os.fork()` the child opens its own connection.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 30.0,
        synchronous: str = "NORMAL",
        history_limit: int | None = None,
        history_max_age: float | None = None,
    ):
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = os.fspath(path)
        self._timeout = float(timeout)
        self._synchronous = synchronous.upper()
        self.history_limit, self.history_max_age = _check_retention(history_limit, history_max_age)
        # threads: guards the store. Reentrant on purpose, though nothing here re-enters it: a
        # KeyboardInterrupt from a signal can land right after `with self._lock:` acquired and before
        # its block (PEP 419; Python 3.14 lands there), and the thread that leaked it can still save.
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        with self._lock:
            self._connection()

    def __repr__(self) -> str:
        return f"SQLiteCheckpointStore({self.path!r})"

    def __reduce__(self) -> tuple:
        options = {"timeout": self._timeout, "synchronous": self._synchronous}
        options.update(history_limit=self.history_limit, history_max_age=self.history_max_age)
        return (_reopen_sqlite, (os.path.abspath(self.path), options))

    def __enter__(self) -> SQLiteCheckpointStore:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close this process's connection (the next call opens a new one)."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None and self._pid == os.getpid():
                conn.close()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        try:
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            _upgrade_schema(conn, self.path)
        except sqlite3.Error as exc:
            raise CheckpointError(f"cannot open the checkpoint database {self.path!r}: {exc}") from exc
        self._conn, self._pid = conn, os.getpid()
        return conn

    @contextmanager
    def _transaction(self, what: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise CheckpointError(f"{what} failed in {self.path!r}: {exc}") from exc

    def _query(self, sql: str, params: tuple, what: str) -> list[tuple]:
        with self._lock:
            try:
                return self._connection().execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise CheckpointError(f"{what} failed in {self.path!r}: {exc}") from exc

    def save(
        self, run_id: str, data: bytes, *, expected_version: int | None = None, history: bool = False
    ) -> CheckpointRecord:
        """Store `data` as the run's latest checkpoint (one transaction); with `history`, also as an
        entry of its history. Its record."""
        _check_run_id(run_id)
        _check_expected(expected_version)
        header = read_header(data)
        now = time.time()
        with self._transaction("saving a checkpoint") as conn:
            sql = "SELECT version, created_at, forked_from FROM sense_checkpoints WHERE run_id = ?"
            row = conn.execute(sql, (run_id,)).fetchone()
            current, created, forked = row if row is not None else (0, now, None)
            if expected_version is not None and expected_version != current:
                raise _conflict(run_id, expected_version, current)
            record = CheckpointRecord(
                run_id, current + 1, header.status, header.fingerprint, len(data), created, now, forked
            )
            self._write(conn, record, data, history)
        return record

    def _write(self, conn: sqlite3.Connection, record: CheckpointRecord, data: bytes, history: bool) -> None:
        """Write `record` as its run's latest checkpoint (and as a history entry) in `conn`'s transaction."""
        r = record
        conn.execute(
            "INSERT INTO sense_checkpoints (run_id, version, status, fingerprint, created_at, updated_at, data, "
            "forked_from) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET version = "
            "excluded.version, status = excluded.status, fingerprint = excluded.fingerprint, "
            "updated_at = excluded.updated_at, data = excluded.data",
            (r.run_id, r.version, r.status, r.fingerprint, r.created_at, r.updated_at, bytes(data), r.forked_from),
        )
        if history:
            conn.execute(
                "INSERT INTO sense_history (run_id, version, status, fingerprint, saved_at, data) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (r.run_id, r.version, r.status, r.fingerprint, r.updated_at, bytes(data)),
            )
            self._apply_retention(conn, r.run_id, r.updated_at)

    def _apply_retention(self, conn: sqlite3.Connection, run_id: str | None, now: float) -> int:
        """Drop the history entries the retention no longer keeps (of `run_id`, or of every run)."""
        which, params = ("run_id = ?", (run_id,)) if run_id is not None else ("1", ())
        removed = 0
        if self.history_max_age is not None:
            cursor = conn.execute(
                f"DELETE FROM sense_history WHERE {which} AND saved_at < ?", (*params, now - self.history_max_age)
            )
            removed += cursor.rowcount
        if self.history_limit is not None:
            cursor = conn.execute(
                f"DELETE FROM sense_history WHERE {which} AND version <= (SELECT h.version FROM sense_history h "
                "WHERE h.run_id = sense_history.run_id ORDER BY h.version DESC LIMIT 1 OFFSET ?)",
                (*params, self.history_limit),
            )
            removed += cursor.rowcount
        return removed

    def load(self, run_id: str, *, version: int | None = None) -> Checkpoint:
        """The run's latest checkpoint, or its checkpoint `version` (the latest or a kept history
        entry); `CheckpointNotFound` when there is none."""
        _check_run_id(run_id)
        _check_version(version)
        rows = self._query(f"SELECT {_COLUMNS}, data FROM sense_checkpoints WHERE run_id = ?", (run_id,), "loading")
        if not rows:
            raise CheckpointNotFound(f"no checkpoint for run {run_id!r} in {self.path!r}")
        if version is None or rows[0][1] == version:
            return Checkpoint(CheckpointRecord(*rows[0][:8]), _checked_data(run_id, rows[0][1], rows[0][8]))
        sql = (
            f"SELECT {_HISTORY_COLUMNS}, h.data FROM sense_history h JOIN sense_checkpoints c USING (run_id) "
            "WHERE h.run_id = ? AND h.version = ?"
        )
        rows = self._query(sql, (run_id, version), "loading")
        if not rows:
            raise _version_not_kept(run_id, version, f" in {self.path!r}")
        return Checkpoint(CheckpointRecord(*rows[0][:8]), _checked_data(run_id, version, rows[0][8]))

    def history(self, run_id: str) -> list[CheckpointRecord]:
        """The run's kept history entries, oldest first; `CheckpointNotFound` for an unknown run."""
        _check_run_id(run_id)
        sql = (
            f"SELECT {_HISTORY_COLUMNS} FROM sense_history h JOIN sense_checkpoints c USING (run_id) "
            "WHERE h.run_id = ? ORDER BY h.version"
        )
        rows = self._query(sql, (run_id,), "reading the history")
        if not rows and not self._query("SELECT 1 FROM sense_checkpoints WHERE run_id = ?", (run_id,), "reading"):
            raise CheckpointNotFound(f"no checkpoint for run {run_id!r} in {self.path!r}")
        return [CheckpointRecord(*row) for row in rows]

    def fork(self, run_id: str, version: int, new_run_id: str) -> CheckpointRecord:
        """`new_run_id` starts (version 1, first history entry) from `run_id`'s checkpoint `version`."""
        _check_run_id(run_id)
        _check_run_id(new_run_id)
        if _check_version(version) is None:
            raise ValueError("fork needs the version of the checkpoint to start from")
        source = self.load(run_id, version=version)
        now = time.time()
        with self._transaction("forking a run") as conn:
            row = conn.execute("SELECT version FROM sense_checkpoints WHERE run_id = ?", (new_run_id,)).fetchone()
            if row is not None:
                raise _fork_conflict(new_run_id, row[0])
            s = source.record
            record = CheckpointRecord(
                new_run_id, 1, s.status, s.fingerprint, s.size, now, now, _forked_from(run_id, version)
            )
            self._write(conn, record, source.data, history=True)
        return record

    def prune(self, run_id: str | None = None) -> int:
        """Apply the retention now, to `run_id` or to every run; the number of history entries removed."""
        if run_id is not None:
            _check_run_id(run_id)
        with self._transaction("pruning the history") as conn:
            return self._apply_retention(conn, run_id, time.time())

    def list(self, *, status: str | None = None) -> list[CheckpointRecord]:
        """Every run's latest checkpoint record, by run id (only those with `status`, when given)."""
        if status is None:
            rows = self._query(f"SELECT {_COLUMNS} FROM sense_checkpoints ORDER BY run_id", (), "listing")
        else:
            sql = f"SELECT {_COLUMNS} FROM sense_checkpoints WHERE status = ? ORDER BY run_id"
            rows = self._query(sql, (status,), "listing")
        return [CheckpointRecord(*row) for row in rows]

    def delete(self, run_id: str, *, expected_version: int | None = None) -> bool:
        """Forget the run and its history; False when it was not stored."""
        _check_run_id(run_id)
        _check_expected(expected_version)
        with self._transaction("deleting a checkpoint") as conn:
            row = conn.execute("SELECT version FROM sense_checkpoints WHERE run_id = ?", (run_id,)).fetchone()
            current = row[0] if row is not None else 0
            if expected_version is not None and expected_version != current:
                raise _conflict(run_id, expected_version, current)
            conn.execute("DELETE FROM sense_checkpoints WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM sense_history WHERE run_id = ?", (run_id,))
        return row is not None


def _reopen_sqlite(path: str, options: dict) -> SQLiteCheckpointStore:
    return SQLiteCheckpointStore(path, **options)


def _upgrade_schema(conn: sqlite3.Connection, path: str) -> None:
    """Create the tables, or bring an older release's file to `_SCHEMA_VERSION` (one transaction)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = conn.execute("PRAGMA user_version").fetchone()[0]
        if found > _SCHEMA_VERSION:
            raise CheckpointError(
                f"the checkpoint database {path!r} has schema version {found}; this release knows "
                f"versions up to {_SCHEMA_VERSION} (upgrade amrita-sense-turbo to read it)"
            )
        if found < _SCHEMA_VERSION:
            columns = {row[1] for row in conn.execute("PRAGMA table_info(sense_checkpoints)")}
            if columns and "forked_from" not in columns:  # a version 1 file
                conn.execute("ALTER TABLE sense_checkpoints ADD COLUMN forked_from TEXT")
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


class MemoryCheckpointStore:
    """Checkpoints in a dictionary: the same protocol and rules as `SQLiteCheckpointStore`, one process only."""

    def __init__(self, *, history_limit: int | None = None, history_max_age: float | None = None) -> None:
        self.history_limit, self.history_max_age = _check_retention(history_limit, history_max_age)
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

    def list(self, *, status: str | None = None) -> list[CheckpointRecord]:
        with self._lock:
            records = [c.record for _, c in sorted(self._runs.items())]
        return [r for r in records if status is None or r.status == status]

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
