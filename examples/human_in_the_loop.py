"""Human in the loop: read an agent's responses and feed it peer messages between its steps.

    PYTHONPATH=src python examples/human_in_the_loop.py

The agent is a workflow (the producer) running a step loop. Each step starts
with `intro_step`, which drains the messages a peer sent since the last
boundary into the conversation as `[peer message]` entries; `act` then
answers and streams one response to the consumer.

The consumer (the "human") reads the responses from the stream's response
generator and answers through `send_to_producer`. So that every reply lands
at the very next step boundary, it asks the stream to park the agent at
`intro_step` (`wait_to_suspend`), reads, replies, then `resume()`s it.
A message sent before the run starts is consumed at the first boundary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from amrita_sense import Node, WorkflowInterpreter
from amrita_sense.instructions import NATIVE_WHILE
from amrita_sense.streaming import SuspendObjectStream

STEP_BOUNDARY = "NodeSuspend::intro_step"


def build_agent(stream: SuspendObjectStream[str], questions: list[str]) -> tuple[WorkflowInterpreter, list[str]]:
    """An agent answering `questions`, one per step; returns it and its conversation log."""
    conversation: list[str] = []
    pending = list(questions)

    @Node(wrap_to_async=False)
    def more_questions() -> bool:
        return bool(pending)

    @Node()
    async def intro_step() -> None:
        for message in stream.drain_producer_input():
            conversation.append(f"[peer message] {message}")

    @Node()
    async def act() -> None:
        question = pending.pop(0)
        conversation.append(f"[question] {question}")
        notes = [entry.removeprefix("[peer message] ") for entry in conversation if entry.startswith("[peer")]
        answer = f"answer to {question!r}" + (f", following: {'; '.join(notes)}" if notes else "")
        conversation.append(f"[answer] {answer}")
        await stream.yield_response(answer)

    @Node()
    async def sign_off() -> None:
        await stream.set_queue_done()

    graph = NATIVE_WHILE(more_questions).ACTION(intro_step >> act).extract() >> sign_off
    return WorkflowInterpreter(graph.render(), object_io=stream), conversation


async def _parked_or_done(waiter: asyncio.Future, run: asyncio.Future) -> bool:
    await asyncio.wait({waiter, run}, return_when=asyncio.FIRST_COMPLETED)
    if waiter.done():
        waiter.result()
        return True
    waiter.cancel()
    run.result()
    return False


async def _park_at_next_boundary(stream: SuspendObjectStream[str]) -> asyncio.Future:
    waiter = asyncio.ensure_future(stream.wait_to_suspend(STEP_BOUNDARY))
    await asyncio.sleep(0)  # registered before the agent can move on
    return waiter


async def session(
    questions: list[str],
    reply: Callable[[str], str | None],
    opening: str | None = None,
    out: Callable[[str], Any] = print,
) -> list[str]:
    """Run the agent with a human who answers each response with `reply(response)`.

    Returns the agent's conversation log.
    """
    stream = SuspendObjectStream[str]()
    agent, conversation = build_agent(stream, questions)
    responses = stream.get_response_generator()
    if opening is not None:
        await stream.send_to_producer(opening)  # before the first step: read at the first boundary
        out(f"human: {opening}")
    waiter = await _park_at_next_boundary(stream)
    run = asyncio.ensure_future(agent.run())
    boundaries = 0
    while await _parked_or_done(waiter, run):
        # The agent waits before `intro_step`; what it said in the step before is already queued.
        if boundaries:
            await _answer(await anext(responses), stream, reply, out)
        boundaries += 1
        waiter = await _park_at_next_boundary(stream)
        stream.resume()
    async for response in responses:  # the last step's answer: no boundary is left to read a reply
        out(f"agent: {response}")
    return conversation


async def _answer(
    response: str,
    stream: SuspendObjectStream[str],
    reply: Callable[[str], str | None],
    out: Callable[[str], Any],
) -> None:
    out(f"agent: {response}")
    message = reply(response)
    if message is not None:
        out(f"human: {message}")
        await stream.send_to_producer(message)


def scripted_human(response: str) -> str | None:
    """A stand-in for a person: asks for sources once, then for brevity."""
    if "sources" not in response:
        return "please cite sources"
    if "brief" not in response:
        return "be brief"
    return None


async def main(out: Callable[[str], Any] = print) -> list[str]:
    questions = ["what is a suspend point?", "what does resume do?", "who drains peer messages?"]
    conversation = await session(questions, scripted_human, opening="hello, I am reviewing", out=out)
    out("-- conversation as the agent saw it --")
    for entry in conversation:
        out(entry)
    return conversation


if __name__ == "__main__":
    asyncio.run(main())
