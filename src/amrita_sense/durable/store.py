"""Checkpoint stores: where snapshots are kept by run id.

`CheckpointStore` is the protocol the engine uses (`save` / `load` / `list` /
`delete`); a backend implements these four methods, synchronously or as
coroutines (the checkpointer awaits what they return when it is awaitable), and
nothing in the engine changes. Two backends ship: `SQLiteCheckpointStore`, the
embedded default, and `MemoryCheckpointStore`, for one process.

A store keeps the latest checkpoint of each run with a version number that
grows by one per save. `save(..., expected_version=n)` saves only if the stored
version is still `n` (0: the run id must be new) and raises
`CheckpointConflict` otherwise, so two processes can never both believe they
own a run: the one that lost finds out at its next save.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from amrita_sense.durable.errors import CheckpointConflict, CheckpointError, CheckpointNotFound
from amrita_sense.durable.format import read_header


@dataclass(frozen=True)
class CheckpointRecord:
    """What a store knows about a run's latest checkpoint (the snapshot's status and graph fingerprint)."""

    run_id: str
    version: int
    status: str
    fingerprint: str
    size: int
    created_at: float
    """When the run's first checkpoint was saved (seconds since the epoch)."""
    updated_at: float
    """When this checkpoint was saved."""


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
        """Forget the run; False when it was not stored. `CheckpointConflict` on a version mismatch."""
        ...


def _check_run_id(run_id: Any) -> str:
    if not isinstance(run_id, str) or not run_id or len(run_id) > 512:
        raise ValueError(f"a run id is a non-empty string of at most 512 characters, not {run_id!r:.60}")
    return run_id


def _check_expected(expected: Any) -> int | None:
    if expected is not None and (type(expected) is not int or expected < 0):
        raise ValueError(f"expected_version is None or a non-negative int, not {expected!r}")
    return expected


def _conflict(run_id: str, expected: int, current: int) -> CheckpointConflict:
    found = f"version {current}" if current else "no checkpoint"
    return CheckpointConflict(f"run {run_id!r}: expected version {expected}, the store has {found}")


_SCHEMA = """
CREATE TABLE IF NOT EXISTS sense_checkpoints (
    run_id      TEXT PRIMARY KEY,
    version     INTEGER NOT NULL,
    status      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    data        BLOB NOT NULL
)
"""
_COLUMNS = "run_id, version, status, fingerprint, length(data), created_at, updated_at"


class SQLiteCheckpointStore:
    """Checkpoints in an SQLite database file (standard library `sqlite3`, no server).

    The database runs in WAL mode, so readers never block the writer; every
    write is one `BEGIN IMMEDIATE` transaction (several processes and threads
    may write the same file: a writer waits up to `timeout` seconds for the
    lock). `synchronous="NORMAL"` (the default) survives a killed process; use
    "FULL" to survive a power loss as well. Snapshots are checked (framing and
    checksum) before they are written, so the store never holds a damaged one.

    One instance may be shared by the threads of a process; after `os.fork()`
    the child opens its own connection.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0, synchronous: str = "NORMAL"):
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = os.fspath(path)
        self._timeout = float(timeout)
        self._synchronous = synchronous.upper()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        with self._lock:
            self._connection()

    def __repr__(self) -> str:
        return f"SQLiteCheckpointStore({self.path!r})"

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
            conn.execute(_SCHEMA)
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

    def save(self, run_id: str, data: bytes, *, expected_version: int | None = None) -> CheckpointRecord:
        """Store `data` as the run's latest checkpoint (one transaction); its record."""
        _check_run_id(run_id)
        _check_expected(expected_version)
        header = read_header(data)
        now = time.time()
        with self._transaction("saving a checkpoint") as conn:
            sql = "SELECT version, created_at FROM sense_checkpoints WHERE run_id = ?"
            row = conn.execute(sql, (run_id,)).fetchone()
            current, created = row if row is not None else (0, now)
            if expected_version is not None and expected_version != current:
                raise _conflict(run_id, expected_version, current)
            conn.execute(
                "INSERT INTO sense_checkpoints (run_id, version, status, fingerprint, created_at, updated_at, data) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET version = excluded.version, "
                "status = excluded.status, fingerprint = excluded.fingerprint, updated_at = excluded.updated_at, "
                "data = excluded.data",
                (run_id, current + 1, header.status, header.fingerprint, created, now, bytes(data)),
            )
        return CheckpointRecord(run_id, current + 1, header.status, header.fingerprint, len(data), created, now)

    def load(self, run_id: str) -> Checkpoint:
        """The run's latest checkpoint; `CheckpointNotFound` when there is none."""
        rows = self._query(
            f"SELECT {_COLUMNS}, data FROM sense_checkpoints WHERE run_id = ?", (_check_run_id(run_id),), "loading"
        )
        if not rows:
            raise CheckpointNotFound(f"no checkpoint for run {run_id!r} in {self.path!r}")
        return Checkpoint(CheckpointRecord(*rows[0][:7]), bytes(rows[0][7]))

    def list(self, *, status: str | None = None) -> list[CheckpointRecord]:
        """Every run's latest checkpoint record, by run id (only those with `status`, when given)."""
        if status is None:
            rows = self._query(f"SELECT {_COLUMNS} FROM sense_checkpoints ORDER BY run_id", (), "listing")
        else:
            sql = f"SELECT {_COLUMNS} FROM sense_checkpoints WHERE status = ? ORDER BY run_id"
            rows = self._query(sql, (status,), "listing")
        return [CheckpointRecord(*row) for row in rows]

    def delete(self, run_id: str, *, expected_version: int | None = None) -> bool:
        """Forget the run; False when it was not stored."""
        _check_run_id(run_id)
        _check_expected(expected_version)
        with self._transaction("deleting a checkpoint") as conn:
            row = conn.execute("SELECT version FROM sense_checkpoints WHERE run_id = ?", (run_id,)).fetchone()
            current = row[0] if row is not None else 0
            if expected_version is not None and expected_version != current:
                raise _conflict(run_id, expected_version, current)
            conn.execute("DELETE FROM sense_checkpoints WHERE run_id = ?", (run_id,))
        return row is not None


class MemoryCheckpointStore:
    """Checkpoints in a dictionary: the same protocol and rules as `SQLiteCheckpointStore`, one process only."""

    def __init__(self) -> None:
        self._runs: dict[str, Checkpoint] = {}
        self._lock = threading.Lock()

    def save(self, run_id: str, data: bytes, *, expected_version: int | None = None) -> CheckpointRecord:
        _check_run_id(run_id)
        _check_expected(expected_version)
        header = read_header(data)
        now = time.time()
        with self._lock:
            previous = self._runs.get(run_id)
            current = previous.record.version if previous is not None else 0
            if expected_version is not None and expected_version != current:
                raise _conflict(run_id, expected_version, current)
            created = previous.record.created_at if previous is not None else now
            record = CheckpointRecord(run_id, current + 1, header.status, header.fingerprint, len(data), created, now)
            self._runs[run_id] = Checkpoint(record, bytes(data))
        return record

    def load(self, run_id: str) -> Checkpoint:
        with self._lock:
            found = self._runs.get(_check_run_id(run_id))
        if found is None:
            raise CheckpointNotFound(f"no checkpoint for run {run_id!r}")
        return found

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
            return self._runs.pop(run_id, None) is not None
