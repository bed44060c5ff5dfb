"""OpenTelemetry (`amrita_sense.telemetry`): run and node spans, span events, metrics, the trace a
snapshot carries into another process. The real SDK with in-memory exporters."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from amrita_sense import NodeCompose, WorkflowInterpreter, telemetry
from amrita_sense.durable import Checkpointing, MemoryCheckpointStore
from amrita_sense.instructions import FUN_BLOCK, IF, NATIVE_WHILE
from amrita_sense.instructions.try_catch import Try
from amrita_sense.instructions.workfl_ctrl import SUSPEND
from amrita_sense.node.wrapper import Node
from amrita_sense.policies import Retry
from amrita_sense.runtime import observe
from amrita_sense.streaming import SuspendObjectStream
from support.runtime_path import RUNTIME_DIR

SUPPORT = Path(__file__).parent / "support"


class Otel:
    """An SDK tracer provider and meter provider with in-memory exporters, installed by `instrument`."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def instrument(self, **kwargs) -> None:
        telemetry.instrument(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **kwargs)

    def spans(self, name_prefix: str = "") -> list:
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith(name_prefix)]

    def runs(self) -> list:
        return self.spans(telemetry.RUN_SPAN)

    def nodes(self) -> list:
        return self.spans("amrita_sense.node ")

    def metric(self, name: str) -> list:
        data = self.reader.get_metrics_data()
        points = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points


@pytest.fixture
def otel():
    otel = Otel()
    yield otel
    telemetry.uninstrument()


def _labels(spans) -> list[str]:
    return [s.attributes["amrita_sense.node.tag"] for s in spans]


def node(name: str, log: list, result=None, *, sync: bool = False):
    if sync:

        def body():
            log.append(name)
            return result

    else:

        async def body():
            log.append(name)
            return result

    body.__name__ = body.__qualname__ = name
    return Node(name)(body)


# ----- off by default ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_off_by_default_and_after_uninstrument(otel):
    log: list = []
    assert not telemetry.instrumented() and observe.current is None
    await WorkflowInterpreter((node("a", log) >> node("b", log)).render()).run()
    assert otel.spans() == []
    otel.instrument()
    assert telemetry.instrumented()
    telemetry.uninstrument()
    await WorkflowInterpreter((node("a", log) >> node("b", log)).render()).run()
    assert otel.spans() == [] and log == ["a", "b", "a", "b"] and observe.current is None


def test_bad_node_spans_values_are_refused(otel):
    for bad, kind in ((0.0, ValueError), (1.5, ValueError), ("every", ValueError), ([], TypeError), ([1], TypeError)):
        with pytest.raises(kind, match="node_spans"):
            telemetry.instrument(node_spans=bad)
    assert not telemetry.instrumented()


# ----- spans -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_run_span_without_node_spans_by_default(otel):
    otel.instrument()
    log: list = []
    interp = WorkflowInterpreter((node("a", log) >> node("b", log, sync=True)).render())
    await interp.run()
    (run,) = otel.runs()
    assert otel.nodes() == []
    assert run.attributes["amrita_sense.interpreter.id"] == interp.id
    assert run.attributes["amrita_sense.graph.fingerprint"] == interp.graph_fingerprint
    assert run.attributes["amrita_sense.run.outcome"] == "finished"
    assert run.status.status_code == StatusCode.UNSET and run.parent is None
    assert [p.value for p in otel.metric("amrita_sense.runs.started")] == [1]
    assert [p.value for p in otel.metric("amrita_sense.runs.active")] == [0]


@pytest.mark.asyncio
async def test_span_tree_of_branches_a_loop_a_try_and_a_panic_then_recover(otel):
    otel.instrument(node_spans="all")
    log: list = []
    fail = {"on": True}

    @Node("boom")
    async def boom():
        if fail["on"]:
            raise ValueError("boom")

    @Node("bad")
    async def bad():
        raise KeyError("caught")

    count = {"n": 0}

    @Node("more")
    def more():
        count["n"] += 1
        return count["n"] <= 2

    graph = (
        node("start", log)
        >> IF(node("yes", log, True), node("then", log)).ELSE(node("else", log)).extract()
        >> NATIVE_WHILE(more).ACTION(node("body", log)).extract()
        >> Try(bad).CATCH(KeyError, node("handler", log))
        >> boom
        >> node("end", log)
    ).render()
    interp = WorkflowInterpreter(graph)
    with pytest.raises(ValueError, match="boom"):
        await interp.run()
    (run,) = otel.runs()
    assert run.status.status_code == StatusCode.ERROR
    assert run.attributes["amrita_sense.run.outcome"] == "panicked"
    assert [e.name for e in run.events] == ["exception"]
    nodes = otel.nodes()
    assert all(n.parent.span_id == run.context.span_id and n.context.trace_id == run.context.trace_id for n in nodes)
    labels = _labels(nodes)
    # an IF's branch and a CATCH handler run inside their instruction's step (a sub-call): no span
    assert log == ["start", "yes", "then", "body", "body", "handler"]
    assert labels[0] == "start" and labels.count("body") == 2 and labels[-1] == "boom"
    (failed,) = [n for n in nodes if n.attributes["amrita_sense.node.tag"] == "boom"]
    assert failed.status.status_code == StatusCode.ERROR
    assert [p.value for p in otel.metric("amrita_sense.runs.panicked")] == [1]

    otel.exporter.clear()
    fail["on"] = False
    await interp.run()  # recovers: the panicked node runs again, then the rest
    (second,) = otel.runs()
    assert [e.name for e in second.events] == ["amrita_sense.recover"]
    assert second.attributes["amrita_sense.run.outcome"] == "finished"
    assert second.links and second.links[0].context.span_id == run.context.span_id
    assert _labels(otel.nodes())[-2:] == ["boom", "end"]


@pytest.mark.asyncio
async def test_node_spans_by_tag_async_only_and_by_predicate(otel):
    log: list = []
    graph = (node("a", log) >> node("s", log, sync=True) >> node("b", log)).render()
    for choice, expected in (
        (["b"], ["b"]),
        ("async", ["a", "b"]),
        (lambda n: n.tag != "a", ["s", "b"]),
        (1.0, ["a", "s", "b"]),
    ):
        otel.exporter.clear()
        otel.instrument(node_spans=choice)
        await WorkflowInterpreter(graph).run()
        assert _labels(otel.nodes()) == expected, choice
        assert len(otel.runs()) == 1
    durations = otel.metric("amrita_sense.node.duration")
    assert sum(p.count for p in durations) == 1 + 2 + 2 + 3


@pytest.mark.asyncio
async def test_sub_interpreters_and_worker_threads_see_their_callers_span(otel):
    otel.instrument(node_spans="all")
    seen: dict = {}

    @Node("in_thread")
    def in_thread():
        seen["thread"] = (threading.current_thread() is threading.main_thread(), trace.get_current_span())

    sub = (node("f1", []) >> in_thread).render()
    interp = WorkflowInterpreter(NodeCompose(node("a", []), FUN_BLOCK(sub)).render())
    tracer = otel.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("caller") as caller:
        await interp.run()
    runs = otel.runs()
    outer = next(r for r in runs if r.attributes["amrita_sense.interpreter.id"] == interp.id)
    inner = next(r for r in runs if r is not outer)
    assert outer.parent.span_id == caller.get_span_context().span_id
    block = next(
        n for n in otel.nodes() if n.parent.span_id == outer.context.span_id and n.name != "amrita_sense.node a"
    )
    assert inner.parent.span_id == block.context.span_id
    assert inner.attributes["amrita_sense.interpreter.parent"] == interp.id
    thread_node = next(n for n in otel.nodes() if n.attributes["amrita_sense.node.tag"] == "in_thread")
    on_main, current = seen["thread"]
    assert not on_main and current.get_span_context().span_id == thread_node.context.span_id
    assert {s.context.trace_id for s in otel.spans()} == {caller.get_span_context().trace_id}


@pytest.mark.asyncio
async def test_suspend_resume_interrupt_and_policy_events(otel, monkeypatch):
    otel.instrument(node_spans="all")
    stream = SuspendObjectStream(queue_size=math.inf)
    tries: list = []
    parked = asyncio.Event()
    go = asyncio.Event()

    @Node("wait")
    async def wait():
        parked.set()
        await go.wait()

    @Node("flaky", retry=Retry(attempts=2))
    async def flaky():
        tries.append(1)
        if len(tries) == 1:
            raise ConnectionError("once")

    side = node("side", [])
    graph = (wait >> node("b", []) >> flaky >> side).render()
    interp = WorkflowInterpreter(graph, stream)
    run = asyncio.ensure_future(interp.run())
    await parked.wait()
    request = asyncio.ensure_future(stream.wait_to_suspend())
    await asyncio.sleep(0)
    go.set()
    await request  # parked between two nodes, the lock free
    await interp.call_sub([3], interrupt=True)  # from outside
    stream.resume()
    await run
    (span,) = otel.runs()
    names = [e.name for e in span.events]
    assert names[:3] == ["amrita_sense.suspend", "amrita_sense.interrupt", "amrita_sense.resume"]
    (flaky_span,) = [n for n in otel.nodes() if n.attributes["amrita_sense.node.tag"] == "flaky"]
    (retry,) = flaky_span.events
    assert retry.name == "amrita_sense.policy" and retry.attributes["amrita_sense.policy.kind"] == "retry"
    assert len(tries) == 2


@pytest.mark.asyncio
async def test_halt_and_checkpoint_events_and_the_run_id(otel):
    otel.instrument()
    store = MemoryCheckpointStore()
    interp = WorkflowInterpreter((node("a", []) >> SUSPEND >> node("b", [])).render())
    interp.checkpointing = Checkpointing(store, "run-7", every_nodes=1)
    await interp.run()
    await interp.run()
    first, second = otel.runs()
    assert first.attributes["amrita_sense.run.outcome"] == "halted"
    assert first.attributes["amrita_sense.run.id"] == "run-7"
    assert "amrita_sense.checkpoint.saved" in [e.name for e in first.events]
    assert second.links[0].context.span_id == first.context.span_id
    assert sum(p.count for p in otel.metric("amrita_sense.checkpoint.save.duration")) >= 2


@pytest.mark.asyncio
async def test_uninstrument_ends_the_spans_of_runs_in_flight(otel):
    otel.instrument()
    gate = asyncio.Event()

    @Node("hold")
    async def hold():
        await gate.wait()

    run = asyncio.ensure_future(WorkflowInterpreter(NodeCompose(hold).render()).run())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    telemetry.uninstrument()
    (span,) = otel.runs()
    assert span.attributes["amrita_sense.run.outcome"] == "uninstrumented"
    gate.set()
    await run
    assert len(otel.runs()) == 1


@pytest.mark.asyncio
async def test_a_cancelled_run_ends_its_span_and_leaves_the_context_clean(otel):
    otel.instrument()

    @Node("hang")
    async def hang():
        await asyncio.Event().wait()

    interp = WorkflowInterpreter(NodeCompose(hang).render())
    run = asyncio.ensure_future(interp.run())
    await asyncio.sleep(0.01)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    (span,) = otel.runs()
    assert span.attributes["amrita_sense.run.outcome"] == "cancelled"
    assert not trace.get_current_span().get_span_context().is_valid
    assert not interp.is_running


# ----- a snapshot carries the trace to another process ----------------------------------------------


def _child(tmp_path: Path, phase: str) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([RUNTIME_DIR, str(SUPPORT)]))
    subprocess.run(
        [sys.executable, str(SUPPORT / "telemetry_programs.py"), phase, str(tmp_path)],
        check=True,
        env=env,
        timeout=120,
    )
    return [json.loads(line) for line in (tmp_path / f"{phase}.jsonl").read_text().splitlines()]


def test_a_run_restored_in_another_process_continues_its_trace(tmp_path):
    first = _child(tmp_path, "first")
    second = _child(tmp_path, "second")
    assert {s["trace_id"] for s in first + second} == {first[0]["trace_id"]}
    nodes = [s["tag"] for s in first + second if s["name"].startswith("amrita_sense.node ")]
    assert nodes == ["a", "b", "NodeSuspend::_suspend_operation", "c", "d"]  # each executed node once: nothing replayed
    (left,) = [s for s in first if s["name"] == "amrita_sense.run"]
    (resumed,) = [s for s in second if s["name"] == "amrita_sense.run"]
    assert left["parent"] == resumed["parent"] and left["parent"] is not None  # the caller's span
    assert resumed["links"] == [left["span_id"]]
    assert resumed["outcome"] == "finished" and left["outcome"] == "halted"


def test_the_console_example_prints_one_trace():
    script = SUPPORT.parent.parent / "examples" / "telemetry_console.py"
    env = dict(os.environ, PYTHONPATH=RUNTIME_DIR)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["amrita_sense.node", "amrita_sense.run", "request"]
    assert len({line.split("trace=")[1].split()[0] for line in lines}) == 1
    assert "outcome=finished" in lines[1]
