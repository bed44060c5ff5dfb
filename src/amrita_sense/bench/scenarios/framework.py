"""The scenarios' framework: the registry (`SCENARIOS`, `FAMILIES`, `@scenario`), what a
scenario builds (`Plan`) and is judged by (`Target`), and how a plan is measured and checked.

It imports nothing of amrita_sense (a peer's environment has none) and nothing of this package.
"""

import dataclasses
import gc
import importlib
import inspect
import itertools
import time
from typing import Any, Callable, Dict, Optional, Tuple


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
    otherwise the value is seconds per operation. `close` (plain or `async def`) releases
    what the plan holds open (connections, a runtime's singleton) once the worker is done
    with it; `note` says how it was configured (the durable work: each store's settings);
    `parts` (`async def`), when set, is measured after each measurement: where one operation's
    time goes, {part: seconds per operation} (ours on the durable work: engine, encode, write).
    """

    ops: int
    timed: Callable[[], Any]
    prepare: Optional[Callable[[], Any]] = None
    check: Optional[Callable[[], Any]] = None
    result: Optional[Callable[[float], float]] = None
    close: Optional[Callable[[], Any]] = None
    note: str = ""
    parts: Optional[Callable[[], Any]] = None


@dataclasses.dataclass(frozen=True)
class Target:
    """A performance target from bench.md, evaluated by the runner on medians.

    `metric` is one of: "x_floor" (compiled / floor), "vs_ref" (1.1.3 / compiled),
    "vs_pure" (pure build / compiled), "value" (the compiled value itself, in the
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
        if self.metric == "vs_pure":
            return f"{self.op}{self.bound:g}x vs pure build"
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
        Family("policy", "an async node with a retry policy, succeeding at once", (_SPREAD,)),
        Family("policy_retry", "an async node with a retry policy, failing once first", (_SPREAD,)),
    )
}


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


def build(name: str, size: Optional[int] = None, *, quick: bool = False, **options: Any) -> Plan:
    """Build the plan of scenario `name` (its default or quick size unless `size` is given);
    `options` go to its make function (the durable work's `mode` and `place`)."""
    spec = SCENARIOS[name]
    if size is None:
        size = spec.quick_size if quick else spec.size
    return spec.make(size, **options) if options else spec.make(size)


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


class Holder:
    """Carries per-measurement state (interpreter, task, stream) from prepare to timed and check."""

    __slots__ = ("graph", "interp", "interps", "nbytes", "nodes", "stream", "task")
    graph: Any
    interp: Any
    interps: Any
    nbytes: int
    nodes: Any
    stream: Any
    task: Any


unique_ids = itertools.count()


def expect_results(what: str, got: list, want: list) -> None:
    """Raise `CountMismatch` naming the first request whose result is wrong or missing."""
    for x, (result, wanted) in enumerate(zip(got, want)):
        if result != wanted:
            raise CountMismatch(f"{what}: request {x} returned {result!r}, expected {wanted!r}")
    expect(f"{what}: results", len(got), len(want))
