"""The human-in-the-loop-across-a-restart example: each step in its own process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from amrita_sense.durable import SQLiteCheckpointStore, inspect_snapshot
from support.runtime_path import RUNTIME_DIR

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "durable_approval.py"


def run(*args: str) -> list[str]:
    env = dict(os.environ, PYTHONPATH=RUNTIME_DIR)
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_demo_starts_in_one_process_and_finishes_in_another():
    lines = run()
    assert "exp-7: waiting for a decision (saved)" in lines
    assert "exp-7: suspended (checkpoint 2, " in " ".join(lines)
    assert "exp-7: approved" in lines
    log = [line.strip() for line in lines if line.startswith("  [pid")]
    assert [entry.split("] ")[1] for entry in log] == ["drafted a report of 420", "decision: approve", "paid out"]
    assert log[0].split("]")[0] != log[1].split("]")[0], "drafting and deciding happened in different processes"


def test_the_waiting_run_is_in_the_store_until_the_answer_arrives(tmp_path):
    database = str(tmp_path / "runs.db")
    assert run("start", database, "exp-1", "99") == ["exp-1: waiting for a decision (saved)"]
    info = inspect_snapshot(SQLiteCheckpointStore(database).load("exp-1").data)
    assert (info.status, info.parked, info.pointer) == ("suspended", "NodeSuspend::await_decision", [1])
    lines = run("answer", database, "exp-1", "reject")
    assert lines[0] == "exp-1: rejected" and lines[-1].endswith("closed without payment")
    assert SQLiteCheckpointStore(database).load("exp-1").record.status == "finished"
