"""The SQLite store's own behaviour: WAL, schema versions, threads, several processes (the protocol every
store keeps is judged by tests/test_store_conformance.py)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from amrita_sense.durable import (
    CheckpointError,
    CorruptSnapshot,
    SQLiteCheckpointStore,
    inspect_snapshot,
)
from amrita_sense.durable.stores.sqlite import _SCHEMA_VERSION
from support.runtime_path import RUNTIME_DIR
from support.stores import sample_snapshots

ROOT = Path(__file__).resolve().parents[1]


HALTED, FINISHED = sample_snapshots()


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


VERSION_1_TABLE = """CREATE TABLE sense_checkpoints (run_id TEXT PRIMARY KEY, version INTEGER NOT NULL,
    status TEXT NOT NULL, fingerprint TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL,
    data BLOB NOT NULL)"""


def test_a_file_of_the_first_schema_is_upgraded_in_place(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as raw:
        raw.execute(VERSION_1_TABLE)
        fingerprint = inspect_snapshot(HALTED).fingerprint
        raw.execute("INSERT INTO sense_checkpoints VALUES ('r', 3, 'halted', ?, 1.0, 2.0, ?)", (fingerprint, HALTED))
    with SQLiteCheckpointStore(path) as store:
        loaded = store.load("r")
        assert (loaded.record.version, loaded.record.forked_from, loaded.data) == (3, None, HALTED)
        assert store.save("r", FINISHED, expected_version=3, history=True).version == 4
        assert [e.version for e in store.history("r")] == [4]
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == _SCHEMA_VERSION


def test_a_file_of_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "new.db"
    SQLiteCheckpointStore(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA user_version = 99")
    with pytest.raises(CheckpointError, match="schema version 99"):
        SQLiteCheckpointStore(path)


def test_a_damaged_row_is_a_corrupt_snapshot_naming_the_run(tmp_path):
    path = tmp_path / "runs.db"
    with SQLiteCheckpointStore(path) as store:
        store.save("r", HALTED, history=True)
        store.save("r", FINISHED)
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE sense_checkpoints SET data = X'00010203'")
        raw.execute("UPDATE sense_history SET data = substr(data, 1, 20)")
    with SQLiteCheckpointStore(path) as store:
        with pytest.raises(CorruptSnapshot, match="run 'r', version 2"):
            store.load("r")
        with pytest.raises(CorruptSnapshot, match="run 'r', version 1"):
            store.load("r", version=1)


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


def test_records_keep_their_origin_whichever_store_instance_saved_before(tmp_path):
    """A save the store can answer without reading the row back (it knows the run's creation time and
    fork origin) gives the record a read-back would, and another instance's changes are still seen."""
    from amrita_sense.durable import CheckpointConflict

    path = tmp_path / "runs.db"
    with SQLiteCheckpointStore(path) as one, SQLiteCheckpointStore(path) as other:
        first = one.save("r", HALTED, expected_version=0)
        again = other.save("r", HALTED, expected_version=1)  # another instance: it reads the row back
        third = one.save("r", FINISHED, expected_version=2)
        assert {first.created_at, again.created_at, third.created_at} == {first.created_at}
        assert third == one.load("r").record
        other.save("r", HALTED, expected_version=3, history=True)
        forked = one.fork("r", 4, "f")
        assert one.save("f", HALTED, expected_version=1).forked_from == forked.forked_from == "r@4"
        assert other.save("f", HALTED, expected_version=2).forked_from == "r@4"
        other.delete("r")
        made_again = other.save("r", HALTED, expected_version=0)
        with pytest.raises(CheckpointConflict):
            one.save("r", HALTED, expected_version=4)  # the run it knew is gone: the save says so
        assert one.save("r", FINISHED, expected_version=1).created_at == made_again.created_at


def test_a_plain_save_refuses_and_records_as_the_general_one(tmp_path):
    """`save`'s short way (over a known version, nothing besides the data: `_save_plain`) refuses what
    the general way refuses, and its record is the one a read-back gives."""
    from amrita_sense.durable import CheckpointConflict

    damaged = HALTED[:-1] + bytes([HALTED[-1] ^ 1])
    with SQLiteCheckpointStore(tmp_path / "runs.db") as store:
        with pytest.raises(ValueError):
            store.save("", HALTED, expected_version=0)
        with pytest.raises(ValueError):
            store.save("r", HALTED, expected_version=-1)
        with pytest.raises(CorruptSnapshot):
            store.save("r", damaged, expected_version=0)
        first = store.save("r", HALTED, expected_version=0)
        assert first == store.load("r").record and first.version == 1
        with pytest.raises(CheckpointConflict):
            store.save("r", FINISHED, expected_version=0)
        with pytest.raises(CheckpointConflict):
            store.save("r", FINISHED, expected_version=2)
        second = store.save("r", FINISHED, expected_version=1)
        assert second == store.load("r").record and store.load("r").data == FINISHED
