"""The injection engine shared by event dispatch and the workflow interpreter.

Matching a signature against the argument pools happens once per pool
*shape*; the result is a `Recipe` (where each parameter's value comes from)
and, for `Depends(...)` parameters, a `FactoryGroup` of providers prepared the
same way. Replaying a recipe is a dict build; a prepared provider is a call.

Pools: `args` is the positional pool (matched by type, first match wins),
`kwargs` the keyword pool (matched by parameter name, whatever the type).
"""

from __future__ import annotations

import asyncio
import sys
import typing
from abc import ABCMeta
from collections.abc import Callable, Mapping
from enum import Enum
from inspect import CO_COROUTINE
from types import CoroutineType, FunctionType, MethodType, UnionType
from typing import Any

from amrita_sense import _unsafe
from amrita_sense.di import DependencyStore, LifecycleScope, Scope
from amrita_sense.di.order import Schedule, build_schedule
from amrita_sense.di.signature import EMPTY, DependencyMeta, type_matches
from amrita_sense.exceptions import DependsDeclarationError, DependsInjectFailed
from amrita_sense.utils import _fingerprint_args

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import ExceptionGroup


class FailedEnum(Enum):
    """Why a signature could not be matched against the pools."""

    MISSED_ANNOTATION = "Missed annotation"
    MISSED_DEPENDENCY = "Missed dependency"
    RESOLVE_FAILED = "Resolution failed"


def hint_name(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__qualname__
    return repr(hint)


def callable_name(func: Any) -> str:
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)


class Unresolved:
    """A failed match: the reason and the parameter it failed on."""

    __slots__ = ("hint", "param", "reason")

    def __init__(self, reason: FailedEnum, param: str, hint: Any = EMPTY) -> None:
        self.reason = reason
        self.param = param
        self.hint = hint

    def describe(self) -> str:
        if self.reason is FailedEnum.MISSED_ANNOTATION:
            return f"parameter {self.param!r} has no type annotation"
        return f"no argument matches the required parameter {self.param!r} ({hint_name(self.hint)})"


class Recipe:
    """Where each matched parameter's value comes from, in parameter order.

    `sources` holds `(name, index)`: index >= 0 reads `args[index]`, -1 reads
    `kwargs[name]`. `build(args, kwargs)` returns the values as a dict.
    """

    __slots__ = ("build", "names", "sources")

    def __init__(self, sources: tuple[tuple[str, int], ...]) -> None:
        self.sources = sources
        self.names = tuple(name for name, _ in sources)
        self.build: Callable[[Any, Mapping[str, Any]], dict[str, Any]] = _dict_builder(sources)

    def build_tuple(self, args: Any, kwargs: Mapping[str, Any]) -> tuple:
        return tuple(kwargs[name] if index < 0 else args[index] for name, index in self.sources)


def _dict_builder(sources: tuple[tuple[str, int], ...]) -> Callable[[Any, Mapping[str, Any]], dict[str, Any]]:
    """A function building the values dict, specialised for the one- and two-parameter cases."""
    if not sources:
        return lambda args, kwargs: {}
    if len(sources) == 1:
        ((name, index),) = sources
        if index < 0:
            return lambda args, kwargs: {name: kwargs[name]}
        return lambda args, kwargs: {name: args[index]}
    if len(sources) == 2 and sources[0][1] >= 0 and sources[1][1] >= 0:
        (first, i), (second, j) = sources
        return lambda args, kwargs: {first: args[i], second: args[j]}

    def build(args: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        values = {}
        for name, index in sources:
            values[name] = kwargs[name] if index < 0 else args[index]
        return values

    return build


def match(meta: DependencyMeta, args: Any, kwargs: Mapping[str, Any]) -> Recipe | Unresolved:
    """Match a signature against the pools.

    Every parameter needs an annotation. A parameter named in `kwargs` takes
    that value; a required one otherwise takes the first positional value whose
    type matches; an optional one keeps its default; factory parameters are
    left to the factories.
    """
    params = meta["params"]
    for name, param in params.items():
        if param["type_hint"] is EMPTY:
            return Unresolved(FailedEnum.MISSED_ANNOTATION, name)
    sources = []
    for name, param in params.items():
        if name in kwargs:
            sources.append((name, -1))
        elif param["default"] is EMPTY:
            hint = param["type_hint"]
            for index, value in enumerate(args):
                if type_matches(value, hint):
                    sources.append((name, index))
                    break
            else:
                return Unresolved(FailedEnum.MISSED_DEPENDENCY, name, hint)
    return Recipe(tuple(sources))


def hint_is_type_stable(hint: Any) -> bool:
    """True when `type_matches(v, hint)` depends on `type(v)` alone (so a match can be cached by type)."""
    if hint is EMPTY or hint is Any:
        return True
    kind = type(hint)
    if kind is type or kind is ABCMeta or (isinstance(hint, type) and kind.__instancecheck__ is type.__instancecheck__):
        return not getattr(hint, "_is_protocol", False)
    if kind is UnionType or typing.get_origin(hint) is typing.Union:
        return all(hint_is_type_stable(arg) for arg in hint.__args__)
    origin = typing.get_origin(hint)
    return isinstance(origin, type) and hint_is_type_stable(origin)


def meta_is_type_stable(meta: DependencyMeta) -> bool:
    return all(hint_is_type_stable(p["type_hint"]) for p in meta["params"].values())


# ----- prepared providers --------------------------------------------------------------

_PLAIN = 0
_GENERATOR = 1


class Prepared:
    """One `Depends` provider matched against pools of one shape.

    `call(args, kwargs)` calls a plain provider that has no `Depends` of its
    own ("direct"); it is None for the others, which go through `produce`.
    `lazy`: calling the provider runs none of its code (an `async def`
    function: the call only makes the coroutine).
    """

    __slots__ = (
        "call",
        "factory",
        "func",
        "kind",
        "lazy",
        "needs_call_scope",
        "nested",
        "recipe",
        "scope",
        "stable",
        "unresolved",
    )

    def __init__(self, factory: Any, args: Any, kwargs: Mapping[str, Any], trail: tuple) -> None:
        if any(factory is seen for seen in trail):
            raise DependsDeclarationError(f"circular Depends: {callable_name(factory._depency_func)} depends on itself")
        meta = factory._sign
        self.factory = factory
        self.func = factory._depency_func
        self.kind = _GENERATOR if factory.generator_kind is not None else _PLAIN
        self.scope = factory.scope
        found = match(meta, args, kwargs)
        self.unresolved: Unresolved | None = found if isinstance(found, Unresolved) else None
        self.recipe: Recipe | None = None if isinstance(found, Unresolved) else found
        fmap = meta["factory_map"]
        self.nested = FactoryGroup.prepare(fmap, args, kwargs, (*trail, factory)) if fmap and self.recipe else None
        direct = self.kind == _PLAIN and self.recipe is not None and self.nested is None
        self.call = _caller(self.func, self.recipe) if direct and self.recipe is not None else None
        code = getattr(getattr(self.func, "__func__", self.func), "__code__", None)
        self.lazy = code is not None and bool(code.co_flags & CO_COROUTINE)
        own_call = self.kind == _GENERATOR and self.scope is Scope.CALL
        self.needs_call_scope = own_call or (self.nested is not None and self.nested.needs_call_scope)
        self.stable = meta_is_type_stable(meta) and (self.nested is None or self.nested.stable)

    def miss_text(self) -> str:
        name = callable_name(self.func)
        if self.unresolved is not None:
            return f"provider `{name}`: {self.unresolved.describe()}"
        return f"provider `{name}` returned None"


def _caller(func: Any, recipe: Recipe) -> Callable[[Any, Mapping[str, Any]], Any]:
    """`call(args, kwargs)` -> `func(<its parameters from the pools>)`, positionally when that is the same call."""
    sources = recipe.sources
    if not leading_positional(func, recipe.names):
        build = recipe.build
        return lambda args, kwargs: func(**build(args, kwargs))
    if not sources:
        return lambda args, kwargs: func()
    if len(sources) == 1:
        ((name, index),) = sources
        if index < 0:
            return lambda args, kwargs: func(kwargs[name])
        return lambda args, kwargs: func(args[index])
    if len(sources) == 2 and sources[0][1] >= 0 and sources[1][1] >= 0:
        i, j = sources[0][1], sources[1][1]
        return lambda args, kwargs: func(args[i], args[j])
    build_tuple = recipe.build_tuple
    return lambda args, kwargs: func(*build_tuple(args, kwargs))


class FactoryGroup(dict):
    """The `Depends` parameters of one function (key -> `DependsFactory`), prepared for one pool shape.

    Providers start in amrita-sense 1.1.3's order (`_order`): the plain ones
    first, a provider after its own `Depends`, concurrent when they suspend;
    then the generator ones one at a time in declaration order, so their
    teardowns run in reverse order. `direct_only` says that every provider is
    a plain one without `Depends` of its own (they start in declaration order:
    `start_plain`); the others run by `schedule` (made when the group is
    prepared, or for a nested group when it is first resolved alone).
    """

    __slots__ = ("direct_only", "needs_call_scope", "plain", "pools", "schedule", "scoped", "stable")
    direct_only: bool
    needs_call_scope: bool
    plain: tuple
    pools: tuple[Any, Mapping[str, Any]] | None
    schedule: Schedule | None
    scoped: tuple
    stable: bool

    @classmethod
    def prepare(
        cls, factories: Mapping[Any, Any], args: Any, kwargs: Mapping[str, Any], trail: tuple = ()
    ) -> FactoryGroup:
        group = cls(factories)
        items = [(key, Prepared(factory, args, kwargs, trail)) for key, factory in factories.items()]
        group.plain = tuple(item for item in items if item[1].kind == _PLAIN)
        group.scoped = tuple(item for item in items if item[1].kind == _GENERATOR)
        group.direct_only = not group.scoped and all(prep.call is not None for _, prep in group.plain)
        group.needs_call_scope = any(prep.needs_call_scope for _, prep in items)
        group.stable = all(prep.stable for _, prep in items)
        group.pools = None
        # a nested group is laid out with its owner's tree; its own schedule only when resolved alone
        group.schedule = None if group.direct_only or trail else build_schedule([group])
        return group

    def bind(self, args: Any, kwargs: Mapping[str, Any]) -> FactoryGroup:
        """A copy that carries the pools it must be resolved from."""
        bound = FactoryGroup(self)
        bound.plain, bound.scoped, bound.direct_only = self.plain, self.scoped, self.direct_only
        bound.needs_call_scope, bound.stable, bound.schedule = self.needs_call_scope, self.stable, self.schedule
        bound.pools = (args, kwargs)
        return bound


class ScopeChain(Mapping):
    """Lifecycles with one more scope in front (a call scope over the site's scopes)."""

    __slots__ = ("_base", "_first", "_scope")

    def __init__(self, scope: Scope, first: LifecycleScope, base: Mapping[Scope, LifecycleScope] | None) -> None:
        self._scope = scope
        self._first = first
        self._base = base or {}

    def __getitem__(self, key: Scope) -> LifecycleScope:
        if key is self._scope:
            return self._first
        return self._base[key]

    def get(self, key: Any, default: Any = None) -> Any:
        if key is self._scope:
            return self._first
        return self._base.get(key, default)

    def __iter__(self):
        yield self._scope
        yield from (k for k in self._base if k is not self._scope)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class DispatchScopes(Mapping):
    """The lifecycles of one event dispatch; the dispatch scope opens on first use."""

    __slots__ = ("_scope",)

    def __init__(self) -> None:
        self._scope: LifecycleScope | None = None

    def __getitem__(self, key: Scope) -> LifecycleScope:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def get(self, key: Any, default: Any = None) -> Any:
        if key is not Scope.DISPATCH:
            return default
        if self._scope is None:
            self._scope = LifecycleScope(Scope.DISPATCH)
        return self._scope

    def __iter__(self):
        yield Scope.DISPATCH

    def __len__(self) -> int:
        return 1

    async def aclose(self) -> None:
        if self._scope is not None:
            await self._scope.aclose()


class Session:
    """One resolution: the pools, the scopes and the store values are shared through."""

    __slots__ = ("_fingerprint", "args", "default_scope", "failed_key", "kwargs", "lifecycles", "miss", "store")

    def __init__(
        self,
        args: Any,
        kwargs: Mapping[str, Any],
        store: DependencyStore | None,
        lifecycles: Mapping[Scope, LifecycleScope] | None,
        default_scope: Scope | None,
        fingerprint: int | None = None,
    ) -> None:
        self.args = args
        self.kwargs = kwargs
        self.store = store
        self.lifecycles = lifecycles
        self.default_scope = default_scope
        self._fingerprint = fingerprint
        self.miss: str | None = None
        self.failed_key: Any = None

    def fingerprint(self) -> int:
        found = self._fingerprint
        if found is None:
            found = self._fingerprint = _fingerprint_args(tuple(self.args), self.kwargs)
        return found

    def fail(self, key: Any, prep: Prepared) -> bool:
        if self.miss is None:
            self.miss = prep.miss_text()
        self.failed_key = key
        return False


# ----- provider tasks ------------------------------------------------------------------


class _Pending:
    """A provider running in a task of its own. `fresh`: the task has not taken its first step
    yet (it does on the loop's next pass)."""

    __slots__ = ("fresh", "task")

    def __init__(self, task: asyncio.Task, fresh: bool) -> None:
        self.task = task
        self.fresh = fresh


_awaitable_kinds: dict[type, bool] = {}
# threads: a race only recomputes the same verdict (bounded by a clear, which a concurrent get survives)
"""Whether a type is awaitable, per type seen as a provider result (`hasattr` misses are slow on types)."""


def is_awaitable(value: Any) -> bool:
    kind = type(value)
    found = _awaitable_kinds.get(kind)
    if found is None:
        if len(_awaitable_kinds) >= 4096:
            _awaitable_kinds.clear()
        found = _awaitable_kinds[kind] = hasattr(kind, "__await__")
    return found


_EAGER_TASKS = sys.version_info >= (3, 12)
"""asyncio can start a task at once (its first step runs in the caller's step, as the task)."""


def start_task(awaitable: Any, scoped: bool = False) -> Any:
    """Run a provider's awaitable in a task of its own, as 1.1.3's `gather` does.

    The task starts at once where asyncio can (3.12+, no task factory set):
    then its outcome (`task_outcome`) when it finished there, else a
    `_Pending`. Elsewhere a fresh `_Pending`, whose task starts on the loop's
    next pass.
    """
    coro = awaitable if type(awaitable) is CoroutineType else _awaiting(awaitable)
    loop = asyncio.get_running_loop()
    if _EAGER_TASKS and loop.get_task_factory() is None:
        task = asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg]  # 3.12+
        if task.done():
            return task_outcome(task, scoped)
        return _Pending(task, False)
    return _Pending(loop.create_task(coro), True)


async def _awaiting(awaitable: Any) -> Any:
    return await awaitable


async def _called_later(func: Any, args: tuple, kwargs: dict) -> Any:
    """`func(*args, **kwargs)` (awaited when it returns an awaitable) in a task: a provider that must
    not start before the tasks started ahead of it have taken their first step."""
    value = func(*args, **kwargs)
    if is_awaitable(value):
        value = await value
    return value


def task_outcome(task: asyncio.Task, scoped: bool = False) -> Any:
    """A finished task's result, or its exception (`CancelledError` when it was cancelled), as a
    `_Raised` for a generator provider (`scoped`)."""
    exc: BaseException | None = asyncio.CancelledError() if task.cancelled() else task.exception()
    if exc is None:
        return task.result()
    return _Raised(exc) if scoped else exc


async def _settle(entries: list[Any], positions: list[int]) -> None:
    """Replace the `_Pending` entries at `positions` by their outcomes (awaited together)."""
    outcomes = await asyncio.gather(*(entries[pos].task for pos in positions), return_exceptions=True)
    for pos, outcome in zip(positions, outcomes):
        entries[pos] = outcome


def _abandon(entries: list[Any]) -> None:
    """Cancel the tasks of the `_Pending` entries left when a resolution stops early."""
    for entry in entries:
        if type(entry) is _Pending:
            entry.task.cancel()
            entry.task.add_done_callback(_retrieve)


def _retrieve(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()


# ----- resolving -----------------------------------------------------------------------


async def produce(prep: Prepared, session: Session) -> Any:
    """One provider's value (its own `Depends` first), or None when it (or one of those) could not be resolved."""
    if prep.recipe is None:
        return None
    values = prep.recipe.build(session.args, session.kwargs)
    if prep.nested is not None and not await resolve_group(prep.nested, session, (), values):
        return None
    if prep.kind == _GENERATOR:
        return await acquire_scoped(prep, values, session)
    value = prep.func(**values)
    if is_awaitable(value):
        value = await value
    return value


async def acquire_scoped(prep: Prepared, values: dict[str, Any], session: Session) -> Any:
    """Enter a generator provider in its scope (once per provider, pools fingerprint and scope)."""
    scope = prep.scope or session.default_scope
    lifecycles = session.lifecycles
    lifecycle = lifecycles.get(scope) if (lifecycles is not None and scope is not None) else None
    if lifecycle is None:
        declared = prep.scope.value if prep.scope is not None else None
        raise DependsInjectFailed(
            f"Dependency {callable_name(prep.func)!r} is a generator declaring scope {declared!r}, "
            f"but no {scope.value if scope else 'matching'!r} lifecycle scope is active at this resolution site."
        )
    key = (id(prep.func), session.fingerprint(), scope)
    factory = prep.factory

    def enter() -> Any:
        return lifecycle.acquire(key, lambda: factory.make_context_manager(values))

    if scope is Scope.CALL:
        return await enter()
    store = session.store
    if store is None:
        store = session.store = DependencyStore()
    return await store.resolve(key, enter)


async def resolve_group(group: FactoryGroup, session: Session, exception_ignored: tuple, target: dict) -> bool:
    """Resolve every provider of `group` into `target`; False when one yields None or cannot be matched.

    A pass-through (`exception_ignored`) exception or a non-`Exception`
    `BaseException` from a plain provider is raised as is; other exceptions
    are raised together as one `ExceptionGroup`. An exception from a
    generator provider is raised as is.
    """
    if group.direct_only:
        results = start_plain(group.plain, session.args, session.kwargs, target)
        return results is None or await finish_plain(group.plain, results, session, exception_ignored, target)
    schedule = group.schedule
    if schedule is None:  # a nested group resolved alone (`DependsFactory.resolve`, `_resolve_scoped`)
        schedule = group.schedule = build_schedule([group])
    run = _Run(schedule, session, exception_ignored)
    steps = schedule.steps
    left: list[tuple] = []
    try:
        index = run.take_from(steps, 0, left)
    except BaseException:
        _abandon(run.outcomes)
        raise
    if index == len(steps) and not left and not run.waiting:
        verdict = run.judge(schedule.roots[0], target)
    else:
        ((_, verdict),) = await run.run([target], False, index, left)
    if verdict is True or verdict is False:
        return verdict
    raise verdict


async def resolve_together(
    groups: list[FactoryGroup], session: Session, exception_ignored: tuple, targets: list[dict]
) -> list[tuple[int, Any]]:
    """Resolve several groups at once, as 1.1.3's DI preload resolves a batch of nodes (one task
    each, in one `gather`): their providers start in the order they start there. Returns
    `(position, verdict)` in the order those resolutions finish, up to the first failed one; a
    verdict is True, False or the exception the resolution raises."""
    run = _Run(build_schedule(groups), session, exception_ignored)
    left: list[tuple] = []
    try:
        index = run.take_from(run.schedule.steps, 0, left)
    except BaseException:
        _abandon(run.outcomes)
        raise
    return await run.run(targets, True, index, left)


class _Raised:
    """A generator provider's exception, as its outcome (a generator's value may be an exception object)."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_UNSET: Any = object()
_BLOCKED: Any = object()
"""A check that needs an outcome still running (or a step not taken yet because of one)."""
_PASS: Any = object()
"""A step may wait for a task that has not taken its first step: let the loop make a pass first."""


class _Run:
    """One resolution by a `Schedule`.

    `outcomes[slot]` is a value, None, a plain provider's exception, a
    `_Raised`, a `_Pending`, or unset while the slot's step is not taken.
    Steps are taken in the schedule's order. A sync provider is called here;
    an async one, or a generator one, runs in a task of its own unless every
    later step needs it (then it is awaited here). A step that needs an
    outcome still running is left for later and the steps after it that do
    not need it go ahead, as 1.1.3's tasks would; then the run waits for the
    first running outcome to end, takes the steps left that can now be taken,
    and so on.
    """

    __slots__ = (
        "exception_ignored",
        "fresh",
        "halt",
        "outcomes",
        "permits",
        "plain_verdicts",
        "schedule",
        "session",
        "waiting",
    )

    def __init__(self, schedule: Schedule, session: Session, exception_ignored: tuple) -> None:
        self.schedule = schedule
        self.session = session
        self.exception_ignored = exception_ignored
        self.outcomes: list[Any] = [_UNSET] * schedule.size
        self.plain_verdicts: list[Any] = [_UNSET] * len(schedule.groups)
        self.permits: dict[int, Any] = {}
        self.waiting: list[int] = []
        self.fresh = False
        self.halt: Any = None

    async def run(
        self, targets: list[dict], stop_at_failure: bool, index: int, left: list[tuple]
    ) -> list[tuple[int, Any]]:
        """Take the steps from `index` (where `take_from` stopped, leaving `left`) and judge every
        root, each as soon as it can be (in the order 1.1.3's resolutions finish when none waits):
        `(position, verdict)` in that order. With `stop_at_failure`, stop at the first failed root
        (1.1.3's preload `gather` raises it at once) and cancel what is still running."""
        schedule = self.schedule
        try:
            left = await self._take_all(schedule.steps, index, left)
            undecided = list(schedule.finish_order)
            finished: list[tuple[int, Any]] = []
            while True:
                for position in tuple(undecided):
                    verdict = self.judge(schedule.roots[position], targets[position])
                    if verdict is _BLOCKED:
                        continue
                    undecided.remove(position)
                    finished.append((position, verdict))
                    if stop_at_failure and verdict is not True:
                        _abandon(self.outcomes)
                        return finished
                if not undecided:  # what is left of the steps is not allowed to start
                    return finished
                await self._wait()
                again: list[tuple] = []
                left = await self._take_all(left, self.take_from(left, 0, again), again)
        except BaseException:
            _abandon(self.outcomes)
            raise

    async def _take_all(self, steps: Any, index: int, left: list[tuple]) -> list[tuple]:
        """Go on where `take_from` stopped (`index`: the step that said what to await, or
        `len(steps)`): await that, take the steps after it, and so on; `left`, with the steps left
        to wait for a running outcome appended in order."""
        count = len(steps)
        while index < count:
            halt = self.halt
            if halt is _PASS:
                await self._pass()  # then take the step again
            else:
                step = steps[index]
                await self._await_here(step[0], step[4], halt)
                index += 1
            index = self.take_from(steps, index, left)
        return left

    def take_from(self, steps: Any, index: int, left: list[tuple]) -> int:
        """Take `steps[index:]` in order until one needs to await something (`halt`: the provider's
        awaitable, or `_PASS` when it may wait for a task that has not started yet); its index, or
        `len(steps)`. The steps left to wait for a running outcome are appended to `left`."""
        alone = len(self.schedule.roots) == 1  # else another root may fail while one step is awaited here
        count = len(steps)
        outcomes = self.outcomes
        session = self.session
        while index < count:
            step = steps[index]
            call = step[1].call
            if call is not None and step[2] < 0 and not self.fresh:
                try:  # the common step inline: a plain provider without `Depends` of its own, not gated
                    value = call(session.args, session.kwargs)
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as exc:
                    value = exc
                awaitable = _awaitable_kinds.get(type(value))
                if awaitable is None:
                    awaitable = is_awaitable(value)
                if not awaitable:
                    outcomes[step[0]] = value
                elif step[5] and alone and not left:
                    self.halt = value
                    return index
                else:
                    self._started(step[0], start_task(value))
                index += 1
                continue
            taken = self._take(step, alone and not left)
            if taken is True:
                index += 1
                continue
            if taken is False:
                if self.fresh:
                    self.halt = _PASS
                    return index
                left.append(step)
                index += 1
                continue
            self.halt = taken
            return index
        return index

    def _take(self, step: tuple, alone: bool) -> Any:
        """Take a step: True when done (the provider called or started in a task, or found failed or
        not allowed to start), False when it must wait, or the provider's awaitable to await here
        (`alone`: no step before it waits, and every later step needs it).

        While a task started here has not taken its first step (`fresh`, before
        3.12), a provider runs in a task too, so that it starts after that one.
        """
        slot, prep, gate, nested, scoped, last = step
        last = last and alone
        if gate >= 0:
            permit = self.permits.get(gate)
            if permit is None:
                permit = self._permit(gate)
            if permit is not True:
                return permit is False
        outcomes = self.outcomes
        session = self.session
        call = prep.call
        if call is None:
            recipe = prep.recipe
            if recipe is None:
                outcomes[slot] = None
                return True
            values = recipe.build(session.args, session.kwargs)
            if nested >= 0:
                verdict = self.judge(nested, values)
                if verdict is _BLOCKED:
                    return False
                if verdict is not True:
                    outcomes[slot] = None if verdict is False else (_Raised(verdict) if scoped else verdict)
                    return True
            if scoped:
                entering = acquire_scoped(prep, values, session)
                if last and not self.fresh:
                    return entering
                return self._started(slot, start_task(entering, True))
            if self.fresh and not prep.lazy:
                return self._started(slot, start_task(_called_later(prep.func, (), values)))
            try:
                value = prep.func(**values)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:
                value = exc
        elif self.fresh and not prep.lazy:
            return self._started(slot, start_task(_called_later(call, (session.args, session.kwargs), {})))
        else:
            try:
                value = call(session.args, session.kwargs)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:
                value = exc
        awaitable = _awaitable_kinds.get(type(value))
        if awaitable is None:
            awaitable = is_awaitable(value)
        if awaitable:
            if last and not self.fresh:
                return value
            return self._started(slot, start_task(value))
        outcomes[slot] = value
        return True

    def _started(self, slot: int, outcome: Any) -> bool:
        if type(outcome) is _Pending:
            self.waiting.append(slot)
            self.fresh = self.fresh or outcome.fresh
        self.outcomes[slot] = outcome
        return True

    async def _pass(self) -> None:
        """Let the tasks started on a fresh `_Pending` take their first step (they are queued before
        us), and store the outcomes of those that finished there."""
        await asyncio.sleep(0)
        self._collect()

    def _collect(self) -> None:
        """Store the outcomes of the finished tasks."""
        outcomes = self.outcomes
        running = []
        scoped = self.schedule.previous
        for slot in self.waiting:
            pending = outcomes[slot]
            task = pending.task
            if not task.done():
                pending.fresh = False
                running.append(slot)
                continue
            outcomes[slot] = task_outcome(task, slot in scoped)
        self.waiting = running
        self.fresh = False

    async def _await_here(self, slot: int, scoped: bool, awaitable: Any) -> None:
        """Await a `last` step's provider in the resolving task (nothing else has to start meanwhile)."""
        try:
            outcome = await awaitable
        except Exception as exc:
            outcome = _Raised(exc) if scoped else exc
        self.outcomes[slot] = outcome

    def _permit(self, slot: int) -> Any:
        """Whether the generator provider of `slot` may start (its group may start, that group's plain
        providers all gave values, and the generator provider before it did), or `_BLOCKED`."""
        index, before = self.schedule.previous[slot]
        permits = self.permits
        gate = self.schedule.groups[index].gate
        if gate >= 0:
            outer = permits.get(gate)
            if outer is None:
                outer = self._permit(gate)
            if outer is not True:
                if outer is False:
                    permits[slot] = False
                return outer
        verdict = self._plain_verdict(index)
        if verdict is _BLOCKED:
            return _BLOCKED
        allowed = verdict is True
        if allowed and before >= 0:
            outcome = self.outcomes[before]
            if outcome is _UNSET or type(outcome) is _Pending:
                if permits.get(before) is not False:
                    return _BLOCKED
                allowed = False
            else:
                allowed = outcome is not None and type(outcome) is not _Raised
        permits[slot] = allowed
        return allowed

    def _plain_verdict(self, index: int) -> Any:
        """1.1.3's verdict on the plain providers of a group once all have finished (`_BLOCKED`
        before): True; False on the first None in declaration order; or the exception to raise,
        a pass-through one or a non-`Exception` one as is, the others in one `ExceptionGroup`."""
        found = self.plain_verdicts[index]
        if found is not _UNSET:
            return found
        outcomes = self.outcomes
        shape = self.schedule.groups[index]
        for _, slot, _ in shape.plain:
            outcome = outcomes[slot]
            if outcome is _UNSET or type(outcome) is _Pending:
                return _BLOCKED
        found = True
        errors = None
        for key, slot, prep in shape.plain:
            value = outcomes[slot]
            if value is None:
                found = self.session.fail(key, prep)
                break
            if isinstance(value, BaseException):
                if not isinstance(value, Exception) or (shape.root and _passes_through(value, self.exception_ignored)):
                    found = value
                    break
                errors = [*(errors or ()), value]
        else:
            if errors:
                found = ExceptionGroup("Some exceptions had occurred.", errors)
        self.plain_verdicts[index] = found
        return found

    def judge(self, index: int, target: dict) -> Any:
        """The group's verdict (True, False, an exception to raise, or `_BLOCKED`); its values go to `target`."""
        verdict = self.plain_verdicts[index]
        if verdict is _UNSET:
            verdict = self._plain_verdict(index)
        if verdict is not True:
            return verdict
        shape = self.schedule.groups[index]
        outcomes = self.outcomes
        for key, slot, _ in shape.plain:
            target[key] = outcomes[slot]
        for key, slot, prep in shape.scoped:
            outcome = outcomes[slot]
            if outcome is _UNSET or type(outcome) is _Pending:
                return _BLOCKED
            if type(outcome) is _Raised:
                return outcome.exc
            if outcome is None:
                return self.session.fail(key, prep)
            target[key] = outcome
        return True

    async def _wait(self) -> None:
        """Wait until one of the running outcomes has finished; store every finished one."""
        outcomes = self.outcomes
        assert self.waiting, "a step waits only for an outcome still running"
        await asyncio.wait([outcomes[slot].task for slot in self.waiting], return_when=asyncio.FIRST_COMPLETED)
        self._collect()


def _passes_through(exc: BaseException, exception_ignored: tuple) -> bool:
    """An exception the resolution raises as is (one of the site's pass-through types)."""
    return bool(exception_ignored) and isinstance(exc, exception_ignored) and not _unsafe.__flags__.DISABLE_EXC_IGNORED


# ----- direct providers ----------------------------------------------------------------


class _Marker:
    __slots__ = ()


_DONE: Any = _Marker()
_LATER: Any = _Marker()


_settled_types: set[type] = set()
# threads: a race only recomputes the same verdict (one `add`; bounded by a clear)
"""Types seen as provider results that are neither awaitable nor exceptions (a cheap membership test)."""


def _is_settled(value: Any) -> bool:
    """True for a ready value: not None, not an exception, not awaitable."""
    kind = type(value)
    if kind in _settled_types:
        return True
    if value is None or kind is _Marker or kind is _Pending or isinstance(value, BaseException):
        return False
    if is_awaitable(value):
        return False
    if len(_settled_types) >= 4096:
        _settled_types.clear()
    _settled_types.add(kind)
    return True


def start_plain(plain: tuple, args: Any, kwargs: Mapping[str, Any], target: dict) -> list[Any] | None:
    """Call direct providers (plain ones without `Depends` of their own) in declaration order,
    storing their values in `target`, up to the first one that returns an awaitable.

    Returns None when every provider gave a value. Otherwise returns one
    entry per provider for `finish_plain`: `_DONE` (stored), the outcome (a
    value, None or an exception), the awaitable, then `_LATER` for the
    providers not called yet.
    """
    results = None
    for pos, (key, prep) in enumerate(plain):
        try:
            value = prep.call(args, kwargs)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            value = exc
        if type(value) in _settled_types:
            if results is None:
                target[key] = value
            else:
                results.append(value)
            continue
        if results is None:
            if _is_settled(value):
                target[key] = value
                continue
            results = [_DONE] * pos
        results.append(value)
        if is_awaitable(value):
            results += [_LATER] * (len(plain) - pos - 1)
            break
    return results


async def finish_plain(
    plain: tuple, results: list[Any], session: Session, exception_ignored: tuple, target: dict
) -> bool:
    """Go on from where `start_plain` stopped: each awaitable runs in a task of its own (the last
    one is awaited here), providers after one are called once it has started; then judge the
    outcomes in declaration order, once all have finished."""
    last = len(results) - 1
    awaitable = results[last]
    if awaitable is not _LATER and type(awaitable) is not _Pending and is_awaitable(awaitable):
        try:  # the common case: only the last provider returned an awaitable
            results[last] = await awaitable
        except Exception as exc:
            results[last] = exc
    else:
        try:
            await _start_rest(plain, results, session)
            waiting = [pos for pos, value in enumerate(results) if type(value) is _Pending]
            if waiting:
                await _settle(results, waiting)
        except BaseException:
            _abandon(results)
            raise
    errors = None
    for (key, prep), value in zip(plain, results):
        if value is _DONE:
            continue
        if isinstance(value, BaseException):
            if _passes_through(value, exception_ignored) or not isinstance(value, Exception):
                raise value
            errors = [*(errors or ()), value]
        elif value is None:
            return session.fail(key, prep)
        else:
            target[key] = value
    if errors:
        raise ExceptionGroup("Some exceptions had occurred.", errors)
    return True


async def _start_rest(plain: tuple, results: list[Any], session: Session) -> None:
    """Start the awaitable `start_plain` stopped at and call the providers after it, in order: an
    awaitable in a task of its own (the last one is awaited here), and, while a task started here
    has not taken its first step (before 3.12), every provider in a task, so that it starts after
    that one."""
    last = len(results) - 1
    fresh = False
    args, kwargs = session.args, session.kwargs
    for pos, value in enumerate(results):
        if value is _LATER:
            prep = plain[pos][1]
            call = prep.call
            if fresh and not prep.lazy:
                value = start_task(_called_later(call, (args, kwargs), {}))
                results[pos] = value
                continue
            try:
                value = call(args, kwargs)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:
                value = exc
        elif value is _DONE or not is_awaitable(value):
            continue
        if is_awaitable(value):
            if pos == last and not fresh:
                try:
                    value = await value
                except Exception as exc:
                    value = exc
            else:
                value = start_task(value)
                fresh = fresh or (type(value) is _Pending and value.fresh)
        results[pos] = value


def leading_positional(func: Any, names: tuple[str, ...]) -> bool:
    """True when `names` are exactly the first positional parameters of a plain function or bound method.

    Then `func(*values)` is the same call as `func(**dict(zip(names, values)))`.
    """
    bound = type(func) is MethodType
    if bound:
        func = func.__func__
    if type(func) is not FunctionType:
        return False
    code = func.__code__
    if code.co_posonlyargcount > bound:
        return False
    end = bound + len(names)
    return end <= code.co_argcount and code.co_varnames[bound:end] == names


def split_cacheable(factories: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`(cacheable, per_call)`: plain providers declared with `use_cache`, and everything else."""
    cacheable = {k: f for k, f in factories.items() if f.cacheable and f.generator_kind is None}
    per_call = {k: f for k, f in factories.items() if k not in cacheable}
    return cacheable, per_call
