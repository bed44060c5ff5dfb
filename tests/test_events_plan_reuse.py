"""Event dispatch reuses the last dispatch's plan (handlers and their injection) only while it still fits:
a handler added to or removed from a priority group, other argument types or other keyword names make a new
one. The dispatch lock's uncontended take and release (no guard) still serialise two threads' dispatches."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import pytest

from amrita_sense import BaseEvent, Matcher, MatcherFactory
from amrita_sense.hook import matcher as matcher_module
from amrita_sense.hook._dispatch_lock import DispatchLock
from amrita_sense.hook.matcher import EventRegistry

GUARD = 60.0  # seconds: turns a hang into a failure; never reached when the code is right


@dataclass
class Tick(BaseEvent):
    n: int = 0

    def get_event_type(self) -> str:
        return "tick"

    @property
    def event_type(self) -> str:
        return "tick"


@pytest.fixture(autouse=True)
def empty_registry():
    EventRegistry()._event_handlers.clear()
    yield
    EventRegistry()._event_handlers.clear()


def _plan_steps():
    plan = matcher_module._dispatch_plans.get("tick")
    return None if plan is None else plan.steps


@pytest.mark.asyncio
async def test_the_same_dispatch_reuses_its_plan():
    log = []

    @Matcher("tick", block=False).handle()
    async def first(event: Tick):
        log.append(event.n)

    await MatcherFactory.trigger_event(Tick(1))
    steps = _plan_steps()
    assert steps is not None
    await MatcherFactory.trigger_event(Tick(2))
    assert _plan_steps() is steps
    assert log == [1, 2]


@pytest.mark.asyncio
async def test_a_handler_appended_to_the_same_group_makes_a_new_plan():
    log = []
    matcher = Matcher("tick", block=False)

    @matcher.handle()
    async def first(event: Tick):
        log.append(("first", event.n))

    await MatcherFactory.trigger_event(Tick(1))
    steps = _plan_steps()

    @matcher.handle()  # same priority group: the registry's key set, and so its version, do not change
    async def second(event: Tick):
        log.append(("second", event.n))

    await MatcherFactory.trigger_event(Tick(2))
    assert _plan_steps() is not steps
    assert log == [("first", 1), ("first", 2), ("second", 2)]


@pytest.mark.asyncio
async def test_a_handler_removed_from_its_group_is_not_run_from_the_old_plan():
    log = []
    matcher = Matcher("tick", block=False)

    @matcher.handle()
    async def first(event: Tick):
        log.append("first")

    @matcher.handle()
    async def second(event: Tick):
        log.append("second")

    await MatcherFactory.trigger_event(Tick())
    group = EventRegistry().get_handlers("tick")[matcher.priority]
    del group[0]  # a direct edit of the list: no version bump
    await MatcherFactory.trigger_event(Tick())
    group[0] = group[0]  # same contents: the plan still fits
    steps = _plan_steps()
    await MatcherFactory.trigger_event(Tick())
    assert _plan_steps() is steps
    assert log == ["first", "second", "second", "second"]


@pytest.mark.asyncio
async def test_other_argument_types_or_keyword_names_make_a_new_plan():
    seen = []

    @Matcher("tick", block=False).handle()
    async def takes(event: Tick, value: int):
        seen.append(value)

    await MatcherFactory.trigger_event(Tick(), 5)
    by_int = _plan_steps()
    await MatcherFactory.trigger_event(Tick(), "text")  # no int to inject: the handler is skipped
    assert _plan_steps() is not by_int
    await MatcherFactory.trigger_event(Tick(), 7)
    await MatcherFactory.trigger_event(Tick(), value=9)
    await MatcherFactory.trigger_event(Tick(), other=9)  # no `value`: skipped
    assert seen == [5, 7, 9]


@pytest.mark.asyncio
async def test_a_new_priority_group_or_a_cleared_table_makes_a_new_plan():
    log = []

    @Matcher("tick", priority=5, block=False).handle()
    async def later(event: Tick):
        log.append("later")

    await MatcherFactory.trigger_event(Tick())

    @Matcher("tick", priority=1, block=False).handle()
    async def sooner(event: Tick):
        log.append("sooner")

    await MatcherFactory.trigger_event(Tick())
    EventRegistry()._event_handlers.clear()
    await MatcherFactory.trigger_event(Tick())
    assert log == ["later", "sooner", "later"]


@pytest.mark.asyncio
async def test_a_table_put_on_the_registry_class_or_another_class_attribute_written_is_seen(monkeypatch):
    # the compiled fast path trusts its plan's table while the registry class's attributes are unchanged
    log = []

    @Matcher("tick", block=False).handle()
    async def first(event: Tick):
        log.append(("first", event.n))

    await MatcherFactory.trigger_event(Tick(1))
    await MatcherFactory.trigger_event(Tick(2))  # on the plan
    monkeypatch.setattr(EventRegistry, "_lock", threading.Lock())  # another attribute: the plan still fits
    await MatcherFactory.trigger_event(Tick(3))
    await MatcherFactory.trigger_event(Tick(4))
    monkeypatch.setattr(EventRegistry, "_event_handlers", matcher_module._HandlerTable())  # a new, empty table
    await MatcherFactory.trigger_event(Tick(5))  # no handler in it
    await MatcherFactory.trigger_event(Tick(6))

    @Matcher("tick", block=False).handle()
    async def second(event: Tick):
        log.append(("second", event.n))

    await MatcherFactory.trigger_event(Tick(7))  # the new table's handler only
    await MatcherFactory.trigger_event(Tick(8))
    monkeypatch.undo()  # the old table back
    await MatcherFactory.trigger_event(Tick(9))
    await MatcherFactory.trigger_event(Tick(10))
    EventRegistry()._event_handlers.clear()
    assert log == [("first", 1), ("first", 2), ("first", 3), ("first", 4), ("second", 7), ("second", 8)] + [
        ("first", 9),
        ("first", 10),
    ]


def test_uncontended_take_and_release_leave_the_lock_free():
    lock = DispatchLock()
    assert lock.try_take() and lock.locked()
    assert not lock.try_take()
    lock.release()
    assert not lock.locked() and not lock._waiters
    assert lock.try_take()
    lock.release()


def test_two_threads_dispatching_one_event_type_are_serialised():
    """Each thread's own loop dispatches `tick` many times; a handler never sees another one running."""
    inside, overlaps, runs = [0], [], [0]
    count_lock = threading.Lock()

    @Matcher("tick", block=False).handle()
    async def check(event: Tick):
        with count_lock:
            inside[0] += 1
            if inside[0] != 1:
                overlaps.append(event.n)
        await asyncio.sleep(0)  # hand the loop over while holding the dispatch lock
        with count_lock:
            inside[0] -= 1
            runs[0] += 1

    async def dispatch_many(n: int) -> None:
        for i in range(n):
            await MatcherFactory.trigger_event(Tick(i))

    threads = [threading.Thread(target=asyncio.run, args=(dispatch_many(300),)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(GUARD)
    assert not any(thread.is_alive() for thread in threads)
    assert overlaps == []
    assert runs[0] == 1200
    assert not MatcherFactory._dispatch_locks["tick"].locked()


@pytest.mark.asyncio
async def test_a_planned_dispatch_of_the_same_type_from_its_own_handler_fails_instead_of_hanging():
    """The second dispatch runs on the core's plan (its holder is the handler it awaits, not a task)."""
    outcomes = []

    @Matcher("tick", block=False).handle()
    async def again(event: Tick):
        if event.n == 1:
            try:
                await MatcherFactory.trigger_event(Tick(0))
            except RuntimeError as exc:
                outcomes.append(str(exc))

    await MatcherFactory.trigger_event(Tick(0))  # makes the plan
    await asyncio.wait_for(MatcherFactory.trigger_event(Tick(1)), GUARD)
    assert len(outcomes) == 1 and "already being dispatched" in outcomes[0]
    assert not MatcherFactory._dispatch_locks["tick"].locked()


@pytest.mark.asyncio
async def test_a_matcher_or_handler_written_between_or_during_dispatches_is_seen():
    log = []
    first_matcher, second_matcher = Matcher("tick", priority=1, block=False), Matcher("tick", priority=2, block=False)

    @first_matcher.handle()
    async def first(event: Tick):
        log.append(("first", event.n))
        if event.n == 2:
            second_matcher.set_block(True)  # read after the second handler ran, in this dispatch

    @second_matcher.handle()
    async def second(event: Tick, matcher: Matcher):
        log.append(("second", event.n, matcher.block))

    await MatcherFactory.trigger_event(Tick(0))
    first_matcher.set_block(True)
    await MatcherFactory.trigger_event(Tick(1))  # the first handler now blocks
    first_matcher.set_block(False)
    await MatcherFactory.trigger_event(Tick(2))
    assert log == [("first", 0), ("second", 0, False), ("first", 1), ("first", 2), ("second", 2, True)]


@dataclass
class Batch(BaseEvent):
    items: tuple = ()

    def get_event_type(self) -> str:
        return "tick"

    @property
    def event_type(self) -> str:
        return "tick"

    def __len__(self) -> int:
        return len(self.items)


@pytest.mark.asyncio
async def test_a_false_event_is_refused_on_a_plan_made_for_its_class():
    # `not event` on the fast path: the event's own __len__ / __bool__, even one given to its class later
    log = []

    @Matcher("tick", block=False).handle()
    async def first(event: BaseEvent):
        log.append(type(event).__name__)

    await MatcherFactory.trigger_event(Batch((1,)))
    await MatcherFactory.trigger_event(Batch((1,)))  # on the plan
    with pytest.raises(RuntimeError, match="No event found"):
        await MatcherFactory.trigger_event(Batch())
    await MatcherFactory.trigger_event(Tick(1))
    await MatcherFactory.trigger_event(Tick(2))  # on the plan
    try:
        Tick.__bool__ = lambda self: self.n > 0  # type: ignore[attr-defined]
        with pytest.raises(RuntimeError, match="No event found"):
            await MatcherFactory.trigger_event(Tick(0))
        await MatcherFactory.trigger_event(Tick(3))
    finally:
        del Tick.__bool__  # type: ignore[attr-defined]
    await MatcherFactory.trigger_event(Tick(0))
    assert log == ["Batch", "Batch", "Tick", "Tick", "Tick", "Tick"]
