"""The Postgres checkpoint stores on a real server: their schema, faults, contention, asyncio, PgBouncer.

The protocol itself (versions, fences, history, forks) is judged by tests/test_store_conformance.py,
as for every store; here is what only a networked store has to get right: creating and versioning
its tables, surviving a server restart, failing cleanly while the server is down, refusing damaged
rows, fencing writers of several processes, working behind PgBouncer in transaction mode.
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import subprocess
import sys
import threading

import pytest

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import (
    AsyncPostgresCheckpointStore,
    CheckpointConflict,
    CheckpointError,
    Checkpointing,
    CheckpointNotFound,
    CorruptSnapshot,
    PostgresCheckpointStore,
    inspect_snapshot,
)
from amrita_sense.durable.stores.postgres import SCHEMA_VERSION
from support import postgres_cluster
from support.durable_support import rec
from support.runtime_path import RUNTIME_DIR
from support.stores import sample_snapshots

HALTED, FINISHED = sample_snapshots()
DOWN_TIMEOUT = 2.0
"""The `timeout` of the stores that meet a stopped server: how long a save waits before it fails."""


def sql(dsn: str, statement: str, params: tuple = ()) -> list[tuple]:
    """Run one statement on its own connection (autocommit); its rows."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description is not None else []


@pytest.fixture
def schema(request, postgres_dsn):
    return postgres_cluster.drop_schema_after(request, postgres_dsn)


@pytest.fixture
def store(postgres_dsn, schema):
    with PostgresCheckpointStore(postgres_dsn, schema=schema, timeout=DOWN_TIMEOUT) as opened:
        yield opened


@pytest.fixture
def cluster(postgres_dsn):
    return postgres_cluster.current()


@pytest.fixture(scope="module")
def bouncer(postgres_dsn):
    with postgres_cluster.pgbouncer(postgres_cluster.current()) as running:
        yield running


def doing(trace: list, name: str, action) -> object:
    """A node named `name` that appends `name` to `trace`, then calls `action()`."""

    def body() -> str:
        trace.append(name)
        action()
        return name

    body.__name__ = body.__qualname__ = name
    return Node(wrap_to_async=False)(body)


# ----- the schema ---------------------------------------------------------------------------------


def test_the_store_creates_its_versioned_schema_once(postgres_dsn, schema, request):
    with PostgresCheckpointStore(postgres_dsn, schema=schema) as store:
        store.save("r", HALTED)
    tables = sql(postgres_dsn, "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))
    assert sorted(t for (t,) in tables) == ["checkpoints", "history", "messages", "meta"]
    assert sql(postgres_dsn, f'SELECT key, value FROM "{schema}".meta') == [("schema_version", SCHEMA_VERSION)]
    with PostgresCheckpointStore(postgres_dsn, schema=schema) as again:  # the tables are there: reused
        assert again.load("r").data == HALTED

    fresh = postgres_cluster.drop_schema_after(request, postgres_dsn)
    stores = [PostgresCheckpointStore(postgres_dsn, schema=fresh) for _ in range(6)]
    start, errors = threading.Barrier(len(stores)), []

    def first_start(store: PostgresCheckpointStore) -> None:
        start.wait()
        try:
            store.save(f"run-{id(store)}", HALTED, expected_version=0)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=first_start, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []  # the advisory lock serialised the six CREATEs
    assert len(sql(postgres_dsn, f'SELECT run_id FROM "{fresh}".checkpoints')) == 6


def _indexes(dsn: str, schema: str) -> list[str]:
    rows = sql(dsn, "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = 'checkpoints'", (schema,))
    return sorted(name for (name,) in rows)


def test_a_plain_save_is_a_hot_update_and_only_a_store_that_expires_runs_indexes_save_times(postgres_dsn, schema):
    """Every save moves `updated_at`; indexed, no save could be a HOT update (the row rewritten in its
    page, no index entry): only a store with `run_ttl`, which sweeps by it, makes that index."""
    with PostgresCheckpointStore(postgres_dsn, schema=schema, min_size=1, max_size=1) as store:
        version = store.save("r", HALTED).version
        for _ in range(20):
            version = store.save("r", HALTED, expected_version=version).version
        assert "checkpoints_updated_at" not in _indexes(postgres_dsn, schema)
        with store._pool.connection() as conn:  # the one connection that saved: its statistics now
            conn.execute("SELECT pg_stat_force_next_flush()")
    updates, hot = sql(
        postgres_dsn,
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE schemaname = %s AND relname = 'checkpoints'",
        (schema,),
    )[0]
    assert updates == 20 and hot >= 15  # (a full page now and then takes a new one)
    with PostgresCheckpointStore(postgres_dsn, schema=schema, run_ttl=3600) as expiring:
        assert expiring.sweep() == 0 and expiring.load("r").record.version == 21
    assert "checkpoints_updated_at" in _indexes(postgres_dsn, schema)


def test_a_schema_newer_than_this_release_is_refused(postgres_dsn, store):
    store.save("r", HALTED)
    sql(postgres_dsn, f'UPDATE "{store.schema}".meta SET value = %s', (SCHEMA_VERSION + 1,))
    newer_schema = PostgresCheckpointStore(postgres_dsn, schema=store.schema)
    with pytest.raises(CheckpointError, match=f"schema version {SCHEMA_VERSION + 1}.*upgrade"):
        newer_schema.save("r", FINISHED)
    with pytest.raises(CheckpointError, match="schema version"):
        newer_schema.load("r")
    newer_schema.close()
    assert sql(postgres_dsn, f'SELECT version FROM "{store.schema}".checkpoints') == [(1,)]


# ----- arguments, repr, pickling, fork --------------------------------------------------------------


def test_arguments_are_checked_and_the_password_never_shows(postgres_dsn):
    for bad in (
        {"schema": "no-dashes"},
        {"schema": "1st"},
        {"schema": "x" * 64},
        {"min_size": -1},
        {"max_size": 0},
        {"min_size": 3, "max_size": 2},
        {"timeout": 0},
        {"history_limit": 0},
    ):
        with pytest.raises(ValueError):
            PostgresCheckpointStore(postgres_dsn, **bad)
    with pytest.raises(TypeError, match="open"):
        PostgresCheckpointStore(postgres_dsn, open=True)
    with pytest.raises(ValueError, match="not a valid") as bad_dsn:
        PostgresCheckpointStore("host=h password=hunter2 junk")
    assert "hunter2" not in str(bad_dsn.value)
    port = postgres_cluster.free_port()  # nothing listens there
    for dsn in (f"host=127.0.0.1 port={port} user=u password=hunter2", f"postgresql://u:hunter2@127.0.0.1:{port}/db"):
        unreachable = PostgresCheckpointStore(dsn, timeout=0.5)
        assert "hunter2" not in repr(unreachable) and f"port={port}" in repr(unreachable)
        with pytest.raises(CheckpointError, match="saving the checkpoint of run 'r'") as failed:
            unreachable.save("r", HALTED)
        assert "hunter2" not in str(failed.value)
        unreachable.close()


WITHOUT_PSYCOPG = """
import sys
sys.modules["psycopg"] = sys.modules["psycopg_pool"] = None  # as if the extra were not installed
import amrita_sense.durable as durable
durable.MemoryCheckpointStore().list()  # the rest of the package works
try:
    durable.PostgresCheckpointStore("host=localhost")
except ImportError as exc:
    print(exc)
"""


def test_without_psycopg_the_package_imports_and_the_store_says_how_to_get_it():
    env = {"PYTHONPATH": RUNTIME_DIR, "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", WITHOUT_PSYCOPG], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pip install amrita-sense-turbo[postgres]" in out.stdout


UNPICKLE_AND_SAVE = """
import pickle, sys
store = pickle.loads(sys.stdin.buffer.read())
record = store.save("from-the-worker", store.load("from-the-driver").data)
print(record.version, repr(store))
store.close()
"""


# The pool's worker threads are running when the test forks, as in a pre-fork server that opened a store
# before forking: that is the case under test, and Python 3.12+ warns about every such fork.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")
def test_a_store_ships_as_its_arguments_and_a_forked_child_opens_its_own_pool(postgres_dsn, schema):
    store = PostgresCheckpointStore(postgres_dsn, schema=schema, max_size=2, history_limit=5, max_lifetime=600)
    store.save("from-the-driver", HALTED)
    shipped = pickle.dumps(store)
    copy = pickle.loads(shipped)
    assert type(copy) is PostgresCheckpointStore and repr(copy) == repr(store)
    assert (copy.history_limit, copy.max_size, copy._pool_kwargs) == (5, 2, {"max_lifetime": 600})
    copy.close()

    env = {"PYTHONPATH": RUNTIME_DIR, "PATH": "/usr/bin:/bin"}  # a worker process, as Ray's would be
    out = subprocess.run(
        [sys.executable, "-c", UNPICKLE_AND_SAVE], input=shipped, capture_output=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().split()[0] == "1"

    child = os.fork()
    if child == 0:  # the child saves through the store its parent opened: it must open its own pool
        try:
            store.save("from-the-child", HALTED)
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # the parent's connections survived the child (which never closed the sockets it inherited)
    assert [r.run_id for r in store.list()] == ["from-the-child", "from-the-driver", "from-the-worker"]
    store.close()


# ----- the server goes away -----------------------------------------------------------------------


def test_a_server_restart_is_survived_by_the_same_store(postgres_dsn, schema, cluster):
    store = PostgresCheckpointStore(postgres_dsn, schema=schema, min_size=2, timeout=DOWN_TIMEOUT)
    store.save("r", HALTED)
    cluster.stop()
    try:
        with pytest.raises(CheckpointError, match="saving the checkpoint of run 'r' failed") as down:
            store.save("r", FINISHED)
        assert not isinstance(down.value, CheckpointConflict)
    finally:
        cluster.start()
    record = store.save("r", FINISHED)  # the dead connections were replaced; the failed save wrote nothing
    assert record.version == 2
    assert store.load("r").data == FINISHED
    store.close()


@pytest.mark.parametrize("recovery", ["run-again", "resume"])
def test_a_server_down_at_a_save_stops_the_run_with_a_checkpoint_error(store, cluster, recovery):
    trace: list = []
    stopped = []

    def stop_once() -> None:
        if not stopped:
            stopped.append(True)
            cluster.stop()

    graph = NodeCompose(rec(trace, "a"), doing(trace, "b", stop_once), rec(trace, "c")).render()
    interp = WorkflowInterpreter(graph)
    interp.checkpointing = Checkpointing(store, "run", history=True)
    try:
        with pytest.raises(CheckpointError, match="saving the checkpoint of run 'run'"):
            asyncio.run(interp.run())  # the save after b cannot reach the server
        assert interp.get_exception() is None and not interp.is_running  # not the run's panic
    finally:
        cluster.start()
    assert trace == ["a", "b"]
    # nothing half-written: the latest checkpoint and the history are those of the save after a
    latest = store.load("run")
    assert latest.record.version == 1 and inspect_snapshot(latest.data).pointer == [1]
    assert [e.version for e in store.history("run")] == [1]
    if recovery == "run-again":  # the same process, once the server is back: on from where it stood
        asyncio.run(interp.run())
        assert trace == ["a", "b", "c"]
    else:  # another process: from the last checkpoint, so b runs again (at-least-once)
        asyncio.run(asyncio.run(Checkpointing(store, "run", history=True).resume(graph)).run())
        assert trace == ["a", "b", "b", "c"]
    assert store.load("run").record.status == "finished"
    versions = [e.version for e in store.history("run")]
    assert versions == list(range(1, len(versions) + 1))


def test_a_restart_between_two_nodes_does_not_stop_the_run(store, cluster):
    trace: list = []

    def restart() -> None:
        cluster.stop("immediate")  # as a crash: the server recovers when it starts
        cluster.start()

    graph = NodeCompose(rec(trace, "a"), doing(trace, "b", restart), rec(trace, "c")).render()
    interp = WorkflowInterpreter(graph)
    saved: list = []
    interp.checkpointing = Checkpointing(store, "run", on_saved=saved.append)
    asyncio.run(interp.run())  # the save after b meets the killed connection: the pool gives it a new one
    assert trace == ["a", "b", "c"]
    assert [r.version for r in saved] == [1, 2, 3]
    assert store.load("run").record == saved[-1]
    after = WorkflowInterpreter(NodeCompose(rec(trace, "d")).render())
    after.checkpointing = Checkpointing(store, "after-the-restart")
    asyncio.run(after.run())
    assert store.load("after-the-restart").record.status == "finished"


def test_a_damaged_row_is_a_corrupt_snapshot_naming_the_run(postgres_dsn, store):
    store.save("r", HALTED, history=True)
    store.save("r", FINISHED, history=True)
    tables = f'"{store.schema}"'
    sql(postgres_dsn, f"UPDATE {tables}.checkpoints SET data = %s WHERE run_id = 'r'", (b"\x00garbage",))
    with pytest.raises(CorruptSnapshot, match="run 'r', version 2"):
        store.load("r")
    with pytest.raises(CorruptSnapshot, match="run 'r'"):
        asyncio.run(Checkpointing(store, "r").resume(NodeCompose(rec([], "a")).render()))
    assert store.load("r", version=1).data == HALTED  # the history entry is intact
    sql(postgres_dsn, f"UPDATE {tables}.history SET data = %s WHERE version = 1", (HALTED[:-3],))
    with pytest.raises(CorruptSnapshot, match="run 'r', version 1"):
        store.load("r", version=1)
    with pytest.raises(CorruptSnapshot):
        store.fork("r", 1, "copy")
    assert [r.run_id for r in store.list()] == ["r"]  # the fork of the damaged entry was rolled back
    assert store.history("r")[0].version == 1  # the records (no data) still read


# ----- several processes --------------------------------------------------------------------------


CONTENDER = """
import json, sys
from amrita_sense.durable import CheckpointConflict, PostgresCheckpointStore
dsn, schema, attempts, snapshot = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with open(snapshot, "rb") as f:
    data = f.read()
store = PostgresCheckpointStore(dsn, schema=schema, max_size=1)
saved = refused = 0
for _ in range(attempts):  # read the version, write over exactly that one
    version = store.load("shared").record.version
    try:
        store.save("shared", data, expected_version=version)
        saved += 1
    except CheckpointConflict:
        refused += 1
store.close()
print(json.dumps({"saved": saved, "refused": refused}))
"""


def test_contended_saves_of_four_processes_lose_no_update(postgres_dsn, store, tmp_path):
    store.save("shared", HALTED)
    snapshot = tmp_path / "snapshot"
    snapshot.write_bytes(HALTED)
    env = {"PYTHONPATH": RUNTIME_DIR, "PATH": "/usr/bin:/bin"}
    attempts = 2500
    argv = [sys.executable, "-c", CONTENDER, postgres_dsn, store.schema, str(attempts), str(snapshot)]
    procs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)
    ]
    counts = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err  # any error but a CheckpointConflict ends the process
        counts.append(json.loads(out))
    assert all(c["saved"] + c["refused"] == attempts for c in counts)
    saved = sum(c["saved"] for c in counts)
    assert store.load("shared").record.version == 1 + saved  # every successful save is a version


# ----- asyncio ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_async_store_under_asyncio(postgres_dsn, schema):
    async with AsyncPostgresCheckpointStore(postgres_dsn, schema=schema, max_size=4, history_limit=2) as store:
        made = await asyncio.gather(*(store.save(f"run-{i:02}", HALTED, expected_version=0) for i in range(20)))
        assert {r.version for r in made} == {1}
        outcomes = await asyncio.gather(
            *(store.save("run-00", FINISHED, expected_version=1) for _ in range(8)), return_exceptions=True
        )
        assert sum(isinstance(o, CheckpointConflict) for o in outcomes) == 7
        assert [r.run_id for r in await store.list(status="finished")] == ["run-00"]

        trace: list = []
        graph = NodeCompose(rec(trace, "a"), rec(trace, "b"), rec(trace, "c")).render()
        interp = WorkflowInterpreter(graph)
        interp.checkpointing = Checkpointing(store, "flow", history=True)
        await interp.run()
        assert [e.version for e in await store.history("flow")] == [2, 3]  # history_limit=2
        first = await store.fork("flow", 2, "what-if")
        assert first.forked_from == "flow@2"
        assert await store.delete("flow") and not await store.delete("flow")
        with pytest.raises(CheckpointNotFound):
            await store.history("flow")


def test_the_async_store_follows_its_event_loop(postgres_dsn, schema):
    store = AsyncPostgresCheckpointStore(postgres_dsn, schema=schema)

    async def closing(operation):
        try:
            return await operation
        finally:
            await store.close()  # before the loop ends (see AsyncPostgresCheckpointStore)

    asyncio.run(closing(store.save("r", HALTED)))
    assert asyncio.run(closing(store.load("r"))).data == HALTED  # another loop: another pool
    copy = pickle.loads(pickle.dumps(store))
    assert type(copy) is AsyncPostgresCheckpointStore and repr(copy) == repr(store)

    async def one_store_two_loops() -> list:
        # a pool per loop: this thread's loop and another thread's loop use the store at once
        here = await copy.save("r", FINISHED, expected_version=1)
        there = await asyncio.to_thread(asyncio.run, closing_copy(copy.load("r")))
        await copy.close()
        return [here.version, there.record.version]

    async def closing_copy(operation):
        try:
            return await operation
        finally:
            await copy.close()

    assert asyncio.run(one_store_two_loops()) == [2, 2]


# ----- PgBouncer ----------------------------------------------------------------------------------


def test_behind_pgbouncer_in_transaction_mode(bouncer, request):
    schema = postgres_cluster.drop_schema_after(request, bouncer.dsn)
    store = PostgresCheckpointStore(bouncer.dsn, schema=schema, max_size=4, history_limit=3, prepare=False)
    errors: list = []

    def writer(name: str) -> None:  # more client connections than PgBouncer has server connections
        try:
            for i in range(12):  # past psycopg's prepare threshold (5): nothing may be prepared
                store.save(name, HALTED if i % 2 else FINISHED, expected_version=i, history=True)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [(r.run_id, r.version) for r in store.list()] == [(f"w{i}", 12) for i in range(4)]
    assert [e.version for e in store.history("w0")] == [10, 11, 12]
    with pytest.raises(CheckpointConflict):
        store.save("w0", HALTED, expected_version=11)
    assert store.load("w0", version=11).data == FINISHED
    fork = store.fork("w0", 11, "fork")
    assert (fork.version, fork.forked_from) == (1, "w0@11")
    assert store.prune() == 0
    assert store.delete("w1", expected_version=12)
    assert [r.run_id for r in store.list(status="halted")] == ["w0", "w2", "w3"]
    store.close()

    async def through_the_bouncer() -> int:
        async with AsyncPostgresCheckpointStore(bouncer.dsn, schema=schema, prepare=False) as asynchronous:
            for _ in range(8):
                record = await asynchronous.save("async", HALTED, history=True)
            return record.version

    assert asyncio.run(through_the_bouncer()) == 8
