"""Real AmritaCore chat turns over a scripted model adapter (no network).

Run as a script: `python tests/support/amrita_core_turns.py LOOP` (LOOP: asyncio or
uvloop) runs every scenario in a fresh process on whatever `amrita_sense` the
interpreter imports, and prints one JSON object: what the runtime is and, per
scenario, what the model was sent, what the consumer received and what was
logged. `tests/test_amrita_core_e2e.py` runs it on this runtime and on 1.1.3 and
holds both to the same expectations.

The adapter registers under its own protocol; each scenario gives it a script:
the tool calls its `call_tools` answers, in turn (None: no tool call), and the
answer chunks its `call_api` streams.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from amrita_core import AmritaConfig, ChatObject, ModelPreset, set_config, simple_tool
from amrita_core.base.adapter import ModelAdapter
from amrita_core.chatmanager import _step_workflow_rendered
from amrita_core.types import ToolCall, UniResponse

import amrita_sense
from amrita_sense.logging import logger
from amrita_sense.streaming import SuspendObjectStream

PROTOCOL = "sense-e2e-scripted"
ANSWER = ["Hello", " world"]


class Script:
    """What the scripted model does in the current scenario, and what it was sent; `failures`:
    how many of the next answers stream one chunk and then fail with ConnectionError."""

    tool_rounds: list[list[dict] | None] = []
    requests: list[dict[str, Any]] = []
    failures = 0
    tracer: Any = None

    @classmethod
    def start(cls, tool_rounds: list[list[dict] | None], failures: int = 0) -> None:
        cls.tool_rounds = list(tool_rounds)
        cls.requests = []
        cls.failures = failures


def _message(message: Any) -> dict[str, str]:
    if isinstance(message, dict):
        return {"role": str(message.get("role")), "content": str(message.get("content"))}
    return {"role": str(getattr(message, "role", "")), "content": str(getattr(message, "content", ""))}


class ScriptedAdapter(ModelAdapter):
    """A model adapter that answers from `Script` and records every request."""

    @staticmethod
    def get_adapter_protocol() -> str:
        return PROTOCOL

    async def call_api(self, messages: Any, **kwargs: Any) -> Any:
        Script.requests.append({"kind": "call_api", "messages": [_message(m) for m in messages]})
        if Script.tracer is not None:  # what an HTTP client's instrumentation would open here
            with Script.tracer.start_as_current_span("http.client POST /chat/completions"):
                pass
        if Script.failures:
            Script.failures -= 1
            yield ANSWER[0][:3]
            raise ConnectionError("the model dropped the connection mid-answer")
        for chunk in ANSWER:
            yield chunk
        yield UniResponse(role="assistant", content="".join(ANSWER), usage=None, tool_calls=None)

    async def call_tools(self, messages: Any, tools: Any, tool_choice: Any = None, **kwargs: Any) -> Any:
        Script.requests.append({"kind": "call_tools", "messages": [_message(m) for m in messages]})
        calls = Script.tool_rounds.pop(0) if Script.tool_rounds else None
        tool_calls = [ToolCall.model_validate(call) for call in calls] if calls else None
        return UniResponse(role="assistant", content=None, usage=None, tool_calls=tool_calls)


@simple_tool
def sense_e2e_lookup(city: str) -> str:
    """Look up the weather of a city.

    Args:
        city (str): The city.
    """
    return f"sunny in {city}"


@simple_tool
def sense_e2e_explode(reason: str) -> str:
    """A tool that always fails.

    Args:
        reason (str): Why.
    """
    raise RuntimeError(f"tool exploded: {reason}")


def _call(name: str, arguments: str, call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _chat(**kwargs: Any) -> ChatObject:
    return ChatObject(
        train={"role": "system", "content": "Answer briefly."},
        user_input="What is the weather?",
        session_id="sense-e2e",
        preset=ModelPreset(model="scripted", protocol=PROTOCOL),
        **kwargs,
    )


async def _finish(chat: ChatObject, consume: Any) -> dict[str, Any]:
    errors: list[str] = []
    sink = logger.add(lambda message: errors.append(str(message.record["message"])), level="ERROR", format="{message}")
    try:
        chat.begin()
        received = await asyncio.wait_for(consume(chat), 60)
        await asyncio.wait_for(chat, 60)
    finally:
        logger.remove(sink)
    return {
        "received": received,
        "exception": repr(chat.get_exception()) if chat.get_exception() else None,
        "requests": Script.requests,
        "errors_logged": errors,
    }


async def _full_response(chat: ChatObject) -> Any:
    return await chat.full_response()


async def _stream(chat: ChatObject) -> Any:
    return [item for item in [x async for x in chat.io_stream.get_response_generator()] if isinstance(item, str)]


async def plain_answer() -> dict[str, Any]:
    Script.start([None])
    return await _finish(_chat(), _full_response)


async def tool_call() -> dict[str, Any]:
    Script.start([[_call("sense_e2e_lookup", '{"city": "Oslo"}', "call_lookup")], None])
    return await _finish(_chat(), _full_response)


async def failing_tool() -> dict[str, Any]:
    Script.start([[_call("sense_e2e_explode", '{"reason": "on purpose"}', "call_explode")], None])
    return await _finish(_chat(), _full_response)


async def streamed_answer() -> dict[str, Any]:
    Script.start([None])
    return await _finish(_chat(), _stream)


async def step_loop_with_a_peer_message() -> dict[str, Any]:
    Script.start([None])
    stream: SuspendObjectStream = SuspendObjectStream()
    await stream.send_to_producer("peer note")
    return await _finish(_chat(io_stream=stream, workflow=_step_workflow_rendered), _full_response)


async def retried_completion() -> dict[str, Any]:
    """The completion node declared with a retry policy and void markers (this runtime only): the
    model fails twice after streaming a chunk, then answers; what the consumer read, cleaned by
    `drop_voided`, is one answer."""
    from amrita_core.chatmanager.chat_object import _workflow
    from amrita_core.components import LLM_COMPLETION

    from amrita_sense.node.wrapper import Node
    from amrita_sense.policies import Retry, drop_voided

    retried = Node(LLM_COMPLETION.tag, retry=Retry(attempts=3, delay=0.001, jitter=0), mark_void=True)(
        LLM_COMPLETION.func
    )
    workflow = amrita_sense.NodeCompose(*[retried if node is LLM_COMPLETION else node for node in _workflow])
    Script.start([None], failures=2)
    raw: list[Any] = []

    async def consume(chat: ChatObject) -> Any:
        raw.extend([x async for x in chat.io_stream.get_response_generator()])
        return [item for item in drop_voided(raw) if isinstance(item, str)]

    outcome = await _finish(_chat(workflow=workflow.render()), consume)
    outcome["raw"] = [item if isinstance(item, str) else type(item).__name__ for item in raw]
    return outcome


async def traced_turn() -> dict[str, Any]:
    """A turn with telemetry on (this runtime only): the spans' names, traces and parents."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from amrita_sense import telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument(tracer_provider=provider, node_spans="all")
    Script.tracer = provider.get_tracer("scripted-http")
    try:
        Script.start([None])
        outcome = await _finish(_chat(), _full_response)
    finally:
        Script.tracer = None
        telemetry.uninstrument()
    spans = exporter.get_finished_spans()
    by_id = {span.context.span_id: span for span in spans}
    http = [span for span in spans if span.name.startswith("http.client")]
    outcome["traces"] = len({span.context.trace_id for span in spans})
    outcome["runs"] = sum(span.name == telemetry.RUN_SPAN for span in spans)
    outcome["http_parents"] = [by_id[span.parent.span_id].name for span in http if span.parent is not None]
    return outcome


SCENARIOS = [plain_answer, tool_call, failing_tool, streamed_answer, step_loop_with_a_peer_message]
if hasattr(amrita_sense, "IMPLEMENTATION"):
    SCENARIOS += [retried_completion, traced_turn]


async def run_all() -> dict[str, Any]:
    set_config(AmritaConfig())
    return {scenario.__name__: await scenario() for scenario in SCENARIOS}


def main(loop_name: str) -> None:
    if loop_name == "uvloop":
        import uvloop

        outcomes = uvloop.run(run_all())
    else:
        outcomes = asyncio.run(run_all())
    runtime = {
        "turbo": hasattr(amrita_sense, "IMPLEMENTATION"),
        "implementation": getattr(amrita_sense, "IMPLEMENTATION", None),
        "file": amrita_sense.__file__,
    }
    print("SENSE-E2E " + json.dumps({"runtime": runtime, "outcomes": outcomes}, default=str))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "asyncio")
