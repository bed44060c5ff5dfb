"""Checkpoint stores: the protocol on SQLite and in memory, versions, conflicts, several processes."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from amrita_sense import SUSPEND, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import (
    CheckpointConflict,
    CheckpointError,
    CheckpointNotFound,
    CheckpointStore,
    CorruptSnapshot,
    MemoryCheckpointStore,
    SQLiteCheckpointStore,
    inspect_snapshot,
)
from support.durable_support import rec
from support.runtime_path import RUNTIME_DIR

ROOT = Path(__file__).resolve().parents[1]


def snapshots() -> list[bytes]:
    """A halted snapshot and a finished one."""
    interp = WorkflowInterpreter(NodeCompose(rec([], "a"), SUSPEND, rec([], "b")).render())
    asyncio.run(interp.run())
    first = interp.snapshot()
    asyncio.run(interp.run())
    return [first, interp.snapshot()]


HALTED, FINISHED = snapshots()


@pytest.fixture(params=["sqlite", "memory"])
def store(request, tmp_path):
    if request.param == "memory":
        yield MemoryCheckpointStore()
        return
    with SQLiteCheckpointStore(tmp_path / "runs.db") as opened:
        yield opened


def test_both_stores_are_checkpoint_stores(store):
    assert isinstance(store, CheckpointStore)


def test_save_load_list_delete(store):
    first = store.save("run-1", HALTED)
    assert (first.version, first.status) == (1, "halted")
    assert first.fingerprint == inspect_snapshot(HALTED).fingerprint and first.size == len(HALTED)
    second = store.save("run-1", FINISHED)
    assert (second.version, second.status, second.created_at) == (2, "finished", first.created_at)
    store.save("run-0", HALTED)
    loaded = store.load("run-1")
    assert loaded.data == FINISHED and loaded.record.version == 2
    assert [r.run_id for r in store.list()] == ["run-0", "run-1"]
    assert [r.run_id for r in store.list(status="halted")] == ["run-0"]
    assert store.delete("run-1") is True and store.delete("run-1") is False
    with pytest.raises(CheckpointNotFound):
        store.load("run-1")
    with pytest.raises(LookupError):
        store.load("nothing")


def test_expected_versions_fence_writers(store):
    store.save("r", HALTED, expected_version=0)
    with pytest.raises(CheckpointConflict, match="expected version 0, the store has version 1"):
        store.save("r", HALTED, expected_version=0)
    store.save("r", FINISHED, expected_version=1)
    with pytest.raises(CheckpointConflict):
        store.save("r", HALTED, expected_version=1)
    with pytest.raises(CheckpointConflict):
        store.delete("r", expected_version=1)
    assert store.load("r").data == FINISHED
    assert store.delete("r", expected_version=2)


def test_damaged_data_and_bad_arguments_never_reach_the_store(store):
    store.save("r", HALTED)
    with pytest.raises(CorruptSnapshot):
        store.save("r", HALTED[:-1] + bytes([HALTED[-1] ^ 1]))
    for run_id in ("", None, "x" * 513):
        with pytest.raises(ValueError):
            store.save(run_id, HALTED)
    with pytest.raises(ValueError):
        store.save("r", HALTED, expected_version=-1)
    assert store.load("r").data == HALTED and store.load("r").record.version == 1


def test_the_sqlite_store_persists_in_wal_mode(tmp_path):
    path = tmp_path / "runs.db"
    with SQLiteCheckpointStore(path) as store:
        store.save("r", HALTED)
    with SQLiteCheckpointStore(path) as again:
        assert again.load("r").data == HALTED
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_an_unusable_database_is_a_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="cannot open"):
        SQLiteCheckpointStore(tmp_path / "missing-dir" / "runs.db")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not an sqlite database" * 100)
    with pytest.raises(CheckpointError):
        SQLiteCheckpointStore(garbage)


def test_threads_share_one_store(tmp_path):
    store = SQLiteCheckpointStore(tmp_path / "runs.db")
    errors: list = []

    def writer(name: str) -> None:
        try:
            for _ in range(20):
                store.save(name, HALTED)
                store.save("shared", FINISHED)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(f"t{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert store.load("shared").record.version == 80
    assert {r.run_id: r.version for r in store.list()} == {"shared": 80, "t0": 20, "t1": 20, "t2": 20, "t3": 20}


WRITER = """
import sys
sys.path.insert(0, {tests!r})
from test_durable_store import HALTED
from amrita_sense.durable import CheckpointConflict, SQLiteCheckpointStore
store = SQLiteCheckpointStore(sys.argv[1], timeout=60)
me, saves = sys.argv[2], int(sys.argv[3])
for _ in range(saves):
    store.save(me, HALTED)
    while True:  # the shared run: read its version, write over exactly that one
        current = store.load("shared").record.version
        try:
            store.save("shared", HALTED, expected_version=current)
            break
        except CheckpointConflict:
            pass
print("ok")
"""


def test_several_processes_write_one_database(tmp_path):
    path = tmp_path / "runs.db"
    SQLiteCheckpointStore(path).save("shared", HALTED)
    script = WRITER.format(tests=str(ROOT / "tests"))
    env = {"PYTHONPATH": RUNTIME_DIR, "PATH": "/usr/bin:/bin"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(path), f"p{i}", "25"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and out.strip() == "ok", err
    store = SQLiteCheckpointStore(path)
    versions = {r.run_id: r.version for r in store.list()}
    assert versions == {"shared": 101, "p0": 25, "p1": 25, "p2": 25, "p3": 25}
    assert all(inspect_snapshot(store.load(run).data).status == "halted" for run in versions)
