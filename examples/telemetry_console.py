"""Tracing workflow runs with OpenTelemetry: spans printed by the console exporter.

    pip install 'amrita-sense-turbo[otel]' opentelemetry-sdk
    python examples/telemetry_console.py

To send the spans to an OpenTelemetry collector instead, install
`opentelemetry-exporter-otlp` and replace the console exporter below with:

    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint="localhost:4317", insecure=True)))
"""

from __future__ import annotations

import asyncio

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from amrita_sense import Node, WorkflowInterpreter, telemetry


@Node("fetch")
async def fetch() -> str:
    await asyncio.sleep(0.01)  # an HTTP call, a model call: its client's spans nest under this node
    return "42"


@Node("parse")
def parse() -> int:
    return 42


def spans_as_lines(span) -> str:
    return f"{span.name} trace={span.context.trace_id:032x} outcome={span.attributes.get('amrita_sense.run.outcome', '-')}\n"


async def main() -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-demo"}))
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(formatter=spans_as_lines)))
    trace.set_tracer_provider(provider)
    telemetry.instrument(node_spans="async")  # a span per run, and one per coroutine node
    with trace.get_tracer("demo").start_as_current_span("request"):
        await WorkflowInterpreter((fetch >> parse).render()).run()
    telemetry.uninstrument()


if __name__ == "__main__":
    asyncio.run(main())
