"""The main comparison's engine scenarios: linear chains and nesting, the control-flow
instructions, building graphs, suspend/resume and external interrupts, events and dependency
injection, many interpreters at once.

No `from __future__ import annotations`: node bodies are analysed for dependency injection,
and their annotations must be real objects.
"""

import asyncio
import dataclasses
import gc
import threading
import tracemalloc
from typing import Any, Tuple

from .bodies import (
    ALPHA,
    BETA,
    NODES_PER_INTERPRETER,
    api,
    chain_plan,
    counting_body,
    depends_factories,
    if_bodies,
    if_expected,
    jmp_bodies,
    named_body,
    run_plan,
    sync_node,
    try_bodies,
    typed_body,
    while_bodies,
    yielding_body,
)
from .framework import CountMismatch, Holder, Plan, Tally, Target, expect, need, scenario, unique_ids

# Scenarios that run the interpreter's step loop: the compiled core must beat the pure build here.
_PURE = Target("vs_pure", ">=", 5)


# ---------------------------------------------------------------------------
# Linear chains and nesting


@scenario(
    "sync_chain",
    "linear chain of sync nodes (wrap_to_async=False)",
    unit="node",
    size=10_000,
    quick=500,
    floor="floor_call",
    targets=(Target("x_floor", "<=", 3), Target("vs_ref", ">=", 50), _PURE),
)
def sync_chain(n: int) -> Plan:
    Node, _, _ = api()
    tally = Tally()
    body = counting_body(tally)
    return chain_plan([sync_node(Node, body) for _ in range(n)], tally, n)


@scenario(
    "async_chain",
    "linear chain of async def nodes",
    unit="node",
    size=10_000,
    quick=500,
    floor="floor_await",
    targets=(Target("x_floor", "<=", 2), Target("vs_ref", ">=", 30), _PURE),
)
def async_chain(n: int) -> Plan:
    Node, _, _ = api()
    tally = Tally()

    async def body() -> None:
        tally.n += 1

    return chain_plan([Node()(body) for _ in range(n)], tally, n)


@scenario(
    "thread_chain",
    "linear chain of default @Node() sync nodes (worker thread)",
    unit="node",
    size=2_000,
    quick=100,
    floor="floor_to_thread",
    targets=(Target("vs_ref", ">=", 3), _PURE),
)
def thread_chain(n: int) -> Plan:
    Node, _, _ = api()
    tally = Tally()
    loop_thread = threading.get_ident()

    def body() -> None:
        tally.n += 1
        if threading.get_ident() != loop_thread:
            tally.aux += 1

    plan = chain_plan([Node()(body) for _ in range(n)], tally, n)

    def check() -> None:
        expect("node bodies run", tally.n, n)
        expect("bodies run off the event-loop thread", tally.aux, n)

    plan.check = check
    return plan


@scenario(
    "nested",
    "compose nested 50 deep",
    unit="node",
    size=10_000,
    quick=500,
    floor="floor_call",
    targets=(Target("vs_ref", ">=", 100), _PURE),
)
def nested(n: int, depth: int = 50) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = api()
    if n % depth:
        raise ValueError(f"size {n} is not a multiple of the depth {depth}")
    tally = Tally()
    body = counting_body(tally)
    inner: Any = None
    for _ in range(depth):
        level = [sync_node(Node, body) for _ in range(n // depth)]
        inner = NodeCompose(*level) if inner is None else NodeCompose(*level, inner)
    graph = inner.render()
    return run_plan(lambda: WorkflowInterpreter(graph), n, lambda: expect("node bodies run", tally.n, n), tally.reset)


# ---------------------------------------------------------------------------
# Control-flow instructions

_CONTROL = (Target("vs_ref", ">=", 100), _PURE)


@scenario(
    "while_loop",
    "WHILE (condition + 1-node body)",
    unit="iteration",
    size=100_000,
    quick=2_000,
    floor="floor_while",
    targets=_CONTROL,
    family="loop",
)
def while_loop(n: int) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = api()
    WHILE = need("amrita_sense", "WHILE")
    tally = Tally()
    cond, body = while_bodies(tally, n)
    graph = NodeCompose(WHILE(sync_node(Node, cond)).ACTION(sync_node(Node, body))).render()

    def check() -> None:
        expect("loop bodies run", tally.n, n)
        expect("conditions evaluated", tally.aux, n + 1)

    return run_plan(lambda: WorkflowInterpreter(graph), n, check, tally.reset)


@scenario(
    "if_elif_else", "sequential IF/ELIF/ELSE", unit="IF", size=10_000, quick=500, floor="floor_if", targets=_CONTROL
)
def if_elif_else(n: int) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = api()
    IF = need("amrita_sense", "IF")
    tally = Tally()
    hits = [0, 0, 0]
    bodies = if_bodies(tally, hits)
    clauses = []
    for _ in range(n):
        first, second, on_first, on_second, on_else = (sync_node(Node, f) for f in bodies)
        clauses.append(IF(first, on_first).ELIF(second, on_second).ELSE(on_else))
    graph = NodeCompose(*clauses).render()
    want = if_expected(n)

    def reset() -> None:
        tally.reset()
        hits[:] = [0, 0, 0]

    def check() -> None:
        expect("IF clauses evaluated", tally.aux, n)
        for branch, got, wanted in zip(("IF", "ELIF", "ELSE"), hits, want):
            expect(f"{branch} branches taken", got, wanted)

    return run_plan(lambda: WorkflowInterpreter(graph), n, check, reset)


@scenario(
    "jmp_loop",
    "loop by jumping back (ALIAS + IF + JMP)",
    unit="iteration",
    size=10_000,
    quick=500,
    floor="floor_jmp",
    targets=_CONTROL,
    family="loop",
)
def jmp_loop(n: int) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = api()
    ALIAS, IF, JMP = need("amrita_sense", "ALIAS", "IF", "JMP")
    tally = Tally()
    head, step, again = jmp_bodies(tally, n)
    alias = f"bench_top_{next(unique_ids)}"
    graph = NodeCompose(
        ALIAS(sync_node(Node, head), alias),
        sync_node(Node, step),
        IF(sync_node(Node, again), JMP(alias)),
    ).render()

    def check() -> None:
        expect("loop heads reached", tally.aux, n)
        expect("loop bodies run", tally.n, n)

    return run_plan(lambda: WorkflowInterpreter(graph), n, check, tally.reset)


@scenario(
    "call_ret",
    "CALL to a 1-node subroutine and RET",
    unit="call",
    size=10_000,
    quick=500,
    floor="floor_call",
    targets=_CONTROL,
)
def call_ret(n: int) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = api()
    ALIAS, ARCHIVED_NODES, CALL = need("amrita_sense", "ALIAS", "ARCHIVED_NODES", "CALL")
    RET = need("amrita_sense.instructions", "RET")
    tally = Tally()
    alias = f"bench_sub_{next(unique_ids)}"
    sub = sync_node(Node, counting_body(tally))
    graph = NodeCompose(*[CALL(alias) for _ in range(n)], ARCHIVED_NODES(ALIAS(sub, alias), RET())).render()
    return run_plan(
        lambda: WorkflowInterpreter(graph), n, lambda: expect("subroutine bodies run", tally.n, n), tally.reset
    )


@scenario(
    "try_catch",
    "Try(raiser).CATCH(ValueError, handler)",
    unit="exception",
    size=10_000,
    quick=500,
    floor="floor_try",
    targets=(Target("x_floor", "<=", 2), _PURE),
    family="try",
)
def try_catch(n: int) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = api()
    Try = need("amrita_sense", "Try")
    tally = Tally()
    raiser, handler = try_bodies(tally)
    clauses = [Try(sync_node(Node, raiser)).CATCH(ValueError, sync_node(Node, handler)) for _ in range(n)]
    graph = NodeCompose(*clauses).render()

    def check() -> None:
        expect("exceptions raised", tally.aux, n)
        expect("exceptions handled", tally.n, n)

    return run_plan(lambda: WorkflowInterpreter(graph), n, check, tally.reset)


# ---------------------------------------------------------------------------
# Building graphs


@scenario("render", "render(), per node", unit="node", size=10_000, quick=1_000, targets=(Target("vs_ref", ">=", 10),))
def render(n: int) -> Plan:
    Node, NodeCompose, _ = api()
    nodes = [sync_node(Node, counting_body(Tally())) for _ in range(n)]
    holder = Holder()

    def prepare() -> None:
        holder.graph = None

    def timed() -> None:
        holder.graph = NodeCompose(*nodes).render()

    def check() -> None:
        expect("rendered slots", len(holder.graph), n)

    return Plan(n, timed, prepare, check)


@scenario(
    "decorate",
    "@Node() decoration, per node",
    unit="node",
    size=10_000,
    quick=1_000,
    targets=(Target("value", "<=", 2e-6),),
)
def decorate(n: int) -> Plan:
    Node, NodeType = need("amrita_sense", "Node", "NodeType")
    holder = Holder()

    def body() -> None:
        pass

    def prepare() -> None:
        holder.nodes = None

    def timed() -> None:
        holder.nodes = [Node()(body) for _ in range(n)]

    def check() -> None:
        expect("nodes made", sum(isinstance(node, NodeType) for node in holder.nodes), n)

    return Plan(n, timed, prepare, check)


@scenario(
    "memory",
    "retained memory: nodes + rendered graph + interpreter",
    unit="node",
    size=10_000,
    quick=1_000,
    measure="memory",
    targets=(Target("value", "<=", 300),),
)
def memory(n: int) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = api()
    body = counting_body(Tally())
    holder = Holder()

    def timed() -> None:
        gc.collect()
        owner = not tracemalloc.is_tracing()
        if owner:
            tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            graph = NodeCompose(*[sync_node(Node, body) for _ in range(n)]).render()
            interp = WorkflowInterpreter(graph)
            gc.collect()
            holder.nbytes = tracemalloc.get_traced_memory()[0] - before
            holder.graph, holder.interp = graph, interp
        finally:
            if owner:
                tracemalloc.stop()

    def check() -> None:
        expect("rendered slots", len(holder.graph), n)
        holder.graph = holder.interp = None

    return Plan(n, timed, None, check, result=lambda _elapsed: holder.nbytes / n)


# ---------------------------------------------------------------------------
# Suspend / resume and external interrupts

_PINGPONG = (Target("x_floor", "<=", 2), _PURE)


def _stream_api() -> Tuple[Any, str]:
    stream_cls = need("amrita_sense.streaming", "SuspendObjectStream")
    checkpoint = need("amrita_sense.runtime.workflow", "PC_CHECKPOINT")
    return stream_cls, checkpoint


async def _park(holder: Holder, graph: Any, stream_cls: Any, checkpoint: str, interp_cls: Any) -> None:
    """Start a run and wait until it is parked at the checkpoint before its first node."""
    holder.stream = stream_cls()
    holder.interp = interp_cls(graph, holder.stream)
    holder.task = asyncio.get_running_loop().create_task(holder.interp.run())
    await holder.stream.wait_to_suspend(checkpoint)


@scenario(
    "suspend_resume",
    "suspend at PC_CHECKPOINT + resume, round trip",
    unit="round trip",
    size=1_000,
    quick=100,
    floor="floor_pingpong_future",  # the stream parks and wakes through bare futures, as this floor does
    targets=_PINGPONG,
)
def suspend_resume(n: int) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = api()
    stream_cls, checkpoint = _stream_api()
    tally = Tally()
    spare = 3
    graph = NodeCompose(*[sync_node(Node, counting_body(tally)) for _ in range(n + spare)]).render()
    holder = Holder()

    async def prepare() -> None:
        tally.reset()
        await _park(holder, graph, stream_cls, checkpoint, WorkflowInterpreter)

    async def timed() -> None:
        stream = holder.stream
        for _ in range(n):
            stream.resume()
            await stream.wait_to_suspend(checkpoint)

    async def check() -> None:
        ran = tally.n
        holder.stream.resume()
        await holder.task
        expect("nodes run, one per round trip", ran, n)
        expect("nodes run in total", tally.n, n + spare)

    return Plan(n, timed, prepare, check)


@scenario(
    "interrupt_inject",
    "external call_sub(interrupt=True) at a suspend window",
    unit="call",
    size=1_000,
    quick=100,
    floor="floor_pingpong",
    targets=_PINGPONG,
)
def interrupt_inject(n: int) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = api()
    ALIAS, ARCHIVED_NODES = need("amrita_sense", "ALIAS", "ARCHIVED_NODES")
    stream_cls, checkpoint = _stream_api()
    main, isr = Tally(), Tally()
    alias = f"bench_isr_{next(unique_ids)}"
    graph = NodeCompose(
        *[sync_node(Node, counting_body(main)) for _ in range(3)],
        ARCHIVED_NODES(ALIAS(sync_node(Node, counting_body(isr)), alias)),
    ).render()
    target = list(graph.calc.resolve_alias(alias))
    holder = Holder()

    async def prepare() -> None:
        main.reset()
        isr.reset()
        await _park(holder, graph, stream_cls, checkpoint, WorkflowInterpreter)

    async def timed() -> None:
        interp = holder.interp
        for _ in range(n):
            await interp.call_sub(list(target), interrupt=True)

    async def check() -> None:
        injected, ran_before = isr.n, main.n
        holder.stream.resume()
        await holder.task
        expect("injected calls run", injected, n)
        expect("main nodes run while parked", ran_before, 0)
        expect("main nodes run in total", main.n, 3)

    return Plan(n, timed, prepare, check)


# ---------------------------------------------------------------------------
# Events and dependency injection

_DI = (Target("vs_ref", ">=", 20), _PURE)


@scenario(
    "event_dispatch",
    "event dispatch to 1 handler",
    unit="event",
    size=10_000,
    quick=200,
    floor="floor_await",
    targets=(Target("vs_ref", ">=", 20),),
    family="event",
)
def event_dispatch(n: int) -> Plan:
    BaseEvent: Any
    BaseEvent, on_event, MatcherFactory = need("amrita_sense", "BaseEvent", "on_event", "MatcherFactory")
    tally = Tally()
    event_type = f"bench.event.{next(unique_ids)}"

    @dataclasses.dataclass
    class BenchEvent(BaseEvent):
        def get_event_type(self) -> str:
            return event_type

        @property
        def event_type(self) -> str:
            return event_type

    async def handler(event: BenchEvent) -> None:
        tally.n += 1

    on_event(event_type).handle()(handler)
    event = BenchEvent()
    trigger = MatcherFactory.trigger_event

    async def timed() -> None:
        for _ in range(n):
            await trigger(event)

    return Plan(n, timed, tally.reset, lambda: expect("handler calls", tally.n, n))


@scenario(
    "di_types",
    "node with 2 parameters injected by type",
    unit="node",
    size=10_000,
    quick=500,
    floor="floor_call_kw2",
    targets=_DI,
)
def di_types(n: int) -> Plan:
    Node, _, _ = api()
    tally = Tally()
    body = typed_body(tally)
    return chain_plan([sync_node(Node, body) for _ in range(n)], tally, 2 * n, extra_args=(ALPHA, BETA))


@scenario(
    "di_names",
    "node with 2 parameters injected by name",
    unit="node",
    size=10_000,
    quick=500,
    floor="floor_call_kw2",
    targets=_DI,
)
def di_names(n: int) -> Plan:
    Node, _, _ = api()
    tally = Tally()
    body = named_body(tally)
    return chain_plan([sync_node(Node, body) for _ in range(n)], tally, 2 * n, extra_kwargs={"first": 1, "second": "s"})


def _depends_chain(n: int, use_cache: bool) -> Tuple[Plan, Tally]:
    Node, _, _ = api()
    Depends = need("amrita_sense.hook.matcher", "Depends")
    tally = Tally()
    make_first, make_second = depends_factories(tally)
    first_dep = Depends(make_first, use_cache=use_cache)
    second_dep = Depends(make_second, use_cache=use_cache)

    def body(first: int = first_dep, second: str = second_dep) -> None:
        tally.n += (first == 1) + (second == "s")

    return chain_plan([sync_node(Node, body) for _ in range(n)], tally, 2 * n), tally


@scenario(
    "di_depends",
    "node with 2 Depends(...) factories",
    unit="node",
    size=10_000,
    quick=500,
    floor="floor_factories",
    targets=_DI,
)
def di_depends(n: int) -> Plan:
    plan, tally = _depends_chain(n, use_cache=False)

    def check() -> None:
        expect("injected values", tally.n, 2 * n)
        expect("factory calls", tally.aux, 2 * n)

    plan.check = check
    return plan


@scenario(
    "di_depends_cached",
    "node with 2 Depends(..., use_cache=True) factories",
    unit="node",
    size=10_000,
    quick=500,
    floor="floor_call_kw2",
    targets=_DI,
)
def di_depends_cached(n: int) -> Plan:
    plan, tally = _depends_chain(n, use_cache=True)

    def check() -> None:
        expect("injected values", tally.n, 2 * n)
        if not 2 <= tally.aux <= 2 * n:
            raise CountMismatch(f"factory calls: counted {tally.aux}, expected between 2 and {2 * n}")

    plan.check = check
    return plan


# ---------------------------------------------------------------------------
# Many interpreters at once


@scenario(
    "interp_construct",
    "WorkflowInterpreter construction",
    unit="interpreter",
    size=1_000,
    quick=100,
    targets=(Target("value", "<=", 3e-6),),
)
def interp_construct(n: int) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = api()
    graph = NodeCompose(*[Node()(yielding_body(Tally())) for _ in range(NODES_PER_INTERPRETER)]).render()
    holder = Holder()

    def prepare() -> None:
        holder.interps = None

    def timed() -> None:
        holder.interps = [WorkflowInterpreter(graph) for _ in range(n)]

    def check() -> None:
        expect("interpreters built", len(holder.interps), n)
        holder.interps = None

    return Plan(n, timed, prepare, check)


@scenario(
    "concurrent",
    "interpreters x 100 yielding async nodes, gathered",
    unit="node",
    size=1_000,
    quick=50,
    floor="floor_gather",
    targets=(Target("x_floor", "<=", 2), _PURE),
)
def concurrent(n: int) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = api()
    tally = Tally()
    body = yielding_body(tally)
    graph = NodeCompose(*[Node()(body) for _ in range(NODES_PER_INTERPRETER)]).render()
    holder = Holder()
    ops = n * NODES_PER_INTERPRETER

    def prepare() -> None:
        tally.reset()
        holder.interps = [WorkflowInterpreter(graph) for _ in range(n)]

    async def timed() -> None:
        await asyncio.gather(*[interp.run() for interp in holder.interps])

    def check() -> None:
        expect("node bodies run", tally.n, ops)
        holder.interps = None

    return Plan(ops, timed, prepare, check)
