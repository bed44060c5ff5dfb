"""Event dispatch on a reused plan (the core's fast path, `core/_events.py`) behaves as the first
dispatch did: a handler that suspends, then returns, raises, passes or is cancelled; a handler called
positionally (its parameters are the injected names, in order) or by keyword (keyword-only,
positional-only, re-coded); the matcher and the event in either order. Each case dispatches once to
make the plan, then again on it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from amrita_sense import BaseEvent, Matcher, MatcherFactory
from amrita_sense.hook.matcher import EventRegistry

GUARD = 60.0  # seconds: turns a hang into a failure; never reached when the code is right


@dataclass
class Beat(BaseEvent):
    n: int = 0

    def get_event_type(self) -> str:
        return "beat"

    @property
    def event_type(self) -> str:
        return "beat"


@pytest.fixture(autouse=True)
def empty_registry():
    EventRegistry()._event_handlers.clear()
    yield
    EventRegistry()._event_handlers.clear()


async def _twice(*events: Beat) -> None:
    for event in events:
        await asyncio.wait_for(MatcherFactory.trigger_event(event), GUARD)


@pytest.mark.asyncio
async def test_a_handler_that_suspends_goes_on_and_the_next_one_runs_after_it():
    log = []

    @Matcher("beat", priority=1, block=False).handle()
    async def first(event: Beat):
        log.append(("first in", event.n))
        await asyncio.sleep(0)  # yields None
        await asyncio.sleep(0.001)  # yields a future
        log.append(("first out", event.n))
        return "ignored"

    @Matcher("beat", priority=2, block=False).handle()
    async def second(event: Beat):
        log.append(("second", event.n))

    await _twice(Beat(1), Beat(2))
    assert log == [("first in", 1), ("first out", 1), ("second", 1), ("first in", 2), ("first out", 2), ("second", 2)]


@pytest.mark.asyncio
async def test_a_handler_that_raises_after_suspending_is_logged_and_skipped_as_before(monkeypatch):
    from amrita_sense.hook import matcher as matcher_module

    failures, log = [], []
    monkeypatch.setattr(matcher_module, "_log_failure", lambda data, exc: failures.append(repr(exc)))
    matcher_module._events.install(
        slow=matcher_module._trigger,
        run_rest=matcher_module._run_rest,
        log_failure=lambda data, exc: failures.append(repr(exc)),
        registry=EventRegistry,
        version=matcher_module._registry_version,
        passed=matcher_module.PassException,
        cancel=matcher_module.CancelException,
        matcher_error=matcher_module.MatcherException,
    )
    try:

        @Matcher("beat", priority=1, block=False).handle()
        async def broken(event: Beat):
            await asyncio.sleep(0)
            raise ValueError(f"broken {event.n}")

        @Matcher("beat", priority=2, block=False).handle()
        async def after(event: Beat):
            log.append(event.n)

        await _twice(Beat(1), Beat(2))
        assert failures == ["ValueError('broken 1')", "ValueError('broken 2')"]
        assert log == [1, 2]
        with pytest.raises(ValueError, match="broken 3"):
            await asyncio.wait_for(MatcherFactory.trigger_event(Beat(3), exception_ignored=(ValueError,)), GUARD)
    finally:
        matcher_module._events.install(
            slow=matcher_module._trigger,
            run_rest=matcher_module._run_rest,
            log_failure=matcher_module._log_failure,
            registry=EventRegistry,
            version=matcher_module._registry_version,
            passed=matcher_module.PassException,
            cancel=matcher_module.CancelException,
            matcher_error=matcher_module.MatcherException,
        )


@pytest.mark.asyncio
async def test_pass_and_cancel_raised_after_suspending():
    log = []
    matcher = Matcher("beat", priority=1, block=False)

    @matcher.handle()
    async def decides(event: Beat):
        await asyncio.sleep(0)
        if event.n % 2:
            matcher.pass_event()
        matcher.stop_process()

    @Matcher("beat", priority=2, block=False).handle()
    async def after(event: Beat):
        log.append(event.n)

    await _twice(Beat(1), Beat(2), Beat(3), Beat(4))
    assert log == [1, 3]


@pytest.mark.asyncio
async def test_a_dispatch_cancelled_while_its_handler_is_suspended():
    started, cleaned = asyncio.Event(), []
    release = asyncio.Event()

    @Matcher("beat", block=False).handle()
    async def waits(event: Beat):
        if event.n == 0:
            return
        started.set()
        try:
            await release.wait()
        finally:
            cleaned.append(event.n)

    await _twice(Beat(0))  # the plan
    task = asyncio.ensure_future(MatcherFactory.trigger_event(Beat(1)))
    await asyncio.wait_for(started.wait(), GUARD)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == [1]
    started.clear()
    release.set()
    await _twice(Beat(2))  # the lock was released
    assert cleaned == [1, 2]


@pytest.mark.asyncio
async def test_a_suspended_dispatch_closed_runs_its_handler_cleanup():
    cleaned = []

    @Matcher("beat", block=False).handle()
    async def waits(event: Beat):
        if event.n == 0:
            return
        try:
            await asyncio.sleep(3600)
        finally:
            cleaned.append(event.n)

    await _twice(Beat(0))
    coro = MatcherFactory.trigger_event(Beat(1))
    future = coro.send(None)  # up to the handler's sleep
    assert isinstance(future, asyncio.Future)
    coro.close()
    assert cleaned == [1]
    await _twice(Beat(0))  # the lock was released


@pytest.mark.asyncio
async def test_handlers_bound_by_name_in_any_order_and_kind():
    seen = []

    @Matcher("beat", priority=1, block=False).handle()
    async def both(matcher: Matcher, event: Beat):
        seen.append(("both", type(matcher).__name__, event.n))

    @Matcher("beat", priority=2, block=False).handle()
    async def keyword_only(*, event: Beat):
        seen.append(("keyword_only", event.n))

    @Matcher("beat", priority=3, block=False).handle()
    async def with_default(event: Beat, extra: int = 7):
        seen.append(("with_default", event.n, extra))

    await _twice(Beat(1), Beat(2))
    expected = lambda n: [("both", "Matcher", n), ("keyword_only", n), ("with_default", n, 7)]  # noqa: E731
    assert seen == expected(1) + expected(2)


@pytest.mark.asyncio
async def test_a_handler_whose_code_is_replaced_is_still_called_by_keyword():
    seen = []

    @Matcher("beat", block=False).handle()
    async def handler(event: Beat):
        seen.append(("old", event.n))

    async def other(other_first: int = 0, event: Beat | None = None):
        seen.append(("new", other_first, event.n if event is not None else None))

    await _twice(Beat(1), Beat(2))
    handler.__code__, handler.__defaults__ = other.__code__, other.__defaults__  # `event` no longer first
    await _twice(Beat(3))
    assert seen[:2] == [("old", 1), ("old", 2)]
    assert seen[2:] == [("new", 0, 3)]
