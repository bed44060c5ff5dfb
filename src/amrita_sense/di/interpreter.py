"""Injection for the workflow interpreter: the pools, the plans a node is called with, the
`use_cache` results, the provider scopes, and 1.1.3's `_di_cache` record.

`Injection` is a base class of `WorkflowInterpreter` (a mixin: the interpreter holds no extra
object per instance, whose allocation a new interpreter per request would pay). Its state lives in
the core's fields (`_ava_args_v`, `_ava_kwargs_v`, `_shape`, `_args_hash`, `_provider_values`,
`_values_key`, `_di_record`, `_plans_valid_v`, `_dep_store_v`, `_lifecycles_v`); what it needs of
the interpreter is the calling side: `_invoke`, `_invoke_plain`, `_offload`, `_force_inline`,
`_exc_ignored`, `_graph`, `_refresh_plans` and `is_running`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amrita_sense import _unsafe
from amrita_sense import core as _core
from amrita_sense.di.cache import DependencyStore
from amrita_sense.di.depends import DependsFactory
from amrita_sense.di.dicache import PAYLOAD_SIZE, DICacheView, DIRecord
from amrita_sense.di.inject import (
    FactoryGroup,
    ScopeChain,
    Session,
    Unresolved,
    callable_name,
    finish_plain,
    resolve_group,
    resolve_together,
    start_plain,
)
from amrita_sense.di.plans import PlanEntry, build_entry, shape_of
from amrita_sense.di.scope import LifecycleScope, Scope
from amrita_sense.di.signature import sign_func
from amrita_sense.exceptions import DependsInjectFailed, DependsResolveFailed, InvalidOperand
from amrita_sense.node.core import BaseNode, program_of
from amrita_sense.types import DICache, LRUCache
from amrita_sense.utils import _fingerprint_args

_flags_home: dict[str, Any] = vars(_unsafe)
# threads: immutable once published (set once, at import of runtime.workflow); the flags in it are
# the user's switches, read at each use
"""The namespace whose `__flags__` the injection reads at each use (semantics rule 88): the
interpreter module's globals, given by `runtime.workflow` through `read_flags_from`, since that
is where 1.1.3's tests and users replace the flags."""


def read_flags_from(namespace: dict[str, Any]) -> None:
    """Read the engine's flags from `namespace["__flags__"]` from now on."""
    global _flags_home
    _flags_home = namespace


PRELOAD_LIMIT = 2048
"""At most this many functions are warmed by `WORKFLOW_DI_PRELOAD_CACHE`."""


if TYPE_CHECKING:  # what the type checker reads: the core's fields are this class's too
    _InjectionBase = _core.InterpreterCore
else:  # at run time a slot-free mixin, listed before the core in the bases of WorkflowInterpreter
    _InjectionBase = object


class Injection(_InjectionBase):
    """The interpreter's dependency injection (see the module's docstring)."""

    __slots__ = ()

    if TYPE_CHECKING:  # the calling side, which `WorkflowInterpreter` implements

        async def _invoke(self, node: BaseNode, plan: tuple) -> Any: ...

        async def _invoke_plain(self, node: BaseNode, func: Any, args: tuple | None, kwargs: dict | None) -> Any: ...

        async def _offload(self, func: Any, args: tuple | None, kwargs: dict | None) -> Any: ...

        @property
        def is_running(self) -> bool: ...

    @property
    def _lifecycles(self) -> dict[Scope, LifecycleScope]:
        """The lifecycle scopes of this interpreter's runs (the workflow scope), made on first use."""
        scopes = self._lifecycles_v
        if scopes is None:
            scopes = self._lifecycles_v = {Scope.WORKFLOW: LifecycleScope(Scope.WORKFLOW)}
        return scopes

    @property
    def _dep_store(self) -> DependencyStore:
        """The values of workflow-scoped providers, made on first use."""
        store = self._dep_store_v
        if store is None:
            store = self._dep_store_v = DependencyStore()
        return store

    @property
    def _ava_args(self) -> tuple:
        return self._ava_args_v

    @_ava_args.setter
    def _ava_args(self, value: tuple) -> None:
        value = _core.args_pool(value, "_ava_args")
        self._untrust_di()
        self._ava_args_v = value

    @property
    def _ava_kwargs(self) -> dict:
        return self._ava_kwargs_v

    @_ava_kwargs.setter
    def _ava_kwargs(self, value: dict) -> None:
        value = _core.kwargs_pool(value, "_ava_kwargs")
        self._untrust_di()
        self._ava_kwargs_v = value

    def _untrust_di(self) -> None:
        """Bypass the plans until `rehash_args()`. `args_hash` keeps the fingerprint of the pools
        being replaced (1.1.3's, which `rehash_args()` compares); it is taken now unless a run is
        starting with no `_di_cache` read yet (then nothing compares it)."""
        if self._args_hash is None and (self._di_record is not None or not self.is_running):
            self._args_hash = _fingerprint_args(self._ava_args_v, self._ava_kwargs_v)
        self._shape = None
        self._refresh_plans()

    @property
    def args_hash(self) -> int:
        """Fingerprint of the type names in the injection pools as of the last `rehash_args()`
        (part of 1.1.3's DI cache key)."""
        if self._args_hash is None:
            self._args_hash = _fingerprint_args(self._ava_args_v, self._ava_kwargs_v)
        return self._args_hash

    @property
    def args_hash_trustable(self) -> bool:
        """False after the pools were reassigned, until `rehash_args()`; the DI cache is bypassed meanwhile."""
        return self._shape is not None

    def rehash_args(self) -> None:
        """Take the pools' shape again and trust the plans; forget the `use_cache` results if it
        moved, and what `_di_cache` lists if the fingerprint changed (1.1.3 clears its payload)."""
        before = self._args_hash
        shape = self._shape = shape_of(self._ava_args_v, self._ava_kwargs_v)
        self._args_hash = None
        if self._values_key is not None and shape.key != self._values_key:
            self._values_key = None
            self._provider_values = None
            if self._di_record is not None:
                self._di_record.own_plans.clear()
        self._refresh_plans()
        if before is not None and self.args_hash != before:
            self._forget_di_listing()

    # ----- `_di_cache`: 1.1.3's DI cache record, a view (amrita_sense.di.dicache) ---------

    def _own_di_record(self) -> DIRecord:
        record = self._di_record
        if record is None:
            record = self._di_record = DIRecord()
        return record

    @property
    def _dicache(self) -> LRUCache:
        """The plans this interpreter keeps for itself (those that cannot be shared)."""
        return self._own_di_record().own_plans

    @property
    def _di_cache(self) -> DICache:
        """1.1.3's DI cache record of this interpreter, computed when read (`DICacheView`)."""
        record = self._own_di_record()
        view = record.view
        if view is None:
            view = record.view = DICacheView(self)
        return view

    @_di_cache.setter
    def _di_cache(self, value: DICache) -> None:
        if not isinstance(value, DICache):
            raise InvalidOperand(f"_di_cache must be a DICache, not {type(value).__name__}")
        if value is self._di_record_view():
            return
        self._adopt_di_payload(value.payload)
        self._set_di_trust(value.hash_trustable)

    @_di_cache.deleter
    def _di_cache(self) -> None:
        raise AttributeError("_di_cache cannot be deleted")

    def _di_record_view(self) -> DICacheView | None:
        record = self._di_record
        return None if record is None else record.view

    def _di_payload(self) -> dict:
        """What 1.1.3's payload would hold: an entry per node resolved through the cache since it
        was last cleared (every node of the graph once a run started with the cache on or the
        preload ran, else those `_call()` resolved), then the entries written into the view."""
        record = self._di_record
        if self._plans_valid_v or (record is not None and record.preloaded):
            nodes: Any = self._nodes_by_function()
        elif record is not None and record.called:
            nodes = list(record.called.values())
        else:
            nodes = ()
        code = self.args_hash
        entries: dict = {}
        for node in nodes:
            found = self._di_entry(node)
            if found is not None:
                entries[hash((id(node.func), code))] = found
        if record is not None and record.written:
            entries.update(record.written)
        return entries

    def _nodes_by_function(self) -> list:
        """The graph's nodes in order, the first of each function (what the preload warms)."""
        nodes: dict[int, BaseNode] = {}
        for node in program_of(self._graph).nodes:
            if isinstance(node, BaseNode) and id(node.func) not in nodes:
                if len(nodes) >= PRELOAD_LIMIT:
                    break
                nodes[id(node.func)] = node
        return list(nodes.values())

    def _di_entry(self, node: BaseNode) -> tuple[dict, dict] | None:
        """1.1.3's `(static_kwargs, per_call_factories)` for `node` from the current pools: the matched
        values and this interpreter's `use_cache` results (None while it has none: 1.1.3 makes the
        entry when it runs them), and the per-call providers. None when the node does not resolve."""
        args, kwargs = self._ava_args_v, self._ava_kwargs_v
        try:
            entry, _ = self._plan_entry(node, args, kwargs, None, None, False)
        except Exception:  # 1.1.3 has no entry for a node it cannot resolve
            return None
        results = None
        if entry.cached_group is not None:
            held = self._provider_values
            results = held.get(entry) if held is not None else None
            if results is None:
                return None
        return entry.values(args, kwargs, results), dict(entry.group or {})

    def _note_uncached_call(self, node: BaseNode) -> None:
        """`_call()` outside a run with the cache on: 1.1.3 would add the node's entry."""
        if self._shape is not None and not _flags_home["__flags__"].WORKFLOW_DI_NO_CACHE:
            self._own_di_record().note_call(node)

    def _write_di_entry(self, key: Any, value: Any) -> None:
        record = self._own_di_record()
        if record.written is None:
            record.written = LRUCache(PAYLOAD_SIZE)
        record.written[key] = value

    def _delete_di_entry(self, key: Any) -> None:
        """Forget one entry of the view; a listed node's `use_cache` results go with it."""
        record = self._own_di_record()
        if record.written is not None and key in record.written:
            del record.written[key]
            return
        code = self.args_hash
        nodes = (
            self._nodes_by_function()
            if self._plans_valid_v or record.preloaded
            else list((record.called or {}).values())
        )
        node = next((n for n in nodes if hash((id(n.func), code)) == key), None)
        if node is None or self._di_entry(node) is None:
            raise KeyError(key)
        self._forget_provider_values(node)
        if self._plans_valid_v or record.preloaded:
            if self.is_running:
                return  # the run lists every node again
            self._drop_run_listing()
            record.preloaded = False
            record.called = {id(n.func): n for n in nodes if n is not node}
        elif record.called:
            record.called.pop(id(node.func), None)

    def _forget_provider_values(self, node: BaseNode) -> None:
        held = self._provider_values
        if held is None:
            return
        try:
            entry, _ = self._plan_entry(node, self._ava_args_v, self._ava_kwargs_v, None, None, False)
        except Exception:
            return
        held.pop(entry, None)

    def _clear_di_cache(self) -> None:
        """`_di_cache.payload.clear()`: forget the listing and the `use_cache` results (1.1.3
        resolves everything again)."""
        self._provider_values = None
        self._values_key = None
        self._forget_di_listing()

    def _forget_di_listing(self) -> None:
        record = self._di_record
        if record is not None:
            record.forget()
        if not self.is_running:
            self._drop_run_listing()

    def _drop_run_listing(self) -> None:
        """Between runs: the plans of the last run are not in use (what `_plans_valid_v` says), so
        the next run (or `_call()`) marks what it resolves again. Nothing else changes: a call
        between runs takes its plan through `_make_plan` instead of the table, the same plan."""
        if self._plans_valid_v:
            self._plans_valid_v = False
            self._refresh_plans()

    def _adopt_di_payload(self, payload: Any) -> None:
        """Assigning a payload (or a whole `DICache`): its entries replace the listing, as written ones."""
        items = list(payload.items())
        self._clear_di_cache()
        for key, value in items:
            self._write_di_entry(key, value)

    def _set_di_trust(self, trusted: bool) -> None:
        if not trusted:
            self._untrust_di()
        elif self._shape is None:
            self._shape = shape_of(self._ava_args_v, self._ava_kwargs_v)
            self._args_hash = None
            self._refresh_plans()

    def _pools(self, extra_args: tuple | None, extra_kwargs: dict | None) -> tuple[tuple, dict]:
        args = self._ava_args_v + tuple(extra_args) if extra_args else self._ava_args_v
        if not extra_kwargs:
            return args, self._ava_kwargs_v
        clash = [k for k in extra_kwargs if k in self._ava_kwargs_v]
        if clash:
            raise DependsInjectFailed("Cannot override existing kwargs: {}".format(", ".join(clash)))
        return args, {**self._ava_kwargs_v, **extra_kwargs}

    async def _make_plan(
        self, node: BaseNode, extra_args: tuple | None, extra_kwargs: dict | None, no_cache: bool = False
    ) -> tuple:
        """`(args, kwargs, per_call_factories)` for calling `node`; exactly one of args / kwargs is not None."""
        args, kwargs = self._pools(extra_args, extra_kwargs)
        extra = bool(extra_args or extra_kwargs)
        entry, keep = self._plan_entry(node, args, kwargs, extra_args, extra_kwargs, no_cache)
        cached = await self._cached_values(node, entry, args, kwargs, keep)
        return entry.instantiate(args, kwargs, cached, extra)

    def _meta_of(self, node: BaseNode) -> Any:
        return sign_func(node.func) if _flags_home["__flags__"].NO_DEPENDENCY_META_CACHE else node.fun_sign

    def _plan_entry(
        self,
        node: BaseNode,
        args: tuple,
        kwargs: dict,
        extra_args: tuple | None,
        extra_kwargs: dict | None,
        no_cache: bool,
    ) -> tuple[PlanEntry, bool]:
        """`(entry, keep)`: the node's plan for these pools, shared by every interpreter when it can
        be, else this interpreter's own; `keep` says whether its `use_cache` results may be kept.
        `DependsResolveFailed` when the signature does not match the pools."""
        meta = self._meta_of(node)
        shape = self._shape
        if no_cache or _flags_home["__flags__"].WORKFLOW_DI_NO_CACHE or shape is None:
            return self._build_entry(node, meta, args, kwargs), False
        if extra_args or extra_kwargs:
            shape = shape.extended(tuple(map(type, extra_args)) if extra_args else (), extra_kwargs or ())
        entry = shape.entry(node.func, meta, args, shape.name_map)
        if entry is not None:
            return entry, True
        payload = self._dicache
        key = (getattr(node.func, "__func__", node.func), shape)
        entry = payload.get(key)
        if entry is None or entry.meta is not meta:
            entry = payload[key] = self._build_entry(node, meta, args, kwargs)
        return entry, True

    @staticmethod
    def _build_entry(node: BaseNode, meta: Any, args: tuple, kwargs: dict) -> PlanEntry:
        found = build_entry(node.func, meta, args, kwargs)
        if isinstance(found, Unresolved):
            raise DependsResolveFailed(
                f"Function {callable_name(node.func)} in {node.tag} could not be resolved due to reason "
                f"`{found.reason.value}`: {found.describe()}"
            )
        return found

    def _shared_plan(self, node: BaseNode, as_handler: bool) -> Any:
        """For the core's plan tables: the shared plan of `node` for the pools' shape (`as_handler`:
        called as a CATCH handler), or `_core.UNSHARED` when it cannot be shared."""
        shape = self._shape
        if as_handler:
            shape = shape.with_exc
        entry = shape.entry(node.func, node.fun_sign, self._ava_args_v, shape.name_map)
        return _core.UNSHARED if entry is None else entry.call_plan

    async def _cached_values(
        self, node: BaseNode, entry: PlanEntry, args: tuple, kwargs: dict, keep: bool
    ) -> dict | None:
        """The results of the plan's `use_cache` providers: this interpreter's, made on first use
        (`keep`), else resolved for this call alone."""
        if entry.cached_group is None:
            return None
        if keep and self._provider_values is not None:
            found = self._provider_values.get(entry)
            if found is not None:
                return found
        values: dict = {}
        session = Session(args, kwargs, self._dep_store, self._lifecycles, Scope.WORKFLOW)
        await self._inject(node, entry.cached_group, session, values)
        if keep:
            if self._provider_values is None:
                self._provider_values = {}
                self._values_key = self._shape.key
            self._provider_values[entry] = values
        return values

    async def _run_unshared(self, node: BaseNode) -> Any:
        """Inject and call a node whose plan is not in the core's table (the per-interpreter path)."""
        return await self._invoke(node, await self._make_plan(node, None, None))

    async def _invoke_slow(self, node: BaseNode, plan: Any) -> Any:
        """Call a node whose table plan needs this layer (providers, `use_cache` results)."""
        entry = plan.entry
        if entry is None:
            return await self._run_unshared(node)
        args, kwargs = self._ava_args_v, self._ava_kwargs_v
        cached = await self._cached_values(node, entry, args, kwargs, True)
        return await self._invoke(node, entry.instantiate(args, kwargs, cached, False))

    def _invoke_slow_now(self, node: BaseNode, plan: Any) -> Any:
        """`_invoke_slow` without a coroutine when it can be done at once (see `_invoke_with_factories_now`)."""
        entry = plan.entry
        if entry is None:
            return _core.NOT_NOW
        if entry.direct and not node.is_coro and not (node.wrap_to_async and not self._force_inline):
            args, kwargs = self._ava_args_v, self._ava_kwargs_v
            values = entry.recipe.build(args, kwargs)
            group = entry.group
            pending = start_plain(group.plain, args, kwargs, values)
            if pending is not None:
                return self._finish_call(node, group, pending, values)
            node.func(**values)
            return None
        cached = None
        if entry.cached_group is not None:
            cached = self._provider_values.get(entry) if self._provider_values is not None else None
            if cached is None:
                return _core.NOT_NOW
        inst = entry.instantiate(self._ava_args_v, self._ava_kwargs_v, cached, False)
        if inst[2]:
            return self._invoke_with_factories_now(node, inst)
        if node.is_coro or (node.wrap_to_async and not _flags_home["__flags__"].FORCE_NOT_WRAP_TO_ASYNC):
            return _core.NOT_NOW
        args, kwargs, _ = inst
        node.func(*args) if args is not None else node.func(**kwargs)
        return None

    async def _rslv_node_static(self, node: BaseNode, ava_args: tuple, ava_kwargs: dict) -> tuple[dict, Any]:
        """`(static_kwargs, per_call_factories)`: matched values plus `use_cache` provider results."""
        entry = self._build_entry(node, self._meta_of(node), ava_args, ava_kwargs)
        cached = await self._cached_values(node, entry, ava_args, ava_kwargs, False)
        return entry.values(ava_args, ava_kwargs, cached), entry.group or {}

    async def _rslv_node(self, node: BaseNode, ava_args: tuple, ava_kwargs: dict) -> dict:
        """Every parameter of `node` resolved from the given pools, per-call providers included."""
        values, group = await self._rslv_node_static(node, ava_args, ava_kwargs)
        if group:
            session = Session(ava_args, ava_kwargs, self._dep_store, self._lifecycles, Scope.WORKFLOW)
            await self._inject(node, group, session, values)
        return values

    async def _invoke_with_factories(
        self, node: BaseNode, plan: tuple, extra_args: tuple | None, extra_kwargs: dict | None
    ) -> Any:
        """Resolve the plan's per-call providers, then call the node (inside a call scope when one is declared)."""
        args, kwargs, group = plan
        values = dict(kwargs) if kwargs is not None else dict(zip(node.func.__code__.co_varnames, args))
        if not isinstance(group, FactoryGroup):
            pools = self._pools(extra_args, extra_kwargs)
            group = FactoryGroup.prepare(group, *pools).bind(*pools)
        if group.direct_only:
            if group.pools is not None:
                pending = start_plain(group.plain, *group.pools, values)
            elif extra_args or extra_kwargs:
                pending = start_plain(group.plain, *self._pools(extra_args, extra_kwargs), values)
            else:
                pending = start_plain(group.plain, self._ava_args_v, self._ava_kwargs_v, values)
            if pending is not None:
                await self._settle_providers(node, group, pending, values, extra_args, extra_kwargs)
            if node.is_coro:
                return await node.func(**values)
            if node.wrap_to_async and not _flags_home["__flags__"].FORCE_NOT_WRAP_TO_ASYNC:
                return await self._offload(node.func, None, values)
            return node.func(**values)  # the inline case of `_invoke_plain`, without its coroutine
        session = self._call_session(group, extra_args, extra_kwargs)
        if not group.needs_call_scope:
            await self._inject(node, group, session, values)
            return await self._invoke_plain(node, node.func, None, values)
        async with LifecycleScope(Scope.CALL) as call_scope:
            session.lifecycles = ScopeChain(Scope.CALL, call_scope, self._lifecycles)
            await self._inject(node, group, session, values)
            return await self._invoke_plain(node, node.func, None, values)

    def _invoke_with_factories_now(self, node: BaseNode, plan: tuple) -> Any:
        """A step's `_invoke_with_factories`, without a coroutine when the providers and the node
        are all direct and synchronous. Returns None when the call is done, an awaitable that
        finishes it (a provider was not direct), or `_core.NOT_NOW` when nothing was done."""
        args, kwargs, group = plan
        if (
            type(group) is not FactoryGroup
            or not group.direct_only
            or group.pools is not None
            or node.is_coro
            or (node.wrap_to_async and not _flags_home["__flags__"].FORCE_NOT_WRAP_TO_ASYNC)
        ):
            return _core.NOT_NOW
        values = dict(kwargs) if kwargs is not None else dict(zip(node.func.__code__.co_varnames, args))
        pending = start_plain(group.plain, self._ava_args_v, self._ava_kwargs_v, values)
        if pending is not None:
            return self._finish_call(node, group, pending, values)
        node.func(**values)
        return None

    async def _finish_call(self, node: BaseNode, group: FactoryGroup, pending: list, values: dict) -> Any:
        await self._settle_providers(node, group, pending, values, None, None)
        return node.func(**values)

    async def _settle_providers(
        self,
        node: BaseNode,
        group: FactoryGroup,
        pending: list,
        values: dict,
        extra_args: tuple | None,
        extra_kwargs: dict | None,
    ) -> None:
        """Finish what `start_plain` left pending; `DependsInjectFailed` when a provider failed."""
        session = self._call_session(group, extra_args, extra_kwargs)
        if not await finish_plain(group.plain, pending, session, self._exc_ignored, values):
            raise self._inject_failed(node, session)

    def _call_session(self, group: FactoryGroup, extra_args: tuple | None, extra_kwargs: dict | None) -> Session:
        if group.pools is not None:
            return Session(*group.pools, self._dep_store, self._lifecycles, Scope.WORKFLOW)
        if extra_args or extra_kwargs:
            return Session(*self._pools(extra_args, extra_kwargs), self._dep_store, self._lifecycles, Scope.WORKFLOW)
        fingerprint = self.args_hash if self._shape is not None else None
        return Session(
            self._ava_args_v, self._ava_kwargs_v, self._dep_store, self._lifecycles, Scope.WORKFLOW, fingerprint
        )

    async def _inject(self, node: BaseNode, group: FactoryGroup, session: Session, target: dict) -> None:
        """Resolve `group` into `target`; `DependsInjectFailed` naming the function and parameter on failure."""
        if not await resolve_group(group, session, self._exc_ignored, target):
            raise self._inject_failed(node, session)

    @staticmethod
    def _inject_failed(node: BaseNode, session: Session) -> DependsInjectFailed:
        return DependsInjectFailed(
            f"Runtime resolve failed for kwargs: {session.failed_key} "
            f"(function {callable_name(node.func)} in {node.tag}: {session.miss})"
        )

    def _pools_hold_factories(self) -> bool:
        """True when a `Depends` object sits in the pools (it is resolved when the run starts)."""
        shape = self._shape
        if shape is None or shape.private:
            factories = any(isinstance(v, DependsFactory) for v in self._ava_args_v)
        else:
            factories = shape.holds_factories
        kwargs = self._ava_kwargs_v
        return factories or (bool(kwargs) and any(isinstance(v, DependsFactory) for v in kwargs.values()))

    async def _refresh_di_cache_full(self) -> None:
        """Make every node's plan and `use_cache` results now, in graph order and in batches
        (needs a trusted args hash)."""
        if self._shape is None:
            raise DependsResolveFailed("Args hash is not trustable! Call `rehash_args()` first.")
        if not self._plans_valid_v:  # in a run with the cache on, `_di_cache` lists every node anyway
            self._own_di_record().preloaded = True
        args, kwargs = self._ava_args_v, self._ava_kwargs_v
        size = max(
            1, int(_flags_home["__flags__"].WORKFLOW_DI_PRELOAD_BATCH) + 1
        )  # 1.1.3 gathers once a batch exceeds the flag
        plans: list = []
        seen: set[int] = set()
        for node in program_of(self._graph).nodes:
            if not isinstance(node, BaseNode) or id(node.func) in seen:
                continue
            if len(seen) >= PRELOAD_LIMIT:
                break
            seen.add(id(node.func))
            plans.append((node, *self._plan_entry(node, args, kwargs, None, None, False)))
        for start in range(0, len(plans), size):
            await self._preload_batch(plans[start : start + size], args, kwargs)

    async def _preload_batch(self, plans: list, args: tuple, kwargs: dict) -> None:
        """The `use_cache` results of a batch of `(node, entry, keep)` the interpreter lacks, resolved
        together (their providers start as in 1.1.3's batch); then the first failure is raised."""
        held = self._provider_values if self._provider_values is not None else {}
        todo = [plan for plan in plans if plan[1].cached_group is not None and not (plan[2] and plan[1] in held)]
        if not todo:
            return
        session = Session(args, kwargs, self._dep_store, self._lifecycles, Scope.WORKFLOW)
        targets: list[dict] = [{} for _ in todo]
        finished = await resolve_together(
            [entry.cached_group for _, entry, _ in todo], session, self._exc_ignored, targets
        )
        failure: BaseException | None = None
        for position, verdict in finished:
            node, entry, keep = todo[position]
            if verdict is True:
                if keep:
                    if self._provider_values is None:
                        self._provider_values = {}
                        self._values_key = self._shape.key
                    self._provider_values[entry] = targets[position]
            elif failure is None:
                failure = verdict if verdict is not False else self._inject_failed(node, session)
        if failure is not None:
            raise failure
