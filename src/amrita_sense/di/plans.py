"""Injection plans shared by every interpreter of the process.

A node's injection plan says where each of its parameters comes from: a
position in the positional pool, a name in the keyword pool, a `Depends`
provider. It is a function of the node's signature analysis (`fun_sign`) and
of the *shape* of the pools (`PoolShape`: the types of the positional values,
the names of the keyword pool), never of the values, so one plan serves every
interpreter whose pools have that shape: a new interpreter per request finds
its plans made. The values are read from the calling interpreter's own pools
on every call, and what is really per interpreter (the results of `use_cache`
providers, lifecycles) stays on the interpreter.

Exactness: a shape is shared only when matching by `isinstance` is decided by
the value types alone (no value overrides `__class__`; the ABC registry token
is part of the key) and a plan only when its hints are type-stable
(`meta_is_type_stable`); anything else gets a private shape or no plan, and
the caller resolves per interpreter as before. Plans are looked up by the
function (weakly, so dynamically made functions do not pile up) and checked
against the node's signature analysis, so a node made after the function's
defaults or annotations changed never gets the old plan.
"""

from __future__ import annotations

import abc
import weakref
from collections.abc import Mapping
from typing import Any

from amrita_sense import core as _core
from amrita_sense.di.depends import DependsFactory
from amrita_sense.di.inject import (
    FactoryGroup,
    Recipe,
    Unresolved,
    leading_positional,
    match,
    meta_is_type_stable,
    split_cacheable,
)

EXC_NAMES = ("exc_type", "exc_val", "exc_tb")
"""The keywords a CATCH handler is called with."""

_SHAPE_LIMIT = 512
_PLANS_PER_SHAPE = 8192
_DERIVED_PER_SHAPE = 64
_NO_NAMES: frozenset = frozenset()


class PlanEntry:
    """A function's plan for pools of one shape: value-free, shared by every interpreter.

    `recipe` places the matched parameters; `cached_group` holds the
    `use_cache` providers (their values are kept per interpreter),
    `group` the per-call providers. `order` is the positional order of a
    call that needs no keywords (None otherwise). `call_plan` is what the
    core's fast path runs (`_core.CallPlan`).
    """

    __slots__ = ("cached_group", "call_plan", "direct", "group", "meta", "order", "recipe", "stable")

    def __init__(
        self,
        func: Any,
        meta: Any,
        recipe: Recipe,
        cached_group: FactoryGroup | None,
        group: FactoryGroup | None,
        cached_names: tuple,
    ) -> None:
        self.meta = meta
        self.recipe = recipe
        self.cached_group = cached_group
        self.group = group
        placed = set(recipe.names).union(cached_names)
        order = tuple(name for name in meta["params"] if name in placed)
        self.order = order if group is None and leading_positional(func, order) else None
        self.direct = cached_group is None and group is not None and group.direct_only
        """Every provider is a plain function of the pools: the call needs no coroutine unless one
        returns an awaitable."""
        self.stable = (
            meta_is_type_stable(meta)
            and (group is None or group.stable)
            and (cached_group is None or cached_group.stable)
        )
        self.call_plan = self._make_call_plan(cached_names)

    def _make_call_plan(self, cached_names: tuple) -> Any:
        """The core's plan. Without per-call providers, the `use_cache` results are sources of
        their own (`(name,)`): the core calls the node itself once the interpreter has them."""
        slow = self.cached_group is not None or self.group is not None
        if self.group is not None:
            srcs = tuple(name if index < 0 else index for name, index in self.recipe.sources)
            return _core.CallPlan(srcs, self.recipe.names, True, self)
        by_name = dict(self.recipe.sources)

        def source(name: str) -> Any:  # a use_cache result wins over a pool value of the same name
            if name in cached_names:
                return (name,)
            return name if by_name[name] < 0 else by_name[name]

        if self.order is not None:
            return _core.CallPlan(tuple(map(source, self.order)), None, slow, self)
        names = tuple(name for name in self.recipe.names if name not in cached_names) + cached_names
        return _core.CallPlan(tuple(map(source, names)), names, slow, self)

    def values(self, args: Any, kwargs: Mapping[str, Any], cached: dict | None) -> dict[str, Any]:
        """The matched values from these pools, plus the interpreter's `use_cache` results."""
        values = self.recipe.build(args, kwargs)
        if cached:
            values.update(cached)
        return values

    def instantiate(self, args: Any, kwargs: Mapping[str, Any], cached: dict | None, bind: bool) -> tuple:
        """`(args, None, {})` or `(None, kwargs, factories)` for one call with these pools.

        `bind` attaches the pools to the per-call providers (a call with extra
        arguments, whose pools differ from the interpreter's).
        """
        values = self.values(args, kwargs, cached)
        if self.order is not None:
            return tuple(values[name] for name in self.order), None, {}
        group = self.group
        if group is None:
            return None, values, {}
        return None, values, group.bind(args, kwargs) if bind else group


def build_entry(func: Any, meta: Any, args: Any, kwargs: Mapping[str, Any]) -> PlanEntry | Unresolved:
    """Match `meta` against the pools and prepare its providers (nothing is called)."""
    found = match(meta, args, kwargs)
    if isinstance(found, Unresolved):
        return found
    cacheable, per_call = split_cacheable(meta["factory_map"])
    cached_group = FactoryGroup.prepare(cacheable, args, kwargs) if cacheable else None
    group = FactoryGroup.prepare(per_call, args, kwargs) if per_call else None
    return PlanEntry(func, meta, found, cached_group, group, tuple(cacheable))


class _EntriesByFunction:
    """PlanEntry per function, held weakly by the function's identity and bounded in size."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        # threads: a race only recomputes the same value: entries are (ref, entry) tuples, each
        # stored in one setitem and read in one get; two threads making one function's plan build
        # equal entries and the last store wins. Dict ops are atomic (the GIL, or the dict's own lock
        # in a free-threaded build); the only compound step, `forget`, tolerates a concurrent clear
        self._entries: dict[int, tuple[weakref.ref, PlanEntry]] = {}

    def get(self, func: Any) -> PlanEntry | None:
        hit = self._entries.get(id(func))
        if hit is not None and hit[0]() is func:
            return hit[1]
        return None

    def put(self, func: Any, entry: PlanEntry) -> bool:
        """Store `entry`; False when `func` cannot be referenced weakly (then it is not shared)."""
        entries = self._entries
        ident = id(func)

        def forget(ref: weakref.ref, entries: dict = entries, ident: int = ident) -> None:
            hit = entries.get(ident)
            if hit is not None and hit[0] is ref:
                # threads: pop, not del: a `clear` of another thread may come between the get and here
                # (no new entry can: the id is the dying function's until it is freed)
                entries.pop(ident, None)

        try:
            ref = weakref.ref(func, forget)
        except TypeError:
            return False
        if len(entries) >= _PLANS_PER_SHAPE:
            entries.clear()
        entries[ident] = (ref, entry)
        return True

    def __len__(self) -> int:
        return len(self._entries)


class PoolShape:
    """What plans depend on in a pair of pools; interned, so equal shapes are one object.

    `private` shapes (a value whose `__class__` is not its type) are never
    interned: their plans serve one interpreter only.
    """

    __slots__ = ("__weakref__", "_derived", "_exc", "entries", "holds_factories", "key", "name_map", "private")

    def __init__(self, key: tuple, private: bool) -> None:
        self.key = key
        self.private = private
        self.entries = _EntriesByFunction()
        self.name_map = dict.fromkeys(key[1])
        """The keyword names as a mapping: what matching reads of a keyword pool of this shape."""
        self._derived: dict | None = None
        self._exc: PoolShape | None = None
        # threads: `_derived` and `_exc` are made on first use, each in one store; a race makes two and
        # keeps one (the other thread uses its own, equal, for that call only)
        self.holds_factories = any(issubclass(kind, DependsFactory) for kind in key[0])
        """A positional value is a `Depends(...)` (resolved when a run starts)."""

    def __repr__(self) -> str:
        types, names, _ = self.key
        shown = ", ".join(t.__qualname__ for t in types)
        return f"PoolShape(({shown}), {sorted(names)}{', private' if self.private else ''})"

    def entry(self, func: Any, meta: Any, args: Any, kwargs: Mapping[str, Any]) -> PlanEntry | None:
        """The shared plan of `func` (analysed as `meta`) for pools `args` / `kwargs` of this shape;
        None when it cannot be shared (unresolvable, type-dependent hints, no weak reference)."""
        key = getattr(func, "__func__", func)
        found = self.entries.get(key)
        if found is not None and found.meta is meta:
            return found
        try:
            built = build_entry(func, meta, args, kwargs)
        except Exception:  # a declaration error: the caller's own resolution raises it
            return None
        if isinstance(built, Unresolved) or not built.stable or not self.entries.put(key, built):
            return None
        return built

    @property
    def with_exc(self) -> PoolShape:
        """This shape with the keywords of a CATCH handler call added."""
        shape = self._exc
        if shape is None:
            shape = self._exc = self.extended((), EXC_NAMES)
        return shape

    def extended(self, extra_types: tuple, extra_names: Any) -> PoolShape:
        """The shape of these pools with more positional values (their types) and keywords."""
        derived = self._derived
        if derived is None:
            derived = self._derived = {}
        names = frozenset(extra_names)
        found = derived.get((extra_types, names))
        if found is None:
            types, own_names, token = self.key
            private = self.private or not all(map(_plain_class, extra_types))
            found = _intern((types + extra_types, own_names | names, token), private)
            if len(derived) >= _DERIVED_PER_SHAPE:
                derived.clear()
            derived[(extra_types, names)] = found
        return found


_shapes: dict[tuple, PoolShape] = {}
# threads: shape interning; a race only recomputes the same value: two threads interning one key at
# once each make a PoolShape and the last store wins; the other thread's interpreter keeps an equal,
# unshared shape (its plans are made once more, never wrong: nothing compares shapes by identity for
# correctness). Bounded by a clear, which a concurrent get survives
_plain_verdicts: dict[type, bool] = {}
# threads: a race only recomputes the same verdict (bounded by a clear)
_OBJECT_CLASS = object.__dict__["__class__"]


def _plain_class(kind: type) -> bool:
    """True when instances of `kind` report `kind` as their `__class__` (so `isinstance` goes by type)."""
    verdict = _plain_verdicts.get(kind)
    if verdict is None:
        descriptor = next(klass.__dict__["__class__"] for klass in kind.__mro__ if "__class__" in klass.__dict__)
        if len(_plain_verdicts) >= 4096:
            _plain_verdicts.clear()
        verdict = _plain_verdicts[kind] = descriptor is _OBJECT_CLASS
    return verdict


def _intern(key: tuple, private: bool) -> PoolShape:
    if private:
        return PoolShape(key, True)
    shape = _shapes.get(key)
    if shape is None:
        if len(_shapes) >= _SHAPE_LIMIT:
            _shapes.clear()
        shape = _shapes[key] = PoolShape(key, False)
    return shape


_last: list = [None]
"""The shape `shape_of` returned last: most interpreters are made with pools like the previous one's."""
# threads: one slot, read once and checked against the pools (types, names, ABC token) before use:
# another thread's store only changes which shape is tried first


def shape_of(args: tuple, kwargs: Mapping[str, Any]) -> PoolShape:
    """The (interned) shape of an interpreter's pools."""
    if type(args) is not tuple:
        args = tuple(args)
    token = abc.get_cache_token()
    last = _last[0]
    if last is not None:
        types, names, last_token = last.key
        if token == last_token and _core.same_types(args, types) and (kwargs.keys() == names if kwargs else not names):
            return last
    key = (tuple(map(type, args)), frozenset(kwargs) if kwargs else _NO_NAMES, token)
    shape = _shapes.get(key)
    if shape is None:
        shape = _intern(key, not all(map(_plain_class, key[0])))
    if not shape.private:
        _last[0] = shape
    return shape


__all__ = ["EXC_NAMES", "PlanEntry", "PoolShape", "build_entry", "shape_of"]

_core.provide(PoolShape=PoolShape)
