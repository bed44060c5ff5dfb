"""Near variants (`--families`): each family is the same work written the ways users write it;
some of its variants are scenarios of the main comparison (their `family=`). Every variant
counts what its bodies did, as every scenario does.

No `from __future__ import annotations`: node bodies are analysed for dependency injection,
and their annotations must be real objects.
"""

import dataclasses
from typing import Any, Callable, Dict, Optional

from .bodies import (
    CONTEXTS,
    REQUEST_NODES,
    api,
    counting_provider,
    make_contexts,
    request_bodies,
    request_graph,
    request_plan,
    run_plan,
    sync_node,
    try_bodies,
    while_bodies,
)
from .framework import Plan, Tally, expect, need, scenario, unique_ids


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
        Node, self.NodeCompose, self.WorkflowInterpreter = api()
        self.Node = Node
        self.Try = need("amrita_sense", "Try")
        self.tally, self.conds = Tally(), Tally()
        self.raiser, _ = try_bodies(self.tally)
        self.handler = _try_handlers(self.tally)[signature]

    def clause(self) -> Any:
        return self.Try(sync_node(self.Node, self.raiser)).CATCH(ValueError, sync_node(self.Node, self.handler))

    def condition(self, n: int) -> Any:
        """A node returning whether fewer than `n` exceptions were handled."""
        tally, conds = self.tally, self.conds

        def more() -> bool:
            conds.n += 1
            return tally.n < n

        return sync_node(self.Node, more)

    def plan(self, graph: Any, n: int, conditions: Optional[int] = None, **interp_kwargs: Any) -> Plan:
        def check() -> None:
            expect("exceptions raised", self.tally.aux, n)
            expect("exceptions handled (with the right arguments)", self.tally.n, n)
            if conditions is not None:
                expect("conditions evaluated", self.conds.n, conditions)

        def reset() -> None:
            self.tally.reset()
            self.conds.reset()

        return run_plan(lambda: self.WorkflowInterpreter(graph, **interp_kwargs), n, check, reset)

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
    return _TryParts("contexts").top_level(n, extra_args=make_contexts())


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

    graph = parts.NodeCompose(*[NATIVE_IF(sync_node(parts.Node, taken), parts.clause()) for _ in range(n)]).render()
    return parts.plan(graph, n, conditions=n)


@_try_variant("try_in_call", "Try/CATCH in a CALLed subroutine, handler(exc_val)")
def try_in_call(n: int) -> Plan:
    parts = _TryParts()
    ALIAS, ARCHIVED_NODES, CALL, NOP = need("amrita_sense", "ALIAS", "ARCHIVED_NODES", "CALL", "NOP")
    RET = need("amrita_sense.instructions", "RET")
    alias = f"bench_try_sub_{next(unique_ids)}"
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
    event_type = f"bench.variant.{next(unique_ids)}"
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
    args = make_contexts() if injected == "contexts" else ()
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
    Node, NodeCompose, WorkflowInterpreter = api()
    tally = Tally()
    cond, body = while_bodies(tally, n)
    graph = NodeCompose(*build(Node, sync_node(Node, cond), sync_node(Node, body))).render()

    def check() -> None:
        expect("loop bodies run", tally.n, n)
        expect("conditions evaluated", tally.aux, conditions)

    return run_plan(lambda: WorkflowInterpreter(graph), n, check, tally.reset)


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
    alias = f"bench_goto_{next(unique_ids)}"
    return _loop_plan(n, lambda Node, cond, body: [ALIAS(body, alias), IF(cond, JMP(alias))], n)


@_loop_variant("loop_call", "WHILE(condition) with a CALL to a 1-node subroutine as its body")
def loop_call(n: int) -> Plan:
    ALIAS, ARCHIVED_NODES, CALL, WHILE = need("amrita_sense", "ALIAS", "ARCHIVED_NODES", "CALL", "WHILE")
    RET = need("amrita_sense.instructions", "RET")
    alias = f"bench_loop_sub_{next(unique_ids)}"

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
    Node, _, _ = api()
    Depends = need("amrita_sense.hook.matcher", "Depends")
    tally = Tally()
    bodies = request_bodies(tally, REQUEST_NODES, Depends(counting_provider(tally)), Depends(_second_provider(tally)))
    graph = request_graph([sync_node(Node, body) for body in bodies])

    def check() -> None:
        expect("node bodies run", tally.n, n * REQUEST_NODES)
        expect("provider calls", tally.aux, 2 * n * REQUEST_NODES)

    return request_plan(graph, n, check, tally.reset)


@_request_variant("request_async", "per_request with async def nodes", size=500, quick=50)
def request_async(n: int) -> Plan:
    Node, _, _ = api()
    tally = Tally()
    graph = request_graph([Node()(body) for body in request_bodies(tally, REQUEST_NODES, prefix="async def")])
    return request_plan(graph, n, lambda: expect("node bodies run", tally.n, n * REQUEST_NODES), tally.reset)
