"""The human-in-the-loop-across-a-restart example: each step in its own process (start, answer,
a waker), and the CLI worker finishing a run the example started."""

from __future__ import annotations

import os
import subprocess
import sys
import time
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


def test_the_demo_starts_in_one_process_and_a_waker_finishes_it_in_another():
    lines = run()
    assert "exp-7: waiting for a decision (saved)" in lines
    assert "exp-7: waiting (checkpoint " in " ".join(lines)
    assert "exp-7: decision sent" in lines
    assert "woke 1 run(s)" in lines
    assert "exp-7: approved" in lines
    assert "exp-7: finished (checkpoint " in " ".join(lines)
    log = [line.strip() for line in lines if line.startswith("  [pid")]
    assert [entry.split("] ")[1] for entry in log] == ["drafted a report of 420", "decision: approve", "paid out"]
    assert log[0].split("]")[0] != log[1].split("]")[0], "drafting and deciding happened in different processes"


def test_the_waiting_run_is_in_the_store_until_the_answer_arrives(tmp_path):
    database = str(tmp_path / "runs.db")
    assert run("start", database, "exp-1", "99") == ["exp-1: waiting for a decision (saved)"]
    info = inspect_snapshot(SQLiteCheckpointStore(database).load("exp-1").data)
    assert (info.status, info.pointer) == ("waiting", [1])
    assert run("wake", database) == ["woke 0 run(s)"]  # no answer yet: not due
    assert run("answer", database, "exp-1", "reject") == ["exp-1: decision sent"]
    lines = run("wake", database)
    assert lines[0] == "exp-1: rejected" and lines[-2].endswith("closed without payment")
    assert lines[-1] == "woke 1 run(s)"
    assert SQLiteCheckpointStore(database).load("exp-1").record.status == "finished"


def test_the_cli_worker_finishes_a_run_the_example_started(tmp_path):
    database = str(tmp_path / "runs.db")
    run("start", database, "exp-2", "5")
    run("answer", database, "exp-2", "approve")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([RUNTIME_DIR, str(SCRIPT.parent)]))
    env["APPROVAL_KEYS"] = (
        "demo:" + __import__("base64").b64encode(b"a demo key: set APPROVAL_KEYS in a deployment").decode()
    )
    command = [sys.executable, "-m", "amrita_sense", "worker", "--store", database, "--graph"]
    command += ["approval=durable_approval:build_graph", "--codec", "pickle", "--keys-env", "APPROVAL_KEYS"]
    worker = subprocess.Popen(
        command + ["--poll", "0.1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        store = SQLiteCheckpointStore(database)
        deadline = time.monotonic() + 90
        while store.load("exp-2").record.status != "finished":
            assert time.monotonic() < deadline, "the worker did not finish the run"
            assert worker.poll() is None, worker.stderr.read() if worker.stderr else ""
            time.sleep(0.05)
    finally:
        worker.terminate()
        out, _ = worker.communicate(timeout=60)
    assert worker.returncode == 0
    assert "exp-2: approved" in out
