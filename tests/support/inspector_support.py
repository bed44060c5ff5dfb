"""Tools of the inspector's tests (`tests/test_inspector*.py`).

- `require_server()`: Starlette, uvicorn and httpx (the `[inspect]` extra and the test client),
  skipped with a reason when missing, a failure instead when AMRITA_SENSE_REQUIRE_INSPECTOR=1;
- `require_browser()`: Selenium, Debian's `chromium` and `chromium-driver`, the same way;
- `sqlite_store(tmp_path)` / `postgres_store(request)`: a store filled by
  `inspector_programs.fill`, and the `--store` argument that names it;
- `client(store, graph)`: a Starlette test client over the inspector's app (Host 127.0.0.1);
- `running_inspector(*args)`: `python -m amrita_sense inspect ...` in a subprocess, its URL;
- `file_state(path)` / `folder_state(folder)` / `postgres_rows(url, schema)`: what the read-only
  checks compare;
- `many_runs(n)` with `sqlite_with_runs` / `postgres_with_runs`: a store of n runs written in bulk.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amrita_sense.durable import SQLiteCheckpointStore
from support import inspector_programs
from support.runtime_path import RUNTIME_DIR

TESTS_DIR = str(Path(__file__).resolve().parents[1])
GRAPH_TARGET = "support.inspector_programs:factory"
REQUIRE = "AMRITA_SENSE_REQUIRE_INSPECTOR"
CHROMIUM = ("chromium", "chromium-browser")
CHROMEDRIVER = ("chromedriver",)


def _missing(reason: str) -> None:
    if os.environ.get(REQUIRE, "") not in ("", "0"):
        pytest.fail(f"{REQUIRE}=1 but {reason}")
    pytest.skip(reason)


def require_server() -> None:
    """Skip (or fail, under AMRITA_SENSE_REQUIRE_INSPECTOR=1) without the server libraries."""
    for module, what in (("starlette", "the [inspect] extra"), ("uvicorn", "the [inspect] extra"), ("httpx", "httpx")):
        if importlib.util.find_spec(module) is None:
            _missing(f"{module} is not installed ({what}: pip install 'amrita-sense-turbo[inspect]' httpx)")


def require_browser() -> tuple[str, str]:
    """`(chromium, chromedriver)` paths; skip (or fail) when Selenium or either program is missing."""
    require_server()
    if importlib.util.find_spec("selenium") is None:
        _missing("selenium is not installed (pip install selenium)")
    browser = next((found for name in CHROMIUM if (found := shutil.which(name))), None)
    driver = next((found for name in CHROMEDRIVER if (found := shutil.which(name))), None)
    if browser is None or driver is None:
        _missing("Chromium or its driver is missing (apt-get install chromium chromium-driver)")
    assert browser is not None and driver is not None
    return browser, driver


def sqlite_store(tmp_path: Path) -> tuple[str, dict]:
    """A filled SQLite store (closed again: only the inspector has it open); its path and `EXPECTED`."""
    path = tmp_path / "runs.db"
    store = SQLiteCheckpointStore(path)
    try:
        expected = inspector_programs.fill(store)
    finally:
        store.close()
    return str(path), expected


def postgres_url(dsn: str) -> str:
    """The session cluster's `key=value` DSN as a postgresql:// URL (what `--store` takes)."""
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(dsn)
    return f"postgresql://{params['user']}@{params['host']}:{params['port']}/{params['dbname']}"


def postgres_store(request: pytest.FixtureRequest) -> tuple[str, str, dict]:
    """A filled Postgres store in a schema of its own (dropped after the test): `(url, schema, EXPECTED)`."""
    from amrita_sense.durable import PostgresCheckpointStore
    from support.postgres_cluster import drop_schema_after

    dsn = request.getfixturevalue("postgres_dsn")
    schema = drop_schema_after(request, dsn)
    store = PostgresCheckpointStore(dsn, schema=schema)
    try:
        expected = inspector_programs.fill(store)
    finally:
        store.close()
    return postgres_url(dsn), schema, expected


def client(store: Any, graph: Any = inspector_programs.GRAPH) -> Any:
    """A test client over the inspector's app on `store` (requests sent with Host 127.0.0.1)."""
    from starlette.testclient import TestClient

    from amrita_sense.inspector import Inspector
    from amrita_sense.inspector.server import make_app

    name = GRAPH_TARGET if graph is not None else None
    app = make_app(Inspector(store, graph, graph_name=name), store_name=repr(store))
    return TestClient(app, base_url="http://127.0.0.1")


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([RUNTIME_DIR, TESTS_DIR])
    return env


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m amrita_sense inspect ARGS` to its end (the bad-input cases)."""
    command = [sys.executable, "-m", "amrita_sense", "inspect", *args]
    return subprocess.run(command, env=cli_env(), capture_output=True, text=True, timeout=timeout)


@contextlib.contextmanager
def running_inspector(*args: str) -> Iterator[str]:
    """`python -m amrita_sense inspect ARGS --port 0` serving; yields the URL it printed, stops it after."""
    with serving_inspector(*args) as (url, _):
        yield url


@contextlib.contextmanager
def serving_inspector(*args: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """As `running_inspector`, yielding `(URL, process)`: once stopped, the process's output can be read."""
    command = [sys.executable, "-m", "amrita_sense", "inspect", *args, "--port", "0"]
    process = subprocess.Popen(command, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = _first_line(process)
        assert " on http://127.0.0.1:" in line, (
            f"no URL printed: {line!r} {process.stderr.read() if process.stderr else ''}"
        )
        yield line.rsplit(" ", 1)[1].strip(), process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def _first_line(process: subprocess.Popen, timeout: float = 60) -> str:
    """The first line the server prints (read in a thread: a server that dies prints none)."""
    found: list[str] = []
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: found.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    return found[0] if found else ""


def file_state(path: str) -> dict[str, Any]:
    """The bytes (as a digest) and modification time of the store's file and of its WAL, if any."""
    state = {}
    for suffix in ("", "-wal"):
        file = Path(path + suffix)
        if file.exists():
            data = file.read_bytes()
            state[suffix or "db"] = (hashlib.sha256(data).hexdigest(), len(data), file.stat().st_mtime_ns)
    return state


def folder_state(folder: Path) -> dict[str, tuple]:
    """Every file of `folder` by name: the digest of its bytes and its size (a created file shows)."""
    state = {}
    for file in sorted(folder.iterdir()):
        data = file.read_bytes() if file.is_file() else b""
        state[file.name] = (hashlib.sha256(data).hexdigest(), len(data), file.stat().st_mtime_ns)
    return state


def postgres_rows(url: str, schema: str) -> dict[str, list[tuple]]:
    """Every row of the store's tables, in key order (and the tables' names)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1", (schema,)
            )
        ]
        return {table: conn.execute(f'SELECT * FROM "{schema}"."{table}" ORDER BY 1, 2').fetchall() for table in tables}


def many_runs(count: int) -> list[tuple]:
    """`count` rows of the checkpoints table (run id, version, status, fingerprint, created_at,
    updated_at, data, size): tiny valid snapshots, statuses halted and finished, times with ties."""
    from amrita_sense.durable.snapshots.format import read_header
    from support.stores import sample_snapshots

    snapshots = sample_snapshots()
    headers = [read_header(data) for data in snapshots]
    rows = []
    for index in range(count):
        data, header = snapshots[index % 2], headers[index % 2]
        created = 1_700_000_000.0 + (index * 7919) % count  # every time, in a shuffled order
        updated = created + (index % 3)  # ties on updated_at, broken by run id
        rows.append((f"run-{index:06d}", 1 + index % 5, header.status, header.fingerprint, created, updated, data))
    return rows


def sqlite_with_runs(path: Path, rows: list[tuple]) -> str:
    """An SQLite store at `path` holding `rows` (from `many_runs`), written in one executemany."""
    import sqlite3

    SQLiteCheckpointStore(path).close()  # the tables, at this release's schema
    conn = sqlite3.connect(path)
    with conn:
        conn.executemany(
            "INSERT INTO sense_checkpoints (run_id, version, status, fingerprint, created_at, updated_at, data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    conn.close()
    return str(path)


def postgres_with_runs(request: pytest.FixtureRequest, rows: list[tuple]) -> tuple[str, str]:
    """A Postgres store in a schema of its own holding `rows` (from `many_runs`), written with COPY:
    `(dsn, schema)`."""
    import psycopg

    from amrita_sense.durable import PostgresCheckpointStore
    from support.postgres_cluster import drop_schema_after

    dsn = request.getfixturevalue("postgres_dsn")
    schema = drop_schema_after(request, dsn)
    PostgresCheckpointStore(dsn, schema=schema).open().close()  # the tables
    columns = "run_id, version, status, fingerprint, created_at, updated_at, data, size"
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cursor:
        with cursor.copy(f'COPY "{schema}".checkpoints ({columns}) FROM STDIN') as copy:
            for row in rows:
                copy.write_row((*row, len(row[6])))
        cursor.execute(f'ANALYZE "{schema}".checkpoints')
    return dsn, schema
