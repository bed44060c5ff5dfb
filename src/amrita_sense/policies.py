"""Per-node policies: a timeout, retries with backoff, a fallback, declared where the node is.

    @Node(timeout=30, retry=Retry(attempts=3, retry_on=(ConnectionError,)), fallback=cached_answer)
    async def complete(prompt: str) -> str: ...

A node with a policy runs its attempts inside the run, under the interpreter lock, as one step:

- **timeout** (seconds): an attempt over it is cancelled and fails with `NodeTimeout` (a
  `TimeoutError`). `idle_timeout` is reset whenever the node sends output on its stream
  (`yield_response` / `push_object`). A worker-thread node cannot be stopped: the run goes on with
  `NodeTimeout` and the thread's late result is dropped. An inline sync node (`wrap_to_async=False`)
  cannot be interrupted at all: declaring a timeout on one is a `ValueError`.
- **retry**: a failure that `Retry.retry_on` accepts is retried after a backoff, up to
  `Retry.attempts` attempts in all. The order of the checks on a failure: the interpreter's
  pass-through types (`InterruptNotice`, `BreakLoop` and the user's `exception_ignored`) and every
  `BaseException` that is not an `Exception` (cancellation included) leave the node at once, never
  retried, never given to the fallback; then `retry_on`. A Try/CATCH around the node sees only the
  final failure. Every attempt gets the arguments injected once, when the node's step began.
- **fallback**: when the attempts run out, the fallback node (or each node of a tuple, in order)
  runs instead, with its own injection plus `exc_type`, `exc_val` and `exc_tb` of the last failure
  by parameter name, as a CATCH handler; its result is the node's result.
- **mark_void**: an `AttemptStarted` marker goes on the stream's response channel before each
  attempt and an `AttemptVoided` marker after each failed one, so that a consumer can drop what a
  failed attempt already streamed (`drop_voided`). Off by default: consumers see what they saw before.

Durable: the number of failed attempts and the backoff deadline (wall-clock time, `CLOCK.now()`)
are part of `snapshot()` while the node backs off, and a checkpointed run saves a checkpoint when
a backoff begins. A run restored from it (in another process, or by a Ray failover) waits out
what is left of the backoff and makes the remaining attempts. A suspend request during a backoff
parks the run at once, at the node's own gate.

Observable: every timeout, retry, fallback and final failure is a `PolicyEvent` dispatched through
the event system (`on_event(POLICY_EVENT)`), with the interpreter's pools for injection.

Graph identity: a policy is not part of the graph's fingerprint, so a snapshot restores onto a
deploy that changed the node's policy.
"""

from __future__ import annotations

import asyncio
import functools
import math
import random
import sys
import time
import weakref
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from amrita_sense._unsafe import __flags__
from amrita_sense.exceptions import InterruptNotice
from amrita_sense.hook.event import BaseEvent
from amrita_sense.hook.matcher import MatcherFactory, has_handlers
from amrita_sense.instructions.enum import BuiltinTags
from amrita_sense.node.abc_base import is_rendered_compose
from amrita_sense.node.core import Node
from amrita_sense.node.run_state import AttemptKeeper
from amrita_sense.runtime import observe as _observe
from amrita_sense.runtime.offload import run_in_worker

POLICY_EVENT = "amrita_sense.policy"
"""The event type of every `PolicyEvent` (register handlers with `on_event(POLICY_EVENT)`)."""

TIMEOUT, RETRY, FALLBACK, GAVE_UP = "timeout", "retry", "fallback", "gave_up"
"""`PolicyEvent.kind`: an attempt timed out; a retry is scheduled; the fallback runs; the node failed."""

SUSPEND_POLL = 0.005
"""Seconds between two looks at the suspend flag while a node backs off (the longest a suspend
request waits before the run parks)."""


class NodeTimeout(TimeoutError):
    """An attempt of a node ran over its `timeout` (or went `idle_timeout` seconds without output)."""

    def __init__(self, node: str, seconds: float, idle: bool = False):
        what = "sent no output for" if idle else "ran over its timeout of"
        super().__init__(f"{node} {what} {seconds:g} s")
        self.node = node
        self.seconds = seconds
        self.idle = idle

    def __reduce__(self) -> Any:
        return type(self), (self.node, self.seconds, self.idle)


class Clock:
    """Where policies read the time and wait: wall-clock seconds (`time.time`, so that a deadline
    means the same in another process) and the event loop's sleep. Tests swap `CLOCK.now` and
    `CLOCK.sleep` for a fake clock."""

    def __init__(self) -> None:
        self.now: Callable[[], float] = time.time
        self.sleep: Callable[[float], Any] = asyncio.sleep
        self.random: Callable[[], float] = random.random


CLOCK = Clock()


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {type(value).__name__}")
    if math.isnan(value):
        raise ValueError(f"{what} must be a number of seconds, not NaN")
    return float(value)


def _exception_predicate(retry_on: Any) -> Callable[[BaseException], bool]:
    """`retry_on` as a predicate: an exception class, a tuple of them, or a callable of the exception."""
    classes = retry_on if isinstance(retry_on, tuple) else (retry_on,)
    if classes and all(isinstance(c, type) and issubclass(c, BaseException) for c in classes):
        return lambda exc: isinstance(exc, classes)
    if not isinstance(retry_on, (tuple, type)) and callable(retry_on):
        return lambda exc: bool(retry_on(exc))
    raise TypeError(
        f"retry_on must be an exception class, a tuple of exception classes or a callable of the "
        f"exception, not {retry_on!r}"
    )


@dataclass(frozen=True)
class Retry:
    """How often and when a failed node runs again.

    Args:
        attempts: the most attempts in all (>= 1; 1 never retries).
        retry_on: the failures worth another attempt: an exception class, a tuple of them, or a
            callable that takes the exception and returns a bool. `NodeTimeout` is a `TimeoutError`.
        delay: seconds before the first retry (>= 0).
        factor: each further retry waits `factor` times longer (>= 1).
        max_delay: the cap on any one wait (>= delay).
        jitter: a fraction in [0, 1]: each wait is drawn from `[w * (1 - jitter), w]`, where `w` is
            the capped exponential wait (0: exactly `w`).
    """

    attempts: int = 3
    retry_on: Any = (Exception,)
    delay: float = 0.1
    factor: float = 2.0
    max_delay: float = 10.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int):
            raise TypeError(f"Retry(attempts=...) must be an int, not {type(self.attempts).__name__}")
        if self.attempts < 1:
            raise ValueError(f"Retry(attempts=...) must be at least 1, not {self.attempts}")
        object.__setattr__(self, "_accepts", _exception_predicate(self.retry_on))
        delay = _number(self.delay, "Retry(delay=...)")
        factor = _number(self.factor, "Retry(factor=...)")
        cap = _number(self.max_delay, "Retry(max_delay=...)")
        jitter = _number(self.jitter, "Retry(jitter=...)")
        if not 0 <= delay < math.inf:
            raise ValueError(f"Retry(delay=...) must be a finite number >= 0, not {delay}")
        if not 1 <= factor < math.inf:
            raise ValueError(f"Retry(factor=...) must be a finite number >= 1, not {factor}")
        if not delay <= cap < math.inf:
            raise ValueError(f"Retry(max_delay=...) must be finite and at least delay ({delay}), not {cap}")
        if not 0 <= jitter <= 1:
            raise ValueError(f"Retry(jitter=...) must be between 0 and 1, not {jitter}")

    def accepts(self, exc: BaseException) -> bool:
        """Whether `retry_on` takes `exc` (the pass-through checks come first, see the module)."""
        return bool(self._accepts(exc))  # type: ignore[attr-defined]  # set in __post_init__

    def wait_bounds(self, failures: int) -> tuple[float, float]:
        """`(shortest, longest)` wait after the `failures`-th failed attempt (1-based)."""
        longest = min(self.max_delay, self.delay * self.factor ** (failures - 1))
        return longest * (1 - self.jitter), longest

    def wait_after(self, failures: int) -> float:
        """The wait after the `failures`-th failed attempt, jitter drawn from `CLOCK.random`."""
        shortest, longest = self.wait_bounds(failures)
        return longest - (longest - shortest) * CLOCK.random()


@dataclass
class PolicyEvent(BaseEvent[str]):
    """What a node's policy did: `kind` is TIMEOUT, RETRY, FALLBACK or GAVE_UP.

    `node` is the node's tag, `attempt` the attempt concerned (1-based), `error` its failure,
    `delay` the backoff before the next attempt (RETRY), `fallback` the tag of the fallback node
    that runs (FALLBACK)."""

    kind: str
    node: str
    attempt: int
    error: BaseException | None = None
    delay: float | None = None
    fallback: str | None = None

    def get_event_type(self) -> str:
        return POLICY_EVENT

    @property
    def event_type(self) -> str:
        return POLICY_EVENT


@dataclass(frozen=True)
class AttemptStarted:
    """On the response channel (with `mark_void`): attempt `attempt` of `node` starts here."""

    node: str
    attempt: int


@dataclass(frozen=True)
class AttemptVoided:
    """On the response channel (with `mark_void`): what attempt `attempt` of `node` sent since its
    `AttemptStarted` is void; `error` says why it failed."""

    node: str
    attempt: int
    error: str


def drop_voided(items: Iterable[Any]) -> list[Any]:
    """`items` (what a consumer read from the stream) without the output of voided attempts and
    without the markers themselves."""
    kept: list[Any] = []
    starts: dict[tuple[str, int], int] = {}
    for item in items:
        if type(item) is AttemptStarted:
            starts[(item.node, item.attempt)] = len(kept)
        elif type(item) is AttemptVoided:
            start = starts.pop((item.node, item.attempt), None)
            if start is not None:
                del kept[start:]
        else:
            kept.append(item)
    return kept


# ----- the policy of one node --------------------------------------------------------------------


@dataclass(frozen=True)
class NodePolicy:
    """What `@Node(timeout=..., idle_timeout=..., retry=..., fallback=..., mark_void=...)` declared."""

    timeout: float | None = None
    idle_timeout: float | None = None
    retry: Retry | None = None
    fallback: tuple[Node, ...] = ()
    mark_void: bool = False

    @property
    def attempts(self) -> int:
        return 1 if self.retry is None else self.retry.attempts


def _seconds_or_none(value: Any, what: str, node: str) -> float | None:
    if value is None:
        return None
    seconds = _number(value, f"{node}: {what}")
    if not 0 < seconds < math.inf:
        raise ValueError(f"{node}: {what} must be a positive, finite number of seconds, not {value!r}")
    return seconds


def _fallbacks(value: Any, node: str) -> tuple[Node, ...]:
    if value is None:
        return ()
    chain = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    if not chain:
        raise ValueError(f"{node}: fallback=() names no node")
    for fallback in chain:
        if not isinstance(fallback, Node):
            raise TypeError(f"{node}: a fallback must be a node made with @Node, not {fallback!r}")
    return chain


def make_policy(
    func: Any,
    *,
    timeout: Any,
    idle_timeout: Any,
    retry: Any,
    fallback: Any,
    mark_void: Any,
) -> NodePolicy:
    """The checked policy of the node about to wrap `func`; errors name the node."""
    name = (
        "with_defaults()"
        if func is with_defaults
        else f"node {getattr(func, '__qualname__', None) or type(func).__name__!s}"
    )
    seconds = _seconds_or_none(timeout, "timeout", name)
    idle = _seconds_or_none(idle_timeout, "idle_timeout", name)
    if retry is not None and not isinstance(retry, Retry):
        raise TypeError(f"{name}: retry must be a Retry(...), not {retry!r}")
    if type(mark_void) is not bool:
        raise TypeError(f"{name}: mark_void must be True or False, not {mark_void!r}")
    return NodePolicy(seconds, idle, retry, _fallbacks(fallback, name), mark_void)


# ----- running a node under its policy -----------------------------------------------------------

_RUNNING_IN: ContextVar[Any] = ContextVar("amrita_sense_policy_interpreter", default=None)
"""The interpreter about to call a policy node, set by the node's `_pre_check` in the run's task."""


class _Attempts:
    """One interpreter's standing at a policy node: failed attempts so far, and when the backoff
    before the next one ends (None: not backing off)."""

    __slots__ = ("deadline", "failures")

    def __init__(self, failures: int, deadline: float | None):
        self.failures = failures
        self.deadline = deadline


class PolicyNode(Node, AttemptKeeper):
    """A node with a policy (made by `@Node(...)` when one is given). Calling the node calls its
    function, as for any node; the interpreter calls `func`, which runs the attempts."""

    __slots__ = ("_origin", "_origin_async", "_standing", "policy")
    _outline_type = Node
    """The class a graph's fingerprint names for this node: a policy is not part of the graph."""

    def __init__(self, func, tag, wrap_to_async, address_able, frame, policy: NodePolicy):
        self._init(func, tag, wrap_to_async, address_able, frame or sys._getframe(1))
        if not self.is_coro and not wrap_to_async and (policy.timeout or policy.idle_timeout):
            raise ValueError(
                f"node {self.tag}: an inline sync node (wrap_to_async=False) cannot be interrupted, so it cannot "
                "have a timeout; declare it `async def`, or leave wrap_to_async=True to run it in a worker thread"
            )
        self._origin = func
        self._origin_async = self.is_coro
        self.policy = policy
        self._standing: weakref.WeakKeyDictionary[Any, _Attempts] = weakref.WeakKeyDictionary()
        self.func = self._runner()
        self.is_coro = True

    @property
    def __call__(self):
        return self._origin

    def _pre_check(self, interp: Any) -> None:
        _RUNNING_IN.set(interp)

    def _runner(self) -> Callable[..., Any]:
        @functools.wraps(self._origin)
        async def run_attempts(*args: Any, **kwargs: Any) -> Any:
            return await self._run(_RUNNING_IN.get(), args, kwargs)

        return run_attempts

    # ----- the AttemptKeeper protocol (snapshots, restore) ------------------------------------

    def attempt_state(self, interp: Any) -> tuple[int, float | None] | None:
        standing = self._standing.get(interp)
        return None if standing is None else (standing.failures, standing.deadline)

    def keep_attempt_state(self, interp: Any, failures: int, deadline: float | None) -> None:
        self._standing[interp] = _Attempts(failures, deadline)

    def backing_off(self, interp: Any) -> bool:
        standing = self._standing.get(interp)
        return standing is not None and standing.deadline is not None

    # ----- the attempts -------------------------------------------------------------------------

    async def _run(self, interp: Any, args: tuple, kwargs: dict) -> Any:
        policy = self.policy
        standing = self._standing.get(interp) if interp is not None and self._standing else None
        try:
            while True:
                if standing is not None and standing.deadline is not None:
                    await self._back_off(interp, standing)
                attempt = 1 if standing is None else standing.failures + 1
                try:
                    if policy.mark_void:
                        await _send(interp, AttemptStarted(self.tag, attempt))
                    return await self._attempt(interp, args, kwargs)
                except Exception as exc:
                    if not self._handles(interp, exc):
                        raise
                    if policy.mark_void:
                        await _send(interp, AttemptVoided(self.tag, attempt, repr(exc)))
                    if isinstance(exc, NodeTimeout):
                        await _dispatch(interp, PolicyEvent(TIMEOUT, self.tag, attempt, exc))
                    if attempt >= policy.attempts or not policy.retry.accepts(exc):  # type: ignore[union-attr]
                        if policy.fallback:
                            self._forget(interp)
                            standing = None
                            return await self._fall_back(interp, attempt, exc)
                        await _dispatch(interp, PolicyEvent(GAVE_UP, self.tag, attempt, exc))
                        raise
                    delay = policy.retry.wait_after(attempt)  # type: ignore[union-attr]
                    standing = _Attempts(attempt, CLOCK.now() + delay)
                    if interp is not None:
                        self._standing[interp] = standing
                    await _dispatch(interp, PolicyEvent(RETRY, self.tag, attempt, exc, delay=delay))
                    await _checkpoint(interp)
        finally:
            # Every way out of the node ends its attempts (a snapshot of a backoff was taken while
            # the node waited; a killed process runs no `finally`).
            self._forget(interp)

    def _forget(self, interp: Any) -> None:
        if interp is not None and self._standing:  # (an empty map's test is cheaper than its pop)
            self._standing.pop(interp, None)

    def _handles(self, interp: Any, exc: Exception) -> bool:
        """Whether the policy deals with `exc`: not a pass-through type of the interpreter."""
        ignored = interp._exc_ignored if interp is not None else (InterruptNotice,)
        return not isinstance(exc, ignored)

    async def _attempt(self, interp: Any, args: tuple, kwargs: dict) -> Any:
        policy = self.policy
        if policy.timeout is None and policy.idle_timeout is None:
            return await self._call_origin(interp, args, kwargs)
        limit = _Limit(self.tag, policy.timeout, policy.idle_timeout, interp)
        try:
            return await self._call_origin(interp, args, kwargs)
        except asyncio.CancelledError:
            limit.close()
            limit.raise_if_fired()
            raise
        finally:
            limit.close()

    def _call_origin(self, interp: Any, args: tuple, kwargs: dict) -> Any:
        func = self._origin
        if self._origin_async:
            return func(*args, **kwargs)
        if self.wrap_to_async and not _force_inline(interp):
            if interp is not None:
                return interp._offload(func, args, kwargs)
            return run_in_worker(asyncio.get_running_loop(), func, args, kwargs)
        return _done(func(*args, **kwargs))

    async def _back_off(self, interp: Any, standing: _Attempts) -> None:
        """Wait until the backoff deadline; park at the node's own gate if a suspend request comes."""
        while True:
            if interp is not None and interp._signal.pending and await interp._gate(self.tag):
                continue  # parked and resumed: the deadline may have passed meanwhile
            remaining = standing.deadline - CLOCK.now()  # type: ignore[operator]
            if remaining <= 0:
                break
            await CLOCK.sleep(min(remaining, SUSPEND_POLL))
        standing.deadline = None

    async def _fall_back(self, interp: Any, attempt: int, exc: Exception) -> Any:
        if interp is None:
            raise RuntimeError(f"{self.tag}: a fallback runs inside a workflow run only") from exc
        error: Exception = exc
        for fallback in self.policy.fallback:
            await _dispatch(interp, PolicyEvent(FALLBACK, self.tag, attempt, error, fallback=fallback.tag))
            extra = {"exc_type": type(error), "exc_val": error, "exc_tb": error.__traceback__}
            try:
                plan = await interp._make_plan(fallback, None, extra)
                return await interp._invoke(fallback, plan)
            except Exception as failed:
                if not self._handles(interp, failed):
                    raise
                error = failed
        await _dispatch(interp, PolicyEvent(GAVE_UP, self.tag, attempt, error))
        raise error


# ----- defaults for a whole graph -------------------------------------------------------------------


def with_defaults(
    graph: Any,
    *,
    timeout: float | None = None,
    idle_timeout: float | None = None,
    retry: Retry | None = None,
    fallback: Any = None,
    mark_void: bool = False,
) -> Any:
    """Give every plain node of a rendered graph (nested segments and instruction bodies included)
    this policy, in place, and return the graph. Nodes that declare a policy of their own keep it, as
    do the instructions' own nodes (a TRIGGER_EVENT constructor...) and ALIAS nodes (give the node
    they name its policy). An inline sync node gets everything but the timeouts, which it cannot
    have. Interpreters already running the graph see the change at their next node table lookup,
    as after a DLL swap. The policy's errors are raised here, before anything is replaced."""
    if not is_rendered_compose(graph) or getattr(graph, "_collected_hooks", None) is None:
        raise TypeError(f"with_defaults() takes a rendered top-level graph (compose.render()), not {graph!r}")
    kwargs = {"timeout": timeout, "idle_timeout": idle_timeout, "retry": retry, "fallback": fallback}
    policy = make_policy(with_defaults, mark_void=mark_void, **kwargs)
    untimed = NodePolicy(None, None, policy.retry, policy.fallback, policy.mark_void)
    replaced: dict[int, Node] = {}

    def policy_node(node: Node) -> Node:
        if id(node) not in replaced:
            inline = not node.is_coro and not node.wrap_to_async
            chosen = untimed if inline else policy
            replaced[id(node)] = PolicyNode(
                node.func, node.tag, node.wrap_to_async, node.address_able, node.fun_frame, chosen
            )
        return replaced[id(node)]

    def walk(segment: Any) -> None:
        children = segment._graph
        for i, child in enumerate(children):
            if is_rendered_compose(child):
                walk(child)
            elif type(child) is Node and child.tag not in _BUILTIN_TAGS:
                children[i] = policy_node(child)

    walk(graph)
    graph._rebuild_program()
    return graph


_BUILTIN_TAGS = frozenset(tag.value for tag in BuiltinTags)


async def _done(value: Any) -> Any:
    return value


def _force_inline(interp: Any) -> bool:
    return bool(interp._force_inline if interp is not None else __flags__.FORCE_NOT_WRAP_TO_ASYNC)


class _Limit:
    """The timeout of one attempt: cancels the running task when it fires (`timeout` seconds from
    the start, or `idle` seconds since the node's last output on its stream)."""

    __slots__ = (
        "_cancelling",
        "_handle",
        "_left",
        "_loop",
        "_stream",
        "_task",
        "ends_at",
        "fired",
        "idle",
        "node",
        "timeout",
    )

    def __init__(self, node: str, timeout: float | None, idle: float | None, interp: Any):
        self.node, self.timeout, self.idle = node, timeout, idle
        self.fired: NodeTimeout | None = None
        self._loop = asyncio.get_running_loop()
        task = self._task = asyncio.current_task()
        self._cancelling = task.cancelling() if hasattr(task, "cancelling") else 0  # type: ignore[union-attr]
        now = self._loop.time()
        self.ends_at = math.inf if timeout is None else now + timeout
        self._left: float | None = None
        self._stream = None
        if interp is not None:
            self._stream = interp.object_io
            self._stream._watch_output(self._on_stream)
        self._arm(now)

    def _arm(self, now: float) -> None:
        idle_at = math.inf if self.idle is None else now + self.idle
        self._handle: Any = self._loop.call_at(min(idle_at, self.ends_at), self._fire, self.ends_at <= idle_at)

    def _on_stream(self, held: bool) -> None:
        """Output sent (False): the idle clock starts again. A gate of the stream parks (True) or
        resumes (False): both clocks stop while the run is parked."""
        now = self._loop.time()
        if held:
            if self._handle is not None:
                self._handle.cancel()
                self._handle = None
                self._left = self.ends_at - now
            return
        if self._left is not None:
            self.ends_at, self._left = now + self._left, None
        elif self._handle is None:
            return  # fired already
        else:
            self._handle.cancel()
        self._arm(now)

    def _fire(self, total: bool) -> None:
        self._handle = None
        seconds = self.timeout if total else self.idle
        self.fired = NodeTimeout(self.node, seconds or 0.0, idle=not total)
        self._task.cancel()  # type: ignore[union-attr]

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._stream is not None:
            self._stream._unwatch_output(self._on_stream)
            self._stream = None

    def raise_if_fired(self) -> None:
        """Turn the cancellation this limit caused into `NodeTimeout` (not one from elsewhere)."""
        if self.fired is None:
            return
        uncancel = getattr(self._task, "uncancel", None)
        if uncancel is None or uncancel() <= self._cancelling:
            raise self.fired from None


async def _send(interp: Any, marker: Any) -> None:
    if interp is not None:
        await interp.object_io.yield_response(marker)


async def _dispatch(interp: Any, event: PolicyEvent) -> None:
    """Dispatch `event` with the interpreter's pools for injection (not when no handler listens).
    Events in the pools are left out: `trigger_event` would dispatch the last of them instead."""
    observer = _observe.current
    if observer is not None and interp is not None:
        observer.event(interp, _observe.EVENT_POLICY, _event_attributes(event))
    if interp is None or not has_handlers(POLICY_EVENT):
        return
    args = tuple(arg for arg in interp._ava_args if not isinstance(arg, BaseEvent))
    await MatcherFactory.trigger_event(event, *args, exception_ignored=interp._exc_ignored, **interp._ava_kwargs)


def _event_attributes(event: PolicyEvent) -> dict[str, Any]:
    """`event` as span-event attributes (plain values only)."""
    attributes: dict[str, Any] = {"amrita_sense.policy.kind": event.kind, "amrita_sense.node.tag": event.node}
    attributes["amrita_sense.policy.attempt"] = event.attempt
    if event.error is not None:
        attributes["amrita_sense.policy.error"] = repr(event.error)
    if event.delay is not None:
        attributes["amrita_sense.policy.delay"] = event.delay
    if event.fallback is not None:
        attributes["amrita_sense.policy.fallback"] = event.fallback
    return attributes


async def _checkpoint(interp: Any) -> None:
    """Save a checkpoint of a checkpointed run as the backoff begins (the run restores into it)."""
    if interp is not None:
        top = interp.top_interpreter
        if top._checkpoints is not None and top.is_running:
            await top._checkpoints.at_backoff(top)


__all__ = [
    "CLOCK",
    "FALLBACK",
    "GAVE_UP",
    "POLICY_EVENT",
    "RETRY",
    "TIMEOUT",
    "AttemptStarted",
    "AttemptVoided",
    "Clock",
    "NodePolicy",
    "NodeTimeout",
    "PolicyEvent",
    "PolicyNode",
    "Retry",
    "drop_voided",
    "with_defaults",
]
