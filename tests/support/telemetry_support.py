"""Telemetry of scale-out runs: a span exporter writing JSON lines, worker set-ups, a five-node walk.

Imported by the Ray workers too (the session's Ray instance puts this directory on their
PYTHONPATH). `instrument_worker` is the pools' `worker_init`: it instruments the worker's process
with an OpenTelemetry SDK provider whose exporter appends every finished span, at once
(`SimpleSpanProcessor`), as one JSON line to a file of the test's directory. A killed worker
loses only the spans it had not ended.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from amrita_sense import Node

TAGS = ("t:1", "t:2", "t:3", "t:4", "t:5")
HOLD = "t:3"
"""The node a held walk stops in (on its first attempt) until its worker is killed."""


class JsonLinesExporter:
    """A span exporter (the SDK's `SpanExporter` protocol): one JSON line per span, appended with one
    write (a killed process never leaves half a line). Holds only its path: it pickles."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        lines = "".join(json.dumps(_record(span)) + "\n" for span in spans)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, lines.encode())
        finally:
            os.close(fd)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _hex(value: int, width: int) -> str:
    return format(value, f"0{width}x")


def _record(span: Any) -> dict:
    context, parent = span.get_span_context(), span.parent
    return {
        "name": span.name,
        "trace_id": _hex(context.trace_id, 32),
        "span_id": _hex(context.span_id, 16),
        "parent": None if parent is None else _hex(parent.span_id, 16),
        "parent_trace_id": None if parent is None else _hex(parent.trace_id, 32),
        "attributes": {key: _plain(value) for key, value in (span.attributes or {}).items()},
        "links": [
            {
                "trace_id": _hex(link.context.trace_id, 32),
                "span_id": _hex(link.context.span_id, 16),
                "attributes": {key: _plain(value) for key, value in (link.attributes or {}).items()},
            }
            for link in span.links
        ],
        "pid": os.getpid(),
    }


def _plain(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool)) else str(value)


def provider(path: str) -> Any:
    """An SDK tracer provider exporting every span, as it ends, to `path`."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    made = TracerProvider()
    made.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    return made


def instrument_worker(directory: str) -> None:
    """A pool's `worker_init` (with `functools.partial`): this worker's runs, and each of their nodes,
    get spans exported to `<directory>/worker-<pid>.jsonl`."""
    from amrita_sense import telemetry

    telemetry.instrument(
        tracer_provider=provider(os.path.join(directory, f"worker-{os.getpid()}.jsonl")), node_spans="all"
    )


def failing_init() -> None:
    """A `worker_init` that cannot set the worker up."""
    raise ValueError("no exporter on this worker")


def read_jsonl(path: str | Path) -> list[dict]:
    """The spans of one exporter's file, in the order they ended."""
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def read_spans(directory: str | Path) -> list[dict]:
    """Every span exported by the workers to `directory`, file by file."""
    spans: list[dict] = []
    for path in sorted(Path(directory).glob("worker-*.jsonl")):
        spans += read_jsonl(path)
    return spans


# ----- the workflow --------------------------------------------------------------------------------------


class Walk:
    """One run's state: the nodes it went through, each also appended as a line to `sink`."""

    def __init__(self, sink: str, hold: bool = False) -> None:
        self.sink = sink
        self.hold = hold
        self.visited: list[str] = []

    def record(self, tag: str) -> None:
        self.visited.append(tag)
        fd = os.open(self.sink, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{tag}\n".encode())
        finally:
            os.close(fd)

    @property
    def held(self) -> str:
        """The file a held walk creates when it stops in `HOLD` (the test kills the worker then)."""
        return self.sink + ".held"


def walk_setup(spec: dict) -> Any:
    from amrita_sense.distributed import RunSetup

    walk = Walk(**spec)
    return RunSetup(args=(walk,), result=lambda walk: list(walk.visited))


async def _visit(walk: Walk, tag: str) -> None:
    walk.record(tag)
    if tag == HOLD and walk.hold and not os.path.exists(walk.held):
        fd = os.open(walk.held, os.O_WRONLY | os.O_CREAT, 0o644)
        os.close(fd)
        await asyncio.sleep(3600)  # until the test kills this worker; the walk resumed elsewhere goes on


@Node(tag="t:1")
async def t1(walk: Walk) -> None:
    await _visit(walk, "t:1")


@Node(tag="t:2")
async def t2(walk: Walk) -> None:
    await _visit(walk, "t:2")


@Node(tag="t:3")
async def t3(walk: Walk) -> None:
    await _visit(walk, "t:3")


@Node(tag="t:4")
async def t4(walk: Walk) -> None:
    await _visit(walk, "t:4")


@Node(tag="t:5")
async def t5(walk: Walk) -> None:
    await _visit(walk, "t:5")


walk = (t1 >> t2 >> t3 >> t4 >> t5).render()
"""Five nodes, tagged `t:1` ... `t:5`; a held walk stops in `t:3` the first time it gets there."""
