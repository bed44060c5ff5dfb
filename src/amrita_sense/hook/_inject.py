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
from types import FunctionType, MethodType, UnionType
from typing import Any

from amrita_sense import _unsafe
from amrita_sense.di import DependencyStore, LifecycleScope, Scope
from amrita_sense.exceptions import DependsDeclarationError, DependsInjectFailed
from amrita_sense.hook.fun_typing import EMPTY, DependencyMeta, type_matches
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
    """

    __slots__ = (
        "call",
        "factory",
        "func",
        "kind",
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

    Plain providers are resolved first (concurrently when several are
    awaitable), then generator providers one at a time in declaration order,
    so their teardowns run in reverse order. `direct_only` says that every
    provider is a plain one without `Depends` of its own.
    """

    __slots__ = ("direct_only", "needs_call_scope", "plain", "pools", "scoped", "stable")
    direct_only: bool
    needs_call_scope: bool
    plain: tuple
    pools: tuple[Any, Mapping[str, Any]] | None
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
        return group

    def bind(self, args: Any, kwargs: Mapping[str, Any]) -> FactoryGroup:
        """A copy that carries the pools it must be resolved from."""
        twin = FactoryGroup(self)
        twin.plain, twin.scoped, twin.direct_only = self.plain, self.scoped, self.direct_only
        twin.needs_call_scope, twin.stable = self.needs_call_scope, self.stable
        twin.pools = (args, kwargs)
        return twin


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


def _is_awaitable(value: Any) -> bool:
    return hasattr(type(value), "__await__")


async def produce(prep: Prepared, session: Session) -> Any:
    """The provider's value, or None when it (or one of its own parameters) could not be resolved."""
    if prep.recipe is None:
        return None
    values = prep.recipe.build(session.args, session.kwargs)
    if prep.nested is not None and not await resolve_group(prep.nested, session, (), values):
        return None
    if prep.kind == _GENERATOR:
        return await acquire_scoped(prep, values, session)
    value = prep.func(**values)
    if _is_awaitable(value):
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
    are raised together as one `ExceptionGroup`.
    """
    plain = group.plain
    if plain:
        results = start_plain(plain, session.args, session.kwargs, target)
        if results is not None and not await finish_plain(plain, results, session, exception_ignored, target):
            return False
    for key, prep in group.scoped:
        value = await produce(prep, session)
        if value is None:
            return session.fail(key, prep)
        target[key] = value
    return True


class _Marker:
    __slots__ = ()


_DONE: Any = _Marker()
_DEFER: Any = _Marker()


_settled_types: set[type] = set()
"""Types seen as provider results that are neither awaitable nor exceptions (a cheap membership test)."""


def _is_settled(value: Any) -> bool:
    """True for a ready value: not None, not an exception, not awaitable."""
    kind = type(value)
    if kind in _settled_types:
        return True
    if value is None or kind is _Marker or isinstance(value, BaseException) or hasattr(kind, "__await__"):
        return False
    if len(_settled_types) >= 4096:
        _settled_types.clear()
    _settled_types.add(kind)
    return True


def start_plain(plain: tuple, args: Any, kwargs: Mapping[str, Any], target: dict) -> list[Any] | None:
    """Call the direct providers in order, storing their values in `target`.

    Returns None when every provider was direct and returned a value.
    Otherwise returns one entry per provider for `finish_plain`: `_DONE`
    (stored), `_DEFER` (not direct), an awaitable, an exception, or None.
    Once a provider returned an awaitable, the ones after it are deferred:
    they start in declaration order when `finish_plain` awaits them all, after
    the awaitable has started (as concurrent providers start in 1.1.3).
    """
    results = None
    awaiting = False
    for pos, (key, prep) in enumerate(plain):
        call = prep.call
        if call is None or awaiting:
            value = _DEFER
        else:
            try:
                value = call(args, kwargs)
            except Exception as exc:
                value = exc
        if results is None:
            if type(value) in _settled_types or _is_settled(value):
                target[key] = value
                continue
            results = [_DONE] * pos
        results.append(value)
        awaiting = awaiting or (value is not _DEFER and _is_awaitable(value))
    return results


async def finish_plain(
    plain: tuple, results: list[Any], session: Session, exception_ignored: tuple, target: dict
) -> bool:
    """Await what `start_plain` left pending (concurrently), then check the outcomes in declaration order."""
    pending = []
    for pos, value in enumerate(results):
        if value is _DEFER:
            pending.append((pos, produce(plain[pos][1], session)))
        elif value is not _DONE and _is_awaitable(value):
            pending.append((pos, value))
    if pending:
        await _settle(pending, results)
    errors = None
    for (key, prep), value in zip(plain, results):
        if value is _DONE:
            continue
        if isinstance(value, BaseException):
            if exception_ignored and isinstance(value, exception_ignored) and not _unsafe.__flags__.DISABLE_EXC_IGNORED:
                raise value
            if not isinstance(value, Exception):
                raise value
            errors = [*(errors or ()), value]
        elif value is None:
            return session.fail(key, prep)
        else:
            target[key] = value
    if errors:
        raise ExceptionGroup("Some exceptions had occurred.", errors)
    return True


async def _settle(pending: list[tuple[int, Any]], results: list[Any]) -> None:
    """Await the pending providers (concurrently when there are several), storing values or exceptions."""
    if len(pending) == 1:
        pos, awaitable = pending[0]
        try:
            results[pos] = await awaitable
        except Exception as exc:
            results[pos] = exc
        return
    outcomes = await asyncio.gather(*(awaitable for _, awaitable in pending), return_exceptions=True)
    for (pos, _), outcome in zip(pending, outcomes):
        results[pos] = outcome


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


async def gather_all(awaitables: list[Any]) -> None:
    """Await all concurrently; once every one has finished, raise the first failure."""
    outcomes = await asyncio.gather(*awaitables, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
