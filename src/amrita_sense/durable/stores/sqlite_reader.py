"""Reading an SQLite checkpoint file without writing anything: `SQLiteCheckpointStore(path, read_only=True)`.

Each query opens its own connection with `mode=ro`, so the file is never written and no write lock
is ever taken. Even a `mode=ro` connection creates the `-wal` and `-shm` files of a database in WAL
mode when they are missing (and fails when it cannot, in a folder it may only read), so:

- when the `-wal` and `-shm` files are there (a writer has the file open), the query reads through
  them (`mode=ro`): it sees the writer's latest commits, and creates nothing;
- when they are not (no writer: every commit is in the file itself), the query reads the file
  alone (`mode=ro&immutable=1`: no locks, no journal files). Should the file change meanwhile (a
  writer came), the query is read again, through the writer's files.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from amrita_sense.durable.errors import CheckpointError

TABLES = ("sense_checkpoints", "sense_history", "sense_messages")
RETRIES = 5
"""Reads of one query before giving up while writers keep changing the file under it."""


def read_only_uri(path: str, *, immutable: bool) -> str:
    """The `file:` URI that opens `path` read-only (`immutable`: without locks or journal files)."""
    return Path(path).resolve().as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro")


def _state(path: str) -> tuple:
    """What tells whether a writer has the file (its journal files) or changed it meanwhile."""
    stat = os.stat(path)
    journals = tuple(os.path.exists(path + suffix) for suffix in ("-wal", "-shm", "-journal"))
    return (*journals, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def query(path: str, sql: str, params: tuple, timeout: float) -> list[tuple]:
    """The rows of one read-only query on the file at `path` (see the module docstring)."""
    for _ in range(RETRIES):
        before = _state(path)
        through_writer = before[0] and before[1]  # -wal and -shm: read through them
        rows = _rows(read_only_uri(path, immutable=not through_writer), sql, params, timeout)
        if through_writer or _state(path) == before:
            return rows
    raise sqlite3.OperationalError(f"the file kept changing during {RETRIES} reads")


def _rows(uri: str, sql: str, params: tuple, timeout: float) -> list[tuple]:
    conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def check_schema(path: str, version: int, timeout: float) -> None:
    """`CheckpointError` unless `path` is an SQLite checkpoint database of schema `version` (read
    only: a file of an older release is not upgraded, one of a newer release is refused)."""
    try:
        found = query(path, "PRAGMA user_version", (), timeout)[0][0]
        tables = {row[0] for row in query(path, "SELECT name FROM sqlite_master WHERE type = 'table'", (), timeout)}
    except (OSError, sqlite3.Error) as exc:
        raise CheckpointError(f"cannot read the checkpoint database {path!r}: {exc}") from exc
    if not set(TABLES) <= tables:
        raise CheckpointError(f"{path!r} holds no checkpoint store (no {TABLES[0]} table)")
    if found != version:
        raise CheckpointError(
            f"{path!r} has checkpoint schema version {found}, this release reads {version} and, read-only, "
            "upgrades nothing (open it once with SQLiteCheckpointStore, or upgrade amrita-sense-turbo)"
        )


def refuse_writes(path: str) -> Any:
    """The error of a write to a store opened read-only."""
    return CheckpointError(f"the checkpoint database {path!r} is opened read-only: it is never written")


__all__ = ["check_schema", "query", "read_only_uri", "refuse_writes"]
