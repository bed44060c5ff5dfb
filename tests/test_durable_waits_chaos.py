"""The waits fault test (issue 46): N runs parked on random timers and waiting for random messages,
served by two CLI worker processes (`python -m amrita_sense worker`) that are killed with SIGKILL at
random moments and started again, on SQLite and on Postgres, both builds (the subprocesses import
the build under test), both loops.

The truth is each run's own checkpointed state (`support/waits_chaos.py`'s `State`, stored with
codec=pickle and a keyring): in the end every run finished, every message id is in its state
exactly once and in the order it was sent, no timer woke before its time, and no message is left
undelivered. Node executions may repeat after a kill (at least once): they are counted in
`executions.json` beside the test's files, not asserted as once.

N: the environment variable AMRITA_SENSE_CHAOS_RUNS (CI's compiled pass sets 2000), default 200;
AMRITA_SENSE_CHAOS_SEED replays a seed (each test prints the one it used).
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import random
import secrets
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from amrita_sense.durable import Keyring, SQLiteCheckpointStore
from support.runtime_path import RUNTIME_DIR

SUPPORT = Path(__file__).resolve().parent / "support"
CHAOS = SUPPORT / "waits_chaos.py"
sys.path.insert(0, str(SUPPORT))
import waits_chaos  # noqa: E402  (by the name the worker processes import it)

LOOPS = ["asyncio", "uvloop"]
RUNS = int(os.environ.get("AMRITA_SENSE_CHAOS_RUNS") or 200)
LEASE = "1"
SEND_WITHIN = 4.0
"""Messages are sent at random times within this many seconds of the wakers' start."""
KILLS_WITHIN = 6.0
"""Wakers are killed (and started again) at random moments within this many seconds, and on until
every run finished."""


def chaos_env(keys: str, until: float, trace: Path) -> dict[str, str]:
    path = os.pathsep.join([RUNTIME_DIR, str(SUPPORT.parent), str(SUPPORT)])
    env = dict(os.environ, PYTHONPATH=path, CHAOS_KEYS=keys, CHAOS_UNTIL=repr(until), CHAOS_TRACE=str(trace))
    env.pop("AMRITA_SENSE_REQUIRE_EXTENSIONS", None)
    return env


@pytest.fixture(params=["sqlite", "postgres"])
def chaos_store(request, tmp_path):
    """`(the worker's --store options, the helper processes' DATABASE, the same store opened here)`."""
    if request.param == "sqlite":
        path = str(tmp_path / "runs.db")
        return ["--store", path, "--poll", "0.05"], path, SQLiteCheckpointStore(path)
    from amrita_sense.durable import PostgresCheckpointStore
    from support.postgres_cluster import drop_schema_after

    dsn = request.getfixturevalue("postgres_dsn")
    schema = drop_schema_after(request, dsn)
    store = PostgresCheckpointStore(dsn, schema=schema)
    request.addfinalizer(store.close)
    return ["--store", dsn, "--schema", schema, "--poll", "0.5"], f"{dsn}|{schema}", store


class Wakers:
    """Two CLI worker processes, killed and started again on request."""

    def __init__(self, options: list[str], loop: str, env: dict[str, str], folder: Path) -> None:
        self.options, self.loop, self.env, self.folder = options, loop, env, folder
        self.started = 0
        self.logged: dict[int, Path] = {}
        self.processes: list[subprocess.Popen] = [self.start(n) for n in range(2)]

    def start(self, slot: int) -> subprocess.Popen:
        self.started += 1
        if self.loop == "asyncio":
            command = [sys.executable, "-m", "amrita_sense", "worker"]
        else:
            command = [sys.executable, str(CHAOS), "worker", self.loop]
        command += [*self.options, *waits_chaos.graph_options(), "--codec", "pickle", "--keys-env"]
        command += [waits_chaos.KEYS_ENV, "--lease", LEASE, "--owner", f"waker-{slot}-{self.started}"]
        log = self.folder / f"waker-{self.started}.log"
        with open(log, "w") as out:
            process = subprocess.Popen(command, env=self.env, stdout=out, stderr=subprocess.STDOUT, text=True)
        self.logged[process.pid] = log
        return process

    def kill_and_restart(self, slot: int) -> None:
        process = self.processes[slot]
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.wait()
        self.processes[slot] = self.start(slot)

    def stop(self) -> list[int | None]:
        for process in self.processes:
            deadline = time.monotonic() + 60  # its SIGTERM handler installed: it says so once serving
            while process.poll() is None and "serving" not in self.logged[process.pid].read_text():
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            if process.poll() is None:
                process.terminate()
        codes = []
        for process in self.processes:
            try:
                codes.append(process.wait(timeout=60))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                codes.append(None)
        return codes

    def logs(self) -> str:
        return "\n".join(path.read_text()[-2000:] for path in sorted(self.folder.glob("waker-*.log")))


def helper(env: dict[str, str], *args: str) -> None:
    done = subprocess.run([sys.executable, str(CHAOS), *args], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]


@pytest.mark.parametrize("loop", LOOPS)
def test_parked_runs_survive_wakers_killed_at_random_and_get_every_message_once_in_order(tmp_path, loop, chaos_store):
    options, database, store = chaos_store
    seed = int(os.environ.get("AMRITA_SENSE_CHAOS_SEED") or secrets.randbits(32))
    print(f"AMRITA_SENSE_CHAOS_SEED={seed} runs={RUNS}")
    rng = random.Random(seed)
    keys = f"chaos:{base64.b64encode(secrets.token_bytes(32)).decode()}"
    keyring = Keyring.from_env("CHAOS_KEYS", {"CHAOS_KEYS": keys})
    trace = tmp_path / "executions.txt"
    env = chaos_env(keys, time.time() + rng.uniform(0.1, 3.0), trace)
    names = sorted(waits_chaos.GRAPHS)
    spec = [[f"chaos-{n}", rng.choice(names)] for n in range(RUNS)]
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    helper(env, "start", database, loop, str(tmp_path / "spec.json"))
    assert {store.load(run_id).record.status for run_id, _ in spec} == {"waiting"}

    sent: dict[str, list[str]] = {run_id: [] for run_id, _ in spec}
    events: list[tuple[float, str, Any]] = []
    for run_id, name in spec:
        times = sorted(rng.uniform(0, SEND_WITHIN) for _ in range(waits_chaos.GRAPHS[name][1]))
        events += [(at, "send", (run_id, f"{run_id}-m{k}")) for k, at in enumerate(times)]
    at = 0.0
    while True:
        at += rng.uniform(0.3, 1.5)
        if at > KILLS_WITHIN:
            break
        events.append((at, "kill", rng.randrange(2)))
    events.sort(key=lambda event: (event[0], event[1]))

    wakers = Wakers(options, loop, env, tmp_path)
    began, kills = time.monotonic(), 0
    try:
        for at, what, target in events:
            pause = began + at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            if what == "send":
                run_id, message_id = target
                store.send(run_id, "m", {"id": message_id}, message_id=message_id, codec=pickle, keyring=keyring)
                sent[run_id].append(message_id)
            else:
                wakers.kill_and_restart(target)
                kills += 1
        waiting = [run_id for run_id, _ in spec]
        deadline = time.monotonic() + 120 + RUNS * 0.1
        next_kill = time.monotonic() + rng.uniform(0.3, 1.5)
        while waiting:  # the kills go on at random moments until every run finished
            waiting = [run_id for run_id in waiting if store.load(run_id).record.status != "finished"]
            if waiting and time.monotonic() > deadline:
                raise AssertionError(f"{len(waiting)} runs never finished, e.g. {waiting[:5]}:\n{wakers.logs()}")
            if waiting and time.monotonic() > next_kill:
                wakers.kill_and_restart(rng.randrange(2))
                kills += 1
                next_kill = time.monotonic() + rng.uniform(0.3, 1.5)
            time.sleep(0.1)
    finally:
        codes = wakers.stop()
    assert codes == [0, 0], wakers.logs()

    helper(env, "report", database, loop, str(tmp_path / "spec.json"), str(tmp_path / "report.json"))
    found = json.loads((tmp_path / "report.json").read_text())
    until = float(env["CHAOS_UNTIL"])
    for run_id, name in spec:
        run, (seconds, _) = found[run_id], waits_chaos.GRAPHS[name]
        state = run["state"]
        assert run["status"] == "finished" and state["done"], (run_id, run)
        assert state["got"] == sent[run_id], (run_id, state["got"], sent[run_id])  # each once, in send order
        due = until if seconds is None else state["parked_at"] + seconds
        assert state["woke_at"] >= due, (run_id, name, state["woke_at"] - due)  # no timer woke early
        assert store.messages(run_id) == []  # nothing left undelivered
        assert [m.message_id for m in store.messages(run_id, pending=False)] == sent[run_id]

    executions = Counter(tuple(line.split()[:2]) for line in trace.read_text().splitlines() if len(line.split()) == 3)
    for run_id, name in spec:  # at least once each
        nodes = ["mark", "woke", *(f"got{k + 1}" for k in range(waits_chaos.GRAPHS[name][1])), "done"]
        assert all(executions[(node, run_id)] >= 1 for node in nodes), run_id
    repeated = {f"{node} {run_id}": count for (node, run_id), count in executions.items() if count > 1}
    summary = {"seed": seed, "runs": RUNS, "kills": kills, "wakers started": wakers.started, "repeated": repeated}
    (tmp_path / "executions.json").write_text(json.dumps(summary, indent=1))
    print(f"kills={kills} executions={sum(executions.values())} repeated={len(repeated)}")
