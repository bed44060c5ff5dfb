"""A worker process killed (SIGKILL on its pid) in the middle of runs takes no run with it.

With a checkpoint store, every run on the killed worker resumes on a live one
from its last checkpoint and ends with the result an uninterrupted run has
(its state travels with the checkpoints: the codec is pickle); the nodes'
outside effects (lines in a file) follow the at-least-once rule: the step that
was running when the process died is done again, nothing is lost. Without a
store, each run either finishes or is reported lost with `WorkerDied`; with
`restart_lost=True` the lost ones start again. The pool replaces the dead
worker either way.
"""

from __future__ import annotations

import os
import pickle
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from support import distributed_support as ds

pytestmark = pytest.mark.ray

STEPS = 12
DELAY = 0.03  # seconds per step: a run takes about 0.4 s, so the kill lands in the middle of runs


@pytest.fixture(scope="module")
def dist(ray_instance):
    import amrita_sense.distributed as dist

    return dist


def _pool(dist: object, **options: object) -> object:
    return dist.SensePool(2, runs_per_worker=32, actor_options={"num_cpus": 0}, name="failover", **options)


def _submit(pool: object, sink: Path, values: range, setup: object = ds.job_setup, hold: Path | None = None) -> list:
    """The first half of the runs one by one, the second half in batches of 5 (one call per batch);
    with `hold`, each run waits before its step `ds.HELD_AT` until that file exists."""
    extra = {} if hold is None else {"hold": str(hold)}
    specs = [{"steps": STEPS, "delay": DELAY, "sink": str(sink), "value": v, **extra} for v in values]
    half = len(specs) // 2
    handles = [pool.submit(ds.counting, spec, setup=setup) for spec in specs[:half]]
    workflow = pool.workflow(ds.counting, setup)
    for start in range(half, len(specs), 5):
        handles += workflow.submit_batch(specs[start : start + 5])
    return handles


def _wait_for_lines(sink: Path, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not sink.exists() or len(sink.read_text().splitlines()) < count:
        assert time.monotonic() < deadline, "the runs did not start"
        time.sleep(0.01)


def _kill_midway(pool: object, worker: int, groups: list[list], sink: Path, hold: Path, timeout: float = 60.0) -> int:
    """Kill `worker` (SIGKILL) once each group has a run on it held before its step `ds.HELD_AT` (the
    runs were submitted with `hold`: none goes past it before the kill, however loaded the machine),
    then let every run go on; the pid killed."""
    pid = pool.workers()[worker]["pid"]
    deadline = time.monotonic() + timeout
    while True:
        done = Counter(int(line.split(" ", 1)[0]) for line in sink.read_text().splitlines()) if sink.exists() else {}
        if all(any(h.worker == worker and done.get(v, 0) == ds.HELD_AT for h, v in group) for group in groups):
            os.kill(pid, signal.SIGKILL)
            hold.touch()
            return pid
        assert time.monotonic() < deadline, f"no run of every group was held on worker {worker}"
        time.sleep(0.005)


def _effects(sink: Path) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for line in sink.read_text().splitlines():
        value, entry = line.split(" ", 1)
        found.setdefault(int(value), []).append(entry)
    return found


def _store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> object:
    from amrita_sense.durable import PostgresCheckpointStore, SQLiteCheckpointStore

    if kind == "sqlite":
        return SQLiteCheckpointStore(tmp_path / "runs.db")
    dsn = request.getfixturevalue("postgres_dsn")
    return PostgresCheckpointStore(dsn, schema=f"failover_{os.getpid()}_{time.monotonic_ns()}")


@pytest.mark.parametrize(
    "kind, options, setup",
    [
        ("sqlite", {"codec": pickle}, ds.job_setup),
        ("sqlite", {}, ds.job_setup),
        ("sqlite", {}, ds.client_job_setup),
        ("postgres", {}, ds.client_job_setup),
    ],
    ids=["pickle", "default-codec", "default-codec-with-a-client", "postgres"],
)
def test_runs_of_a_killed_worker_resume_from_their_checkpoints(dist, tmp_path, request, kind, options, setup):
    """The runs' context (a `Job` their nodes append to) comes back with them: by default too, where
    a store without a codec used to resume them from a fresh setup (and a wrong result); an injected
    object that does not pickle (a client) comes from the resuming worker's setup. The Postgres store
    is the one a cluster of several machines would share."""
    sink = tmp_path / "effects"
    store = _store(kind, request, tmp_path)
    with _pool(dist, checkpoint_store=store, checkpoint_options=options) as pool:
        parked = pool.submit(ds.gated, 99, setup=ds.job_setup)
        parking = parked.suspend("gate:second", timeout=60)
        parked.send("go").wait(60)
        assert parking.wait(60) is True
        hold = tmp_path / "hold"
        handles = _submit(pool, sink, range(40), setup, hold)
        victim = parked.worker
        numbered = list(zip(handles, range(40)))
        old_pid = _kill_midway(pool, victim, [numbered[:20], numbered[20:]], sink, hold)
        for handle, value in zip(handles, range(40)):
            assert handle.result(120) == ds.expected(value, STEPS)
        assert any(h.outcome().attempts == 2 for h in handles[:20])
        assert any(h.outcome().attempts == 2 for h in handles[20:])  # batched runs go on one by one
        assert not parked.done(), parked.outcome()
        assert parked.worker is not None  # still parked, on a live worker
        parked.resume().wait(60)
        assert parked.result(60) == (99, ["got go", "first", "second"])
        assert parked.outcome().attempts == 2
        info = pool.workers()[victim]
        assert (info["generation"], info["deaths"]) == (1, 1) and info["pid"] != old_pid
    for value, entries in _effects(sink).items():
        wanted = ds.expected(value, STEPS)[1]
        counts = Counter(entries)
        assert set(counts) == set(wanted), value
        assert sum(counts.values()) - len(wanted) <= 1, f"run {value} redid more than the step in flight"
    assert store.list() == []  # finished runs leave no checkpoint behind


def test_a_worker_that_dies_after_its_run_ended_leaves_the_result_to_the_failover(dist, tmp_path):
    """Killed between the run's end and its outcome reaching the pool (in the setup's `close`), a
    worker used to have deleted the run's checkpoint already, so the run started again from its first
    node. The ended checkpoint now stays until the pool has the outcome: the failover returns the run's
    result, no step runs twice, and the checkpoint is deleted after all."""
    from amrita_sense.durable import SQLiteCheckpointStore

    sink = tmp_path / "effects"
    store = SQLiteCheckpointStore(tmp_path / "runs.db")
    with _pool(dist, checkpoint_store=store, checkpoint_options={"codec": pickle}) as pool:
        spec = {"steps": STEPS, "delay": 0.0, "sink": str(sink), "value": 7}
        handle = pool.submit(ds.counting, spec, setup=ds.dying_close_setup)
        assert handle.result(120) == ds.expected(7, STEPS)
        assert handle.outcome().attempts == 2
    assert (tmp_path / "effects.killed").exists()  # the first worker did die in the window
    assert _effects(sink)[7] == ds.expected(7, STEPS)[1]
    assert store.list() == []


def test_without_a_store_each_run_finishes_or_is_reported_lost(dist, tmp_path):
    sink = tmp_path / "effects"
    with _pool(dist) as pool:
        # the pid is asked for first: asking a loaded machine's worker after the runs started could take
        # longer than the runs, and a kill after them would lose nothing
        victim = pool.workers()[0]["pid"]
        handles = _submit(pool, sink, range(30))
        _wait_for_lines(sink, 45)
        os.kill(victim, signal.SIGKILL)
        outcomes = [h.outcome(120) for h in handles]
        statuses = Counter(o.status for o in outcomes)
        assert set(statuses) == {"finished", "lost"}, statuses
        for value, outcome in zip(range(30), outcomes):
            if outcome.status == "finished":
                assert outcome.result == ds.expected(value, STEPS)
            else:
                with pytest.raises(dist.WorkerDied, match="keeps no checkpoints"):
                    outcome.unwrap()
        assert list(pool.map(ds.counting, range(4), setup=ds.job_setup)) == [ds.expected(v) for v in range(4)]


def test_restart_lost_starts_the_lost_runs_again(dist, tmp_path):
    sink = tmp_path / "effects"
    with _pool(dist, restart_lost=True) as pool:
        streamed = pool.submit(ds.talking, {"value": 7, "steps": 40, "delay": DELAY}, setup=ds.job_setup, stream=True)
        items = iter(streamed.stream())
        before = [next(items) for _ in range(5)]
        # the pid first (as above): asked after the runs started, a loaded machine may answer after they ended
        victim = pool.workers()[streamed.worker]["pid"]
        handles = _submit(pool, sink, range(20))
        _wait_for_lines(sink, 30)
        os.kill(victim, signal.SIGKILL)
        for handle, value in zip(handles, range(20)):
            assert handle.result(120) == ds.expected(value, STEPS)
        assert any(h.outcome().attempts == 2 for h in handles)
        seen = before + list(items)
        wanted = [f"7:{i}" for i in range(40)]
        restart = len(seen) - seen[::-1].index("7:0") - 1  # the run started again: its stream starts again
        assert seen[:restart] == wanted[:restart] and seen[restart:] == wanted
        assert streamed.result(60) == (7, [f"said {i}" for i in range(40)])
        assert streamed.outcome().attempts == 2
