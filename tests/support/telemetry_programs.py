"""Run in a child process by tests/test_telemetry.py: ``first DIR`` runs a graph under a "caller"
span up to its SUSPEND and writes the snapshot; ``second DIR`` restores it and runs the rest. Each
writes its finished spans to ``DIR/<phase>.jsonl``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from amrita_sense import WorkflowInterpreter, telemetry
from amrita_sense.instructions.workfl_ctrl import SUSPEND
from amrita_sense.node.wrapper import Node


def _node(name: str):
    async def body():
        return name

    body.__name__ = body.__qualname__ = name
    return Node(name)(body)


GRAPH = (_node("a") >> _node("b") >> SUSPEND >> _node("c") >> _node("d")).render()


def _record(span) -> dict:
    attributes = dict(span.attributes)
    return {
        "name": span.name,
        "trace_id": f"{span.context.trace_id:032x}",
        "span_id": f"{span.context.span_id:016x}",
        "parent": None if span.parent is None else f"{span.parent.span_id:016x}",
        "links": [f"{link.context.span_id:016x}" for link in span.links],
        "tag": attributes.get("amrita_sense.node.tag"),
        "outcome": attributes.get("amrita_sense.run.outcome"),
    }


async def main(phase: str, folder: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument(tracer_provider=provider, node_spans="all")
    if phase == "first":
        interp = WorkflowInterpreter(GRAPH)
        with provider.get_tracer("caller").start_as_current_span("caller"):
            await interp.run()  # halts at SUSPEND
        (folder / "run.snapshot").write_bytes(interp.snapshot())
    else:
        interp = WorkflowInterpreter.restore(GRAPH, (folder / "run.snapshot").read_bytes())
        await interp.run()
    spans = [_record(s) for s in exporter.get_finished_spans() if s.name != "caller"]
    (folder / f"{phase}.jsonl").write_text("".join(json.dumps(s) + "\n" for s in spans))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
