"""The drop-in under AmritaCore: a chat turn shaped as AmritaCore runs one, on this runtime.

    pip install amrita-sense-turbo          # beside amrita-core (which pulls in amrita-sense 1.1.3)
    python examples/amritacore_dropin.py

AmritaCore renders its workflow once and builds a new `WorkflowInterpreter` for every chat turn,
with about ten context objects in its pools (config, session, memory, the user's message, ...),
default `@Node()` sync nodes (they run on worker threads), a `NATIVE_IF` on the tool decision and
a `SuspendObjectStream` the caller reads the answer from. This script runs such a turn with
stand-in objects (no model, no network), then, when amrita-core is installed, imports it and
shows that its `amrita_sense` is this runtime: nothing in AmritaCore changes.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import sys
from dataclasses import dataclass, field

import amrita_sense
from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.instructions import NATIVE_IF
from amrita_sense.streaming import SuspendObjectStream


# ----- the context objects of one turn: injected into the nodes by their types -----------------------
@dataclass
class Config:
    model: str = "scripted-model"
    max_tokens: int = 256


@dataclass
class Session:
    session_id: str
    turn: int = 0


@dataclass
class Memory:
    messages: list[str] = field(default_factory=list)


@dataclass
class UserMessage:
    text: str


@dataclass
class Preset:
    system_prompt: str = "You are a helpful assistant."


@dataclass
class ToolRegistry:
    tools: dict[str, str] = field(default_factory=lambda: {"weather": "sunny"})


@dataclass
class ToolCalls:
    calls: list[str] = field(default_factory=list)


@dataclass
class Limits:
    max_history: int = 8


@dataclass
class Locale:
    language: str = "en"


@dataclass
class Usage:
    nodes: list[str] = field(default_factory=list)


# ----- the nodes: default @Node() sync functions, as AmritaCore writes them -----------------------------
@Node()
def load_history(memory: Memory, limits: Limits, usage: Usage) -> None:
    del memory.messages[: -limits.max_history]
    usage.nodes.append("load_history")


@Node()
def build_prompt(preset: Preset, memory: Memory, message: UserMessage, locale: Locale, usage: Usage) -> None:
    memory.messages.append(f"[{locale.language}] user: {message.text}")
    usage.nodes.append("build_prompt")


@Node()
def wants_tool(message: UserMessage, tools: ToolRegistry, calls: ToolCalls) -> bool:
    calls.calls = [name for name in tools.tools if name in message.text]
    return bool(calls.calls)


@Node()
def call_tools(tools: ToolRegistry, calls: ToolCalls, memory: Memory, usage: Usage) -> None:
    for name in calls.calls:
        memory.messages.append(f"tool {name}: {tools.tools[name]}")
    usage.nodes.append("call_tools")


@Node()
async def completion(config: Config, memory: Memory, calls: ToolCalls, pc: WorkflowInterpreter, usage: Usage) -> None:
    answer = f"({config.model}) " + ("It is sunny." if calls.calls else "Hello!")
    for chunk in answer.split(" "):  # a streaming model: chunks go to the caller as they come
        await pc.object_io.yield_response(chunk + " ")
    memory.messages.append(f"assistant: {answer}")
    usage.nodes.append("completion")


@Node()
async def finish(session: Session, pc: WorkflowInterpreter) -> None:
    session.turn += 1
    await pc.object_io.set_queue_done()


# Rendered once per process; every turn runs a new interpreter over it.
TURN = NodeCompose(load_history, build_prompt, NATIVE_IF(wants_tool, call_tools), completion, finish).render()


async def chat_turn(session: Session, memory: Memory, text: str) -> tuple[str, Usage]:
    """One turn: ten context objects in the pools, a fresh interpreter, the answer read from the stream."""
    usage = Usage()
    contexts = (
        Config(),
        session,
        memory,
        UserMessage(text),
        Preset(),
        ToolRegistry(),
        ToolCalls(),
        Limits(),
        Locale(),
        usage,
    )
    stream = SuspendObjectStream[str]()
    interp: WorkflowInterpreter[str] = WorkflowInterpreter(TURN, object_io=stream, extra_args=contexts)
    run = asyncio.ensure_future(interp.run())
    answer = "".join([chunk async for chunk in stream.get_response_generator()])
    await run
    return answer.strip(), usage


def show_amrita_core() -> None:
    if importlib.util.find_spec("amrita_core") is None:
        print("amrita-core is not installed (pip install amrita-core): skipped the import check")
        return
    amrita_core = importlib.import_module("amrita_core")  # imports amrita_sense: the hook resolves it to this runtime

    stream_class = amrita_core.SuspendObjectStream  # AmritaCore's own re-export of amrita_sense.streaming
    runtime = sys.modules["amrita_sense"]
    print(f"amrita_core imports amrita_sense from {runtime.__file__}")
    print(f"amrita_core's SuspendObjectStream is this runtime's: {stream_class is SuspendObjectStream}")
    print(f"amrita_core runs on: {getattr(runtime, 'IMPLEMENTATION', 'amrita-sense 1.1.3 (no IMPLEMENTATION)')}")


async def main() -> None:
    session, memory = Session("chat-42"), Memory()
    for text in ("hi there", "what is the weather in Paris?"):
        answer, usage = await chat_turn(session, memory, text)
        print(f"turn {session.turn}: {text!r} -> {answer!r} via {' > '.join(usage.nodes)}")
    print(f"memory holds {len(memory.messages)} messages")
    print("core:", amrita_sense.IMPLEMENTATION)
    show_amrita_core()


if __name__ == "__main__":
    asyncio.run(main())
