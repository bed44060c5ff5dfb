"""LlamaIndex Workflows' version of the peers' work (runs in its own environment, see
`peers/__init__.py`).

Written as LlamaIndex's users write it: a `Workflow` subclass whose `@step` async methods take an
event and return the next one (`StartEvent` in, `StopEvent(result=...)` out, typed `Event`
subclasses carrying the data in between); the chain's twenty steps, one event class each, are
registered on the workflow with `@step(workflow=...)`. The workflow is made once, each request
is one `await workflow.run(...)` (a new run and context each time). Nothing here imports
LlamaIndex at module level: `build` does, inside the worker that runs in its environment.
"""

from collections.abc import Callable
from typing import Any

TELEMETRY_OFF: dict = {}  # no telemetry; instrumentation goes only to the handlers a user adds


def telemetry() -> str:
    """How instrumentation stands once the library is loaded (raises if a handler is registered)."""
    from llama_index_instrumentation import root_dispatcher

    handlers = [type(h).__name__ for h in root_dispatcher.event_handlers + root_dispatcher.span_handlers]
    if any(not name.startswith("Null") for name in handlers):
        raise RuntimeError(f"instrumentation handlers registered: {handlers}")
    return f"instrumentation: only the root dispatcher's null handlers ({', '.join(handlers)}); no telemetry"


def build(work: str, S: Any) -> Callable[[int], Any]:
    """`serve(x)`: one request of `work` (a name in `S.PEER_WORKS`) on a workflow made here."""
    builders = {"peer_chain": _chain, "peer_agent": _agent, "peer_if_else": _branch}
    if work not in builders:
        raise S.Unavailable(f"{work} is not written for LlamaIndex Workflows (not written for it yet)")
    return builders[work](S)


def _chain(S: Any) -> Callable[[int], Any]:
    from workflows import Workflow, step
    from workflows.events import Event, StartEvent, StopEvent

    class ChainFlow(Workflow):
        pass

    def value_event(k: int) -> type:
        return type(f"Value{k}", (Event,), {"__annotations__": {"value": int}, "__module__": __name__})

    def make_step(k: int, accepts: type, returns: type) -> None:
        last = returns is StopEvent

        async def chain_step(ev: Any) -> Any:
            value = S.peer_mix(ev.value, k)
            return StopEvent(result=value) if last else returns(value=value)

        chain_step.__name__ = chain_step.__qualname__ = f"step_{k}"
        chain_step.__annotations__ = {"ev": accepts, "return": returns}
        step(workflow=ChainFlow)(chain_step)

    events = [StartEvent] + [value_event(k) for k in range(1, S.PEER_CHAIN_NODES)] + [StopEvent]
    for k in range(S.PEER_CHAIN_NODES):
        make_step(k, events[k], events[k + 1])
    workflow = ChainFlow()

    async def serve(x: int) -> int:
        return await workflow.run(value=x)

    return serve


def _agent(S: Any) -> Callable[[int], Any]:
    from workflows import Workflow, step
    from workflows.events import Event, StartEvent, StopEvent

    mix, iterations = S.peer_mix, S.PEER_AGENT_ITERATIONS

    class ToolCall(Event):
        step: int
        acc: int

    class ToolResult(Event):
        step: int
        acc: int

    class Answer(Event):
        step: int
        acc: int

    class AgentFlow(Workflow):
        @step
        async def model(self, ev: StartEvent | ToolResult) -> ToolCall | Answer:
            step, acc = (ev.step + 1, ev.acc) if isinstance(ev, ToolResult) else (1, ev.x)
            return ToolCall(step=step, acc=acc) if step < iterations else Answer(step=step, acc=acc)

        @step
        async def tool(self, ev: ToolCall) -> ToolResult:
            return ToolResult(step=ev.step, acc=mix(ev.acc, ev.step))

        @step
        async def finish(self, ev: Answer) -> StopEvent:
            return StopEvent(result=mix(ev.acc, ev.step))

    workflow = AgentFlow()

    async def serve(x: int) -> int:
        return await workflow.run(x=x)

    return serve


def _branch(S: Any) -> Callable[[int], Any]:
    from workflows import Workflow, step
    from workflows.events import Event, StartEvent, StopEvent

    class Even(Event):
        x: int

    class Odd(Event):
        x: int

    class BranchFlow(Workflow):
        @step
        async def check(self, ev: StartEvent) -> Even | Odd:
            return Even(x=ev.x) if ev.x % 2 == 0 else Odd(x=ev.x)

        @step
        async def half(self, ev: Even) -> StopEvent:
            return StopEvent(result=ev.x // 2)

        @step
        async def triple(self, ev: Odd) -> StopEvent:
            return StopEvent(result=3 * ev.x + 1)

    workflow = BranchFlow()

    async def serve(x: int) -> int:
        return await workflow.run(x=x)

    return serve
