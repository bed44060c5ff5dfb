"""The checkpoint stores the conformance suite judges, and the snapshots it stores.

`STORES` maps a name to a function `(request, tmp_path, options) -> store` that opens a fresh, empty
store (`options`: the retention keywords); a store with a `close()` is closed after the test. A new
backend earns its place here by passing tests/test_store_conformance.py unchanged.
"""

from __future__ import annotations

import asyncio
import os
import pickle
from collections.abc import Callable
from typing import Any

from amrita_sense import SUSPEND, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import MemoryCheckpointStore, SQLiteCheckpointStore
from support.durable_support import rec


def sample_snapshots(payload: int = 0) -> tuple[bytes, bytes]:
    """A halted snapshot and a finished one of the same small graph; with `payload`, the run holds
    that many random bytes (pickled into the snapshot: large enough, the stores keep it as frames)."""
    graph = NodeCompose(rec([], "a"), SUSPEND, rec([], "b")).render()
    interp = WorkflowInterpreter(graph, extra_args=(os.urandom(payload),) if payload else ())
    codec = pickle if payload else None
    asyncio.run(interp.run())
    halted = interp.snapshot(codec)
    asyncio.run(interp.run())
    return halted, interp.snapshot(codec)


def _memory(request: Any, tmp_path: Any, options: dict) -> Any:
    return MemoryCheckpointStore(**options)


def _sqlite(request: Any, tmp_path: Any, options: dict) -> Any:
    return SQLiteCheckpointStore(tmp_path / "runs.db", **options)


def _postgres(request: Any, tmp_path: Any, options: dict, *, asynchronous: bool = False) -> Any:
    """A Postgres store (sync or async) on the session's cluster, in a schema of its own (dropped after
    the test), so that tests never see each other's rows."""
    from amrita_sense.durable import AsyncPostgresCheckpointStore, PostgresCheckpointStore
    from support.postgres_cluster import drop_schema_after

    dsn = request.getfixturevalue("postgres_dsn")
    schema = drop_schema_after(request, dsn)
    kind = AsyncPostgresCheckpointStore if asynchronous else PostgresCheckpointStore
    return kind(dsn, schema=schema, **options)


def _postgres_async(request: Any, tmp_path: Any, options: dict) -> Any:
    return _postgres(request, tmp_path, options, asynchronous=True)


STORES: dict[str, Callable[[Any, Any, dict], Any]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "postgres": _postgres,
    "postgres-async": _postgres_async,
}
