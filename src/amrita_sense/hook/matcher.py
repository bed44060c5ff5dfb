"""Event handlers (`Matcher`), their registry and event dispatch; `Depends` (from `di.depends`).

Handlers are registered per event type and priority. `trigger_event`
dispatches an event to them: priority groups in ascending order, handlers of a
group in registration order, one dispatch per event type at a time.
"""

from __future__ import annotations

import abc
import datetime
import itertools
import sys
from collections import defaultdict
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from threading import Lock
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeVar
from uuid import UUID, uuid4

from amrita_sense._unsafe import __flags__
from amrita_sense._unsafe import _listeners as _flag_listeners
from amrita_sense.core import events as _events
from amrita_sense.di import DependencyStore, LifecycleScope, Scope
from amrita_sense.di.depends import Depends as Depends  # re-exported: 1.1.3's path
from amrita_sense.di.depends import DependsFactory as DependsFactory
from amrita_sense.di.depends import detect_generator_kind as detect_generator_kind
from amrita_sense.di.inject import (
    DispatchScopes,
    FactoryGroup,
    FailedEnum,
    Prepared,
    ScopeChain,
    Session,
    Unresolved,
    callable_name,
    match,
    meta_is_type_stable,
    produce,
    resolve_group,
)
from amrita_sense.di.plans import _plain_class
from amrita_sense.di.signature import EMPTY as EMPTY  # re-exported, as 1.1.3's module has them
from amrita_sense.di.signature import DependencyMeta, FunctionData, _set_change_listener, sign_func
from amrita_sense.di.signature import ParamDescriptor as ParamDescriptor
from amrita_sense.di.signature import type_matches as type_matches
from amrita_sense.exceptions import InvalidOperand
from amrita_sense.hook._dispatch_lock import DispatchLock
from amrita_sense.logging import engine_debug_enabled, logger
from amrita_sense.weakcache import WeakValueLRUCache

from .event import BaseEvent, ConstructableEvent
from .exception import CancelException, MatcherException, PassException

T = TypeVar("T")

# ----- the registry ------------------------------------------------------------------

_registry_version = [0]
"""Bumped whenever an event type or a priority group is added, removed or replaced."""
# threads: written only by `_bump`, under `_version_lock`, after the change it announces; readers
# read it before they read the table (`_handler_groups`), so a cache entry is never newer than its
# contents. Unguarded, two bumps could both write n + 1 after a third wrote n + 2: the version would go
# back and revive a stale cache entry.
_version_lock = Lock()
_versions = itertools.count(1)


def _bump() -> None:
    with _version_lock:
        _registry_version[0] = next(_versions)


class _TrackedDefaultDict(defaultdict):
    """A defaultdict that bumps `_registry_version` whenever its key set changes."""

    __slots__ = ()

    def __missing__(self, key: Any) -> Any:
        # Our own: since 3.15 defaultdict's C `__missing__` inserts without calling `__setitem__`.
        if self.default_factory is None:
            raise KeyError(key)
        value = dict.setdefault(self, key, self.default_factory())
        _bump()
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        _bump()

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        _bump()

    def clear(self) -> None:
        super().clear()
        _bump()

    def pop(self, *args: Any) -> Any:
        try:
            return super().pop(*args)
        finally:
            _bump()

    def popitem(self) -> Any:
        try:
            return super().popitem()
        finally:
            _bump()

    def setdefault(self, key: Any, default: Any = None) -> Any:
        try:
            return super().setdefault(key, default)
        finally:
            _bump()

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        _bump()

    def __ior__(self, other: Any) -> Any:  # type: ignore[misc]  # typeshed gives defaultdict an __or__ mypy cannot pair with any __ior__ here
        try:
            return super().__ior__(other)
        finally:
            _bump()


class _PriorityGroups(_TrackedDefaultDict):
    """priority -> handlers of one event type."""

    __slots__ = ()

    def __init__(self, *args: Any) -> None:
        super().__init__(list, *args)


class _HandlerTable(_TrackedDefaultDict):
    """event type -> `_PriorityGroups`."""

    __slots__ = ()

    def __init__(self, *args: Any) -> None:
        super().__init__(_PriorityGroups, *args)


class EventRegistry:
    """The process-wide handler table: `_event_handlers[event_type][priority] -> [FunctionData]`.

    A singleton; the table lives on the class. Tests reset it with
    `EventRegistry()._event_handlers.clear()`.
    """

    _instance: ClassVar[EventRegistry | None] = None
    # threads: a race only makes a second instance that carries no state (the table is on the class)
    _event_handlers: ClassVar[defaultdict[str, defaultdict[int, list[FunctionData]]]] = _HandlerTable()
    _lock: ClassVar[Lock] = Lock()
    # threads: registration goes through `_lock`; dispatch reads the handler lists without it (appends
    # are atomic; a dispatch running while a handler is added may or may not see it) and finds them
    # through `_groups_cache`, versioned by `_registry_version`

    def __new__(cls) -> EventRegistry:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def register_handler(self, event_type: str, data: FunctionData) -> None:
        """Append a handler to its priority group (registration order is run order)."""
        with self._lock:
            self._event_handlers[event_type][data.priority].append(data)

    def get_handlers(self, event_type: str) -> defaultdict[int, list[FunctionData]]:
        """priority -> handlers for `event_type` (empty for an unknown type)."""
        with self._lock:
            return self._event_handlers[event_type]

    def get_all(self) -> defaultdict[str, defaultdict[int, list[FunctionData]]]:
        with self._lock:
            return self._event_handlers


_groups_cache: dict[str, tuple[int, Any, tuple[list[FunctionData], ...]]] = {}
# threads: entries are tuples stored in one setitem; each is labelled with the version read before its
# contents were (`_handler_groups`), so a race at worst stores an entry already stale, recomputed next time


def _handler_groups(event_type: str) -> tuple[list[FunctionData], ...]:
    """The live handler lists of `event_type`, in ascending priority; recomputed only when the table changed."""
    table = EventRegistry._event_handlers
    version = _registry_version[0]  # before the table is read: a change from now on makes the entry stale
    hit = _groups_cache.get(event_type)
    if hit is not None and hit[0] == version and hit[1] is table:
        return hit[2]
    by_priority = table.get(event_type)
    groups = tuple(by_priority[p] for p in sorted(by_priority)) if by_priority else ()
    if type(table) is _HandlerTable and (by_priority is None or type(by_priority) is _PriorityGroups):
        _groups_cache[event_type] = (version, table, groups)
    return groups


def has_handlers(event_type: str) -> bool:
    """Whether any handler is registered for `event_type` (a dispatcher of its own events may then
    skip building and dispatching them)."""
    return any(_handler_groups(event_type))


# ----- matchers ----------------------------------------------------------------------


class Matcher(Hashable):
    """Registers handlers for one event type at one priority.

    `priority` must be positive; lower numbers run first. With `block=True`
    a handler of this matcher that returns normally ends the dispatch.
    After `dead_at` the matcher's handlers are dropped when next dispatched.
    """

    _dead_at: datetime.datetime | None = None
    id: UUID

    def __init__(
        self,
        event_type: str,
        priority: int = 10,
        block: bool = True,
        dead_at: datetime.datetime | None = None,
    ):
        if not isinstance(event_type, str):
            raise InvalidOperand(f"event_type must be a string, not {type(event_type).__name__}")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise InvalidOperand(f"priority must be an int, not {type(priority).__name__}")
        if priority <= 0:
            raise ValueError("Event priority cannot be zero or negative!")
        self.event_type: str = event_type
        self.priority: int = priority
        self.block: bool = block
        self._dead_at = dead_at
        self.id = uuid4()

    def __setattr__(self, name: str, value: Any) -> None:
        # the core's fast dispatch keeps what it read of a matcher (`block`, `_dead_at`, its class)
        # while the registry's version stands
        object.__setattr__(self, name, value)
        _bump()

    def __hash__(self) -> int:
        return hash(self.id.bytes)

    def __repr__(self) -> str:
        return f"<Matcher {self.event_type!r} priority={self.priority} block={self.block}>"

    def append_handler(self, func: Callable[..., Awaitable[Any]]) -> None:
        """Register `func` (an async function) as a handler of this matcher."""
        self._register(func, sys._getframe(1))

    def _register(self, func: Callable[..., Awaitable[Any]], frame: Any) -> None:
        data = FunctionData(function=func, signature=sign_func(func), frame=frame, priority=self.priority, matcher=self)
        EventRegistry().register_handler(self.event_type, data)

    def handle(self) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]]:
        """Decorator registering an async handler; returns the function unchanged."""

        def wrapper(func: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
            self._register(func, sys._getframe(1))
            return func

        return wrapper

    def set_block(self, block: bool) -> None:
        self.block = block

    def stop_process(self) -> NoReturn:
        """End the whole dispatch (from inside a handler)."""
        raise CancelException()

    def pass_event(self) -> NoReturn:
        """Skip the rest of this handler and go on with the next one."""
        raise PassException()

    @property
    def dead(self) -> bool:
        """True once `dead_at` has passed."""
        return self._dead_at is not None and self._dead_at < datetime.datetime.now()


# ----- Depends ----------------------------------------------------------------------


# ----- dispatch ---------------------------------------------------------------------

_RAN, _SKIPPED, _STOPPED = 0, 1, 2
_PLAN_CACHE_LIMIT = 64


def _handler_builder(
    sources: tuple[tuple[str, int], ...],
) -> Callable[[Any, list[Any], Mapping[str, Any]], dict[str, Any]]:
    """`build(matcher, s_args, kwargs)` for a recipe over the pool `[matcher, *s_args]`."""
    if not sources:
        return lambda matcher, s_args, kwargs: {}
    if len(sources) == 1:
        ((name, index),) = sources
        if index < 0:
            return lambda matcher, s_args, kwargs: {name: kwargs[name]}
        if index == 0:
            return lambda matcher, s_args, kwargs: {name: matcher}
        shifted = index - 1
        return lambda matcher, s_args, kwargs: {name: s_args[shifted]}

    def build(matcher: Any, s_args: list[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        values = {}
        for name, index in sources:
            values[name] = kwargs[name] if index < 0 else (matcher if index == 0 else s_args[index - 1])
        return values

    return build


class _HandlerPlan:
    """A handler's signature matched against pools of one shape (`build` is None when it cannot be)."""

    __slots__ = ("build", "group", "matcher_type", "signature", "sources", "stable", "unresolved")

    def __init__(
        self, signature: DependencyMeta, matcher: Matcher, s_args: list[Any], kwargs: Mapping[str, Any]
    ) -> None:
        pool = [matcher, *s_args]
        found = match(signature, pool, kwargs)
        self.signature = signature
        self.matcher_type = type(matcher)
        self.unresolved: Unresolved | None = found if isinstance(found, Unresolved) else None
        self.sources: tuple[tuple[str, int], ...] = () if isinstance(found, Unresolved) else tuple(found.sources)
        self.build = None if isinstance(found, Unresolved) else _handler_builder(self.sources)
        fmap = signature["factory_map"]
        self.group = FactoryGroup.prepare(fmap, pool, kwargs) if fmap and self.build is not None else None
        self.stable = meta_is_type_stable(signature) and (self.group is None or self.group.stable)


def _plan_of(data: FunctionData, s_args: list[Any], kwargs: Mapping[str, Any], key: Hashable | type) -> _HandlerPlan:
    """The handler's plan for this pool shape, cached on the `FunctionData` when matching is type-stable."""
    matcher = data.matcher
    if __flags__.NO_DEPENDENCY_META_CACHE:
        return _HandlerPlan(sign_func(data.function), matcher, s_args, kwargs)
    plans = data.__dict__.get("_plans")
    if plans is not None:
        plan = plans.get(key)
        if plan is not None and plan.signature is data.signature and plan.matcher_type is type(matcher):
            return plan
    plan = _HandlerPlan(data.signature, matcher, s_args, kwargs)
    if plan.stable and plans is not None:
        if len(plans) >= _PLAN_CACHE_LIMIT:
            plans.clear()
        plans[key] = plan
    return plan


def _pool_key(s_args: list[Any], kwargs: Mapping[str, Any]) -> Hashable | type:
    """What a handler plan depends on: the types of the positional pool and the keyword names."""
    if len(s_args) == 1 and not kwargs:
        return type(s_args[0])
    return (tuple(map(type, s_args)), tuple(kwargs))


def _has_factories(s_args: Iterable[Any], kwargs: Mapping[str, Any]) -> bool:
    for value in s_args:
        if isinstance(value, DependsFactory):
            return True
    for value in kwargs.values():
        if isinstance(value, DependsFactory):
            return True
    return False


def _where(data: FunctionData) -> str:
    frame = data.frame
    if frame is None:
        return "?"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _log_failure(data: FunctionData, exc: Exception) -> None:
    logger.opt(exception=exc).error(
        f"An error occurred while running '{callable_name(data.function)}' ({_where(data)})"
    )


def _log_unresolved(data: FunctionData, plan: _HandlerPlan) -> None:
    unresolved = plan.unresolved
    assert unresolved is not None, "logged for an unresolved plan only"
    logger.warning(
        f"Matcher {callable_name(data.function)} ({_where(data)}) failed to resolve dependencies for "
        f"{unresolved.reason.value}: {unresolved.describe()}. Skipping......"
    )


class _DispatchState:
    """What the handlers of one dispatch share: the dependency store and the dispatch scope (made on first use)."""

    store: DependencyStore | None = None
    scopes: Mapping[Scope, LifecycleScope] | None = None

    def session(self, pool: list[Any], kwargs: Mapping[str, Any]) -> Session:
        if self.store is None:
            self.store = DependencyStore()
        if self.scopes is None:
            self.scopes = DispatchScopes()
        return Session(pool, kwargs, self.store, self.scopes, Scope.DISPATCH)

    async def aclose(self) -> None:
        scopes = self.scopes
        if isinstance(scopes, DispatchScopes):
            await scopes.aclose()


async def _call_handler(data: FunctionData, values: dict[str, Any], exception_ignored: tuple) -> int:
    try:
        await data.function(**values)
    except Exception as exc:
        failed = _handler_failed(data, exc, exception_ignored)
        if failed is None:
            raise
        return failed
    return _RAN


def _handler_failed(data: FunctionData, exc: Exception, exception_ignored: tuple) -> int | None:
    """What a handler's exception does to the dispatch: `PassException` skips to the next handler,
    `CancelException` stops it, any other is logged and the next handler runs; None: it propagates
    (a `MatcherException`, or one of `exception_ignored`)."""
    if isinstance(exc, PassException):
        return _SKIPPED
    if isinstance(exc, CancelException):
        return _STOPPED
    if isinstance(exc, MatcherException) or (exception_ignored and isinstance(exc, exception_ignored)):
        return None
    _log_failure(data, exc)
    return _SKIPPED


async def _call_with_factories(
    data: FunctionData,
    plan: _HandlerPlan,
    values: dict[str, Any],
    session: Session,
    exception_ignored: tuple,
) -> int:
    group = plan.group
    assert group is not None, "run for a plan with providers only"
    if not group.needs_call_scope:
        if not await resolve_group(group, session, exception_ignored, values):
            return _skip_unprovided(data, session)
        return await _call_handler(data, values, exception_ignored)
    async with LifecycleScope(Scope.CALL) as call_scope:
        session.lifecycles = ScopeChain(Scope.CALL, call_scope, session.lifecycles)
        if not await resolve_group(group, session, exception_ignored, values):
            return _skip_unprovided(data, session)
        return await _call_handler(data, values, exception_ignored)


def _skip_unprovided(data: FunctionData, session: Session) -> int:
    if engine_debug_enabled():
        logger.debug(
            f"Handler '{callable_name(data.function)}' skipped: dependency {session.failed_key!r} "
            f"could not be provided ({session.miss})"
        )
    return _SKIPPED


async def _run_steps(
    steps: Iterable[tuple[FunctionData, _HandlerPlan, list[FunctionData]]],
    s_args: list[Any],
    kwargs: dict[str, Any],
    key: Hashable | type,
    exception_ignored: tuple,
    state: _DispatchState,
) -> bool:
    """Run the handlers of `steps` (`(data, its plan, its priority group)` each) in order; False when
    the dispatch must stop (a handler stopped it, or a blocking one ran). The handlers of expired
    matchers are skipped, and removed from their groups at the end."""
    dead = None
    try:
        for data, hplan, handlers in steps:
            matcher = data.matcher
            if matcher._dead_at is not None and matcher.dead:
                dead = [*(dead or ()), (data, handlers)]
                continue
            if hplan.signature is not data.signature or hplan.matcher_type is not type(matcher):
                hplan = _plan_of(data, s_args, kwargs, key)
            build = hplan.build
            if build is None:
                _log_unresolved(data, hplan)
                continue
            values = build(matcher, s_args, kwargs)
            if hplan.group is not None:
                session = state.session([matcher, *s_args], kwargs)
                outcome = await _call_with_factories(data, hplan, values, session, exception_ignored)
            else:  # `_call_handler`, inline: no coroutine of its own per handler
                try:
                    await data.function(**values)
                    outcome = _RAN
                except Exception as exc:
                    failed = _handler_failed(data, exc, exception_ignored)
                    if failed is None:
                        raise
                    outcome = failed
            if outcome == _STOPPED:
                return False
            if outcome == _SKIPPED:
                continue
            if matcher.block:
                return False
    finally:
        if dead:
            _drop_dead(dead)
    return True


class MatcherFactory:
    """Event dispatch and the dependency-resolution entry points."""

    _lock_pool: ClassVar[WeakValueLRUCache[str, Any]] = WeakValueLRUCache(capacity=1024, loose_mode=True)
    # threads: guarded by its own lock (weakcache.py)
    _dispatch_locks: ClassVar[dict[str, DispatchLock]] = {}
    # threads: grows only, one lock per event type, made once (`_repo_lock`: setdefault); each
    # DispatchLock guards itself (`core._events._GUARD`)

    @classmethod
    def _repo_lock(cls, category: str) -> DispatchLock:
        """The lock serialising the dispatches of one event type."""
        lock = cls._dispatch_locks.get(category)
        if lock is None:
            # threads: one `setdefault` (atomic for str keys), so two loops dispatching a new type
            # at once get the same lock; a get-then-store could hand each its own
            lock = cls._dispatch_locks.setdefault(category, DispatchLock())
            cls._lock_pool[category] = lock
        return lock

    @staticmethod
    def _resolve_dependencies(
        signature: DependencyMeta,
        session_args: Iterable[Any],
        session_kwargs: dict[str, Any],
    ) -> tuple[FailedEnum | None, dict[str, Any], dict[str, DependsFactory]]:
        """Match a signature against the pools: `(failure or None, values, factories still to resolve)`."""
        args = session_args if isinstance(session_args, (list, tuple)) else list(session_args)
        found = match(signature, args, session_kwargs)
        if isinstance(found, Unresolved):
            return found.reason, {}, {}
        return None, found.build(args, session_kwargs), signature["factory_map"]

    @staticmethod
    async def _resolve_scoped(
        factory: DependsFactory,
        session_args: list[Any],
        session_kwargs: dict[str, Any],
        store: DependencyStore | None,
        lifecycles: Mapping[Scope, LifecycleScope] | None,
        default_scope: Scope | None,
    ) -> Any:
        """Resolve one provider (a generator one through its scope); None when it cannot be provided."""
        session = Session(session_args, session_kwargs, store, lifecycles, default_scope)
        return await produce(Prepared(factory, session_args, session_kwargs, ()), session)

    @staticmethod
    async def _do_runtime_resolve(
        runtime_args: dict[int, DependsFactory],
        runtime_kwargs: dict[str, DependsFactory],
        args2update: list[Any],
        kwargs2update: dict[str, Any],
        session_args: list[Any],
        session_kwargs: dict[str, Any],
        exception_ignored: tuple[type[BaseException], ...],
        *,
        store: DependencyStore | None = None,
        lifecycles: Mapping[Scope, LifecycleScope] | None = None,
        default_scope: Scope | None = None,
    ) -> bool:
        """Resolve factories into `args2update[index]` / `kwargs2update[name]`.

        Returns False (updating nothing) when a provider returns None or its
        parameters cannot be resolved. Plain providers run first and
        concurrently; generator providers then one at a time in order.
        """
        if not runtime_args and not runtime_kwargs:
            return True
        group = FactoryGroup.prepare({**runtime_args, **runtime_kwargs}, session_args, session_kwargs)
        session = Session(session_args, session_kwargs, store or DependencyStore(), lifecycles, default_scope)
        resolved: dict[Any, Any] = {}
        if not await resolve_group(group, session, exception_ignored, resolved):
            return False
        for key, value in resolved.items():
            if type(key) is int:
                args2update[key] = value
            else:
                kwargs2update[key] = value
        return True

    @classmethod
    async def _simple_run(
        cls,
        matcher_list: list[FunctionData],
        /,
        exception_ignored: tuple[type[BaseException], ...],
        extra_args: Iterable[Any],
        extra_kwargs: dict[str, Any],
        store: DependencyStore | None = None,
        lifecycles: Mapping[Scope, LifecycleScope] | None = None,
    ) -> bool:
        """Run one priority group of handlers against the pools `[matcher, *extra_args]` / `extra_kwargs`.

        Returns False when the dispatch must stop (a blocking handler ran, or
        `stop_process()` was called).
        """
        s_args = list(extra_args)
        if matcher_list and _has_factories(s_args, extra_kwargs):
            raise ValueError(
                "Runtime dependency injection is not supported in simple_run, please resolve them first "
                "or pass it to the trigger_event method"
            )
        state = _DispatchState()
        state.store, state.scopes = store, lifecycles
        key = _pool_key(s_args, extra_kwargs)
        steps = [(data, _plan_of(data, s_args, extra_kwargs, key), matcher_list) for data in matcher_list]
        try:
            return await _run_steps(steps, s_args, extra_kwargs, key, exception_ignored, state)
        finally:
            if lifecycles is None:
                await state.aclose()

    if TYPE_CHECKING:

        @classmethod
        async def trigger_event(
            cls, event: BaseEvent, *args: Any, exception_ignored: tuple[type[BaseException], ...] = (), **kwargs: Any
        ) -> None: ...

    else:
        trigger_event = classmethod(_events.trigger_event)
    """`await trigger_event(event, *args, exception_ignored=(), **kwargs)`: dispatch `event` to the
    handlers registered for its type.

    The positional pool is `[matcher, event, *args]` and the keyword pool `kwargs`; the last
    `BaseEvent` among `args` replaces `event`. Any `Depends(...)` among `args` / `kwargs` is resolved
    once, before the handlers run (`RuntimeError` if it cannot be). Priority groups run in ascending
    order, handlers of a group in registration order, and one dispatch per event type runs at a time.
    Exceptions of the `exception_ignored` types raised by a handler propagate; other handler
    exceptions are logged and the next handler runs.

    An argument-less dispatch whose plan fits runs in the core (`core.events.trigger_event`, one
    coroutine); any other in `_trigger`."""


async def _trigger(
    cls: type[MatcherFactory],
    event: Any,
    args: tuple,
    exception_ignored: tuple,
    kwargs: dict[str, Any],
    event_type: str | None,
) -> None:
    """`trigger_event` where the core's fast path does not apply (`event_type`: None when the fast
    path did not read it, else `event` is a checked `BaseEvent` and this its type)."""
    scan = _scan_args(args) if args else _NO_ARGS
    if event_type is None:
        if scan[1] >= 0:
            event = args[scan[1]]
        if not event:
            raise RuntimeError("No event found in args")
        if isinstance(event, type) and issubclass(event, ConstructableEvent):
            raise TypeError(
                f"Cannot trigger ConstructableEvent class {event!r} directly; "
                "please use a constructable event in TRIGGER_EVENT node."
            )
        if not _is_event(event):
            raise InvalidOperand(f"trigger_event(event) needs a BaseEvent, not {type(event).__name__}")
        event_type = event.get_event_type()
    if __flags__.DISABLE_EXC_IGNORED:
        exception_ignored = ()
    lock = cls._dispatch_locks.get(event_type) or cls._repo_lock(event_type)
    if not lock.try_take():
        await lock.acquire()
    try:
        version = _registry_version[0]  # before the table is read (see `_registry_version`)
        groups = _handler_groups(event_type)
        if not groups:
            if engine_debug_enabled():
                logger.debug(f"No registered Matcher for {event_type} event, skipping processing.")
            return
        # the handlers of `groups` in order, until one stops the dispatch or a blocking one runs
        s_args = [event, *args]
        state = _DispatchState()
        key: Hashable | type
        plain = not args and not kwargs
        try:
            if scan[2] or (kwargs and _has_factories((), kwargs)):
                await _resolve_trigger_factories(s_args, kwargs, exception_ignored, state)
                key = _pool_key(s_args, kwargs)  # the resolved values' types
            elif plain:
                key = type(event)
            else:
                key = ((type(event), *scan[0]), tuple(kwargs))
            steps = _dispatch_steps(event_type, version, groups, s_args, kwargs, key, plain)
            await _run_steps(steps, s_args, kwargs, key, exception_ignored, state)
        finally:
            if state.scopes is not None:  # a provider opened the dispatch scope
                await state.aclose()
    finally:
        lock.release()


_event_kinds: dict[type, bool] = {}
"""Whether a type's instances are `BaseEvent`s (an ABC check, ~0.1 us each), for plain types (whose
instances report the type as their `__class__`), valid for the ABC cache token in `_event_kinds_token`."""
_event_kinds_token: list = [None]
# threads: a race only recomputes the same verdict; a clear on a new ABC token may drop another
# thread's fresh entry (recomputed), and a verdict stored under the old token is one `isinstance` that
# an ABC registration of that moment may change either way


def _event_verdicts() -> dict[type, bool]:
    """`_event_kinds`, emptied first when an ABC registration may have changed a verdict."""
    token = abc.get_cache_token()
    if _event_kinds_token[0] != token:
        _event_kinds.clear()
        _event_kinds_token[0] = token
    return _event_kinds


def _learn_event_kind(value: Any) -> bool:
    """`isinstance(value, BaseEvent)`, remembered for its type when the type is a plain one."""

    kind = type(value)
    verdict = isinstance(value, BaseEvent)
    if _plain_class(kind):
        if len(_event_kinds) >= 1024:
            _event_kinds.clear()
        _event_kinds[kind] = verdict
    return verdict


def _is_event(value: Any) -> bool:
    """`isinstance(value, BaseEvent)`, remembered per plain type."""
    verdict = _event_verdicts().get(type(value))
    return _learn_event_kind(value) if verdict is None else verdict


_NO_ARGS: tuple = ((), -1, False)
_arg_scans: dict[tuple[type, ...], tuple] = {}
"""`_scan_args` per tuple of plain argument types, valid for the ABC cache token in `_arg_scans_token`."""
_arg_scans_token: list = [None]
# threads: as `_event_kinds`: a race only recomputes the same scan (one tuple per key)


def _scan_args(args: tuple) -> tuple:
    """`(types, last, factories)` of `trigger_event`'s extra arguments: their types, the index of
    the last `BaseEvent` among them (-1: none) and whether a `Depends` is among them; one pass,
    remembered per tuple of types when every type is a plain one."""
    kinds = _event_verdicts()
    if _arg_scans_token[0] != _event_kinds_token[0]:
        _arg_scans.clear()
        _arg_scans_token[0] = _event_kinds_token[0]
    types = tuple(map(type, args))
    scan = _arg_scans.get(types)
    if scan is not None:
        return scan
    last, factories = -1, False
    for index, arg in enumerate(args):
        verdict = kinds.get(type(arg))
        if verdict is None:
            verdict = _learn_event_kind(arg)
        if verdict:
            last = index
        factories = factories or isinstance(arg, DependsFactory)
    scan = (types, last, factories)
    if all(kind in kinds for kind in types):  # the verdicts of plain types only are kept
        if len(_arg_scans) >= 1024:
            _arg_scans.clear()
        _arg_scans[types] = scan
    return scan


class _DispatchPlan:
    """What a dispatch of one event type resolved: its handlers in run order, each with its injection plan.

    Valid while the event type's priority groups are the tuple `groups` (the one `_groups_cache` holds
    for registry version `version`) holding the handlers they held (`copies`: a handler appended to an
    existing priority group, or removed from it, bumps no version), for the pool key `key` (the argument
    types and keyword names). Only made when every handler plan is type-stable (`_HandlerPlan.stable`),
    i.e. depends on nothing but the key.

    threads: immutable once published; a plan is stored in one setitem of `_dispatch_plans` and read in
    one get, then checked whole (`_fits`) before use, so a race at worst stores a plan already stale,
    remade at the next dispatch.
    """

    __slots__ = ("copies", "groups", "key", "steps", "version")

    def __init__(self, version: int, groups: tuple[list[FunctionData], ...], key: Any, steps: tuple) -> None:
        self.version, self.groups, self.key, self.steps = version, groups, key, steps
        self.copies = tuple(list(handlers) for handlers in groups)
        """`steps`: `(data, handler plan, its priority group's list)` per handler, in run order."""


_dispatch_plans: dict[str, _DispatchPlan] = {}
"""The last dispatch plan of each event type (emptied past `_DISPATCH_PLAN_LIMIT` event types)."""
# threads: a race only recomputes the same value (see `_DispatchPlan`)
_DISPATCH_PLAN_LIMIT = 1024


def _fits(plan: _DispatchPlan | None, version: int, groups: tuple, key: Any) -> bool:
    """Whether `plan` is still the plan of a dispatch over `groups` with pool key `key`."""
    return (
        plan is not None
        and plan.groups is groups
        and plan.version == version
        and (plan.key is key or plan.key == key)
        and plan.copies == groups  # the lists' contents (identity first, element by element)
        and not __flags__.NO_DEPENDENCY_META_CACHE
    )


def _plan_dispatch(
    event_type: str, version: int, groups: tuple, s_args: list[Any], kwargs: Mapping[str, Any], key: Any
) -> tuple:
    """The steps of a dispatch of `event_type` with these pools; kept for the next one when type-stable."""
    steps = tuple((data, _plan_of(data, s_args, kwargs, key), handlers) for handlers in groups for data in handlers)
    if all(step[1].stable for step in steps) and not __flags__.NO_DEPENDENCY_META_CACHE:
        if len(_dispatch_plans) >= _DISPATCH_PLAN_LIMIT:
            _dispatch_plans.clear()
        _dispatch_plans[event_type] = _DispatchPlan(version, groups, key, steps)
    return steps


def _drop_dead(dead: list[tuple[FunctionData, list[FunctionData]]]) -> None:
    """Remove the handlers of expired matchers from their priority groups."""
    for data, handlers in dead:
        try:
            handlers.remove(data)
        except ValueError:
            pass


def _dispatch_steps(
    event_type: str, version: int, groups: tuple, s_args: list[Any], kwargs: dict[str, Any], key: Any, plain: bool
) -> tuple:
    """The steps of a dispatch of `event_type` over `groups` with these pools (pool key `key`): the
    kept plan's when it fits, else planned now (and, for a `plain` dispatch, one without arguments,
    handed to the core's fast path)."""
    plan = _dispatch_plans.get(event_type)
    if _fits(plan, version, groups, key):
        return plan.steps  # type: ignore[union-attr]  # _fits: not None
    steps = _plan_dispatch(event_type, version, groups, s_args, kwargs, key)
    if plain:
        _remember_fast(event_type, type(s_args[0]), version, groups, steps)
    return steps


def _remember_fast(event_type: str, event_class: type, version: int, groups: tuple, steps: tuple) -> None:
    """Give the core's fast path the plan of this argument-less dispatch, when every handler of it is
    a plain keyword call of at most `MAX_FAST_ARGS` arguments whose matcher does not expire (else
    forget the one it had). The plan holds what it read of the handlers, their matchers and the flags:
    a write to any of them bumps `_registry_version`, which ends the plan."""
    fast = [_fast_step(data, hplan) for data, hplan, _handlers in steps]
    lock = MatcherFactory._dispatch_locks.get(event_type)
    if None in fast or lock is None or _dispatch_plans.get(event_type) is None or __flags__.NO_DEPENDENCY_META_CACHE:
        _events.forget(event_class)
        return
    state = (version, EventRegistry._event_handlers, groups, __flags__.DISABLE_EXC_IGNORED, steps)
    _events.remember(_events.FastPlan(event_type, event_class, lock, state, tuple(fast)))


def _fast_step(data: FunctionData, hplan: _HandlerPlan) -> Any:
    """The core's step for this handler, or None when the fast path cannot run it."""
    matcher = data.matcher
    if hplan.build is None or hplan.group is not None or len(hplan.sources) > _events.MAX_FAST_ARGS:
        return None
    if matcher._dead_at is not None or hplan.signature is not data.signature or hplan.matcher_type is not type(matcher):
        return None
    picks = 0
    for i, (_name, index) in enumerate(hplan.sources):
        if index == 0:
            picks |= 1 << i
    names = tuple(name for name, _index in hplan.sources)
    return _events.FastStep(data.function, matcher, bool(matcher.block), names, picks)


async def _run_rest(steps: tuple, event: Any, exception_ignored: tuple) -> None:
    """The rest of a fast plan's dispatch, from a handler that changed since the plan was made."""
    state = _DispatchState()
    try:
        await _run_steps(steps, [event], {}, type(event), exception_ignored, state)
    finally:
        await state.aclose()


async def _resolve_trigger_factories(
    s_args: list[Any], kwargs: dict[str, Any], exception_ignored: tuple, state: _DispatchState
) -> None:
    """Resolve the `Depends` passed to `trigger_event` in place, once for the whole dispatch."""
    session = state.session(s_args, kwargs)
    ok = await MatcherFactory._do_runtime_resolve(
        {i: v for i, v in enumerate(s_args) if isinstance(v, DependsFactory)},
        {k: v for k, v in kwargs.items() if isinstance(v, DependsFactory)},
        s_args,
        kwargs,
        s_args,
        kwargs,
        exception_ignored,
        store=session.store,
        lifecycles=session.lifecycles,
        default_scope=Scope.DISPATCH,
    )
    if not ok:
        raise RuntimeError("Runtime arguments cannot be resolved")


_set_change_listener(_bump)  # a write to a handler's FunctionData ends the plans that read it
_flag_listeners.append(_bump)  # and so does a write to an engine flag
_events.install(
    slow=_trigger,
    run_rest=_run_rest,
    log_failure=_log_failure,
    registry=EventRegistry,
    version=_registry_version,
    passed=PassException,
    cancel=CancelException,
    matcher_error=MatcherException,
)
