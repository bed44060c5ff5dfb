"""Opening the store the inspector reads, so that opening it writes nothing.

`open_store(spec)` takes an SQLite file path or a `postgresql://` / `postgres://` URL. Both store
classes create their tables when they are missing; the inspector must never do that, so:

- SQLite: the file is first looked at through a read-only connection (`file:...?mode=ro`); it
  must exist, be an SQLite database and hold the checkpoint tables at the schema version this
  release writes. Only then is `SQLiteCheckpointStore` opened, whose opening then changes nothing
  (the schema is current, the file already in WAL mode);
- Postgres: every connection of the store's pool starts with `default_transaction_read_only=on`,
  so the server itself refuses any write; a schema without the checkpoint tables is reported as
  such instead of being created.

The inspector then calls only `list`, `load` and `history`.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from amrita_sense import durable
from amrita_sense.durable.errors import CheckpointError
from amrita_sense.durable.stores.sqlite import _SCHEMA_VERSION as SQLITE_SCHEMA_VERSION

try:
    import psycopg
except ImportError:  # the [postgres] extra is not installed: a Postgres URL is refused with a hint
    psycopg = None  # type: ignore[assignment]

POSTGRES_SCHEMES = ("postgresql", "postgres")
READ_ONLY_OPTION = "-c default_transaction_read_only=on"
"""The libpq `options` that make each session of the store's pool read-only (server enforced)."""
SQLSTATE_READ_ONLY = "25006"
"""`read_only_sql_transaction`: what the server answers when the store tries to create its tables."""
SQLITE_TABLES = ("sense_checkpoints", "sense_history")
POSTGRES_TIMEOUT = 10.0
"""Seconds the inspector waits for the Postgres server (to connect, for a pooled connection)."""


class BadStore(ValueError):
    """The store named on the command line cannot be read (the message is one line)."""


def is_postgres_url(spec: str) -> bool:
    """True when `spec` names a Postgres database (`postgresql://...` or `postgres://...`)."""
    return urlsplit(spec).scheme.lower() in POSTGRES_SCHEMES


def open_store(spec: str, *, schema: str | None = None) -> Any:
    """The checkpoint store `spec` names, opened for reading only (`BadStore` when it cannot be)."""
    if not isinstance(spec, str) or not spec:
        raise BadStore("--store names an SQLite file or a postgresql:// URL")
    if is_postgres_url(spec):
        return _open_postgres(spec, schema)
    if "://" in spec:
        raise BadStore(f"unsupported store URL {_without_secrets(spec)!r}: use an SQLite file path or postgresql://...")
    if schema is not None:
        raise BadStore("--schema is for a Postgres store only")
    return _open_sqlite(spec)


# ----- SQLite ------------------------------------------------------------------------------------


def _open_sqlite(path: str) -> Any:
    check_sqlite_file(path)
    try:
        return durable.SQLiteCheckpointStore(path)
    except CheckpointError as exc:
        raise BadStore(str(exc)) from None


def check_sqlite_file(path: str) -> None:
    """`BadStore` unless `path` is an SQLite checkpoint database at the current schema version
    (looked at through a read-only connection: nothing is created or upgraded)."""
    file = Path(path)
    if not file.exists():
        raise BadStore(f"no such checkpoint database: {path!r}")
    if not file.is_file():
        raise BadStore(f"{path!r} is not a file (an SQLite checkpoint database is one file)")
    if not os.access(file, os.R_OK):
        raise BadStore(f"cannot read {path!r}: permission denied")
    try:
        version, tables = _sqlite_schema(file)
    except sqlite3.Error as exc:
        raise BadStore(f"{path!r} is not a readable SQLite database: {exc}") from None
    if not set(SQLITE_TABLES) <= tables:
        raise BadStore(f"{path!r} holds no checkpoint store (no {SQLITE_TABLES[0]} table)")
    if version != SQLITE_SCHEMA_VERSION:
        raise BadStore(
            f"{path!r} has checkpoint schema version {version}, this release reads {SQLITE_SCHEMA_VERSION}; "
            "the inspector never upgrades a store (open it once with SQLiteCheckpointStore, or upgrade the package)"
        )


def _sqlite_schema(file: Path) -> tuple[int, set[str]]:
    """`(user_version, table names)` of an SQLite file, read through a `mode=ro` connection."""
    conn = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    finally:
        conn.close()
    return int(version), {row[0] for row in rows}


# ----- Postgres ----------------------------------------------------------------------------------


def _open_postgres(url: str, schema: str | None) -> Any:
    if psycopg is None:
        raise BadStore("a Postgres store needs psycopg: pip install 'amrita-sense-turbo[postgres]'")
    _probe(url)
    options: dict[str, Any] = {"kwargs": {"options": read_only_options(url)}, "timeout": POSTGRES_TIMEOUT}
    if schema is not None:
        options["schema"] = schema
    try:
        store = durable.PostgresCheckpointStore(url, **options)
    except ImportError:
        raise BadStore("a Postgres store needs psycopg: pip install 'amrita-sense-turbo[postgres]'") from None
    except (TypeError, ValueError) as exc:
        raise BadStore(f"bad Postgres store {_without_secrets(url)!r}: {exc}") from None
    try:
        store.open()
    except CheckpointError as exc:
        store.close()
        if getattr(exc.__cause__, "sqlstate", None) == SQLSTATE_READ_ONLY:
            raise BadStore(
                f"schema {store.schema!r} of {_without_secrets(url)!r} holds no checkpoint store "
                "(the inspector never creates one)"
            ) from None
        raise BadStore(" ".join(str(exc).split())) from None
    return store


def _probe(url: str) -> None:
    """Connect once, read-only, so that a server that cannot be reached is one clear message now
    (the store's pool would retry in the background until its timeout)."""
    try:
        with psycopg.connect(
            url, connect_timeout=int(POSTGRES_TIMEOUT), options=read_only_options(url), autocommit=True
        ) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        raise BadStore(f"cannot connect to {_without_secrets(url)!r}: {message}") from None


def read_only_options(url: str) -> str:
    """The libpq `options` of the store's sessions: the URL's own, then read-only transactions."""
    given = parse_qs(urlsplit(url).query).get("options", [])
    return " ".join([*given, READ_ONLY_OPTION])


def _without_secrets(url: str) -> str:
    """`url` with the password of its network location left out (for messages)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return parts._replace(netloc=f"{user}:***@{host}").geturl()


def close_store(store: Any) -> None:
    """Close the store's connections (every shipped store has `close`)."""
    close = getattr(store, "close", None)
    if callable(close):
        close()


__all__ = ["BadStore", "check_sqlite_file", "close_store", "is_postgres_url", "open_store", "read_only_options"]
