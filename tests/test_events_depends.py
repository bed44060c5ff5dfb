"""Injection into event handlers: pools, `Depends`, dispatch and call scopes, trigger-time factories (rules 74, 78-79, 84)."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

import pytest

from amrita_sense import BaseEvent, Matcher, MatcherFactory, Node, NodeCompose, WorkflowInterpreter, on_event
from amrita_sense.hook.fun_typing import FunctionData
from amrita_sense.hook.matcher import Depends, EventRegistry

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup


@dataclass
class Ping(BaseEvent):
    payload: str = "ping"

    def get_event_type(self) -> str:
        return "ping"

    @property
    def event_type(self) -> str:
        return "ping"


class Service:
    def __init__(self, name: str = "svc"):
        self.name = name


@pytest.fixture(autouse=True)
def empty_registry():
    EventRegistry()._event_handlers.clear()
    yield
    EventRegistry()._event_handlers.clear()


@pytest.mark.asyncio
async def test_pools_are_matcher_event_args_and_kwargs():
    seen = []
    matcher = Matcher("ping", block=False)

    @matcher.handle()
    async def run(m: Matcher, event: Ping, svc: Service, label: str, count: int = 0):
        seen.append((m is matcher, event.payload, svc.name, label, count))

    await MatcherFactory.trigger_event(Ping("e"), Service("s"), label="L")
    await MatcherFactory.trigger_event(Ping("f"), Service("t"), label="M", count=2)
    assert seen == [(True, "e", "s", "L", 0), (True, "f", "t", "M", 2)]


@pytest.mark.asyncio
async def test_handler_plan_follows_pool_types():
    seen = []
    matcher = Matcher("ping", block=False)

    @matcher.handle()
    async def run(value: int | str):
        seen.append(value)

    await MatcherFactory.trigger_event(Ping(), 1)
    await MatcherFactory.trigger_event(Ping(), "text")
    await MatcherFactory.trigger_event(Ping(), 2.5, 3)
    assert seen == [1, "text", 3]


@pytest.mark.asyncio
async def test_unresolvable_handler_is_skipped_with_a_warning(caplog):
    seen = []
    first, second = Matcher("ping", 1, block=True), Matcher("ping", 2, block=False)

    @first.handle()
    async def needs_service(svc: Service):
        seen.append("first")

    @second.handle()
    async def fine(event: Ping):
        seen.append("second")

    with caplog.at_level(logging.WARNING, logger="amrita_sense"):
        await MatcherFactory.trigger_event(Ping())
    assert seen == ["second"]
    assert any("needs_service" in r.getMessage() and "svc" in r.getMessage() for r in caplog.records)


@pytest.mark.asyncio
async def test_depends_in_handlers():
    seen = []
    matcher = Matcher("ping", block=False)

    def upper(event: Ping) -> str:
        return event.payload.upper()

    async def size(text: str = Depends(upper)) -> int:
        return len(text)

    @matcher.handle()
    async def run(text: str = Depends(upper), n: int = Depends(size)):
        seen.append((text, n))

    await MatcherFactory.trigger_event(Ping("abc"))
    assert seen == [("ABC", 3)]


@pytest.mark.asyncio
async def test_provider_none_skips_only_that_handler():
    seen = []
    first, second = Matcher("ping", 1, block=True), Matcher("ping", 2, block=False)

    @first.handle()
    async def gated(value: int = Depends(lambda: None)):
        seen.append("gated")

    @second.handle()
    async def open_(event: Ping):
        seen.append("open")

    await MatcherFactory.trigger_event(Ping())
    assert seen == ["open"]


@pytest.mark.asyncio
async def test_provider_exception_propagates_out_of_the_dispatch():
    matcher = Matcher("ping")

    def broken() -> int:
        raise ValueError("provider")

    @matcher.handle()
    async def run(value: int = Depends(broken)):
        pass

    with pytest.raises(ExceptionGroup):
        await MatcherFactory.trigger_event(Ping())


@pytest.mark.asyncio
async def test_use_cache_has_no_effect_in_dispatch():
    calls = []
    matcher = Matcher("ping", block=False)

    def provider() -> int:
        calls.append(1)
        return len(calls)

    @matcher.handle()
    async def run(value: int = Depends(provider, use_cache=True)):
        pass

    await MatcherFactory.trigger_event(Ping())
    await MatcherFactory.trigger_event(Ping())
    assert len(calls) == 2


def tracked(log: list, name: str):
    async def provider():
        log.append(f"open {name}")
        yield name
        log.append(f"close {name}")

    return provider


@pytest.mark.asyncio
async def test_dispatch_scope_is_shared_by_all_handlers_and_closed_after_them():
    log = []
    shared = Depends(tracked(log, "d"))
    first, second = Matcher("ping", 1, block=False), Matcher("ping", 2, block=False)

    @first.handle()
    async def a(res: str = shared):
        log.append(("a", res))

    @second.handle()
    async def b(res: str = shared):
        log.append(("b", res))

    await MatcherFactory.trigger_event(Ping())
    assert log == ["open d", ("a", "d"), ("b", "d"), "close d"]
    await MatcherFactory.trigger_event(Ping())
    assert log[4:] == ["open d", ("a", "d"), ("b", "d"), "close d"]


@pytest.mark.asyncio
async def test_dispatch_scope_closes_when_a_handler_error_propagates():
    log = []
    matcher = Matcher("ping")

    @matcher.handle()
    async def a(res: str = Depends(tracked(log, "d"))):
        raise KeyError("out")

    with pytest.raises(KeyError):
        await MatcherFactory.trigger_event(Ping(), exception_ignored=(KeyError,))
    assert log == ["open d", "close d"]


@pytest.mark.asyncio
async def test_call_scope_in_a_handler_closes_after_that_handler():
    log = []
    first, second = Matcher("ping", 1, block=False), Matcher("ping", 2, block=False)

    @first.handle()
    async def a(res: str = Depends(tracked(log, "c"), scope="call")):
        log.append(("a", res))

    @second.handle()
    async def b(event: Ping):
        log.append("b")

    await MatcherFactory.trigger_event(Ping())
    assert log == ["open c", ("a", "c"), "close c", "b"]


@pytest.mark.asyncio
async def test_workflow_scope_is_not_available_in_a_dispatch():
    from amrita_sense import DependsInjectFailed

    matcher = Matcher("ping")

    @matcher.handle()
    async def a(res: str = Depends(tracked([], "w"), scope="workflow")):
        pass

    with pytest.raises(DependsInjectFailed, match="workflow"):
        await MatcherFactory.trigger_event(Ping())


@pytest.mark.asyncio
async def test_trigger_time_depends_are_resolved_once_per_dispatch():
    calls = []
    seen = []

    def make_service(event: Ping) -> Service:
        calls.append(event.payload)
        return Service(event.payload)

    first, second = Matcher("ping", 1, block=False), Matcher("ping", 2, block=False)

    @first.handle()
    async def a(svc: Service, label: str):
        seen.append(("a", svc.name, label))

    @second.handle()
    async def b(svc: Service):
        seen.append(("b", svc.name))

    await MatcherFactory.trigger_event(Ping("x"), Depends(make_service), label=Depends(lambda: "lbl"))
    assert calls == ["x"]
    assert seen == [("a", "x", "lbl"), ("b", "x")]


@pytest.mark.asyncio
async def test_the_same_argument_types_with_and_without_depends_dispatch_each_their_own_way():
    # the scan of trigger_event's arguments is kept per tuple of their types: a Depends argument
    # and a plain one of other types, in turn, are each found again at every dispatch
    seen = []

    @Matcher("ping", block=False).handle()
    async def handler(event: Ping, svc: Service):
        seen.append((event.payload, svc.name))

    for payload in ("a", "b"):
        await MatcherFactory.trigger_event(Ping(payload), Depends(lambda: Service("made")))
        await MatcherFactory.trigger_event(Ping(payload), Service("given"))
    assert seen == [("a", "made"), ("a", "given"), ("b", "made"), ("b", "given")]


@pytest.mark.asyncio
async def test_unresolvable_trigger_time_depends_is_a_runtime_error():
    on_event("ping").handle()(_noop_handler)
    with pytest.raises(RuntimeError, match="Runtime arguments cannot be resolved"):
        await MatcherFactory.trigger_event(Ping(), Depends(lambda: None))


async def _noop_handler(event: Ping):
    pass


@pytest.mark.asyncio
async def test_trigger_from_a_workflow_node_with_the_interpreter_pools():
    seen = []
    matcher = Matcher("ping", block=False)

    @matcher.handle()
    async def run(pc: WorkflowInterpreter, svc: Service, event: Ping):
        seen.append((pc, svc.name, event.payload))

    @Node()
    async def fire(pc: WorkflowInterpreter):
        await MatcherFactory.trigger_event(Ping("from node"), *pc._ava_args, **pc._ava_kwargs)

    interp = WorkflowInterpreter(NodeCompose(fire).render(), extra_args=(Service("wf"),))
    await interp.run()
    assert seen == [(interp, "wf", "from node")]


def test_registry_is_a_singleton_with_a_class_level_table():
    matcher = on_event("ping", priority=3, block=False)

    @matcher.handle()
    async def run(event: Ping):
        pass

    assert EventRegistry() is EventRegistry()
    groups = EventRegistry().get_handlers("ping")
    assert list(groups) == [3]
    data = groups[3][0]
    assert isinstance(data, FunctionData)
    assert (data.function, data.priority, data.matcher) == (run, 3, matcher)
    assert list(data.signature["params"]) == ["event"]
    assert data.frame is not None and data.frame.f_code.co_filename == __file__
    assert "ping" in EventRegistry().get_all()
    assert EventRegistry().get_handlers("never registered") == {}


def test_append_handler_registers_too():
    matcher = Matcher("ping", 7)

    async def run(event: Ping):
        pass

    matcher.append_handler(run)
    assert [d.function for d in EventRegistry().get_handlers("ping")[7]] == [run]


def test_matcher_validation_and_identity():
    with pytest.raises(ValueError):
        Matcher("ping", 0)
    with pytest.raises(ValueError):
        on_event("ping", -1)
    first, second = Matcher("ping"), Matcher("ping")
    assert (first.priority, first.block, first.event_type) == (10, True, "ping")
    assert first != second and hash(first) != hash(second)
    assert len({first, second, first}) == 2
    assert first.dead is False


def test_handle_returns_the_function():
    async def run(event: Ping):
        pass

    assert Matcher("ping").handle()(run) is run


@pytest.mark.asyncio
async def test_no_dependency_meta_cache_reinspects_handlers(monkeypatch):
    from amrita_sense._unsafe import _Flags
    from amrita_sense.hook import matcher as matcher_module

    seen = []
    matcher = Matcher("ping", block=False)

    @matcher.handle()
    async def run(event: Ping):
        seen.append(event.payload)

    data = EventRegistry().get_handlers("ping")[10][0]
    data.signature = {"params": {"svc": {"type_hint": Service, "kind": "required", "default": None}}, "factory_map": {}}
    await MatcherFactory.trigger_event(Ping("skipped"))
    flags = _Flags()
    flags.NO_DEPENDENCY_META_CACHE = True
    monkeypatch.setattr(matcher_module, "__flags__", flags)
    await MatcherFactory.trigger_event(Ping("seen"))
    assert seen == ["seen"]
