"""The pool's wakers: runs parked in the store resumed by the workers of a real local Ray, exactly once.

The driver starts runs of graph "parked" (`distributed_support.parked_graph`: a WAIT for a message,
then a SLEEP) on an SQLite store the workers reach, signed with the pool's keyring; it sends each run
its message (half before the pool exists, half after); the two workers' wakers resume every run at
its WAIT and again after its SLEEP, until it finishes. What each run did is checked twice: in its
last checkpoint (the `Job` the checkpoints carry) and in the lines its nodes wrote to a file (an
outside effect): every node once, the message delivered once.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import time
from pathlib import Path

import pytest

from support import distributed_support as ds

pytestmark = pytest.mark.ray

RUNS = 12


@pytest.fixture(scope="module")
def dist(ray_instance):
    import amrita_sense.distributed as dist

    return dist


def _start_parked(store: object, keys: object, sink: Path, runs: int) -> None:
    """Start `runs` runs of graph "parked" here (the application's process): each parks at its WAIT."""
    from amrita_sense import WorkflowInterpreter
    from amrita_sense.durable import Checkpointing

    async def start() -> None:
        for i in range(runs):
            interp = WorkflowInterpreter(ds.parked_graph(), extra_args=(ds.Job(i, sink=str(sink)),))
            interp.checkpointing = Checkpointing(store, f"parked-{i}", codec=pickle, keyring=keys, graph="parked")
            await interp.run()

    asyncio.run(start())


def _wait_finished(store: object, runs: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        statuses = [store.load(f"parked-{i}").record.status for i in range(runs)]
        if all(status == "finished" for status in statuses):
            return
        assert time.monotonic() < deadline, f"the runs did not all finish: {statuses}"
        time.sleep(0.1)


def _resumed_count(pool: object, expected: int, timeout: float = 60.0) -> int:
    """The wakers' count once it reached `expected` (a run's last save lands before its waker's round
    ends and counts it), or what it is at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        count = pool.wakers_resumed()
        if count >= expected or time.monotonic() > deadline:
            return count
        time.sleep(0.1)


def test_the_workers_wakers_resume_every_parked_run_exactly_once(dist, tmp_path):
    from amrita_sense import WorkflowInterpreter
    from amrita_sense.durable import Keyring, SQLiteCheckpointStore

    store = SQLiteCheckpointStore(tmp_path / "runs.db")
    keys = Keyring.generate("wakers-test")
    sink = tmp_path / "effects.txt"
    _start_parked(store, keys, sink, RUNS)
    assert [store.load(f"parked-{i}").record.status for i in range(RUNS)] == ["waiting"] * RUNS
    half = RUNS // 2
    for i in range(half):  # sent before any waker exists: kept until one takes the run
        store.send(f"parked-{i}", "go", i * 10, keyring=keys, message_id=f"m-{i}")

    with dist.SensePool(
        2,
        runs_per_worker=8,
        checkpoint_store=store,
        checkpoint_options={"codec": pickle},
        keyring=keys,
        actor_options={"num_cpus": 0},
        name="wakers",
        wakers={"parked": ds.parked_graph},
        waker_options={"poll_interval": 0.1, "lease_seconds": 10.0},
    ) as pool:
        for i in range(half, RUNS):  # sent while the wakers serve
            store.send(f"parked-{i}", "go", i * 10, keyring=keys, message_id=f"m-{i}")
        _wait_finished(store, RUNS)
        resumed = _resumed_count(pool, 2 * RUNS)
        infos = pool.workers()

    assert all(info["waker"] is not None and info["waker"]["graphs"] == ["parked"] for info in infos)
    assert all(info["waker"]["failures"] == [] for info in infos)
    assert resumed == 2 * RUNS  # each run once at its WAIT, once after its SLEEP
    worker_pids = {info["pid"] for info in infos}

    # the checkpointed state: every node once, the run's own message once
    for i in range(RUNS):
        checkpoint = store.load(f"parked-{i}")
        signed = keys.bound_to(f"parked-{i}", checkpoint.record.version)
        interp = WorkflowInterpreter.restore(ds.parked_graph(), checkpoint.data, codec=pickle, keyring=signed)
        trace = [entry.rsplit(" ", 1)[0] for entry in interp._ava_args_v[1].trace]
        assert trace == ["start", f"message {i * 10}", "end"]
        assert [m.message_id for m in store.messages(f"parked-{i}", pending=False)] == [f"m-{i}"]
        assert store.messages(f"parked-{i}") == []

    # the outside effects: the nodes after the WAIT ran once each, on the pool's workers
    lines: dict[int, list[str]] = {}
    for line in sink.read_text().splitlines():
        value, entry = line.split(" ", 1)
        lines.setdefault(int(value), []).append(entry)
    assert sorted(lines) == list(range(RUNS))
    for i, entries in lines.items():
        names = [entry.rsplit(" ", 1)[0] for entry in entries]
        assert names == ["start", f"message {i * 10}", "end"]
        assert {int(entry.rsplit(" ", 1)[1]) for entry in entries[1:]} <= worker_pids


def test_a_worker_that_replaces_a_dead_one_serves_the_wakers_with_the_pools_own_keyring(dist, ray_instance, tmp_path):
    from amrita_sense.durable import SQLiteCheckpointStore

    store = SQLiteCheckpointStore(tmp_path / "runs.db")
    sink = tmp_path / "effects.txt"
    runs = 4
    with dist.SensePool(
        1,
        checkpoint_store=store,
        checkpoint_options={"codec": pickle},
        actor_options={"num_cpus": 0},
        name="wakers-replaced",
        wakers={"parked": ds.parked_graph},
        waker_options={"poll_interval": 0.1},
    ) as pool:
        keys = pool.keyring  # the pool's own (none was given): the application signs its runs with it
        _start_parked(store, keys, sink, runs)
        first = pool.workers()[0]
        os.kill(first["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 120
        while True:  # the replacement is up and its waker serves
            info = pool.workers()[0]
            if info["generation"] == 1 and "error" not in info and (info["waker"] or {}).get("serving"):
                break
            assert time.monotonic() < deadline, f"no replacement worker with a waker: {info}"
            time.sleep(0.1)
        for i in range(runs):
            store.send(f"parked-{i}", "go", i, keyring=keys, message_id=f"m-{i}")
        _wait_finished(store, runs)
        assert _resumed_count(pool, 2 * runs) == 2 * runs
        replacement = pool.workers()[0]["pid"]
        # what close() asks of every worker first: its waker stops serving (nothing of it runs any more)
        assert ray_instance.get(pool._workers[0].actor.stop_waker.remote(10.0)) is True
        assert pool.workers()[0]["waker"]["serving"] is False
    assert replacement != first["pid"]
    lines = [line.split(" ") for line in sink.read_text().splitlines()]
    assert sorted((int(v), name) for v, name, *_ in lines if name != "start") == sorted(
        [(i, "message") for i in range(runs)] + [(i, "end") for i in range(runs)]
    )
    assert {int(pid) for _, name, *_, pid in lines if name != "start"} == {replacement}


def test_a_pool_without_a_checkpoint_store_refuses_wakers(dist):
    with pytest.raises(TypeError, match="checkpoint_store"):
        dist.SensePool(1, actor_options={"num_cpus": 0}, name="no-store", wakers={"parked": ds.parked_graph})


def test_bad_wakers_and_waker_options_are_refused_at_construction(dist, tmp_path):
    from amrita_sense.durable import SQLiteCheckpointStore

    store = SQLiteCheckpointStore(tmp_path / "runs.db")
    common = {"checkpoint_store": store, "actor_options": {"num_cpus": 0}, "name": "bad-wakers"}
    with pytest.raises(TypeError, match="mapping"):
        dist.SensePool(1, wakers=[ds.parked_graph], **common)
    with pytest.raises(TypeError, match="graphs\\['parked'\\]"):
        dist.SensePool(1, wakers={"parked": 42}, **common)
    with pytest.raises(TypeError, match="owner"):
        dist.SensePool(1, wakers={"parked": ds.parked_graph}, waker_options={"owner": "me"}, **common)
    with pytest.raises(ValueError, match="poll_interval"):
        dist.SensePool(1, wakers={"parked": ds.parked_graph}, waker_options={"poll_interval": 0}, **common)
    with pytest.raises(TypeError, match="waker_options without wakers"):
        dist.SensePool(1, waker_options={"poll_interval": 1.0}, **common)
