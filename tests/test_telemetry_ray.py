"""Telemetry across a `SensePool`: a run's spans on a worker stay in the trace of the code that submitted it.

The caller (this process) is instrumented and opens a span ``caller`` around the submit; each
worker instruments itself in its `worker_init` (`telemetry_support.instrument_worker`) and exports
every span it ends, at once, as a JSON line to a file of the test's directory. A run's span is a
child of the caller's span. When its worker is killed mid-run (SIGKILL on its pid), the run
resumes on another worker from its last checkpoint in the same trace, under the caller's span:
the spans the dead worker had ended are kept, the ones it had open (the run's and the node's in
flight) are lost with it. A `worker_init` that raises makes the runs end with an error, at once.
"""

from __future__ import annotations

import functools
import os
import pickle
import signal
import time
from pathlib import Path

import pytest

from support import telemetry_support as ts

pytestmark = pytest.mark.ray

RUN_SPAN = "amrita_sense.run"
NODE_SPANS = [f"amrita_sense.node {tag}" for tag in ts.TAGS]


@pytest.fixture(scope="module")
def dist(ray_instance):
    import amrita_sense.distributed as dist  # the OpenTelemetry SDK is in the test extra: required

    return dist


@pytest.fixture
def caller(dist, tmp_path):
    """This process instrumented (spans exported to `caller.jsonl`); its tracer. Uninstrumented after."""
    from amrita_sense import telemetry

    provider = ts.provider(str(tmp_path / "caller.jsonl"))
    telemetry.instrument(tracer_provider=provider)
    try:
        yield provider.get_tracer("test_telemetry_ray")
    finally:
        telemetry.uninstrument()
        provider.shutdown()


def _pool(dist: object, spans: Path, **options: object) -> object:
    spans.mkdir()
    return dist.SensePool(
        2,
        runs_per_worker=8,
        actor_options={"num_cpus": 0},
        name="telemetry",
        worker_init=functools.partial(ts.instrument_worker, str(spans)),
        **options,
    )


def _ids(span: object) -> tuple[str, str]:
    context = span.get_span_context()
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def _wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, "the run did not reach its hold"
        time.sleep(0.01)


def _kill(pool: object, index: int) -> int:
    pid = pool.workers()[index]["pid"]
    os.kill(pid, signal.SIGKILL)
    return pid


def _walk(tmp_path: Path, name: str, hold: bool = False) -> dict:
    return {"sink": str(tmp_path / name), "hold": hold}


def test_runs_on_the_workers_are_children_of_the_callers_span(dist, caller, tmp_path):
    from amrita_sense.durable import SQLiteCheckpointStore

    spans = tmp_path / "spans"
    store = SQLiteCheckpointStore(tmp_path / "runs.db")
    with _pool(dist, spans, checkpoint_store=store, checkpoint_options={"codec": pickle}) as pool:
        alone = pool.submit(ts.walk, _walk(tmp_path, "alone"), setup=ts.walk_setup)  # no span is current
        with caller.start_as_current_span("caller") as span:
            single = pool.submit(ts.walk, _walk(tmp_path, "single"), setup=ts.walk_setup)
            batch = pool.workflow(ts.walk, ts.walk_setup).submit_batch([_walk(tmp_path, f"b{i}") for i in range(2)])
        for handle in (alone, single, *batch):
            assert handle.result(60) == list(ts.TAGS)
    trace_id, caller_id = _ids(span)
    found = ts.read_spans(spans)
    runs = {s["attributes"]["amrita_sense.run.id"]: s for s in found if s["name"] == RUN_SPAN}
    assert set(runs) == {h.run_id for h in (alone, single, *batch)}  # one span per run
    for handle in (single, *batch):
        run = runs[handle.run_id]
        assert (run["trace_id"], run["parent"]) == (trace_id, caller_id)
        assert run["attributes"]["amrita_sense.run.outcome"] == "finished"
        assert run["pid"] != os.getpid()  # made on a worker
    assert runs[alone.run_id]["parent"] is None and runs[alone.run_id]["trace_id"] != trace_id
    for run in runs.values():  # one span per node, children of their run's span, in order
        assert [s["name"] for s in found if s["parent"] == run["span_id"]] == NODE_SPANS
    assert len(found) == len(runs) * (1 + len(ts.TAGS))
    (exported,) = ts.read_jsonl(tmp_path / "caller.jsonl")
    assert (exported["name"], exported["span_id"], exported["parent"]) == ("caller", caller_id, None)


def test_a_run_resumed_after_its_worker_was_killed_stays_in_the_callers_trace(dist, caller, tmp_path):
    from amrita_sense.durable import SQLiteCheckpointStore

    spans = tmp_path / "spans"
    store = SQLiteCheckpointStore(tmp_path / "runs.db")
    options = {"codec": pickle, "every_nodes": 1}
    with _pool(dist, spans, checkpoint_store=store, checkpoint_options=options) as pool:
        spec = _walk(tmp_path, "walk", hold=True)
        with caller.start_as_current_span("caller") as span:
            handle = pool.submit(ts.walk, spec, setup=ts.walk_setup)
        _wait_for(Path(spec["sink"] + ".held"))  # in t:3; t:1 and t:2 ended, and the checkpoint after t:2 is saved
        victim = handle.worker
        old_pid = _kill(pool, victim)
        assert handle.result(120) == list(ts.TAGS)  # the walk resumed: its state came with the checkpoint
        assert handle.outcome().attempts == 2
        info = pool.workers()[victim]
        assert (info["generation"], info["deaths"]) == (1, 1) and info["pid"] != old_pid
    assert Path(spec["sink"]).read_text().split() == ["t:1", "t:2", "t:3", "t:3", "t:4", "t:5"]  # t:3 ran again
    trace_id, caller_id = _ids(span)
    found = ts.read_spans(spans)
    assert {s["trace_id"] for s in found} == {trace_id}  # every span, of both workers, in the caller's trace
    # Run spans: exactly 1. The killed worker's run span never ended (it is lost with the process);
    # the resumed run's span replaces it: under the caller's span, linked to the lost one.
    (run,) = [s for s in found if s["name"] == RUN_SPAN]
    assert (run["parent"], run["attributes"]["amrita_sense.run.outcome"]) == (caller_id, "finished")
    assert run["attributes"]["amrita_sense.run.id"] == handle.run_id and run["pid"] != old_pid
    (link,) = run["links"]
    assert link["attributes"] == {"amrita_sense.link": "restored_from"} and link["trace_id"] == trace_id
    lost = link["span_id"]
    assert lost not in {s["span_id"] for s in found}
    # Node spans: exactly 5 = the uninterrupted run's 5 nodes + the nodes that ran again with a span
    # the killed worker had ended: 0, since it checkpointed after every node and the only node after
    # its last checkpoint (t:3) was in flight, its span lost (t:3 ran twice, it has one span).
    nodes = [s for s in found if s["name"] != RUN_SPAN]
    assert len(nodes) == len(ts.TAGS) + 0
    before = [s["name"] for s in nodes if s["pid"] == old_pid]
    after = [s["name"] for s in nodes if s["pid"] == run["pid"]]
    assert (before, after) == (NODE_SPANS[:2], NODE_SPANS[2:])
    assert {s["parent"] for s in nodes if s["pid"] == old_pid} == {lost}  # children of the lost run span
    assert {s["parent"] for s in nodes if s["pid"] == run["pid"]} == {run["span_id"]}
    assert store.list() == []


def test_a_worker_init_that_raises_ends_the_runs_with_an_error(dist, tmp_path):
    with pytest.raises(TypeError, match="worker_init must be a callable"):
        dist.SensePool(1, actor_options={"num_cpus": 0}, worker_init="instrument")
    with dist.SensePool(2, actor_options={"num_cpus": 0}, name="no-init", worker_init=ts.failing_init) as pool:
        outcomes = [pool.submit(ts.walk, _walk(tmp_path, "never"), setup=ts.walk_setup).outcome(60)]
        outcomes += [h.outcome(60) for h in pool.workflow(ts.walk, ts.walk_setup).submit_batch([_walk(tmp_path, "b")])]
        outcomes.append(pool.submit(ts.walk, _walk(tmp_path, "later"), setup=ts.walk_setup).outcome(60))
        for outcome in outcomes:
            assert outcome.status == "error", outcome
            assert isinstance(outcome.exception, RuntimeError)
            message = str(outcome.exception)
            assert "every worker failed to start" in message and "no exporter on this worker" in message
            with pytest.raises(dist.RunFailed, match="worker_init"):
                outcome.unwrap()
        # not replaced once its worker_init raised; under load Ray may first report the actor's creation
        # failure as its process dying (the pool then starts it once more, and that one fails to start)
        assert all("error" in info and info["deaths"] <= 1 for info in pool.workers())
    assert not Path(tmp_path / "never").exists()
