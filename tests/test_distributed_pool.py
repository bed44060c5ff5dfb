"""Scale-out on a real local Ray instance: fan-out, streaming, input, gates, cancellation, failures.

One pool of two workers (an SQLite checkpoint store, the pools pickled with
the checkpoints) serves the module; the workflows live in `distributed_support`,
which the workers import by name.
"""

from __future__ import annotations

import pickle
import threading

import pytest

import amrita_sense
from support import distributed_support as ds

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def dist(ray_instance):
    import amrita_sense.distributed as dist

    return dist


@pytest.fixture(scope="module")
def pool(dist, tmp_path_factory):
    from amrita_sense.durable import SQLiteCheckpointStore

    store = SQLiteCheckpointStore(tmp_path_factory.mktemp("pool") / "runs.db")
    with dist.SensePool(
        2,
        runs_per_worker=32,
        checkpoint_store=store,
        checkpoint_options={"codec": pickle},
        actor_options={"num_cpus": 0},
        name="test-pool",
    ) as pool:
        yield pool


@pytest.fixture(scope="module")
def counting(pool):
    return pool.workflow(ds.counting, ds.job_setup)


# ----- fan-out ----------------------------------------------------------------------------------------------


def test_fan_out_returns_every_result_in_input_order(counting):
    assert list(counting.map(range(300))) == [ds.expected(v) for v in range(300)]


def test_fan_out_as_completed_with_back_pressure_and_progress(counting):
    pulled, taken, seen = [], [], []

    def inputs():
        for value in range(200):
            pulled.append(value)
            assert len(pulled) <= len(taken) + 5, "read more inputs than max_in_flight allows"
            yield value

    for result in counting.map(inputs(), ordered=False, max_in_flight=5, progress=lambda *c: seen.append(c)):
        taken.append(result)
    assert sorted(taken) == [ds.expected(v) for v in range(200)]
    assert seen[-1] == (200, None, 0) and len(seen) == 200


def test_fan_out_failure_raises_where_it_comes(pool, dist):
    refusing = pool.workflow(ds.refusing, ds.job_setup)
    results = []
    with pytest.raises(dist.RunPanicked) as caught:
        for result in refusing.map([1, 2, -3, 4, 5]):
            results.append(result)
    assert results == [(1, ["accepted"]), (2, ["accepted"])]
    assert isinstance(caught.value.exception, ds.Refusal) and str(caught.value.exception) == "negative: -3"
    outcomes = list(refusing.map([1, -2, 3], outcomes=True))
    assert [o.status for o in outcomes] == ["finished", "panicked", "finished"]


def test_fan_out_in_batches(counting, dist):
    assert list(counting.map(range(100), chunk_size=8, max_in_flight=24)) == [ds.expected(v) for v in range(100)]
    handles = counting.submit_batch([1, 2, 3])
    assert [h.result(30) for h in handles] == [ds.expected(1), ds.expected(2), ds.expected(3)]
    assert len({h.run_id for h in handles}) == 3
    with pytest.raises(ValueError, match="does not fit"):
        counting.submit_batch(range(33))
    with pytest.raises(ValueError, match="chunk_size"):
        list(counting.map(range(3), chunk_size=0))


@pytest.mark.asyncio
async def test_async_fan_out(counting):
    results = [r async for r in counting.amap(range(60), ordered=False, max_in_flight=16)]
    assert sorted(results) == [ds.expected(v) for v in range(60)]
    assert [r async for r in counting.amap([7, 8])] == [ds.expected(7), ds.expected(8)]


def test_workers_run_the_drivers_core_and_hold_each_graph_once(pool, counting):
    counting.map(range(10))
    infos = pool.workers()
    assert [i["core"] for i in infos] == [amrita_sense.IMPLEMENTATION] * 2
    assert all(i["deaths"] == 0 for i in infos)
    assert all(i["workflows"] <= 4 for i in infos)  # one per workflow this module registered, not per run


# ----- one run: streaming, input, gates ------------------------------------------------------------------


def test_stream_and_input_round_trip(pool):
    handle = pool.submit(ds.chat, 1, setup=ds.job_setup, stream=True)
    stream = iter(handle.stream())
    for word in ("alpha", "beta", "gamma"):
        handle.send(word).wait(30)
        assert next(stream) == f"echo {word}"
    handle.send_done().wait(30)
    assert list(stream) == ["done"]
    assert handle.result(30) == (1, ["got alpha", "got beta", "got gamma"])


@pytest.mark.asyncio
async def test_stream_and_input_round_trip_async(pool):
    handle = pool.submit(ds.chat, 2, setup=ds.job_setup, stream=True)
    await handle.send("one")
    await handle.send("two")
    await handle.send_done()
    assert [item async for item in handle.stream()] == ["echo one", "echo two", "done"]
    assert await handle == (2, ["got one", "got two"])


def test_output_of_a_run_not_streamed_is_in_its_outcome(pool):
    outcome = pool.submit(ds.talking, {"value": 3, "steps": 4}, setup=ds.job_setup).outcome(30)
    assert outcome.output == ["3:0", "3:1", "3:2", "3:3"]
    with pytest.raises(ValueError):
        pool.submit(ds.talking, 1, setup=ds.job_setup).stream()


def test_suspend_snapshot_resume(pool):
    from amrita_sense.durable import inspect_snapshot

    handle = pool.submit(ds.gated, 4, setup=ds.job_setup)
    parked = handle.suspend("gate:second", timeout=30)
    handle.send("go").wait(30)
    assert parked.wait(30) is True
    info = inspect_snapshot(handle.snapshot().wait(30))
    assert (info.status, info.parked) == ("suspended", "gate:second")
    handle.resume().wait(30)
    assert handle.result(30) == (4, ["got go", "first", "second"])


def test_a_halted_run_goes_on_from_its_snapshot_or_its_checkpoint(pool):
    outcome = pool.submit(ds.halting, 5, setup=ds.job_setup, run_id="halt-5").outcome(30)
    assert (outcome.status, outcome.result) == ("halted", (5, ["first"]))
    again = pool.submit(ds.halting, 5, setup=ds.job_setup, resume_from=outcome.snapshot)
    assert again.result(30) == (5, ["first", "second"])
    resumed = pool.submit(ds.halting, 5, setup=ds.job_setup, run_id="halt-5", resume=True)
    assert resumed.result(30) == (5, ["first", "second"])


def test_a_run_id_in_use_and_requests_after_the_end(pool, dist):
    handle = pool.submit(ds.sleeper, 1, setup=ds.job_setup, run_id="busy", stream=True)
    next(iter(handle.stream()))
    with pytest.raises(ValueError, match="already in this pool"):
        pool.submit(ds.sleeper, 1, setup=ds.job_setup, run_id="busy")
    handle.cancel().wait(30)
    handle.outcome(30)
    with pytest.raises(dist.RunEnded):
        handle.send("late").wait(30)


# ----- cancellation --------------------------------------------------------------------------------------


def test_cancel_a_running_run(pool, dist):
    handle = pool.submit(ds.sleeper, 6, setup=ds.job_setup, stream=True)
    assert next(iter(handle.stream())) == "waiting"
    assert handle.cancel().wait(30) is True
    assert handle.outcome(30).status == "cancelled"
    with pytest.raises(dist.RunCancelled):
        handle.result()
    assert handle.cancel().wait(30) is False
    assert pool.submit(ds.counting, 6, setup=ds.job_setup).result(30) == ds.expected(6)


def test_cancel_a_run_waiting_for_a_slot(dist, ray_instance):
    with dist.SensePool(1, runs_per_worker=1, actor_options={"num_cpus": 0}, name="one-slot") as small:
        busy = small.submit(ds.sleeper, 1, setup=ds.job_setup, stream=True)
        next(iter(busy.stream()))
        queued = small.submit(ds.counting, 2, setup=ds.job_setup)
        assert queued.worker is None
        assert queued.cancel().wait(30) is True
        outcome = queued.outcome(30)
        assert (outcome.status, outcome.attempts) == ("cancelled", 0)
        busy.cancel().wait(30)
        assert busy.outcome(30).status == "cancelled"
        assert small.submit(ds.counting, 3, setup=ds.job_setup).result(30) == ds.expected(3)


# ----- failures ---------------------------------------------------------------------------------------------


def test_a_panic_brings_back_its_record_and_exception(pool, dist):
    with pytest.raises(dist.RunPanicked) as caught:
        pool.submit(ds.refusing, -7, setup=ds.job_setup).result(30)
    error = caught.value
    assert type(error.exception) is ds.Refusal and error.exception.args == ("negative: -7",)
    assert "in refuse" in error.traceback and "Refusal: negative: -7" in error.traceback
    assert "Failed at node: NodeSuspend::refuse->refuse" in error.sense_traceback
    assert error.outcome.snapshot is not None


def test_an_exception_that_cannot_travel_comes_back_as_a_restored_panic(pool, dist):
    from amrita_sense.durable import RestoredPanic

    outcome = pool.submit(ds.locked, 8, setup=ds.job_setup).outcome(30)
    assert outcome.status == "panicked"
    assert isinstance(outcome.exception, RestoredPanic)
    assert outcome.exception.type_name == "support.distributed_support:LockedError"
    assert str(outcome.exception) == "locked 8" and "LockedError" in outcome.traceback


def test_setup_failures_and_results_that_cannot_travel(pool, dist, tmp_path):
    failed = pool.submit(ds.counting, 9, setup=ds.failing_setup).outcome(30)
    assert failed.status == "error" and str(failed.exception) == "no resources for 9"
    with pytest.raises(dist.RunFailed):
        failed.unwrap()
    bad = pool.submit(ds.counting, 9, setup=ds.unpicklable_result_setup).outcome(30)
    assert bad.status == "error" and isinstance(bad.exception, dist.NotPicklable)
    sink = tmp_path / "sink"
    assert pool.submit(ds.refusing, {"value": 9, "sink": str(sink)}, setup=ds.closing_setup).result(30) == (
        9,
        ["accepted"],
    )
    assert sink.read_text().splitlines() == ["9 accepted", "9 closed"]
    unstorable = pool.submit(ds.refusing, 9, setup=ds.lock_setup).outcome(30)  # the pool's codec is pickle
    assert unstorable.status == "error" and "cannot pickle '_thread.lock'" in str(unstorable.exception)


def test_an_unpicklable_node_is_refused_at_submission(pool, dist):
    deaths = [w["deaths"] for w in pool.workers()]
    with pytest.raises(dist.NotPicklable) as caught:
        pool.workflow(ds.unpicklable_graph(), ds.job_setup)
    message = str(caught.value)
    assert "[1]" in message and "guarded" in message and "closure variable 'guard'" in message
    assert isinstance(caught.value, TypeError)
    with pytest.raises(dist.NotPicklable, match="the run's input"):
        pool.submit(ds.counting, threading.Lock(), setup=ds.job_setup)
    assert [w["deaths"] for w in pool.workers()] == deaths


def test_progress_on_a_terminal_and_off_elsewhere(counting, monkeypatch):
    import io
    import sys

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setitem(sys.modules, "tqdm", None)  # the standard-library line, even where tqdm is installed
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert len(list(counting.map(range(10), progress=True))) == 10
    shown = sys.stderr.getvalue()
    assert shown.startswith("\r") and shown.endswith("\n") and "\r10/10 runs, " in shown
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert len(list(counting.map(range(3), progress=True))) == 3
    assert sys.stderr.getvalue() == ""


def test_closing_without_waiting_cancels_what_is_left(dist, ray_instance):
    pool = dist.SensePool(1, runs_per_worker=1, actor_options={"num_cpus": 0}, name="closing")
    busy = pool.submit(ds.sleeper, 1, setup=ds.job_setup, stream=True)
    next(iter(busy.stream()))
    queued = pool.submit(ds.gated, 2, setup=ds.job_setup)
    parking = queued.suspend("gate:second")  # waits for the run to get a worker
    pool.close(wait=False)
    assert busy.outcome(30).status == "cancelled"
    assert (queued.outcome(30).status, queued.outcome().extra["reason"]) == ("cancelled", "the pool was closed")
    with pytest.raises(dist.RunEnded):
        parking.wait(30)
    with pytest.raises(dist.PoolClosed):
        pool.submit(ds.counting, 3, setup=ds.job_setup)
    pool.close()  # again: nothing happens
