"""Opening the store the inspector reads, so that opening and reading it writes nothing.

`open_store(spec)` takes an SQLite file path, or a Postgres connection string: a `postgresql://` /
`postgres://` URL or a libpq `key=value` string. Both store classes create their tables when they
are missing; the inspector must never do that, so:

- SQLite: the file is opened with `SQLiteCheckpointStore(path, read_only=True)`: every read is a
  `mode=ro` connection; nothing is written, no `-wal`/`-shm` file is created, no write lock is
  taken, a file the inspector may only read works. It must exist, be an SQLite database and hold
  the checkpoint tables at the schema version this release reads (it is never upgraded);
- Postgres: every connection of the store's pool starts with `default_transaction_read_only=on`,
  so the server itself refuses any write; a schema without the checkpoint tables is reported as
  such instead of being created.

The inspector then calls only `list_page`, `load` and `history`. A store is shown, in the page
and in every message, by `describe_store(spec)`: a Postgres connection string without its
password, however it was given (`password=`, the URL's `user:password@`, `?password=`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from amrita_sense import durable
from amrita_sense.durable.errors import CheckpointError

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
except ImportError:  # the [postgres] extra is not installed: a Postgres URL is refused with a hint
    psycopg = None  # type: ignore[assignment]

POSTGRES_SCHEMES = ("postgresql", "postgres")
READ_ONLY_OPTION = "-c default_transaction_read_only=on"
"""The libpq `options` that make each session of the store's pool read-only (server enforced)."""
SQLSTATE_READ_ONLY = "25006"
"""`read_only_sql_transaction`: what the server answers when the store tries to create its tables."""
SECRET_PARAMETERS = ("password", "sslpassword")
"""The connection parameters never shown (in the page, in a message, in a log)."""
KEY_VALUE = re.compile(r"\s*[A-Za-z_]+\s*=")
"""The start of a libpq `key=value` connection string (`host=db dbname=app ...`)."""
HIDDEN = "a Postgres database (its connection string cannot be read, so it is not shown)"
POSTGRES_TIMEOUT = 10.0
"""Seconds the inspector waits for the Postgres server (to connect, for a pooled connection)."""


class BadStore(ValueError):
    """The store named on the command line cannot be read (the message is one line)."""


def is_postgres_url(spec: str) -> bool:
    """True when `spec` names a Postgres database: a `postgresql://...` / `postgres://...` URL, or a
    libpq `key=value` string (that is not the path of an existing file)."""
    if urlsplit(spec).scheme.lower() in POSTGRES_SCHEMES:
        return True
    return "://" not in spec and KEY_VALUE.match(spec) is not None and not os.path.exists(spec)


def describe_store(spec: str, schema: str | None = None) -> str:
    """How the page and the messages name the store `spec`: an SQLite path as it is, a Postgres
    connection string without its password (and the schema, when given)."""
    if not is_postgres_url(spec):
        return spec
    params = _postgres_params(spec)
    if params is None:
        return HIDDEN
    shown = make_conninfo("", **{k: v for k, v in params.items() if k not in SECRET_PARAMETERS})
    return f"postgres {shown}" + (f" schema={schema}" if schema else "")


def _postgres_params(spec: str) -> dict[str, Any] | None:
    """The parameters libpq reads from `spec`; None when psycopg is missing or `spec` is no
    connection string (the parser's message is never shown: it quotes the string)."""
    if psycopg is None:
        return None
    try:
        return conninfo_to_dict(spec)
    except psycopg.Error:
        return None


def without_secrets(text: str, spec: str) -> str:
    """`text` (a message) with every secret of the connection string `spec` masked."""
    secrets = {str(value) for key, value in (_postgres_params(spec) or {}).items() if key in SECRET_PARAMETERS}
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def open_store(spec: str, *, schema: str | None = None) -> Any:
    """The checkpoint store `spec` names, opened for reading only (`BadStore` when it cannot be)."""
    if not isinstance(spec, str) or not spec:
        raise BadStore("--store names an SQLite file or a Postgres connection string (postgresql://...)")
    if is_postgres_url(spec):
        return _open_postgres(spec, schema)
    if "://" in spec:
        raise BadStore(f"unsupported store URL {_scheme(spec)}://...: use an SQLite file path or postgresql://...")
    if schema is not None:
        raise BadStore("--schema is for a Postgres store only")
    return _open_sqlite(spec)


def _scheme(spec: str) -> str:
    return spec.split("://", 1)[0][:20]


# ----- SQLite ------------------------------------------------------------------------------------


def _open_sqlite(path: str) -> Any:
    check_sqlite_file(path)
    try:
        return durable.SQLiteCheckpointStore(path, read_only=True)
    except CheckpointError as exc:
        raise BadStore(" ".join(str(exc).split())) from None


def check_sqlite_file(path: str) -> None:
    """`BadStore` unless `path` is a file the inspector can read (what it holds is checked by
    opening it read-only: nothing is created or upgraded)."""
    file = Path(path)
    if not file.exists():
        raise BadStore(f"no such checkpoint database: {path!r}")
    if not file.is_file():
        raise BadStore(f"{path!r} is not a file (an SQLite checkpoint database is one file)")
    if not os.access(file, os.R_OK):
        raise BadStore(f"cannot read {path!r}: permission denied")
    with file.open("rb") as head:
        start = head.read(16)
    if start and start != b"SQLite format 3\x00":
        raise BadStore(f"{path!r} is not a readable SQLite database")


# ----- Postgres ----------------------------------------------------------------------------------


def _open_postgres(spec: str, schema: str | None) -> Any:
    if psycopg is None:
        raise BadStore("a Postgres store needs psycopg: pip install 'amrita-sense-turbo[postgres]'")
    if _postgres_params(spec) is None:
        raise BadStore("--store is not a valid Postgres connection string (postgresql://... or key=value ...)")
    shown = describe_store(spec, schema)
    _probe(spec, shown)
    options: dict[str, Any] = {"kwargs": {"options": read_only_options(spec)}, "timeout": POSTGRES_TIMEOUT}
    if schema is not None:
        options["schema"] = schema
    try:
        store = durable.PostgresCheckpointStore(spec, **options)
    except ImportError:
        raise BadStore("a Postgres store needs psycopg: pip install 'amrita-sense-turbo[postgres]'") from None
    except (TypeError, ValueError) as exc:
        raise BadStore(without_secrets(f"bad Postgres store {shown}: {exc}", spec)) from None
    try:
        store.open()
    except CheckpointError as exc:
        store.close()
        if getattr(exc.__cause__, "sqlstate", None) == SQLSTATE_READ_ONLY:
            raise BadStore(
                f"schema {store.schema!r} of {shown} holds no checkpoint store (the inspector never creates one)"
            ) from None
        raise BadStore(without_secrets(" ".join(str(exc).split()), spec)) from None
    return store


def _probe(spec: str, shown: str) -> None:
    """Connect once, read-only, so that a server that cannot be reached is one clear message now
    (the store's pool would retry in the background until its timeout)."""
    try:
        with psycopg.connect(
            spec, connect_timeout=int(POSTGRES_TIMEOUT), options=read_only_options(spec), autocommit=True
        ) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        raise BadStore(without_secrets(f"cannot connect to {shown}: {message}", spec)) from None


def read_only_options(spec: str) -> str:
    """The libpq `options` of the store's sessions: the connection string's own, then read-only transactions."""
    given = (_postgres_params(spec) or {}).get("options")
    return " ".join([given, READ_ONLY_OPTION] if given else [READ_ONLY_OPTION])


def close_store(store: Any) -> None:
    """Close the store's connections (every shipped store has `close`)."""
    close = getattr(store, "close", None)
    if callable(close):
        close()


__all__ = [
    "BadStore",
    "check_sqlite_file",
    "close_store",
    "describe_store",
    "is_postgres_url",
    "open_store",
    "read_only_options",
    "without_secrets",
]
