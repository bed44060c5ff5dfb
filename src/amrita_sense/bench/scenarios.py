"""Benchmark scenarios shared by the comparison runner and the pytest-benchmark suite.

Only the public API of amrita-sense 1.1.3 is used here, so this very file runs
under the reference package and under amrita-sense-turbo (either core).

A scenario function takes a size and returns a `Plan`: everything slow to build
(nodes, rendered graphs) is built by the scenario function itself, `prepare`
runs untimed before every measurement (fresh interpreter, counters reset),
`timed` is the only part on the clock, and `check` proves afterwards that the
timed part did exactly the work it claims (raises `CountMismatch` otherwise),
so a scenario can never silently measure nothing. A scenario whose feature is
missing from the build under test raises `Unavailable` while it is being built.

Conventions: sync bodies are decorated `wrap_to_async=False` unless the scenario
is about the worker-thread hand-off; all nodes of a chain share one body function
(as a chain built in a loop does); the plain-Python floors (`floor_*`) call the
very same bodies without the engine.

Kinds: "engine" (the default set), "app" (a user's application: AmritaCore's chat turn,
in the default set), "floor", "peer" (`--peers`), "variant" (a near
variant, run with `--families`: a `Family` groups scenarios that do the same work
written the ways users write it; some members are "engine" scenarios too).

Module note: no `from __future__ import annotations` here -- node bodies are
analysed for dependency injection, and their annotations must be real objects.
"""

import asyncio
import contextlib
import dataclasses
import gc
import importlib
import inspect
import itertools
import threading
import time
import tracemalloc
from typing import Any, Callable, Dict, Optional, Tuple

# ---------------------------------------------------------------------------
# Framework


class Unavailable(Exception):
    """The build under test lacks a feature the scenario needs (reported as n/a)."""


class CountMismatch(AssertionError):
    """The timed part did not do the work the scenario claims to measure."""


@dataclasses.dataclass
class Plan:
    """One built scenario, ready to be measured any number of times.

    `ops` is the number of operations one call of `timed` performs. `prepare`,
    `timed` and `check` may be plain or `async def` functions. `result`, when
    set, turns the elapsed seconds into the reported value (memory scenarios);
    otherwise the value is seconds per operation.
    """

    ops: int
    timed: Callable[[], Any]
    prepare: Optional[Callable[[], Any]] = None
    check: Optional[Callable[[], Any]] = None
    result: Optional[Callable[[float], float]] = None


@dataclasses.dataclass(frozen=True)
class Target:
    """A performance target from bench.md, evaluated by the runner on medians.

    `metric` is one of: "x_floor" (compiled / floor), "vs_ref" (1.1.3 / compiled),
    "vs_twin" (twin / compiled), "value" (the compiled value itself, in the
    scenario's unit: seconds, or bytes for memory), "x_fastest" (compiled / the
    compiled time of the fastest variant of its family: a family's targets only).
    """

    metric: str
    op: str
    bound: float

    def describe(self, unit_kind: str = "time") -> str:
        if self.metric == "x_floor":
            return f"{self.op}{self.bound:g}x floor"
        if self.metric == "vs_ref":
            return f"{self.op}{self.bound:g}x vs 1.1.3"
        if self.metric == "vs_twin":
            return f"{self.op}{self.bound:g}x vs twin"
        if self.metric == "x_fastest":
            return f"{self.op}{self.bound:g}x the fastest variant"
        if unit_kind == "memory":
            return f"{self.op}{self.bound:g} B"
        return f"{self.op}{format_seconds(self.bound)}"

    def met(self, actual: float) -> bool:
        return actual <= self.bound if self.op == "<=" else actual >= self.bound


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A registered scenario: how to build it, its sizes, floor and targets."""

    name: str
    title: str
    unit: str
    size: int
    quick_size: int
    make: Callable[[int], Plan]
    kind: str = "engine"
    measure: str = "time"
    floor: Optional[str] = None
    targets: Tuple[Target, ...] = ()
    family: Optional[str] = None


SCENARIOS: Dict[str, Scenario] = {}


@dataclasses.dataclass(frozen=True)
class Family:
    """Near variants: scenarios doing the same work (in the same unit) written the ways users
    write it. Its targets hold for every variant (`x_fastest` compares it with the family's
    fastest variant)."""

    name: str
    title: str
    targets: Tuple[Target, ...]


_SPREAD = Target("x_fastest", "<=", 3)
FAMILIES: Dict[str, Family] = {
    family.name: family
    for family in (
        Family("try", "Try/CATCH with an injected handler", (Target("vs_ref", ">=", 50), _SPREAD)),
        Family("event", "event dispatch to one handler", (Target("vs_ref", ">=", 20), _SPREAD)),
        Family("loop", "a loop: condition + 1-node body", (Target("vs_ref", ">=", 50), _SPREAD)),
        Family(
            "request",
            "a new interpreter per request over 20 distinct nodes, 10 contexts",
            (Target("vs_ref", ">=", 50), _SPREAD),
        ),
    )
}

# Scenarios that run the interpreter's step loop: the compiled core must beat the twin here.
_TWIN = Target("vs_twin", ">=", 5)


def scenario(
    name: str,
    title: str,
    *,
    unit: str,
    size: int,
    quick: int,
    kind: str = "engine",
    measure: str = "time",
    floor: Optional[str] = None,
    targets: Tuple[Target, ...] = (),
    family: Optional[str] = None,
):
    """Register the decorated `make(size) -> Plan` function under `name` (a variant of
    `family` when given)."""

    def register(make: Callable[[int], Plan]) -> Callable[[int], Plan]:
        if name in SCENARIOS:
            raise ValueError(f"duplicate scenario {name!r}")
        if family is not None and family not in FAMILIES:
            raise ValueError(f"scenario {name!r}: unknown family {family!r}")
        SCENARIOS[name] = Scenario(name, title, unit, size, quick, make, kind, measure, floor, targets, family)
        return make

    return register


def need(module: str, *names: str) -> Any:
    """Import `names` from `module`, or raise `Unavailable` naming what is missing."""
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise Unavailable(f"cannot import {module}: {exc}") from None
    missing = [name for name in names if not hasattr(mod, name)]
    if missing:
        raise Unavailable(f"{module} has no {', '.join(missing)}")
    values = tuple(getattr(mod, name) for name in names)
    return values[0] if len(values) == 1 else values


def expect(what: str, counted: Any, wanted: Any) -> None:
    """Raise `CountMismatch` unless `counted == wanted`."""
    if counted != wanted:
        raise CountMismatch(f"{what}: counted {counted}, expected {wanted}")


async def _settle(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


async def measure(plan: Plan) -> float:
    """Prepare, time and check one run of `plan`; return its value (seconds per op by default)."""
    if plan.prepare is not None:
        await _settle(plan.prepare())
    gc.collect()
    timed = plan.timed
    if inspect.iscoroutinefunction(timed):
        start = time.perf_counter()
        await timed()
        elapsed = time.perf_counter() - start
    else:
        start = time.perf_counter()
        timed()
        elapsed = time.perf_counter() - start
    if plan.check is not None:
        await _settle(plan.check())
    if plan.result is not None:
        return plan.result(elapsed)
    return elapsed / plan.ops


async def measure_best(plan: Plan, budget: float = 0.0, max_runs: int = 25) -> Tuple[float, int]:
    """Best (lowest) value of repeated `measure(plan)` runs, and how many ran.

    Runs until `budget` seconds were spent or `max_runs` ran (at least once; once only
    for memory plans). On a shared machine a short run is either clean or hit by a
    preemption, so the best of several is the robust estimate of its cost.
    """
    best: Optional[float] = None
    spent, runs = 0.0, 0
    while True:
        start = time.perf_counter()
        value = await measure(plan)
        spent += time.perf_counter() - start
        runs += 1
        best = value if best is None else min(best, value)
        if plan.result is not None or spent >= budget or runs >= max_runs:
            return best, runs


def build(name: str, size: Optional[int] = None, *, quick: bool = False) -> Plan:
    """Build the plan of scenario `name` (its default or quick size unless `size` is given)."""
    spec = SCENARIOS[name]
    if size is None:
        size = spec.quick_size if quick else spec.size
    return spec.make(size)


def format_seconds(seconds: float) -> str:
    """Render a duration with a readable unit (ns, us, ms, s)."""
    for unit, scale in (("ns", 1e-9), ("us", 1e-6), ("ms", 1e-3)):
        if seconds < scale * 1000:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"


class Tally:
    """Counts the work done by node bodies so that a scenario can prove it ran."""

    __slots__ = ("aux", "n")

    def __init__(self) -> None:
        self.n = 0
        self.aux = 0

    def reset(self) -> None:
        self.n = 0
        self.aux = 0


class _Holder:
    """Carries per-measurement state (interpreter, task, stream) from prepare to timed and check."""

    __slots__ = ("graph", "interp", "interps", "nbytes", "nodes", "stream", "task")
    graph: Any
    interp: Any
    interps: Any
    nbytes: int
    nodes: Any
    stream: Any
    task: Any


_ids = itertools.count()


def _api() -> Tuple[Any, Any, Any]:
    return need("amrita_sense", "Node", "NodeCompose", "WorkflowInterpreter")


def _sync(Node: Any, func: Callable[..., Any]) -> Any:
    return Node(wrap_to_async=False)(func)


def _counting_body(tally: Tally) -> Callable[[], None]:
    def body() -> None:
        tally.n += 1

    return body


def _run_plan(make_interp: Callable[[], Any], ops: int, check: Callable[[], None], reset: Callable[[], None]) -> Plan:
    """A plan whose timed part is one `run()` of a fresh interpreter."""
    holder = _Holder()

    def prepare() -> None:
        reset()
        holder.interp = make_interp()

    async def timed() -> None:
        await holder.interp.run()

    return Plan(ops, timed, prepare, check)


def _chain_plan(nodes: list, tally: Tally, want: int, **interp_kwargs: Any) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = _api()
    graph = NodeCompose(*nodes).render()
    return _run_plan(
        lambda: WorkflowInterpreter(graph, **interp_kwargs),
        len(nodes),
        lambda: expect("node bodies run", tally.n, want),
        tally.reset,
    )


# ---------------------------------------------------------------------------
# Linear chains and nesting

_EXEC = (_TWIN,)


@scenario(
    "sync_chain",
    "linear chain of sync nodes (wrap_to_async=False)",
    unit="node",
    size=10_000,
    quick=500,
    floor="floor_call",
    targets=(Target("x_floor", "<=", 3), Target("vs_ref", ">=", 50), _TWIN),
)
def sync_chain(n: int) -> Plan:
    Node, _, _ = _api()
    tally = Tally()
    body = _counting_body(tally)
    return _chain_plan([_sync(Node, body) for _ in range(n)], tally, n)


@scenario(
    "async_chain",
    "linear chain of async def nodes",
    unit="node",
    size=10_000,
    quick=500,
    floor="floor_await",
    targets=(Target("x_floor", "<=", 2), Target("vs_ref", ">=", 30), _TWIN),
)
def async_chain(n: int) -> Plan:
    Node, _, _ = _api()
    tally = Tally()

    async def body() -> None:
        tally.n += 1

    return _chain_plan([Node()(body) for _ in range(n)], tally, n)


@scenario(
    "thread_chain",
    "linear chain of default @Node() sync nodes (worker thread)",
    unit="node",
    size=2_000,
    quick=100,
    floor="floor_to_thread",
    targets=(Target("vs_ref", ">=", 3), _TWIN),
)
def thread_chain(n: int) -> Plan:
    Node, _, _ = _api()
    tally = Tally()
    loop_thread = threading.get_ident()

    def body() -> None:
        tally.n += 1
        if threading.get_ident() != loop_thread:
            tally.aux += 1

    plan = _chain_plan([Node()(body) for _ in range(n)], tally, n)

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
    targets=(Target("vs_ref", ">=", 100), _TWIN),
)
def nested(n: int, depth: int = 50) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = _api()
    if n % depth:
        raise ValueError(f"size {n} is not a multiple of the depth {depth}")
    tally = Tally()
    body = _counting_body(tally)
    inner: Any = None
    for _ in range(depth):
        level = [_sync(Node, body) for _ in range(n // depth)]
        inner = NodeCompose(*level) if inner is None else NodeCompose(*level, inner)
    graph = inner.render()
    return _run_plan(lambda: WorkflowInterpreter(graph), n, lambda: expect("node bodies run", tally.n, n), tally.reset)


# ---------------------------------------------------------------------------
# Control-flow instructions

_CONTROL = (Target("vs_ref", ">=", 100), _TWIN)


def _while_bodies(tally: Tally, n: int) -> Tuple[Callable[[], bool], Callable[[], None]]:
    def cond() -> bool:
        tally.aux += 1
        return tally.n < n

    def body() -> None:
        tally.n += 1

    return cond, body


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
    Node, NodeCompose, WorkflowInterpreter = _api()
    WHILE = need("amrita_sense", "WHILE")
    tally = Tally()
    cond, body = _while_bodies(tally, n)
    graph = NodeCompose(WHILE(_sync(Node, cond)).ACTION(_sync(Node, body))).render()

    def check() -> None:
        expect("loop bodies run", tally.n, n)
        expect("conditions evaluated", tally.aux, n + 1)

    return _run_plan(lambda: WorkflowInterpreter(graph), n, check, tally.reset)


def _if_bodies(tally: Tally, hits: list) -> Tuple[Callable[..., Any], ...]:
    def first() -> bool:
        tally.aux += 1
        return tally.aux % 3 == 0

    def second() -> bool:
        return tally.aux % 3 == 1

    def on_first() -> None:
        hits[0] += 1

    def on_second() -> None:
        hits[1] += 1

    def on_else() -> None:
        hits[2] += 1

    return first, second, on_first, on_second, on_else


def _if_expected(n: int) -> list:
    want = [0, 0, 0]
    for k in range(1, n + 1):
        want[0 if k % 3 == 0 else 1 if k % 3 == 1 else 2] += 1
    return want


@scenario(
    "if_elif_else", "sequential IF/ELIF/ELSE", unit="IF", size=10_000, quick=500, floor="floor_if", targets=_CONTROL
)
def if_elif_else(n: int) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = _api()
    IF = need("amrita_sense", "IF")
    tally = Tally()
    hits = [0, 0, 0]
    bodies = _if_bodies(tally, hits)
    clauses = []
    for _ in range(n):
        first, second, on_first, on_second, on_else = (_sync(Node, f) for f in bodies)
        clauses.append(IF(first, on_first).ELIF(second, on_second).ELSE(on_else))
    graph = NodeCompose(*clauses).render()
    want = _if_expected(n)

    def reset() -> None:
        tally.reset()
        hits[:] = [0, 0, 0]

    def check() -> None:
        expect("IF clauses evaluated", tally.aux, n)
        for branch, got, wanted in zip(("IF", "ELIF", "ELSE"), hits, want):
            expect(f"{branch} branches taken", got, wanted)

    return _run_plan(lambda: WorkflowInterpreter(graph), n, check, reset)


def _jmp_bodies(tally: Tally, n: int) -> Tuple[Callable[..., Any], ...]:
    def head() -> None:
        tally.aux += 1

    def step() -> None:
        tally.n += 1

    def again() -> bool:
        return tally.n < n

    return head, step, again


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
    Node, NodeCompose, WorkflowInterpreter = _api()
    ALIAS, IF, JMP = need("amrita_sense", "ALIAS", "IF", "JMP")
    tally = Tally()
    head, step, again = _jmp_bodies(tally, n)
    alias = f"bench_top_{next(_ids)}"
    graph = NodeCompose(
        ALIAS(_sync(Node, head), alias),
        _sync(Node, step),
        IF(_sync(Node, again), JMP(alias)),
    ).render()

    def check() -> None:
        expect("loop heads reached", tally.aux, n)
        expect("loop bodies run", tally.n, n)

    return _run_plan(lambda: WorkflowInterpreter(graph), n, check, tally.reset)


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
    Node, NodeCompose, WorkflowInterpreter = _api()
    ALIAS, ARCHIVED_NODES, CALL = need("amrita_sense", "ALIAS", "ARCHIVED_NODES", "CALL")
    RET = need("amrita_sense.instructions", "RET")
    tally = Tally()
    alias = f"bench_sub_{next(_ids)}"
    sub = _sync(Node, _counting_body(tally))
    graph = NodeCompose(*[CALL(alias) for _ in range(n)], ARCHIVED_NODES(ALIAS(sub, alias), RET())).render()
    return _run_plan(
        lambda: WorkflowInterpreter(graph), n, lambda: expect("subroutine bodies run", tally.n, n), tally.reset
    )


def _try_bodies(tally: Tally) -> Tuple[Callable[[], None], Callable[[], None]]:
    def raiser() -> None:
        tally.aux += 1
        raise ValueError("bench")

    def handler() -> None:
        tally.n += 1

    return raiser, handler


@scenario(
    "try_catch",
    "Try(raiser).CATCH(ValueError, handler)",
    unit="exception",
    size=10_000,
    quick=500,
    floor="floor_try",
    targets=(Target("x_floor", "<=", 2), _TWIN),
    family="try",
)
def try_catch(n: int) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = _api()
    Try = need("amrita_sense", "Try")
    tally = Tally()
    raiser, handler = _try_bodies(tally)
    clauses = [Try(_sync(Node, raiser)).CATCH(ValueError, _sync(Node, handler)) for _ in range(n)]
    graph = NodeCompose(*clauses).render()

    def check() -> None:
        expect("exceptions raised", tally.aux, n)
        expect("exceptions handled", tally.n, n)

    return _run_plan(lambda: WorkflowInterpreter(graph), n, check, tally.reset)


# ---------------------------------------------------------------------------
# Building graphs


@scenario("render", "render(), per node", unit="node", size=10_000, quick=1_000, targets=(Target("vs_ref", ">=", 10),))
def render(n: int) -> Plan:
    Node, NodeCompose, _ = _api()
    nodes = [_sync(Node, _counting_body(Tally())) for _ in range(n)]
    holder = _Holder()

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
    holder = _Holder()

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
    Node, NodeCompose, WorkflowInterpreter = _api()
    body = _counting_body(Tally())
    holder = _Holder()

    def timed() -> None:
        gc.collect()
        owner = not tracemalloc.is_tracing()
        if owner:
            tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            graph = NodeCompose(*[_sync(Node, body) for _ in range(n)]).render()
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

_PINGPONG = (Target("x_floor", "<=", 2), _TWIN)


def _stream_api() -> Tuple[Any, str]:
    stream_cls = need("amrita_sense.streaming", "SuspendObjectStream")
    checkpoint = need("amrita_sense.runtime.workflow", "PC_CHECKPOINT")
    return stream_cls, checkpoint


async def _park(holder: _Holder, graph: Any, stream_cls: Any, checkpoint: str, interp_cls: Any) -> None:
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
    floor="floor_pingpong",
    targets=_PINGPONG,
)
def suspend_resume(n: int) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = _api()
    stream_cls, checkpoint = _stream_api()
    tally = Tally()
    spare = 3
    graph = NodeCompose(*[_sync(Node, _counting_body(tally)) for _ in range(n + spare)]).render()
    holder = _Holder()

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
    Node, NodeCompose, WorkflowInterpreter = _api()
    ALIAS, ARCHIVED_NODES = need("amrita_sense", "ALIAS", "ARCHIVED_NODES")
    stream_cls, checkpoint = _stream_api()
    main, isr = Tally(), Tally()
    alias = f"bench_isr_{next(_ids)}"
    graph = NodeCompose(
        *[_sync(Node, _counting_body(main)) for _ in range(3)],
        ARCHIVED_NODES(ALIAS(_sync(Node, _counting_body(isr)), alias)),
    ).render()
    target = list(graph.calc.resolve_alias(alias))
    holder = _Holder()

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

_DI = (Target("vs_ref", ">=", 20), _TWIN)


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
    event_type = f"bench.event.{next(_ids)}"

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


class Alpha:
    """Injected by type in the DI scenarios."""


class Beta:
    """Injected by type in the DI scenarios."""


ALPHA, BETA = Alpha(), Beta()


def _typed_body(tally: Tally) -> Callable[..., None]:
    def body(first: Alpha, second: Beta) -> None:
        tally.n += (first is ALPHA) + (second is BETA)

    return body


def _named_body(tally: Tally) -> Callable[..., None]:
    def body(first: int, second: str) -> None:
        tally.n += (first == 1) + (second == "s")

    return body


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
    Node, _, _ = _api()
    tally = Tally()
    body = _typed_body(tally)
    return _chain_plan([_sync(Node, body) for _ in range(n)], tally, 2 * n, extra_args=(ALPHA, BETA))


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
    Node, _, _ = _api()
    tally = Tally()
    body = _named_body(tally)
    return _chain_plan([_sync(Node, body) for _ in range(n)], tally, 2 * n, extra_kwargs={"first": 1, "second": "s"})


def _factories(tally: Tally) -> Tuple[Callable[[], int], Callable[[], str]]:
    def make_first() -> int:
        tally.aux += 1
        return 1

    def make_second() -> str:
        tally.aux += 1
        return "s"

    return make_first, make_second


def _depends_chain(n: int, use_cache: bool) -> Tuple[Plan, Tally]:
    Node, _, _ = _api()
    Depends = need("amrita_sense.hook.matcher", "Depends")
    tally = Tally()
    make_first, make_second = _factories(tally)
    first_dep = Depends(make_first, use_cache=use_cache)
    second_dep = Depends(make_second, use_cache=use_cache)

    def body(first: int = first_dep, second: str = second_dep) -> None:
        tally.n += (first == 1) + (second == "s")

    return _chain_plan([_sync(Node, body) for _ in range(n)], tally, 2 * n), tally


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

NODES_PER_INTERPRETER = 100


def _yielding_body(tally: Tally) -> Callable[[], Any]:
    async def body() -> None:
        await asyncio.sleep(0)
        tally.n += 1

    return body


@scenario(
    "interp_construct",
    "WorkflowInterpreter construction",
    unit="interpreter",
    size=1_000,
    quick=100,
    targets=(Target("value", "<=", 3e-6),),
)
def interp_construct(n: int) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = _api()
    graph = NodeCompose(*[Node()(_yielding_body(Tally())) for _ in range(NODES_PER_INTERPRETER)]).render()
    holder = _Holder()

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
    targets=(Target("x_floor", "<=", 2), _TWIN),
)
def concurrent(n: int) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = _api()
    tally = Tally()
    body = _yielding_body(tally)
    graph = NodeCompose(*[Node()(body) for _ in range(NODES_PER_INTERPRETER)]).render()
    holder = _Holder()
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


# ---------------------------------------------------------------------------
# Per request, as applications run the engine: a graph rendered once, a new interpreter for
# every request with about ten context objects in its pools, distinct node functions (each
# its own code object, as functions written one by one in modules are)

REQUEST_NODES = 20
CONTEXTS = tuple(type(f"Context{i}", (), {"__doc__": "A context object injected by type."}) for i in range(10))


def _contexts() -> tuple:
    return tuple(kind() for kind in CONTEXTS)


def _context_pair(k: int) -> Tuple[int, int]:
    """The two context types node `k` takes."""
    return k % len(CONTEXTS), (3 * k + 1) % len(CONTEXTS)


def _distinct(source: str, name: str, scope: dict) -> Callable[..., Any]:
    """A function of its own code object, compiled from `source` (defines `name`) in `scope`."""
    namespace = {**scope, **{kind.__name__: kind for kind in CONTEXTS}}
    exec(compile(source, f"<bench {name}>", "exec"), namespace)
    return namespace[name]


def _request_bodies(tally: Tally, n: int, *depends: Any, prefix: str = "def") -> list:
    """`n` distinct bodies (`prefix` "async def" for coroutine functions) taking two typed
    contexts and, for each of `depends`, a parameter defaulting to it (a provider value)."""
    bodies = []
    scope = {"tally": tally, **{f"depends_{i}": value for i, value in enumerate(depends)}}
    extra = "".join(f", made_{i}: int = depends_{i}" for i in range(len(depends)))
    for k in range(n):
        first, second = _context_pair(k)
        source = f"{prefix} body_{k}(a: Context{first}, b: Context{second}{extra}):\n    tally.n += 1\n"
        bodies.append(_distinct(source, f"body_{k}", scope))
    return bodies


def _provider(tally: Tally) -> Callable[..., int]:
    def provider(a: CONTEXTS[0]) -> int:  # type: ignore[valid-type]  # a runtime type for injection
        tally.aux += 1
        return 1

    return provider


def _request_plan(graph: Any, n: int, want: Callable[[], None], reset: Callable[[], None]) -> Plan:
    """A plan whose timed part serves `n` requests: a new interpreter over `graph` for each."""
    _, _, WorkflowInterpreter = _api()
    contexts = _contexts()

    async def timed() -> None:
        for _ in range(n):
            await WorkflowInterpreter(graph, extra_args=contexts).run()

    return Plan(n, timed, reset, want)


def _request_graph(nodes: list) -> Any:
    _, NodeCompose, _ = _api()
    return NodeCompose(*nodes).render()


_REQUEST = (Target("vs_ref", ">=", 50), Target("x_floor", "<=", 5))


@scenario(
    "per_request",
    f"new interpreter per request, {REQUEST_NODES} distinct nodes x 2 typed contexts of 10",
    unit="request",
    size=500,
    quick=50,
    floor="floor_per_request",
    targets=_REQUEST,
    family="request",
)
def per_request(n: int) -> Plan:
    Node, _, _ = _api()
    tally = Tally()
    graph = _request_graph([_sync(Node, body) for body in _request_bodies(tally, REQUEST_NODES)])
    return _request_plan(graph, n, lambda: expect("node bodies run", tally.n, n * REQUEST_NODES), tally.reset)


@scenario(
    "per_request_first",
    "per_request, the first request of a fresh process (nothing made yet)",
    unit="request",
    size=1,
    quick=1,
    floor="floor_per_request",
)
def per_request_first(n: int) -> Plan:
    """Every measurement builds new functions and a new graph, so nothing is cached for them."""
    Node, _, WorkflowInterpreter = _api()
    tally = Tally()
    holder = _Holder()
    contexts = _contexts()

    def prepare() -> None:
        tally.reset()
        holder.graph = _request_graph([_sync(Node, body) for body in _request_bodies(tally, REQUEST_NODES)])

    async def timed() -> None:
        for _ in range(n):
            await WorkflowInterpreter(holder.graph, extra_args=contexts).run()

    return Plan(n, timed, prepare, lambda: expect("node bodies run", tally.n, n * REQUEST_NODES))


@scenario(
    "per_request_depends",
    "per_request with one Depends(...) provider per node",
    unit="request",
    size=200,
    quick=20,
    floor="floor_per_request_depends",
    targets=(Target("vs_ref", ">=", 25),),
    family="request",
)
def per_request_depends(n: int) -> Plan:
    Node, _, _ = _api()
    Depends = need("amrita_sense.hook.matcher", "Depends")
    tally = Tally()
    bodies = _request_bodies(tally, REQUEST_NODES, Depends(_provider(tally)))
    graph = _request_graph([_sync(Node, body) for body in bodies])

    def check() -> None:
        expect("node bodies run", tally.n, n * REQUEST_NODES)
        expect("provider calls", tally.aux, n * REQUEST_NODES)

    return _request_plan(graph, n, check, tally.reset)


def _try_request_bodies(tally: Tally, n: int) -> list:
    """`n` distinct (raiser, handler) pairs; each handler takes `exc_val: ValueError` and a context."""
    pairs = []
    for k in range(n):
        first, second = _context_pair(k)
        raiser = _distinct(
            f"def raiser_{k}(a: Context{first}):\n    tally.aux += 1\n    raise ValueError({k})\n",
            f"raiser_{k}",
            {"tally": tally},
        )
        handler = _distinct(
            f"def handler_{k}(exc_val: ValueError, b: Context{second}):\n    tally.n += exc_val.args[0] == {k}\n",
            f"handler_{k}",
            {"tally": tally},
        )
        pairs.append((raiser, handler))
    return pairs


@scenario(
    "try_request",
    f"new interpreter per request, {REQUEST_NODES} distinct Try blocks, CATCH handler taking exc_val: ValueError",
    unit="request",
    size=200,
    quick=20,
    floor="floor_try_request",
    targets=(Target("vs_ref", ">=", 50),),
)
def try_request(n: int) -> Plan:
    Node, _, _ = _api()
    Try = need("amrita_sense", "Try")
    tally = Tally()
    clauses = [
        Try(_sync(Node, raiser)).CATCH(ValueError, _sync(Node, handler))
        for raiser, handler in _try_request_bodies(tally, REQUEST_NODES)
    ]

    def check() -> None:
        expect("exceptions raised", tally.aux, n * REQUEST_NODES)
        expect("exceptions handled", tally.n, n * REQUEST_NODES)

    return _request_plan(_request_graph(clauses), n, check, tally.reset)


def _event_api(tally: Tally) -> Tuple[Any, Any, Callable[..., Any]]:
    """A dataclass event type of its own, and a handler injected with the event, its matcher and two contexts."""
    BaseEvent: Any
    Matcher: Any
    BaseEvent, on_event, MatcherFactory = need("amrita_sense", "BaseEvent", "on_event", "MatcherFactory")
    Matcher = need("amrita_sense.hook.matcher", "Matcher")
    event_type = f"bench.request.{next(_ids)}"

    @dataclasses.dataclass
    class RequestEvent(BaseEvent):
        payload: str = "ping"

        def get_event_type(self) -> str:
            return event_type

        @property
        def event_type(self) -> str:
            return event_type

    async def handler(event: RequestEvent, matcher: Matcher, a: CONTEXTS[2], b: CONTEXTS[7]) -> None:  # type: ignore[valid-type]  # runtime types
        tally.n += event.payload == "ping"

    on_event(event_type).handle()(handler)
    return RequestEvent, MatcherFactory.trigger_event, handler


@scenario(
    "event_request",
    "event dispatch: a dataclass event, a handler injected with it and 2 contexts of 10",
    unit="event",
    size=2_000,
    quick=100,
    floor="floor_event_request",
    targets=(Target("vs_ref", ">=", 20),),
    family="event",
)
def event_request(n: int) -> Plan:
    tally = Tally()
    RequestEvent, trigger, _ = _event_api(tally)
    event = RequestEvent()
    contexts = _contexts()

    async def timed() -> None:
        for _ in range(n):
            await trigger(event, *contexts)

    return Plan(n, timed, tally.reset, lambda: expect("handler calls", tally.n, n))


@scenario(
    "thread_request",
    f"new interpreter per request, {REQUEST_NODES} distinct default @Node() sync nodes (worker thread)",
    unit="request",
    size=20,
    quick=3,
    floor="floor_thread_request",
    targets=(Target("vs_ref", ">=", 5),),
    family="request",
)
def thread_request(n: int) -> Plan:
    Node, _, _ = _api()
    tally = Tally()
    loop_thread = threading.get_ident()
    bodies = []
    for k in range(REQUEST_NODES):
        first, second = _context_pair(k)
        source = (
            f"def body_{k}(a: Context{first}, b: Context{second}):\n"
            f"    tally.n += 1\n    tally.aux += get_ident() != loop_thread\n"
        )
        bodies.append(
            _distinct(
                source, f"body_{k}", {"tally": tally, "get_ident": threading.get_ident, "loop_thread": loop_thread}
            )
        )
    graph = _request_graph([Node()(body) for body in bodies])

    def check() -> None:
        expect("node bodies run", tally.n, n * REQUEST_NODES)
        expect("bodies run off the event-loop thread", tally.aux, n * REQUEST_NODES)

    return _request_plan(graph, n, check, tally.reset)


# ---------------------------------------------------------------------------
# Near variants (`--families`): each family is the same work written the ways users write it;
# some of its variants are the scenarios above (their `family=`). Every variant counts what
# its bodies did, as every scenario does.


def _variant(name: str, title: str, family: str, *, unit: str, size: int, quick: int, floor: str) -> Callable:
    return scenario(name, title, unit=unit, size=size, quick=quick, kind="variant", floor=floor, family=family)


def _try_handlers(tally: Tally) -> Dict[str, Callable[..., None]]:
    """Handlers by signature; each counts a handled exception only when what it was given is right."""

    def on_value(exc_val: ValueError) -> None:
        tally.n += isinstance(exc_val, ValueError)

    def on_type(exc_type: type) -> None:
        tally.n += exc_type is ValueError

    def on_both(exc_type: type, exc_val: ValueError) -> None:
        tally.n += exc_type is ValueError and isinstance(exc_val, ValueError)

    def on_contexts(exc_val: ValueError, a: CONTEXTS[2], b: CONTEXTS[7]) -> None:  # type: ignore[valid-type]  # runtime types
        tally.n += isinstance(exc_val, ValueError) and isinstance(a, CONTEXTS[2]) and isinstance(b, CONTEXTS[7])

    return {"exc_val": on_value, "exc_type": on_type, "both": on_both, "contexts": on_contexts}


class _TryParts:
    """A Try variant's pieces: a fresh Try(raiser).CATCH(ValueError, handler) per call of
    `clause()`, a condition node for loops and branches, and the count check."""

    def __init__(self, signature: str = "exc_val") -> None:
        Node, self.NodeCompose, self.WorkflowInterpreter = _api()
        self.Node = Node
        self.Try = need("amrita_sense", "Try")
        self.tally, self.conds = Tally(), Tally()
        self.raiser, _ = _try_bodies(self.tally)
        self.handler = _try_handlers(self.tally)[signature]

    def clause(self) -> Any:
        return self.Try(_sync(self.Node, self.raiser)).CATCH(ValueError, _sync(self.Node, self.handler))

    def condition(self, n: int) -> Any:
        """A node returning whether fewer than `n` exceptions were handled."""
        tally, conds = self.tally, self.conds

        def more() -> bool:
            conds.n += 1
            return tally.n < n

        return _sync(self.Node, more)

    def plan(self, graph: Any, n: int, conditions: Optional[int] = None, **interp_kwargs: Any) -> Plan:
        def check() -> None:
            expect("exceptions raised", self.tally.aux, n)
            expect("exceptions handled (with the right arguments)", self.tally.n, n)
            if conditions is not None:
                expect("conditions evaluated", self.conds.n, conditions)

        def reset() -> None:
            self.tally.reset()
            self.conds.reset()

        return _run_plan(lambda: self.WorkflowInterpreter(graph, **interp_kwargs), n, check, reset)

    def top_level(self, n: int, **interp_kwargs: Any) -> Plan:
        graph = self.NodeCompose(*[self.clause() for _ in range(n)]).render()
        return self.plan(graph, n, **interp_kwargs)


def _try_variant(name: str, title: str) -> Callable:
    return _variant(name, title, "try", unit="exception", size=10_000, quick=500, floor="floor_try")


@_try_variant("try_exc_val", "Try/CATCH at top level, handler(exc_val)")
def try_exc_val(n: int) -> Plan:
    return _TryParts("exc_val").top_level(n)


@_try_variant("try_exc_type", "Try/CATCH at top level, handler(exc_type)")
def try_exc_type(n: int) -> Plan:
    return _TryParts("exc_type").top_level(n)


@_try_variant("try_exc_both", "Try/CATCH at top level, handler(exc_type, exc_val)")
def try_exc_both(n: int) -> Plan:
    return _TryParts("both").top_level(n)


@_try_variant("try_exc_contexts", "Try/CATCH at top level, handler(exc_val, 2 contexts of 10)")
def try_exc_contexts(n: int) -> Plan:
    return _TryParts("contexts").top_level(n, extra_args=_contexts())


@_try_variant("try_in_while", "Try/CATCH as a WHILE body, handler(exc_val)")
def try_in_while(n: int) -> Plan:
    parts = _TryParts()
    WHILE = need("amrita_sense", "WHILE")
    graph = parts.NodeCompose(WHILE(parts.condition(n)).ACTION(parts.clause())).render()
    return parts.plan(graph, n, conditions=n + 1)


@_try_variant("try_in_do", "Try/CATCH as a DO body, handler(exc_val)")
def try_in_do(n: int) -> Plan:
    parts = _TryParts()
    DO = need("amrita_sense", "DO")
    graph = parts.NodeCompose(DO(parts.clause()).WHILE(parts.condition(n))).render()
    return parts.plan(graph, n, conditions=n)


@_try_variant("try_in_native_if", "Try/CATCH in a NATIVE_IF branch, handler(exc_val)")
def try_in_native_if(n: int) -> Plan:
    """(An IF branch cannot hold a Try block on either runtime: IF takes one node.)"""
    parts = _TryParts()
    NATIVE_IF = need("amrita_sense.instructions.native", "NATIVE_IF")

    def taken() -> bool:
        parts.conds.n += 1
        return True

    graph = parts.NodeCompose(*[NATIVE_IF(_sync(parts.Node, taken), parts.clause()) for _ in range(n)]).render()
    return parts.plan(graph, n, conditions=n)


@_try_variant("try_in_call", "Try/CATCH in a CALLed subroutine, handler(exc_val)")
def try_in_call(n: int) -> Plan:
    parts = _TryParts()
    ALIAS, ARCHIVED_NODES, CALL, NOP = need("amrita_sense", "ALIAS", "ARCHIVED_NODES", "CALL", "NOP")
    RET = need("amrita_sense.instructions", "RET")
    alias = f"bench_try_sub_{next(_ids)}"
    routine = ARCHIVED_NODES(ALIAS(NOP, alias), parts.clause(), RET())  # an alias names a node, not a Try block
    graph = parts.NodeCompose(*[CALL(alias) for _ in range(n)], routine).render()
    return parts.plan(graph, n)


def _event_class(base: Any, event_type: str, as_dataclass: bool) -> Any:
    """An event class of its own on `base` (BaseEvent or a parametrised BaseEvent[str])."""

    class VariantEvent(base):
        def get_event_type(self) -> str:
            return event_type

        @property
        def event_type(self) -> str:
            return event_type

    return dataclasses.dataclass(VariantEvent) if as_dataclass else VariantEvent


def _event_variant_plan(n: int, base: str, as_dataclass: bool, injected: str) -> Plan:
    """`n` events of a new class, each to one async handler taking the event and `injected`:
    "" (nothing more), "matcher", or "contexts" (two of the ten contexts it is triggered with)."""
    BaseEvent, on_event, MatcherFactory = need("amrita_sense", "BaseEvent", "on_event", "MatcherFactory")
    Matcher = need("amrita_sense.hook.matcher", "Matcher")
    event_type = f"bench.variant.{next(_ids)}"
    event_cls = _event_class(BaseEvent[str] if base == "generic" else BaseEvent, event_type, as_dataclass)
    tally = Tally()
    if injected == "matcher":

        async def handler(event: event_cls, matcher: Matcher) -> None:  # type: ignore[valid-type]  # runtime types
            tally.n += isinstance(event, event_cls) and isinstance(matcher, Matcher)
    elif injected == "contexts":

        async def handler(event: event_cls, a: CONTEXTS[2], b: CONTEXTS[7]) -> None:  # type: ignore[valid-type,misc]
            tally.n += isinstance(event, event_cls) and isinstance(a, CONTEXTS[2]) and isinstance(b, CONTEXTS[7])
    else:

        async def handler(event: event_cls) -> None:  # type: ignore[valid-type,misc]
            tally.n += isinstance(event, event_cls)

    on_event(event_type).handle()(handler)
    event = event_cls()
    args = _contexts() if injected == "contexts" else ()
    trigger = MatcherFactory.trigger_event

    async def timed() -> None:
        for _ in range(n):
            await trigger(event, *args)

    return Plan(n, timed, tally.reset, lambda: expect("handler calls (with the right arguments)", tally.n, n))


def _event_variant(name: str, title: str) -> Callable:
    return _variant(name, title, "event", unit="event", size=10_000, quick=200, floor="floor_await")


@_event_variant("event_plain", "event dispatch: a plain event class, async handler(event)")
def event_plain(n: int) -> Plan:
    return _event_variant_plan(n, "plain", False, "")


@_event_variant("event_generic", "event dispatch: a subclass of BaseEvent[str], async handler(event)")
def event_generic(n: int) -> Plan:
    return _event_variant_plan(n, "generic", False, "")


@_event_variant("event_generic_dataclass", "event dispatch: a dataclass on BaseEvent[str], async handler(event)")
def event_generic_dataclass(n: int) -> Plan:
    return _event_variant_plan(n, "generic", True, "")


@_event_variant("event_matcher", "event dispatch: a dataclass event, async handler(event, matcher)")
def event_matcher(n: int) -> Plan:
    return _event_variant_plan(n, "plain", True, "matcher")


@_event_variant("event_contexts", "event dispatch: a plain event class, async handler(event, 2 contexts of 10)")
def event_contexts(n: int) -> Plan:
    return _event_variant_plan(n, "plain", False, "contexts")


def _loop_variant(name: str, title: str) -> Callable:
    return _variant(name, title, "loop", unit="iteration", size=10_000, quick=500, floor="floor_while")


def _loop_plan(n: int, build: Callable[[Any, Any, Any], Any], conditions: int) -> Plan:
    """A loop of `n` iterations over the WHILE scenario's bodies; `build(Node, cond, body)`
    returns what goes into the graph."""
    Node, NodeCompose, WorkflowInterpreter = _api()
    tally = Tally()
    cond, body = _while_bodies(tally, n)
    graph = NodeCompose(*build(Node, _sync(Node, cond), _sync(Node, body))).render()

    def check() -> None:
        expect("loop bodies run", tally.n, n)
        expect("conditions evaluated", tally.aux, conditions)

    return _run_plan(lambda: WorkflowInterpreter(graph), n, check, tally.reset)


@_loop_variant("loop_do", "DO (1-node body) .WHILE(condition)")
def loop_do(n: int) -> Plan:
    DO = need("amrita_sense", "DO")
    return _loop_plan(n, lambda Node, cond, body: [DO(body).WHILE(cond)], n)


@_loop_variant("loop_native_while", "NATIVE_WHILE(condition) + 1-node body")
def loop_native_while(n: int) -> Plan:
    NATIVE_WHILE = need("amrita_sense.instructions.native", "NATIVE_WHILE")
    return _loop_plan(n, lambda Node, cond, body: [NATIVE_WHILE(cond).ACTION(body)], n + 1)


@_loop_variant("loop_native_do", "NATIVE_DO(1-node body) .WHILE(condition)")
def loop_native_do(n: int) -> Plan:
    NATIVE_DO = need("amrita_sense.instructions.native", "NATIVE_DO")
    return _loop_plan(n, lambda Node, cond, body: [NATIVE_DO(body).WHILE(cond)], n)


@_loop_variant("loop_goto", "GOTO loop: ALIAS(body) + IF(condition, JMP back)")
def loop_goto(n: int) -> Plan:
    ALIAS, IF, JMP = need("amrita_sense", "ALIAS", "IF", "JMP")
    alias = f"bench_goto_{next(_ids)}"
    return _loop_plan(n, lambda Node, cond, body: [ALIAS(body, alias), IF(cond, JMP(alias))], n)


@_loop_variant("loop_call", "WHILE(condition) with a CALL to a 1-node subroutine as its body")
def loop_call(n: int) -> Plan:
    ALIAS, ARCHIVED_NODES, CALL, WHILE = need("amrita_sense", "ALIAS", "ARCHIVED_NODES", "CALL", "WHILE")
    RET = need("amrita_sense.instructions", "RET")
    alias = f"bench_loop_sub_{next(_ids)}"

    def build(Node: Any, cond: Any, body: Any) -> list:
        return [WHILE(cond).ACTION(CALL(alias)), ARCHIVED_NODES(ALIAS(body, alias), RET())]

    return _loop_plan(n, build, n + 1)


def _request_variant(name: str, title: str, size: int = 200, quick: int = 20) -> Callable:
    return _variant(name, title, "request", unit="request", size=size, quick=quick, floor="floor_per_request")


def _second_provider(tally: Tally) -> Callable[..., int]:
    def second(b: CONTEXTS[1]) -> int:  # type: ignore[valid-type]  # a runtime type for injection
        tally.aux += 1
        return 1

    return second


@_request_variant("request_depends2", "per_request with two Depends(...) providers per node")
def request_depends2(n: int) -> Plan:
    Node, _, _ = _api()
    Depends = need("amrita_sense.hook.matcher", "Depends")
    tally = Tally()
    bodies = _request_bodies(tally, REQUEST_NODES, Depends(_provider(tally)), Depends(_second_provider(tally)))
    graph = _request_graph([_sync(Node, body) for body in bodies])

    def check() -> None:
        expect("node bodies run", tally.n, n * REQUEST_NODES)
        expect("provider calls", tally.aux, 2 * n * REQUEST_NODES)

    return _request_plan(graph, n, check, tally.reset)


@_request_variant("request_async", "per_request with async def nodes", size=500, quick=50)
def request_async(n: int) -> Plan:
    Node, _, _ = _api()
    tally = Tally()
    graph = _request_graph([Node()(body) for body in _request_bodies(tally, REQUEST_NODES, prefix="async def")])
    return _request_plan(graph, n, lambda: expect("node bodies run", tally.n, n * REQUEST_NODES), tally.reset)


# ---------------------------------------------------------------------------
# A user's whole application turn: AmritaCore's ChatObject (PyPI amrita-core, which runs on
# whichever amrita_sense its environment imports) over an instant scripted model, registered
# under a protocol of its own. n/a where amrita-core is not installed.

AMRITA_CORE_ANSWER = ("Hello", " world")
AMRITA_CORE_TURNS = ("chat", "tool", "step")  # a chat turn, one tool round, the NATIVE_DO step loop


class _AmritaCoreModel:
    """AmritaCore, its scripted model and tool, made once per process (AmritaCore keeps its
    adapters and tools in process-wide registries)."""

    made: Optional["_AmritaCoreModel"] = None

    def __init__(self) -> None:
        AmritaConfig, self.ChatObject, ModelPreset, set_config, simple_tool = need(
            "amrita_core", "AmritaConfig", "ChatObject", "ModelPreset", "set_config", "simple_tool"
        )
        ModelAdapter = need("amrita_core.base.adapter", "ModelAdapter")
        self.ToolCall, self.UniResponse = need("amrita_core.types", "ToolCall", "UniResponse")
        self.step_workflow = need("amrita_core.chatmanager", "_step_workflow_rendered")
        suffix = next(_ids)
        self.tool_rounds: list = []  # what each call_tools answers, in turn (None: no tool call)
        self.tool_runs = 0
        self.tool_name = f"bench_weather_{suffix}"
        set_config(AmritaConfig())
        self.preset = ModelPreset(model="scripted", protocol=f"amrita-sense-bench-{suffix}")
        self.adapter = self._adapter(ModelAdapter, self.preset.protocol)
        simple_tool(self._tool())

    @classmethod
    def get(cls) -> "_AmritaCoreModel":
        if cls.made is None:
            cls.made = cls()
        return cls.made

    def _adapter(self, ModelAdapter: Any, protocol: str) -> Any:
        model = self

        class ScriptedAdapter(ModelAdapter):
            @staticmethod
            def get_adapter_protocol() -> str:
                return protocol

            async def call_api(self, messages: Any, **kwargs: Any) -> Any:
                for chunk in AMRITA_CORE_ANSWER:
                    yield chunk
                yield model.UniResponse(role="assistant", content="".join(AMRITA_CORE_ANSWER), tool_calls=None)

            async def call_tools(self, messages: Any, tools: Any, tool_choice: Any = None, **kwargs: Any) -> Any:
                calls = model.tool_rounds.pop(0) if model.tool_rounds else None
                tool_calls = [model.ToolCall.model_validate(call) for call in calls] if calls else None
                return model.UniResponse(role="assistant", content=None, tool_calls=tool_calls)

        return ScriptedAdapter

    def _tool(self) -> Callable[..., Any]:
        async def weather(city: str) -> str:
            """Look up the weather of a city.

            Args:
                city (str): The city.
            """
            self.tool_runs += 1
            return f"sunny in {city}"

        weather.__name__ = weather.__qualname__ = self.tool_name
        return weather

    def _call(self) -> dict:
        return {
            "id": "call_0",
            "type": "function",
            "function": {"name": self.tool_name, "arguments": '{"city": "Oslo"}'},
        }

    async def turn(self, kind: str) -> str:
        """One chat turn; what the consumer received (or, if the turn failed, why)."""
        self.tool_rounds = [[self._call()], None] if kind == "tool" else [None]
        extra = {"workflow": self.step_workflow} if kind == "step" else {}
        chat = self.ChatObject(
            train={"role": "system", "content": "Answer briefly."},
            user_input="What is the weather?",
            session_id=f"bench-{kind}",
            preset=self.preset,
            **extra,
        )
        chat.begin()
        received = await chat.full_response()
        await chat
        problem = chat.get_exception()
        return received if problem is None else f"{type(problem).__name__}: {problem}"


class _EngineFlag:
    """Sets an engine flag (`_unsafe.__flags__`) for a while and restores it, leaving the
    flags' own record of what a user set untouched."""

    def __init__(self, name: str, value: Any) -> None:
        self.flags = need("amrita_sense._unsafe", "__flags__")
        self.name, self.value = name, value

    def __enter__(self) -> None:
        self.saved = getattr(self.flags, self.name)
        object.__setattr__(self.flags, self.name, self.value)

    def __exit__(self, *exc: Any) -> None:
        object.__setattr__(self.flags, self.name, self.saved)


def _amrita_core_plan(rounds: int, inline: bool) -> Plan:
    """`rounds` rounds of the three turns, alternating; a value per turn. Each turn's
    consumer must receive the scripted answer, and every tool turn must run the tool.
    The first measurement is preceded by one untimed round (first-turn costs).

    The heap is frozen from prepare to check: AmritaCore's imports leave a heap whose full
    collection takes 0.1-0.3 s, which would land in random timed runs and, as the collection
    before each run counts against the budget, leave one run per measurement."""
    model = _AmritaCoreModel.get()
    want = "".join(AMRITA_CORE_ANSWER)
    got: list = []
    holder = _Holder()
    holder.nodes = None  # None until the untimed round ran
    flag = _EngineFlag("FORCE_NOT_WRAP_TO_ASYNC", True) if inline else contextlib.nullcontext()

    async def prepare() -> None:
        if holder.nodes is None:
            holder.nodes = [await model.turn(kind) for kind in AMRITA_CORE_TURNS]
            expect_results("the untimed round", holder.nodes, [want] * len(AMRITA_CORE_TURNS))
        got.clear()
        model.tool_runs = 0
        gc.freeze()

    async def timed() -> None:
        with flag:
            for _ in range(rounds):
                for kind in AMRITA_CORE_TURNS:
                    got.append(await model.turn(kind))

    def check() -> None:
        gc.unfreeze()
        expect_results("turns (what the consumer received)", got, [want] * (rounds * len(AMRITA_CORE_TURNS)))
        expect("tool runs", model.tool_runs, rounds)

    return Plan(rounds * len(AMRITA_CORE_TURNS), timed, prepare, check)


@scenario(
    "amrita_core_turn",
    "AmritaCore chat turn, instant model: chat / one tool round / NATIVE_DO step loop, alternating",
    unit="turn",
    size=5,
    quick=1,
    kind="app",
)
def amrita_core_turn(n: int) -> Plan:
    return _amrita_core_plan(n, inline=False)


@scenario(
    "amrita_core_turn_inline",
    "amrita_core_turn with FORCE_NOT_WRAP_TO_ASYNC: default @Node() sync nodes inline, no worker threads",
    unit="turn",
    size=5,
    quick=1,
    kind="app",
)
def amrita_core_turn_inline(n: int) -> Plan:
    return _amrita_core_plan(n, inline=True)


# ---------------------------------------------------------------------------
# Plain-Python floors: the same bodies without the engine


@scenario(
    "floor_call", "floor: sync bodies called from a plain loop", unit="call", size=10_000, quick=500, kind="floor"
)
def floor_call(n: int) -> Plan:
    tally = Tally()
    bodies = [_counting_body(tally)] * n

    def timed() -> None:
        for body in bodies:
            body()

    return Plan(n, timed, tally.reset, lambda: expect("calls", tally.n, n))


@scenario("floor_await", "floor: async bodies awaited in a loop", unit="await", size=10_000, quick=500, kind="floor")
def floor_await(n: int) -> Plan:
    tally = Tally()

    async def body() -> None:
        tally.n += 1

    bodies = [body] * n

    async def timed() -> None:
        for coro_fn in bodies:
            await coro_fn()

    return Plan(n, timed, tally.reset, lambda: expect("awaits", tally.n, n))


@scenario(
    "floor_to_thread",
    "floor: each body awaited through asyncio.to_thread",
    unit="call",
    size=2_000,
    quick=100,
    kind="floor",
)
def floor_to_thread(n: int) -> Plan:
    tally = Tally()
    body = _counting_body(tally)
    to_thread = asyncio.to_thread

    async def timed() -> None:
        for _ in range(n):
            await to_thread(body)

    return Plan(n, timed, tally.reset, lambda: expect("calls", tally.n, n))


@scenario(
    "floor_call_kw2",
    "floor: sync body called with 2 keyword arguments",
    unit="call",
    size=10_000,
    quick=500,
    kind="floor",
)
def floor_call_kw2(n: int) -> Plan:
    tally = Tally()
    body = _typed_body(tally)

    def timed() -> None:
        for _ in range(n):
            body(first=ALPHA, second=BETA)

    return Plan(n, timed, tally.reset, lambda: expect("injected values", tally.n, 2 * n))


@scenario(
    "floor_factories", "floor: 2 factories called, then the body", unit="call", size=10_000, quick=500, kind="floor"
)
def floor_factories(n: int) -> Plan:
    tally, made = Tally(), Tally()
    make_first, make_second = _factories(made)
    body = _named_body(tally)

    def reset() -> None:
        tally.reset()
        made.reset()

    def timed() -> None:
        for _ in range(n):
            body(first=make_first(), second=make_second())

    def check() -> None:
        expect("injected values", tally.n, 2 * n)
        expect("factory calls", made.aux, 2 * n)

    return Plan(n, timed, reset, check)


@scenario("floor_while", "floor: while cond(): body()", unit="iteration", size=100_000, quick=2_000, kind="floor")
def floor_while(n: int) -> Plan:
    tally = Tally()
    cond, body = _while_bodies(tally, n)

    def timed() -> None:
        while cond():
            body()

    return Plan(n, timed, tally.reset, lambda: expect("loop bodies run", tally.n, n))


@scenario("floor_if", "floor: if/elif/else calling the same bodies", unit="IF", size=10_000, quick=500, kind="floor")
def floor_if(n: int) -> Plan:
    tally = Tally()
    hits = [0, 0, 0]
    first, second, on_first, on_second, on_else = _if_bodies(tally, hits)
    want = _if_expected(n)

    def reset() -> None:
        tally.reset()
        hits[:] = [0, 0, 0]

    def timed() -> None:
        for _ in range(n):
            if first():
                on_first()
            elif second():
                on_second()
            else:
                on_else()

    return Plan(n, timed, reset, lambda: expect("branches taken", hits, want))


@scenario(
    "floor_jmp", "floor: head(); step(); loop while again()", unit="iteration", size=10_000, quick=500, kind="floor"
)
def floor_jmp(n: int) -> Plan:
    tally = Tally()
    head, step, again = _jmp_bodies(tally, n)

    def timed() -> None:
        while True:
            head()
            step()
            if not again():
                break

    return Plan(n, timed, tally.reset, lambda: expect("loop bodies run", tally.n, n))


@scenario("floor_try", "floor: try/except calling the handler", unit="exception", size=10_000, quick=500, kind="floor")
def floor_try(n: int) -> Plan:
    tally = Tally()
    raiser, handler = _try_bodies(tally)

    def timed() -> None:
        for _ in range(n):
            try:
                raiser()
            except ValueError:
                handler()

    return Plan(n, timed, tally.reset, lambda: expect("exceptions handled", tally.n, n))


@scenario("floor_pingpong", "floor: two-task asyncio ping-pong", unit="round trip", size=1_000, quick=100, kind="floor")
def floor_pingpong(n: int) -> Plan:
    tally = Tally()

    async def timed() -> None:
        ping, pong = asyncio.Event(), asyncio.Event()

        async def responder() -> None:
            for _ in range(n):
                await ping.wait()
                ping.clear()
                tally.n += 1
                pong.set()

        task = asyncio.get_running_loop().create_task(responder())
        for _ in range(n):
            ping.set()
            await pong.wait()
            pong.clear()
        await task

    return Plan(n, timed, tally.reset, lambda: expect("round trips", tally.n, n))


@scenario(
    "floor_gather", "floor: tasks x 100 yielding bodies, gathered", unit="node", size=1_000, quick=50, kind="floor"
)
def floor_gather(n: int) -> Plan:
    tally = Tally()
    bodies = [_yielding_body(tally)] * NODES_PER_INTERPRETER
    ops = n * NODES_PER_INTERPRETER

    async def worker() -> None:
        for body in bodies:
            await body()

    async def timed() -> None:
        await asyncio.gather(*[worker() for _ in range(n)])

    return Plan(ops, timed, tally.reset, lambda: expect("bodies run", tally.n, ops))


@scenario(
    "floor_per_request",
    f"floor: the {REQUEST_NODES} per_request bodies called from a plain loop",
    unit="request",
    size=500,
    quick=50,
    kind="floor",
)
def floor_per_request(n: int) -> Plan:
    tally = Tally()
    contexts = _contexts()
    calls = [
        (body, contexts[i], contexts[j])
        for body, (i, j) in zip(_request_bodies(tally, REQUEST_NODES), map(_context_pair, range(REQUEST_NODES)))
    ]

    def timed() -> None:
        for _ in range(n):
            for body, a, b in calls:
                body(a, b)

    return Plan(n, timed, tally.reset, lambda: expect("calls", tally.n, n * REQUEST_NODES))


@scenario(
    "floor_per_request_depends",
    "floor: the per_request_depends bodies, each after its provider",
    unit="request",
    size=200,
    quick=20,
    kind="floor",
)
def floor_per_request_depends(n: int) -> Plan:
    tally = Tally()
    contexts = _contexts()
    provider = _provider(tally)
    bodies = _request_bodies(tally, REQUEST_NODES, 0)
    calls = [(body, contexts[i], contexts[j]) for body, (i, j) in zip(bodies, map(_context_pair, range(REQUEST_NODES)))]
    first = contexts[0]

    def timed() -> None:
        for _ in range(n):
            for body, a, b in calls:
                body(a, b, provider(first))

    return Plan(n, timed, tally.reset, lambda: expect("calls", tally.n, n * REQUEST_NODES))


@scenario(
    "floor_try_request",
    "floor: try/except over the try_request bodies",
    unit="request",
    size=200,
    quick=20,
    kind="floor",
)
def floor_try_request(n: int) -> Plan:
    tally = Tally()
    contexts = _contexts()
    calls = [
        (raiser, handler, contexts[i], contexts[j])
        for (raiser, handler), (i, j) in zip(
            _try_request_bodies(tally, REQUEST_NODES), map(_context_pair, range(REQUEST_NODES))
        )
    ]

    def timed() -> None:
        for _ in range(n):
            for raiser, handler, a, b in calls:
                try:
                    raiser(a)
                except ValueError as exc:
                    handler(exc, b)

    return Plan(n, timed, tally.reset, lambda: expect("exceptions handled", tally.n, n * REQUEST_NODES))


@scenario(
    "floor_event_request",
    "floor: the event_request handler awaited directly",
    unit="event",
    size=2_000,
    quick=100,
    kind="floor",
)
def floor_event_request(n: int) -> Plan:
    tally = Tally()
    RequestEvent, _, handler = _event_api(Tally())
    contexts = _contexts()
    event = RequestEvent()

    async def counted(*args: Any) -> None:
        await handler(*args)
        tally.n += 1

    async def timed() -> None:
        for _ in range(n):
            await counted(event, None, contexts[2], contexts[7])

    return Plan(n, timed, tally.reset, lambda: expect("handler calls", tally.n, n))


@scenario(
    "floor_thread_request",
    "floor: the thread_request bodies, each awaited through asyncio.to_thread",
    unit="request",
    size=20,
    quick=3,
    kind="floor",
)
def floor_thread_request(n: int) -> Plan:
    tally = Tally()
    contexts = _contexts()
    calls = [
        (body, contexts[i], contexts[j])
        for body, (i, j) in zip(_request_bodies(tally, REQUEST_NODES), map(_context_pair, range(REQUEST_NODES)))
    ]
    to_thread = asyncio.to_thread

    async def timed() -> None:
        for _ in range(n):
            for body, a, b in calls:
                await to_thread(body, a, b)

    return Plan(n, timed, tally.reset, lambda: expect("calls", tally.n, n * REQUEST_NODES))


# ---------------------------------------------------------------------------
# The peers' work: the same three requests written for every runtime in the comparison
# (`--peers`; the peers' versions are in `peers/`). A request takes an input x and returns a
# number; every node's step is order-sensitive (`peer_mix`), so a node skipped, repeated or run
# out of order changes the result, and every request's result is checked.

PEER_CHAIN_NODES = 20
PEER_AGENT_ITERATIONS = 10
PEER_MODULUS = 1_000_003


def peer_mix(value: int, k: int) -> int:
    """One node's work: fold `k` into `value`."""
    return (value * 31 + k) % PEER_MODULUS


def peer_chain_result(x: int) -> int:
    """The chain: node k (0..19) folds k into the value, starting from x."""
    value = x
    for k in range(PEER_CHAIN_NODES):
        value = peer_mix(value, k)
    return value


def peer_agent_result(x: int) -> int:
    """The agent loop: each iteration is a model step (step += 1; a tool call while step < 10),
    then the tool (acc = mix(acc, step)) or, on the last, the answer (mix(acc, step))."""
    acc = x
    for step in range(1, PEER_AGENT_ITERATIONS + 1):
        acc = peer_mix(acc, step)
    return acc


def peer_branch_result(x: int) -> int:
    """IF x is even: x // 2, ELSE: 3x + 1."""
    return x // 2 if x % 2 == 0 else 3 * x + 1


@dataclasses.dataclass(frozen=True)
class PeerWork:
    """One of the peers' three requests: its title and the result expected for input x."""

    name: str
    title: str
    expected: Callable[[int], int]


PEER_WORKS: Dict[str, PeerWork] = {
    work.name: work
    for work in (
        PeerWork("peer_chain", f"{PEER_CHAIN_NODES}-node request chain", peer_chain_result),
        PeerWork(
            "peer_agent",
            f"{PEER_AGENT_ITERATIONS}-iteration agent loop (model step, then tool or finish)",
            peer_agent_result,
        ),
        PeerWork("peer_if_else", "IF/ELSE on the request", peer_branch_result),
    )
}


def expect_results(what: str, got: list, want: list) -> None:
    """Raise `CountMismatch` naming the first request whose result is wrong or missing."""
    for x, (result, wanted) in enumerate(zip(got, want)):
        if result != wanted:
            raise CountMismatch(f"{what}: request {x} returned {result!r}, expected {wanted!r}")
    expect(f"{what}: results", len(got), len(want))


def peer_plan(name: str, n: int, serve: Callable[[int], Any]) -> Plan:
    """A plan whose timed part serves `n` requests of the peers' work `name`, one `await
    serve(x)` each (x = 0..n-1, one new run per request); every result is checked. Before each
    measurement one request is served untimed (and checked), so a first request's one-time
    costs (plans made, caches filled: `per_request_first` measures those) stay off the clock
    on every system alike, also in a quick run without warm-up rounds."""
    work = PEER_WORKS[name]
    want = [work.expected(x) for x in range(n)]
    got: list = [None] * n

    async def timed() -> None:
        for x in range(n):
            got[x] = await serve(x)

    async def prepare() -> None:
        got[:] = [None] * n
        expect_results(f"{name} (untimed request)", [await serve(n)], [work.expected(n)])

    return Plan(n, timed, prepare, lambda: expect_results(name, got, want))


class ChainRequest:
    """The chain's request, injected by type into every node."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value


class AgentRequest:
    """The agent loop's request: the model's step count, the tools' accumulator, the answer."""

    __slots__ = ("acc", "result", "step")

    def __init__(self, x: int) -> None:
        self.step = 0
        self.acc = x
        self.result: Optional[int] = None


class BranchRequest:
    """The IF/ELSE request."""

    __slots__ = ("result", "x")

    def __init__(self, x: int) -> None:
        self.x = x
        self.result: Optional[int] = None


def _peer_chain_graph() -> Any:
    """20 distinct async nodes (each its own code object), each taking the request by type."""
    Node, NodeCompose, _ = _api()
    scope = {"ChainRequest": ChainRequest, "mix": peer_mix}
    nodes = []
    for k in range(PEER_CHAIN_NODES):
        source = f"async def step_{k}(request: ChainRequest):\n    request.value = mix(request.value, {k})\n"
        nodes.append(Node()(_distinct(source, f"step_{k}", scope)))
    return NodeCompose(*nodes).render()


def _peer_agent_graph() -> Any:
    """WHILE the model asks for a tool, run the tool; then the answer. The model step is the
    loop's condition (a node returning whether it called a tool)."""
    Node, NodeCompose, _ = _api()
    WHILE = need("amrita_sense", "WHILE")

    async def model(request: AgentRequest) -> bool:
        request.step += 1
        return request.step < PEER_AGENT_ITERATIONS

    async def tool(request: AgentRequest) -> None:
        request.acc = peer_mix(request.acc, request.step)

    async def finish(request: AgentRequest) -> None:
        request.result = peer_mix(request.acc, request.step)

    return NodeCompose(WHILE(Node()(model)).ACTION(Node()(tool)), Node()(finish)).render()


def _peer_branch_graph() -> Any:
    Node, NodeCompose, _ = _api()
    IF = need("amrita_sense", "IF")

    async def is_even(request: BranchRequest) -> bool:
        return request.x % 2 == 0

    async def half(request: BranchRequest) -> None:
        request.result = request.x // 2

    async def triple(request: BranchRequest) -> None:
        request.result = 3 * request.x + 1

    return NodeCompose(IF(Node()(is_even), Node()(half)).ELSE(Node()(triple))).render()


def _serve_on(graph: Any, make_request: Callable[[int], Any], result: Callable[[Any], int]) -> Callable[[int], Any]:
    """One request: a new interpreter over `graph`, the request object in its pool."""
    _, _, WorkflowInterpreter = _api()

    async def serve(x: int) -> int:
        request = make_request(x)
        await WorkflowInterpreter(graph, extra_args=(request,)).run()
        return result(request)

    return serve


def _peer_scenario(name: str) -> Callable[[Callable[[int], Plan]], Callable[[int], Plan]]:
    return scenario(name, PEER_WORKS[name].title, unit="request", size=100, quick=10, kind="peer")


@_peer_scenario("peer_chain")
def peer_chain(n: int) -> Plan:
    return peer_plan("peer_chain", n, _serve_on(_peer_chain_graph(), ChainRequest, lambda request: request.value))


@_peer_scenario("peer_agent")
def peer_agent(n: int) -> Plan:
    return peer_plan("peer_agent", n, _serve_on(_peer_agent_graph(), AgentRequest, lambda request: request.result))


@_peer_scenario("peer_if_else")
def peer_if_else(n: int) -> Plan:
    return peer_plan("peer_if_else", n, _serve_on(_peer_branch_graph(), BranchRequest, lambda request: request.result))
