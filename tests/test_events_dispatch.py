"""Event dispatch: ordering, blocking, control exceptions, failures, dead matchers, concurrency (rules 82-86)."""

from __future__ import annotations

import asyncio
import datetime
import logging
from dataclasses import dataclass

import pytest

from amrita_sense import BaseEvent, Matcher, MatcherFactory, on_event
from amrita_sense._unsafe import _Flags
from amrita_sense.hook import matcher as matcher_module
from amrita_sense.hook.event import ConstructableEvent
from amrita_sense.hook.exception import MatcherException
from amrita_sense.hook.matcher import EventRegistry


@dataclass
class Ping(BaseEvent):
    payload: str = "ping"

    def get_event_type(self) -> str:
        return "ping"

    @property
    def event_type(self) -> str:
        return "ping"


@dataclass
class Pong(BaseEvent):
    def get_event_type(self) -> str:
        return "pong"

    @property
    def event_type(self) -> str:
        return "pong"


@dataclass
class Built(ConstructableEvent):
    def get_event_type(self) -> str:
        return "built"

    @property
    def event_type(self) -> str:
        return "built"

    @classmethod
    def constructor(cls) -> Built:
        return cls()


@pytest.fixture(autouse=True)
def empty_registry():
    EventRegistry()._event_handlers.clear()
    yield
    EventRegistry()._event_handlers.clear()


def handler(log: list, name: str, *, priority: int = 10, block: bool = False, event_type: str = "ping", action=None):
    """Register a handler that logs `name`, then runs `action(matcher)` if given."""
    matcher = Matcher(event_type, priority, block)

    @matcher.handle()
    async def run(event: Ping, matcher: Matcher):
        log.append(name)
        if action is not None:
            action(matcher)

    return matcher


@pytest.mark.asyncio
async def test_priorities_ascending_then_registration_order():
    log = []
    handler(log, "10a", priority=10)
    handler(log, "1", priority=1)
    handler(log, "5a", priority=5)
    handler(log, "5b", priority=5)
    handler(log, "10b", priority=10)
    await MatcherFactory.trigger_event(Ping())
    assert log == ["1", "5a", "5b", "10a", "10b"]


@pytest.mark.asyncio
async def test_blocking_handler_stops_the_rest_even_in_its_group():
    log = []
    handler(log, "5a", priority=5, block=True)
    handler(log, "5b", priority=5)
    handler(log, "10", priority=10)
    await MatcherFactory.trigger_event(Ping())
    assert log == ["5a"]


@pytest.mark.asyncio
async def test_set_block_changes_a_matcher():
    log = []
    first = handler(log, "a", priority=1, block=True)
    handler(log, "b", priority=2)
    first.set_block(False)
    await MatcherFactory.trigger_event(Ping())
    assert log == ["a", "b"]


@pytest.mark.asyncio
async def test_pass_event_skips_to_the_next_handler_without_blocking():
    log = []
    handler(log, "a", priority=1, block=True, action=lambda m: m.pass_event())
    handler(log, "b", priority=2)
    await MatcherFactory.trigger_event(Ping())
    assert log == ["a", "b"]


@pytest.mark.asyncio
async def test_stop_process_ends_the_dispatch():
    log = []
    handler(log, "a", priority=1, action=lambda m: m.stop_process())
    handler(log, "b", priority=1)
    handler(log, "c", priority=2)
    await MatcherFactory.trigger_event(Ping())
    assert log == ["a"]


@pytest.mark.asyncio
async def test_failing_handler_is_logged_and_does_not_block(caplog):
    log = []

    def fail(_m):
        raise ValueError("handler broke")

    handler(log, "a", priority=1, block=True, action=fail)
    handler(log, "b", priority=2)
    with caplog.at_level(logging.ERROR, logger="amrita_sense"):
        await MatcherFactory.trigger_event(Ping())
    assert log == ["a", "b"]
    assert any("handler broke" in (r.exc_text or "") or r.exc_info for r in caplog.records)


@pytest.mark.asyncio
async def test_ignored_exception_propagates_and_stops():
    log = []

    def fail(_m):
        raise KeyError("pass me through")

    handler(log, "a", priority=1, action=fail)
    handler(log, "b", priority=2)
    with pytest.raises(KeyError):
        await MatcherFactory.trigger_event(Ping(), exception_ignored=(KeyError,))
    assert log == ["a"]


@pytest.mark.asyncio
async def test_other_matcher_exceptions_propagate():
    class Custom(MatcherException):
        pass

    def fail(_m):
        raise Custom()

    handler([], "a", action=fail)
    with pytest.raises(Custom):
        await MatcherFactory.trigger_event(Ping())


@pytest.mark.asyncio
async def test_disable_exc_ignored_flag_empties_the_pass_through_types(monkeypatch):
    flags = _Flags()
    flags.DISABLE_EXC_IGNORED = True
    monkeypatch.setattr(matcher_module, "__flags__", flags)
    log = []

    def fail(_m):
        raise KeyError("now only logged")

    handler(log, "a", priority=1, action=fail)
    handler(log, "b", priority=2)
    await MatcherFactory.trigger_event(Ping(), exception_ignored=(KeyError,))
    assert log == ["a", "b"]


@pytest.mark.asyncio
async def test_dead_matcher_is_skipped_and_pruned():
    log = []
    past = datetime.datetime.now() - datetime.timedelta(seconds=1)
    future = datetime.datetime.now() + datetime.timedelta(days=1)
    dead = Matcher("ping", 5, block=False, dead_at=past)
    alive = Matcher("ping", 5, block=False, dead_at=future)

    @dead.handle()
    async def gone(event: Ping):
        log.append("dead")

    @alive.handle()
    async def here(event: Ping):
        log.append("alive")

    assert dead.dead and not alive.dead
    await MatcherFactory.trigger_event(Ping())
    assert log == ["alive"]
    assert [d.function for d in EventRegistry().get_handlers("ping")[5]] == [here]


@pytest.mark.asyncio
async def test_unknown_event_type_does_nothing():
    await MatcherFactory.trigger_event(Pong())
    assert EventRegistry().get_handlers("pong") == {}


@pytest.mark.asyncio
async def test_last_event_in_args_replaces_the_event():
    seen = []
    matcher = on_event("pong", block=False)

    @matcher.handle()
    async def run(event: Pong, first: Ping):
        seen.append((type(event).__name__, first.payload))

    # the pool is [matcher, Pong(), Ping("q"), Pong()]: the first positional event is dropped
    await MatcherFactory.trigger_event(Ping("p"), Ping("q"), Pong())
    assert seen == [("Pong", "q")]


class Virtual:
    """Becomes a `BaseEvent` by registration (`BaseEvent.register`), not by inheritance."""

    def get_event_type(self) -> str:
        return "pong"


class Posing:
    """Reports `Pong` as its `__class__` when `posing` is set: `isinstance` answers per value."""

    def __init__(self, posing: bool):
        self.posing = posing

    @property
    def __class__(self):  # noqa: D401 - mimics a proxy
        return Pong if self.posing else Posing

    def get_event_type(self) -> str:
        return "pong"


@pytest.mark.asyncio
async def test_which_argument_is_an_event_follows_registration_and_each_value():
    seen = []
    matcher = on_event("pong", block=False)

    @matcher.handle()
    async def run(event: BaseEvent):
        seen.append(type(event).__name__)

    unregistered = type("Unregistered", (Virtual,), {})
    await MatcherFactory.trigger_event(Pong(), unregistered())
    BaseEvent.register(unregistered)
    await MatcherFactory.trigger_event(Pong(), unregistered())
    await MatcherFactory.trigger_event(Pong(), Posing(False))
    await MatcherFactory.trigger_event(Pong(), Posing(True))
    assert seen == ["Pong", "Unregistered", "Pong", "Posing"]


@pytest.mark.asyncio
async def test_bad_events_are_refused():
    with pytest.raises(TypeError, match="ConstructableEvent"):
        await MatcherFactory.trigger_event(Built)
    with pytest.raises(RuntimeError, match="No event"):
        await MatcherFactory.trigger_event(None)
    with pytest.raises(TypeError, match="BaseEvent"):
        await MatcherFactory.trigger_event("not an event")


@pytest.mark.asyncio
async def test_handlers_registered_between_dispatches_take_part():
    log = []
    handler(log, "a", priority=5)
    await MatcherFactory.trigger_event(Ping())
    handler(log, "b", priority=1)
    handler(log, "c", priority=5)
    await MatcherFactory.trigger_event(Ping())
    EventRegistry()._event_handlers.clear()
    await MatcherFactory.trigger_event(Ping())
    assert log == ["a", "b", "a", "c"]


@pytest.mark.asyncio
async def test_dispatches_of_one_type_are_serialised():
    log = []
    gate = asyncio.Event()
    matcher = Matcher("ping", block=False)

    @matcher.handle()
    async def slow(event: Ping):
        log.append(f"start {event.payload}")
        if event.payload == "first":
            await gate.wait()
        log.append(f"end {event.payload}")

    first = asyncio.create_task(MatcherFactory.trigger_event(Ping("first")))
    await asyncio.sleep(0)
    second = asyncio.create_task(MatcherFactory.trigger_event(Ping("second")))
    await asyncio.sleep(0.01)
    assert log == ["start first"]
    gate.set()
    await asyncio.gather(first, second)
    assert log == ["start first", "end first", "start second", "end second"]


@pytest.mark.asyncio
async def test_dispatches_of_different_types_run_concurrently():
    log = []
    gate = asyncio.Event()
    ping_matcher, pong_matcher = Matcher("ping", block=False), Matcher("pong", block=False)

    @ping_matcher.handle()
    async def on_ping(event: Ping):
        log.append("ping start")
        await gate.wait()
        log.append("ping end")

    @pong_matcher.handle()
    async def on_pong(event: Pong):
        log.append("pong")
        gate.set()

    await asyncio.wait_for(
        asyncio.gather(MatcherFactory.trigger_event(Ping()), MatcherFactory.trigger_event(Pong())), 5
    )
    assert log == ["ping start", "pong", "ping end"]


@pytest.mark.asyncio
async def test_cancelled_waiter_leaves_the_lock_usable():
    gate = asyncio.Event()
    matcher = Matcher("ping", block=False)
    log = []

    @matcher.handle()
    async def slow(event: Ping):
        log.append(event.payload)
        if event.payload == "hold":
            await gate.wait()

    holder = asyncio.create_task(MatcherFactory.trigger_event(Ping("hold")))
    await asyncio.sleep(0)
    waiter = asyncio.create_task(MatcherFactory.trigger_event(Ping("cancelled")))
    await asyncio.sleep(0.01)
    waiter.cancel()
    gate.set()
    await holder
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await asyncio.wait_for(MatcherFactory.trigger_event(Ping("after")), 5)
    assert log == ["hold", "after"]


@pytest.mark.asyncio
async def test_recursive_dispatch_of_the_same_type_fails_instead_of_hanging():
    outcomes = []
    matcher = Matcher("ping", block=False)

    @matcher.handle()
    async def again(event: Ping):
        if event.payload == "outer":
            try:
                await MatcherFactory.trigger_event(Ping("inner"))
            except RuntimeError as exc:
                outcomes.append(str(exc))

    await asyncio.wait_for(MatcherFactory.trigger_event(Ping("outer")), 5)
    assert len(outcomes) == 1 and "already being dispatched" in outcomes[0]


@pytest.mark.asyncio
async def test_nested_dispatch_of_another_type_works():
    log = []
    ping_matcher, pong_matcher = Matcher("ping", block=False), Matcher("pong", block=False)

    @ping_matcher.handle()
    async def on_ping(event: Ping):
        log.append("ping")
        await MatcherFactory.trigger_event(Pong())

    @pong_matcher.handle()
    async def on_pong(event: Pong):
        log.append("pong")

    await MatcherFactory.trigger_event(Ping())
    assert log == ["ping", "pong"]


@pytest.mark.asyncio
async def test_simple_run_reports_whether_to_continue():
    log = []
    handler(log, "a", block=True)
    handlers = EventRegistry().get_handlers("ping")[10]
    assert await MatcherFactory._simple_run(handlers, (), [Ping()], {}) is False
    handler(log, "b", priority=3)
    assert await MatcherFactory._simple_run(EventRegistry().get_handlers("ping")[3], (), [Ping()], {}) is True
    assert log == ["a", "b"]


@pytest.mark.asyncio
async def test_simple_run_refuses_unresolved_factories():
    from amrita_sense.hook.matcher import Depends

    handler([], "a")
    with pytest.raises(ValueError, match="simple_run"):
        await MatcherFactory._simple_run(EventRegistry().get_handlers("ping")[10], (), [Ping(), Depends(lambda: 1)], {})


@pytest.mark.asyncio
async def test_sync_handler_is_reported_as_a_failure():
    log = []
    matcher = Matcher("ping", 1, block=True)

    @matcher.handle()
    def not_async(event: Ping):
        log.append("sync ran")

    handler(log, "next", priority=2)
    await MatcherFactory.trigger_event(Ping())
    assert log == ["sync ran", "next"]


class Caller:
    """A context object dispatched beside the event (the shape of AmritaCore's events)."""

    def __init__(self, name: str) -> None:
        self.name = name


@pytest.mark.asyncio
async def test_handler_outcomes_of_a_dispatch_with_context_arguments(caplog):
    """Pass, stop, a logged failure, an ignored exception and a matcher exception, each dispatched
    twice with a context argument (planned, then the kept plan): the same outcome both times."""
    log = []

    def with_caller(name, priority, action=None, block=False):
        matcher = Matcher("ping", priority, block)

        @matcher.handle()
        async def run(event: Ping, caller: Caller, matcher: Matcher):
            log.append((name, caller.name))
            if action is not None:
                action(matcher)

    class Custom(MatcherException):
        pass

    def broke(_m):
        raise ValueError("handler broke")

    def ignored(_m):
        raise KeyError("pass me through")

    def custom(_m):
        raise Custom()

    with_caller("pass", 1, lambda m: m.pass_event(), block=True)
    with_caller("broke", 2, broke, block=True)
    with_caller("ran", 3)
    with_caller("stop", 4, lambda m: m.stop_process())
    with_caller("never", 5)
    for round_ in ("first", "again"):
        log.clear()
        with caplog.at_level(logging.ERROR, logger="amrita_sense"):
            await MatcherFactory.trigger_event(Ping(), Caller(round_))
        assert log == [(name, round_) for name in ("pass", "broke", "ran", "stop")]
        assert any("handler broke" in (r.exc_text or "") or r.exc_info for r in caplog.records)
        caplog.clear()

    EventRegistry()._event_handlers.clear()
    with_caller("ignored", 1, ignored)
    with_caller("after", 2)
    for _ in range(2):
        log.clear()
        with pytest.raises(KeyError):
            await MatcherFactory.trigger_event(Ping(), Caller("k"), exception_ignored=(KeyError,))
        assert log == [("ignored", "k")]

    EventRegistry()._event_handlers.clear()
    with_caller("custom", 1, custom)
    with_caller("after", 2)
    for _ in range(2):
        log.clear()
        with pytest.raises(Custom):
            await MatcherFactory.trigger_event(Ping(), Caller("m"))
        assert log == [("custom", "m")]
