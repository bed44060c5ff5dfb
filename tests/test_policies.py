"""Per-node policies (`amrita_sense.policies`): timeouts, retries with backoff, fallbacks, void
markers on the stream, events, snapshots and checkpoints taken during a backoff.

Backoffs run on a fake clock (`clock`): its sleep moves the time on at once, so no test waits for a
backoff. Timeouts are the event loop's own timers, set to a few milliseconds.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import amrita_sense
from amrita_sense import NodeCompose, NodeType, Try, WorkflowInterpreter
from amrita_sense.durable import Checkpointing, MemoryCheckpointStore, inspect_snapshot
from amrita_sense.exceptions import BreakLoop, InterruptNotice
from amrita_sense.hook.matcher import EventRegistry
from amrita_sense.hook.on import on_event
from amrita_sense.node.wrapper import Node
from amrita_sense.policies import (
    CLOCK,
    FALLBACK,
    GAVE_UP,
    POLICY_EVENT,
    RETRY,
    TIMEOUT,
    AttemptStarted,
    AttemptVoided,
    NodeTimeout,
    PolicyEvent,
    PolicyNode,
    Retry,
    drop_voided,
)
from amrita_sense.streaming import SUSPEND_ON_YIELD, SuspendObjectStream
from support import policy_programs
from support.durable_support import KEYS  # noqa: E402

SUPPORT = Path(__file__).parent / "support"

# ----- the fake clock and the event recorder ---------------------------------------------------


class FakeClock:
    """`CLOCK`'s time and sleep: a sleep moves the time on at once (after one turn of the loop);
    `hold()` makes sleeps wait until `release()`, to catch a run in its backoff."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.slept = 0.0
        self.held: asyncio.Event | None = None
        self.waiting = asyncio.Event()
        self.draws = iter(())

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if self.held is not None:
            self.waiting.set()
            await self.held.wait()
        self.now += seconds
        self.slept += seconds
        await asyncio.sleep(0)

    def random(self) -> float:
        return next(self.draws, 0.5)

    def hold(self) -> None:
        self.held = asyncio.Event()
        self.waiting = asyncio.Event()

    def release(self) -> None:
        if self.held is not None:
            self.held.set()
        self.held = None


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(CLOCK, "now", fake.time)
    monkeypatch.setattr(CLOCK, "sleep", fake.sleep)
    monkeypatch.setattr(CLOCK, "random", fake.random)
    return fake


@pytest.fixture
def events():
    """The `PolicyEvent`s dispatched during the test, through a handler registered for it alone."""
    recorded: list[PolicyEvent] = []

    async def record(event: PolicyEvent) -> None:
        recorded.append(event)

    on_event(POLICY_EVENT).handle()(record)
    yield recorded
    for handlers in (EventRegistry._event_handlers.get(POLICY_EVENT) or {}).values():
        handlers[:] = [data for data in handlers if data.function is not record]


def _failing(calls: list, error: BaseException, succeed_at: int = 0):
    """A body that records each call and raises `error` until call `succeed_at` (0: always)."""

    def body():
        calls.append(CLOCK.now())
        if succeed_at and len(calls) >= succeed_at:
            return "ok"
        raise error

    return body


async def _run(*nodes, **kwargs) -> WorkflowInterpreter:
    interp = WorkflowInterpreter(NodeCompose(*nodes).render(), **kwargs)
    await interp.run()
    return interp


# ----- declaration ------------------------------------------------------------------------------


def test_a_node_without_a_policy_is_a_plain_node():
    @Node()
    def plain():
        pass

    @Node(retry=Retry())
    def retried():
        pass

    assert type(plain) is NodeType
    assert type(retried) is PolicyNode and isinstance(retried, NodeType)


def test_calling_a_policy_node_calls_its_function():
    @Node(retry=Retry(), wrap_to_async=False)
    def double(x: int) -> int:
        return 2 * x

    assert double(21) == 42


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"timeout": 0}, ValueError, "timeout"),
        ({"timeout": -1}, ValueError, "timeout"),
        ({"timeout": math.inf}, ValueError, "timeout"),
        ({"timeout": math.nan}, ValueError, "NaN"),
        ({"timeout": "5"}, TypeError, "timeout"),
        ({"timeout": True}, TypeError, "timeout"),
        ({"idle_timeout": 0}, ValueError, "idle_timeout"),
        ({"retry": 3}, TypeError, "Retry"),
        ({"fallback": 42}, TypeError, "fallback"),
        ({"fallback": ()}, ValueError, "fallback"),
        ({"mark_void": 1}, TypeError, "mark_void"),
    ],
)
def test_a_bad_policy_is_refused_at_declaration_naming_the_node(kwargs, error, words):
    with pytest.raises(error, match=words) as caught:

        @Node(**kwargs)
        async def fetch_weather():
            pass

    assert "fetch_weather" in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"attempts": 0}, ValueError),
        ({"attempts": 2.0}, TypeError),
        ({"attempts": True}, TypeError),
        ({"retry_on": "ConnectionError"}, TypeError),
        ({"retry_on": (ValueError, 3)}, TypeError),
        ({"retry_on": int}, TypeError),
        ({"delay": -0.1}, ValueError),
        ({"factor": 0.5}, ValueError),
        ({"max_delay": 0.01, "delay": 1}, ValueError),
        ({"jitter": 1.5}, ValueError),
        ({"jitter": "a"}, TypeError),
    ],
)
def test_a_bad_retry_is_refused(kwargs, error):
    with pytest.raises(error, match="Retry|retry_on"):
        Retry(**kwargs)


def test_an_inline_sync_node_cannot_have_a_timeout():
    with pytest.raises(ValueError, match="inline sync node"):

        @Node(wrap_to_async=False, timeout=1)
        def blocking():
            pass


# ----- retry --------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("thread", [False, True], ids=["inline", "thread"])
async def test_exactly_the_declared_attempts_then_the_failure(clock, events, thread):
    calls: list = []
    node = Node(wrap_to_async=thread, retry=Retry(attempts=4))(_failing(calls, ConnectionError("down")))
    interp = WorkflowInterpreter(NodeCompose(node).render())
    with pytest.raises(ConnectionError, match="down"):
        await interp.run()
    assert len(calls) == 4
    assert [(e.kind, e.attempt) for e in events] == [(RETRY, 1), (RETRY, 2), (RETRY, 3), (GAVE_UP, 4)]
    assert not interp.is_running and interp._interpret_lock.owner is None


@pytest.mark.asyncio
async def test_a_retry_that_succeeds_continues_the_run(clock):
    calls: list = []
    trace: list = []
    node = Node(wrap_to_async=False, retry=Retry(attempts=5))(_failing(calls, ConnectionError(), succeed_at=3))

    @Node(wrap_to_async=False)
    def after():
        trace.append("after")

    await _run(node, after)
    assert len(calls) == 3 and trace == ["after"]


@pytest.mark.asyncio
async def test_backoff_waits_stay_within_their_bounds(clock, events):
    retry = Retry(attempts=6, delay=0.5, factor=3, max_delay=5, jitter=0.4)
    clock.draws = iter([0.0, 1.0, 0.25, 0.999, 0.5])
    calls: list = []
    await _run(Node(wrap_to_async=False, retry=retry, fallback=_ok_fallback())(_failing(calls, OSError())))
    waits = [later - earlier for earlier, later in zip(calls, calls[1:])]
    assert len(waits) == 5
    for failures, wait in enumerate(waits, start=1):
        shortest, longest = retry.wait_bounds(failures)
        assert shortest - 1e-9 <= wait <= longest + 1e-9
    assert [e.delay for e in events if e.kind == RETRY] == pytest.approx(waits)
    assert retry.wait_bounds(1) == pytest.approx((0.3, 0.5))
    assert retry.wait_bounds(5) == pytest.approx((3.0, 5.0))  # 0.5 * 3**4 = 40.5, capped at 5


def _ok_fallback():
    @Node(wrap_to_async=False)
    def fallback():
        return "fallback"

    return fallback


@pytest.mark.asyncio
async def test_retry_on_is_respected(clock):
    calls: list = []
    node = Node(wrap_to_async=False, retry=Retry(attempts=5, retry_on=ConnectionError))(_failing(calls, ValueError()))
    with pytest.raises(ValueError):
        await _run(node)
    assert len(calls) == 1


@pytest.mark.asyncio
async def test_retry_on_may_be_a_predicate(clock):
    calls: list = []

    def transient(exc: BaseException) -> bool:
        return "transient" in str(exc)

    node = Node(wrap_to_async=False, retry=Retry(attempts=3, retry_on=transient))(
        _failing(calls, RuntimeError("transient glitch"))
    )
    with pytest.raises(RuntimeError):
        await _run(node)
    assert len(calls) == 3


class _Passes(Exception):
    """A user's pass-through type (`exception_ignored`)."""


@pytest.mark.asyncio
@pytest.mark.parametrize("error", [InterruptNotice(), _Passes(), KeyboardInterrupt(), BreakLoop()])
async def test_pass_through_types_and_base_exceptions_are_never_retried(clock, error):
    calls: list = []
    fell_back: list = []

    @Node(wrap_to_async=False)
    def fallback():
        fell_back.append(1)

    node = Node(wrap_to_async=False, retry=Retry(attempts=5, retry_on=BaseException), fallback=fallback)(
        _failing(calls, error)
    )
    interp = WorkflowInterpreter(NodeCompose(node).render(), exception_ignored=(_Passes,))
    try:
        await interp.run()
    except BaseException as exc:  # noqa: BLE001 - each kind leaves the run its own way
        assert type(exc) is type(error)
    assert len(calls) == 1 and not fell_back
    assert interp._interpret_lock.owner is None


@pytest.mark.asyncio
async def test_a_try_around_the_node_sees_only_the_final_failure(clock):
    calls: list = []
    caught: list = []
    node = Node(wrap_to_async=False, retry=Retry(attempts=3))(_failing(calls, ConnectionError("last")))

    @Node(wrap_to_async=False)
    def handler(exc_val: BaseException):
        caught.append(str(exc_val))

    await _run(Try(node).CATCH(ConnectionError, handler))
    assert len(calls) == 3 and caught == ["last"]


# ----- fallback -----------------------------------------------------------------------------------


class Pool:
    """An object in the interpreter's pools, injected by type."""

    city = "Oslo"


@pytest.mark.asyncio
async def test_the_fallback_runs_when_the_attempts_run_out(clock, events):
    calls: list = []
    seen: list = []

    @Node(wrap_to_async=False)
    def cached(pool: Pool, exc_val: BaseException):
        seen.append((pool.city, str(exc_val)))
        return "cached"

    node = Node(wrap_to_async=False, retry=Retry(attempts=2), fallback=cached)(_failing(calls, OSError("gone")))
    await _run(node, extra_args=(Pool(),))
    assert len(calls) == 2 and seen == [("Oslo", "gone")]
    assert [(e.kind, e.fallback) for e in events][-1] == (FALLBACK, cached.tag)


@pytest.mark.asyncio
async def test_a_chain_of_fallbacks_is_tried_in_order(clock, events):
    order: list = []

    @Node(wrap_to_async=False)
    def first(exc_val: BaseException):
        order.append(("first", str(exc_val)))
        raise OSError("first failed too")

    @Node()
    async def second(exc_val: BaseException):
        order.append(("second", str(exc_val)))

    node = Node(wrap_to_async=False, fallback=(first, second))(_failing([], OSError("node failed")))
    await _run(node)
    assert order == [("first", "node failed"), ("second", "first failed too")]
    assert [e.kind for e in events] == [FALLBACK, FALLBACK]


@pytest.mark.asyncio
async def test_when_every_fallback_fails_the_last_failure_propagates(clock, events):
    @Node(wrap_to_async=False)
    def broken():
        raise LookupError("fallback failed")

    node = Node(wrap_to_async=False, fallback=broken)(_failing([], OSError("node failed")))
    with pytest.raises(LookupError, match="fallback failed"):
        await _run(node)
    assert [e.kind for e in events] == [FALLBACK, GAVE_UP]


# ----- timeouts -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_async_node_over_its_timeout_is_cancelled(events):
    cancelled: list = []

    @Node(timeout=0.005)
    async def slow():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    with pytest.raises(NodeTimeout) as caught:
        await _run(slow)
    assert isinstance(caught.value, TimeoutError) and caught.value.seconds == 0.005
    assert cancelled == [True]
    assert [e.kind for e in events] == [TIMEOUT, GAVE_UP]


@pytest.mark.asyncio
async def test_timeouts_can_be_retried(clock):
    calls: list = []

    @Node(timeout=0.005, retry=Retry(attempts=3, retry_on=TimeoutError))
    async def slow_then_fast():
        calls.append(1)
        if len(calls) < 3:
            await asyncio.sleep(30)
        return "fast"

    await _run(slow_then_fast)
    assert len(calls) == 3


@pytest.mark.asyncio
async def test_a_timeout_does_not_swallow_a_cancellation_from_outside():
    started = asyncio.Event()

    @Node(timeout=30)
    async def waits():
        started.set()
        await asyncio.sleep(30)

    interp = WorkflowInterpreter(NodeCompose(waits).render())
    task = asyncio.ensure_future(interp.run())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not interp.is_running and interp._interpret_lock.owner is None


@pytest.mark.asyncio
async def test_a_worker_thread_node_over_its_timeout_lets_the_run_go_on():
    gate = threading.Event()
    trace: list = []

    @Node(timeout=0.005)
    def blocking():
        gate.wait(10)
        return "late result"

    @Node(wrap_to_async=False)
    def fallback_after():
        trace.append("went on")

    try:
        with pytest.raises(NodeTimeout):
            await _run(blocking)
        await _run(Node(timeout=0.005, fallback=fallback_after)(blocking._origin))
    finally:
        gate.set()
    assert trace == ["went on"]


@pytest.mark.asyncio
async def test_an_idle_timeout_is_reset_by_output_and_fires_on_silence():
    chunks: list = []

    @Node(idle_timeout=0.05)
    async def steady(interp: WorkflowInterpreter):
        for i in range(6):
            await asyncio.sleep(0.015)
            await interp.object_io.yield_response(i)

    @Node(idle_timeout=0.01)
    async def stalls(interp: WorkflowInterpreter):
        await interp.object_io.yield_response("first")
        await asyncio.sleep(30)

    stream = SuspendObjectStream(queue_size=math.inf)
    await _run(steady, object_io=stream)
    with pytest.raises(NodeTimeout) as caught:
        await _run(stalls, object_io=stream)
    assert caught.value.idle
    await stream.set_queue_done()
    chunks = [x async for x in stream.get_response_generator()]
    assert chunks == [0, 1, 2, 3, 4, 5, "first"]


@pytest.mark.asyncio
async def test_time_parked_at_a_stream_gate_does_not_count():
    stream = SuspendObjectStream(queue_size=math.inf)
    done: list = []

    @Node(timeout=0.03)
    async def streams(interp: WorkflowInterpreter):
        await interp.object_io.yield_response("a")  # parks here while the consumer holds the run
        done.append(True)

    interp = WorkflowInterpreter(NodeCompose(streams).render(), stream)
    run = asyncio.ensure_future(interp.run())
    await stream.wait_to_suspend(SUSPEND_ON_YIELD)
    await asyncio.sleep(0.06)  # twice the timeout, parked
    stream.resume()
    await run
    assert done == [True]


# ----- the stream ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_void_markers_let_the_consumer_drop_a_failed_attempts_output(clock):
    calls: list = []

    @Node(retry=Retry(attempts=3), mark_void=True)
    async def answer(interp: WorkflowInterpreter):
        calls.append(1)
        await interp.object_io.yield_response("Hel")
        if len(calls) < 3:
            raise ConnectionError("dropped")
        await interp.object_io.yield_response("lo")

    stream = SuspendObjectStream(queue_size=math.inf)
    await _run(answer, object_io=stream)
    await stream.set_queue_done()
    raw = [x async for x in stream.get_response_generator()]
    tag = answer.tag
    assert raw == [
        AttemptStarted(tag, 1),
        "Hel",
        AttemptVoided(tag, 1, "ConnectionError('dropped')"),
        AttemptStarted(tag, 2),
        "Hel",
        AttemptVoided(tag, 2, "ConnectionError('dropped')"),
        AttemptStarted(tag, 3),
        "Hel",
        "lo",
    ]
    assert drop_voided(raw) == ["Hel", "lo"]


@pytest.mark.asyncio
async def test_without_mark_void_the_stream_carries_no_markers(clock):
    calls: list = []

    @Node(retry=Retry(attempts=2))
    async def answer(interp: WorkflowInterpreter):
        calls.append(1)
        await interp.object_io.yield_response(len(calls))
        if len(calls) < 2:
            raise ConnectionError()

    stream = SuspendObjectStream(queue_size=math.inf)
    await _run(answer, object_io=stream)
    await stream.set_queue_done()
    assert [x async for x in stream.get_response_generator()] == [1, 2]


# ----- backoff: cancellation, suspend, snapshots, checkpoints ---------------------------------------


async def _start_in_backoff(clock: FakeClock, succeed_at: int = 0, **kwargs) -> tuple:
    """Start the policy program's run and return once it waits in its first backoff."""
    state = policy_programs.Attempts(succeed_at)
    interp = WorkflowInterpreter(policy_programs.graph(), extra_args=(state,), **kwargs)
    clock.hold()
    task = asyncio.ensure_future(interp.run())
    await clock.waiting.wait()
    return interp, state, task


@pytest.mark.asyncio
async def test_cancelling_a_run_in_its_backoff_frees_the_interpreter(clock):
    interp, state, task = await _start_in_backoff(clock, succeed_at=2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    clock.release()
    assert not interp.is_running and interp._interpret_lock.owner is None
    interp.reset()
    await interp.run()
    assert state.calls == 2 and state.trace[-1] == "after"


@pytest.mark.asyncio
async def test_a_suspend_request_during_a_backoff_parks_the_run_at_once(clock):
    stream = SuspendObjectStream()
    interp, state, task = await _start_in_backoff(clock, succeed_at=3, object_io=stream)
    request = asyncio.ensure_future(stream.wait_to_suspend())
    clock.release()
    await asyncio.wait_for(request, 5)
    assert state.calls == 1  # parked before the next attempt
    info = inspect_snapshot(interp.snapshot(pickle))
    assert (info.status, info.position, info.parked) == ("suspended", "gate", policy_programs.flaky.tag)
    stream.resume()
    await task
    assert state.calls == 3 and state.trace[-1] == "after"


@pytest.mark.asyncio
async def test_a_snapshot_in_a_backoff_restores_to_the_remaining_attempts(clock):
    interp, state, task = await _start_in_backoff(clock)
    data = interp.snapshot(pickle)
    info = inspect_snapshot(data)
    assert (info.status, info.position) == ("running", "gate")
    task.cancel()
    clock.release()
    with pytest.raises(asyncio.CancelledError):
        await task
    restored = WorkflowInterpreter.restore(policy_programs.graph(), data, codec=pickle, allow_unsigned=True)
    restored_state = restored._ava_args[1]
    with pytest.raises(ConnectionError, match=f"attempt {policy_programs.ATTEMPTS} failed"):
        await restored.run()
    assert restored_state.calls == policy_programs.ATTEMPTS  # 1 before the snapshot, the rest after


@pytest.mark.asyncio
async def test_a_snapshot_in_a_backoff_restores_in_another_process(clock, tmp_path):
    interp, state, task = await _start_in_backoff(clock)
    path = tmp_path / "backoff.snapshot"
    path.write_bytes(interp.snapshot(pickle))
    task.cancel()
    clock.release()
    with pytest.raises(asyncio.CancelledError):
        await task
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run(
        [sys.executable, str(SUPPORT / "policy_programs.py"), str(path)],
        env=env,
        cwd=SUPPORT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("POLICY "))
    outcome = json.loads(line.removeprefix("POLICY "))
    assert outcome["calls_here"] == policy_programs.ATTEMPTS - 1
    assert outcome["ended"] == f"failed: attempt {policy_programs.ATTEMPTS} failed"
    assert outcome["trace"] == ["before", *(f"attempt {n}" for n in range(1, policy_programs.ATTEMPTS + 1))]


@pytest.mark.asyncio
async def test_a_checkpointed_run_saves_as_its_backoff_begins_and_resumes_there(clock):
    store = MemoryCheckpointStore()
    policy = Checkpointing(store, "run-1", every_nodes=None, codec=pickle, keyring=KEYS)
    state = policy_programs.Attempts(succeed_at=3)
    interp = WorkflowInterpreter(policy_programs.graph(), extra_args=(state,))
    interp.checkpointing = policy
    clock.hold()
    task = asyncio.ensure_future(interp.run())
    await clock.waiting.wait()
    task.cancel()  # the process "dies" in the backoff: only the store remains
    clock.release()
    with pytest.raises(asyncio.CancelledError):
        await task
    resumed = await Checkpointing(store, "run-1", codec=pickle, keyring=KEYS).resume(policy_programs.graph())
    await resumed.run()
    resumed_state = resumed._ava_args[1]
    assert resumed_state.calls == 3
    assert resumed_state.trace == ["before", "attempt 1", "attempt 2", "attempt 3", "after"]


def test_a_policy_is_not_part_of_the_graph_identity():
    @Node()
    async def step():
        pass

    retried = Node(retry=Retry())(step.func)
    assert retried.tag == step.tag
    fingerprints = {WorkflowInterpreter(NodeCompose(n).render()).graph_fingerprint for n in (step, retried)}
    assert len(fingerprints) == 1


def test_policies_is_a_public_module():
    assert amrita_sense.policies.Retry is Retry


# ----- defaults for a whole graph -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_with_defaults_gives_every_plain_node_of_the_graph_the_policy(clock):
    from amrita_sense import IF
    from amrita_sense.policies import with_defaults

    calls: dict = {"top": [], "cond": [], "body": [], "own": []}

    def flaky(name: str, fails: int):
        def body():
            calls[name].append(1)
            if len(calls[name]) <= fails:
                raise ConnectionError(name)
            return True

        return body

    own = Node(wrap_to_async=False, retry=Retry(attempts=1))(flaky("own", 1))
    graph = NodeCompose(
        Node(wrap_to_async=False)(flaky("top", 2)),
        IF(Node(wrap_to_async=False)(flaky("cond", 1)), Node()(flaky("body", 1))),
        Try(own).CATCH(ConnectionError, Node(wrap_to_async=False)(lambda: None)),
    ).render()
    assert with_defaults(graph, retry=Retry(attempts=3), timeout=5) is graph
    await WorkflowInterpreter(graph).run()
    assert {name: len(c) for name, c in calls.items()} == {"top": 3, "cond": 2, "body": 2, "own": 1}


def test_with_defaults_refuses_what_is_not_a_rendered_graph_and_a_bad_policy():
    from amrita_sense.policies import with_defaults

    @Node()
    async def step():
        pass

    with pytest.raises(TypeError, match="rendered top-level graph"):
        with_defaults(NodeCompose(step), retry=Retry())
    with pytest.raises(ValueError, match="with_defaults"):
        with_defaults(NodeCompose(step).render(), timeout=-1)
