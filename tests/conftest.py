"""Every test runs on the core that loaded (id `cython` or `python`) and async tests on both loops.

The test command runs the suite twice: once with the compiled core required and
once with AMRITA_SENSE_NO_EXTENSIONS=1 (see scripts/test.sh). Import amrita_sense
normally; `tests/support/dual.py` loads both cores side by side for differential tests.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

import amrita_sense
from amrita_sense.durable import MemoryCheckpointStore, SQLiteCheckpointStore

CORE = amrita_sense.IMPLEMENTATION
LOOPS = ["asyncio"] + (["uvloop"] if sys.platform != "win32" else [])


def pytest_report_header(config):
    return f"amrita_sense core: {CORE}"


@pytest.fixture(params=[CORE], autouse=True)
def sense_core(request):
    """The core under test, as a test-id component."""
    return request.param


@pytest.fixture(scope="session")
def cores():
    """The compiled and the pure copy of the package, side by side (`dual.both_cores`)."""
    from support.dual import both_cores

    return both_cores()


@pytest.fixture(params=[False, True], ids=["stepped", "squashed"])
def squashed(request, monkeypatch):
    """Run with SQUASHED_LOOP off and on (a fresh flags object: the real one is set-once)."""
    from amrita_sense._unsafe import _Flags
    from support.dual import install_flags

    install_flags(monkeypatch, _Flags(SQUASHED_LOOP=request.param))
    return request.param


@pytest.fixture
def caplog(caplog):
    """pytest's `caplog`, fed by the library's loguru logger as well; the handler's level (set by
    `caplog.at_level` / `set_level`) decides what is kept."""
    from amrita_sense.logging import logger

    handler = caplog.handler
    sink_id = logger.add(
        handler, level=0, format="{message}", diagnose=False, filter=lambda r: r["level"].no >= handler.level
    )
    try:
        yield caplog
    finally:
        logger.remove(sink_id)


def pytest_asyncio_loop_factories(config, item):
    factories = {"asyncio": asyncio.new_event_loop}
    if "uvloop" in LOOPS:
        import uvloop

        factories["uvloop"] = uvloop.new_event_loop
    return factories


@pytest.fixture(scope="session")
def ray_instance():
    """A real local Ray instance with 2 CPUs, once per session (tests marked `ray`).

    Skips when Ray is not installed, or fails when AMRITA_SENSE_REQUIRE_RAY=1. The workers inherit
    this process's environment (the core switches, PYTHONPATH) with this directory added to
    PYTHONPATH, so they import `support.distributed_support` as a user's module would be imported.
    """
    import os

    try:
        import ray
    except ImportError as exc:
        if os.environ.get("AMRITA_SENSE_REQUIRE_RAY", "") not in ("", "0"):
            pytest.fail(f"AMRITA_SENSE_REQUIRE_RAY=1 but Ray cannot be imported: {exc}")
        pytest.skip("Ray is not installed (pip install 'amrita-sense-turbo[ray]')")
    os.environ["RAY_TQDM_PATCH_PRINT"] = "0"  # else the driver's builtins.print is replaced when a worker dies
    here = os.path.dirname(os.path.abspath(__file__))
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, saved) if p)
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def postgres_dsn():
    """The connection string of a throwaway PostgreSQL cluster, once per session (loopback, trust).

    Skips when psycopg or the server binaries are missing, or fails when AMRITA_SENSE_REQUIRE_POSTGRES=1
    (see `support.postgres_cluster`; `support.postgres_cluster.current()` stops and starts it).
    """
    from support.postgres_cluster import session_cluster

    with session_cluster() as cluster:
        yield cluster.dsn


# ----- stores for the waits tests (tests/test_durable_waits*.py, tests/test_durable_busy.py) -----


@pytest.fixture
def make_store(request, tmp_path):
    """`make_store(kind)`: a fresh store of that kind (Postgres: a schema of the session's server,
    dropped after the test)."""

    def make(kind: str) -> Any:
        if kind == "memory":
            return MemoryCheckpointStore()
        if kind == "sqlite":
            return SQLiteCheckpointStore(str(tmp_path / "runs.db"))
        from amrita_sense.durable import PostgresCheckpointStore
        from support.postgres_cluster import drop_schema_after

        dsn = request.getfixturevalue("postgres_dsn")
        store = PostgresCheckpointStore(dsn, schema=drop_schema_after(request, dsn))
        request.addfinalizer(store.close)
        return store

    return make


@pytest.fixture(params=["sqlite", "postgres"])
def shared_store(request, tmp_path):
    """`(what a worker process opens, the same store opened here)`: an SQLite file, or a Postgres schema."""
    if request.param == "sqlite":
        path = str(tmp_path / "runs.db")
        return path, SQLiteCheckpointStore(path)
    from amrita_sense.durable import PostgresCheckpointStore
    from support.postgres_cluster import drop_schema_after

    dsn = request.getfixturevalue("postgres_dsn")
    schema = drop_schema_after(request, dsn)
    store = PostgresCheckpointStore(dsn, schema=schema)
    request.addfinalizer(store.close)
    return f"{dsn}|{schema}", store
