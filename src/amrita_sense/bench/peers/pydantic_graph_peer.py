"""pydantic-graph's version of the peers' work (runs in its own environment, see `peers/__init__.py`).

Written as pydantic-graph's users write it: a `GraphBuilder` with `@g.step` async steps that take
a `StepContext` and return their output, edges from `g.edge_from(...).to(...)`, branching with
`g.decision()` and `g.match(...)`, the agent's accumulator in the graph's state; built once,
each request is one `await graph.run(...)`. Nothing here imports pydantic-graph at module
level: `build` does, inside the worker that runs in its environment.
"""

import dataclasses
import importlib.util
from collections.abc import Callable
from typing import Any

TELEMETRY_OFF: dict = {}  # instrumentation goes through logfire-api, a no-op unless logfire is installed


@dataclasses.dataclass
class AgentState:
    acc: int


@dataclasses.dataclass
class ToolCall:
    step: int


@dataclasses.dataclass
class Answer:
    step: int


def telemetry() -> str:
    """How instrumentation stands once the library is loaded (raises if logfire is there)."""
    import pydantic_graph  # noqa: F401 - loads logfire-api the way the library does

    if importlib.util.find_spec("logfire") is not None:
        raise RuntimeError("logfire is installed in this environment")
    return "logfire not installed and not configured: logfire-api's spans are no-ops"


def build(work: str, S: Any) -> Callable[[int], Any]:
    """`serve(x)`: one request of `work` (a name in `S.PEER_WORKS`) on a graph built here."""
    builders = {"peer_chain": _chain, "peer_agent": _agent, "peer_if_else": _branch}
    if work not in builders:
        raise S.Unavailable(f"{work} is not written for pydantic-graph (it has no per-node retry policy)")
    return builders[work](S)


def _chain(S: Any) -> Callable[[int], Any]:
    from pydantic_graph import GraphBuilder, StepContext

    g = GraphBuilder(name="chain", input_type=int, output_type=int)

    def make_step(k: int) -> Any:
        async def step(ctx: StepContext[None, None, int]) -> int:
            return S.peer_mix(ctx.inputs, k)

        return g.step(step, node_id=f"step_{k}")

    steps = [make_step(k) for k in range(S.PEER_CHAIN_NODES)]
    g.add(g.edge_from(g.start_node).to(steps[0]))
    for before, after in zip(steps, steps[1:]):
        g.add(g.edge_from(before).to(after))
    g.add(g.edge_from(steps[-1]).to(g.end_node))
    graph = g.build()

    async def serve(x: int) -> int:
        return await graph.run(inputs=x)

    return serve


def _agent(S: Any) -> Callable[[int], Any]:
    from pydantic_graph import GraphBuilder, StepContext

    mix, iterations = S.peer_mix, S.PEER_AGENT_ITERATIONS
    g = GraphBuilder(name="agent", state_type=AgentState, input_type=int, output_type=int)

    @g.step
    async def model(ctx: StepContext[AgentState, None, int]) -> ToolCall | Answer:
        step = ctx.inputs + 1
        return ToolCall(step) if step < iterations else Answer(step)

    @g.step
    async def tool(ctx: StepContext[AgentState, None, ToolCall]) -> int:
        ctx.state.acc = mix(ctx.state.acc, ctx.inputs.step)
        return ctx.inputs.step

    @g.step
    async def finish(ctx: StepContext[AgentState, None, Answer]) -> int:
        return mix(ctx.state.acc, ctx.inputs.step)

    g.add(
        g.edge_from(g.start_node).to(model),
        g.edge_from(model).to(g.decision().branch(g.match(ToolCall).to(tool)).branch(g.match(Answer).to(finish))),
        g.edge_from(tool).to(model),
        g.edge_from(finish).to(g.end_node),
    )
    graph = g.build()

    async def serve(x: int) -> int:
        return await graph.run(state=AgentState(acc=x), inputs=0)

    return serve


def _branch(S: Any) -> Callable[[int], Any]:
    from pydantic_graph import GraphBuilder, StepContext

    g = GraphBuilder(name="branch", input_type=int, output_type=int)

    @g.step
    async def half(ctx: StepContext[None, None, int]) -> int:
        return ctx.inputs // 2

    @g.step
    async def triple(ctx: StepContext[None, None, int]) -> int:
        return 3 * ctx.inputs + 1

    is_even = g.match(int, matches=lambda x: x % 2 == 0).to(half)
    g.add(
        g.edge_from(g.start_node).to(g.decision().branch(is_even).branch(g.match(int).to(triple))),
        g.edge_from(half, triple).to(g.end_node),
    )
    graph = g.build()

    async def serve(x: int) -> int:
        return await graph.run(inputs=x)

    return serve
