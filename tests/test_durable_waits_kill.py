"""Runs that wait, with real processes: step keys across a SIGKILL, two wakers sharing one SQLite
store, and a waker killed mid-run (another takes the run once the lease expired). Both builds (the
subprocesses import the build under test), both loops."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from amrita_sense.durable import SQLiteCheckpointStore
from support.runtime_path import RUNTIME_DIR

WORKER = Path(__file__).resolve().parent / "support" / "waits_worker.py"
LOOPS = ["asyncio", "uvloop"]


def worker_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([RUNTIME_DIR, str(WORKER.parents[1])]), **extra)
    env.pop("AMRITA_SENSE_REQUIRE_EXTENSIONS", None)
    return env


def run_worker(*args: str, **env: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(WORKER), *args]
    return subprocess.run(command, env=worker_env(**env), capture_output=True, text=True, timeout=120)


def start_waker(database: Any, trace: Path, loop: str, owner: str, lease: str = "1.0", **env: str) -> subprocess.Popen:
    command = [sys.executable, str(WORKER), "waker", str(database), str(trace), loop, lease, owner]
    process = subprocess.Popen(
        command, env=worker_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "serving\n"  # its SIGTERM handler is installed
    return process


def stop(process: subprocess.Popen) -> int:
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return process.returncode


def lines(trace: Path) -> list[list[str]]:
    return [line.split() for line in trace.read_text().splitlines()] if trace.exists() else []


def wait_until(condition, what: str, seconds: float = 90.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_the_step_key_of_a_step_run_again_after_a_kill_is_the_one_the_killed_process_saw(tmp_path, durability, loop):
    database, trace = tmp_path / "runs.db", tmp_path / "trace.txt"
    killed = run_worker("stepkeys", str(database), str(trace), durability, loop)
    assert killed.returncode == -9, killed.stderr
    done = run_worker("stepkeys", str(database), str(trace), durability, loop)
    assert done.returncode == 0, done.stderr
    seen = lines(trace)
    k2 = [key for name, key in seen if name == "k2"]
    assert len(k2) == 2 and k2[0] == k2[1]  # the step the kill cut short, run again: the same key
    owners: dict[str, set[str]] = {}
    for name, key in seen:
        owners.setdefault(key, set()).add(name)
    assert all(len(names) == 1 for names in owners.values()), owners
    per_name = Counter(next(iter(names)) for names in owners.values())
    assert per_name == {"k0": 1, "body": 3, "k1": 1, "k2": 1, "k3": 1}  # every loop iteration its own key
    assert SQLiteCheckpointStore(str(database)).load("keys").record.status == "finished"


@pytest.mark.parametrize("loop", LOOPS)
def test_two_wakers_on_one_store_resume_every_wait_exactly_once(tmp_path, loop, shared_store):
    (database, store), trace = shared_store, tmp_path / "trace.txt"
    runs = [f"run-{n}" for n in range(16)]
    started = run_worker("start", str(database), str(trace), loop, *runs)
    assert started.returncode == 0, started.stderr
    assert {store.load(r).record.status for r in runs} == {"waiting"}
    wakers = [start_waker(database, trace, loop, f"waker-{n}") for n in range(2)]
    try:
        for n, run_id in enumerate(runs):
            store.send(run_id, "go", {"n": n}, message_id=f"m-{n}")
        wait_until(lambda: all(store.load(r).record.status == "finished" for r in runs), "every run to finish")
    finally:
        codes = [stop(w) for w in wakers]
    assert codes == [0, 0], [w.stderr.read() for w in wakers]
    seen = lines(trace)
    afters = Counter((fields[1], fields[2]) for fields in seen if fields[0] == "after")
    finishes = Counter(fields[1] for fields in seen if fields[0] == "finish")
    assert afters == {(r, f"m-{n}"): 1 for n, r in enumerate(runs)}
    assert finishes == dict.fromkeys(runs, 1)
    assert all(store.messages(r) == [] for r in runs)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_waker_killed_mid_run_leaves_the_run_to_another_after_the_lease_and_the_message_is_delivered_once(
    tmp_path, loop, shared_store
):
    (database, store), trace, marker = shared_store, tmp_path / "trace.txt", tmp_path / "killed"
    assert run_worker("start", str(database), str(trace), loop, "solo").returncode == 0
    store.send("solo", "go", "hello", message_id="only")
    doomed = start_waker(database, trace, loop, "doomed", WAITS_KILL_MARKER=str(marker))
    assert doomed.wait(timeout=90) == -9  # it ran `after` and killed itself
    assert store.load("solo").record.status != "finished"
    heir = start_waker(database, trace, loop, "heir", WAITS_KILL_MARKER=str(marker))
    try:
        wait_until(lambda: store.load("solo").record.status == "finished", "the run to finish")
    finally:
        assert stop(heir) == 0, heir.stderr.read()
    seen = lines(trace)
    pids = {fields[3] for fields in seen if fields[0] == "after"}
    assert [fields[:3] for fields in seen if fields[0] == "after"] == [["after", "solo", "only"]] * 2
    assert len(pids) == 2  # once in the killed waker, once in its heir (at least once, as after any crash)
    assert [fields[:2] for fields in seen if fields[0] == "finish"] == [["finish", "solo"]]
    assert store.messages("solo") == []
    assert [m.message_id for m in store.messages("solo", pending=False)] == ["only"]


# ----- the CLI worker ------------------------------------------------------------------------------------


def start_cli_worker(database: Path, trace: Path, *extra: str) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "amrita_sense",
        "worker",
        "--store",
        str(database),
        "--graph",
        "w=waits_worker:build",
        "--codec",
        "pickle",
        "--allow-unsigned",
        "--poll",
        "0.05",
        "--lease",
        "5",
        *extra,
    ]
    env = worker_env(WAITS_TRACE=str(trace))
    env["PYTHONPATH"] += os.pathsep + str(WORKER.parent)
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("signum", ["TERM", "INT"])
def test_the_cli_worker_resumes_runs_and_stops_cleanly_on_sigterm_and_sigint(tmp_path, signum):
    database, trace = tmp_path / "runs.db", tmp_path / "trace.txt"
    assert run_worker("start", str(database), str(trace), "asyncio", "c-1", "c-2").returncode == 0
    worker = start_cli_worker(database, trace)
    try:
        assert worker.stdout is not None
        assert "serving w" in worker.stdout.readline()  # the signal handlers are installed
        store = SQLiteCheckpointStore(str(database))
        store.send("c-1", "go", 1, message_id="x")
        store.send("c-2", "go", 2, message_id="y")
        wait_until(lambda: all(store.load(r).record.status == "finished" for r in ("c-1", "c-2")), "the runs")
        worker.send_signal(getattr(__import__("signal"), f"SIG{signum}"))
        assert worker.wait(timeout=60) == 0, worker.stderr.read() if worker.stderr else ""
        assert "stopped" in worker.stdout.read()
    finally:
        stop(worker)
    assert sorted(fields[1] for fields in lines(trace) if fields[0] == "finish") == ["c-1", "c-2"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--graph", "v=no_such_module:build"], "cannot import module 'no_such_module'"),
        (["--graph", "w=waits_worker:build"], "--graph 'w' is given twice"),
        (["--graph", "nonsense"], "NAME=module:factory"),
        (["--keys-env", "WAITS_NO_SUCH_VARIABLE"], "WAITS_NO_SUCH_VARIABLE"),
        (["--store", "redis://x"], "unsupported store URL redis://"),
        (["--lookahead", "-1"], "expected a number of seconds >= 0"),
        (["--lookahead", "2"], "to a third of lease_seconds (1.66667)"),
    ],
)
def test_the_cli_worker_refuses_bad_input_with_one_line_and_exit_2(tmp_path, extra, message):
    worker = start_cli_worker(tmp_path / "runs.db", tmp_path / "trace.txt", *extra)
    _, err = worker.communicate(timeout=60)
    assert worker.returncode == 2
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("concurrency", "connections"), [(1, 4), (8, 10), (14, 16), (64, 16)])
def test_the_cli_worker_gives_its_postgres_store_a_connection_for_each_run_in_flight_up_to_a_bound(
    monkeypatch, concurrency, connections
):
    pytest.importorskip("psycopg")
    from amrita_sense.durable.waits.cli import build_waker, parser

    monkeypatch.syspath_prepend(str(WORKER.parent))
    options = ["--graph", "w=waits_worker:build", "--concurrency", str(concurrency), "--schema", "s"]
    args = parser().parse_args(["--store", "postgresql://u@127.0.0.1:9/db", *options])
    waker = build_waker(args)  # the pool opens on first use: nothing connects here
    assert (waker.store.max_size, waker.store.schema, waker.concurrency) == (connections, "s", concurrency)
