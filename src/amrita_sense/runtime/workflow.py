"""The workflow interpreter: the public API over the core's step loop.

The core (`amrita_sense._core`, compiled or pure) owns the node table, the
pointer, the return stack, the interpreter lock and the loop. This layer adds
what runs at most once per run or off the fast path: run setup and exception
routing (panic / recover, InterruptNotice reset, keep-context halt), the
suspend gates, dependency injection plans, sub-interpreters, and the rest of
the public surface.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, Awaitable, Callable
from io import StringIO
from typing import Any, Generic, TypeVar, cast
from uuid import uuid4

from amrita_sense import _core
from amrita_sense._core import address_list
from amrita_sense._unsafe import __flags__
from amrita_sense.di import DependencyStore, LifecycleScope, Scope
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
from amrita_sense.di.signature import sign_func
from amrita_sense.exceptions import (
    DependsInjectFailed,
    DependsResolveFailed,
    IllegalState,
    InterruptKeepContext,
    InterruptNotice,
    InvalidFlags,
    InvalidMiddleware,
    InvalidOperand,
)
from amrita_sense.hook.matcher import DependsFactory, MatcherFactory
from amrita_sense.logging import engine_debug_enabled, logger
from amrita_sense.node.abc_base import AbstractCompose, is_rendered_compose
from amrita_sense.node.addressing import AddressCalculator
from amrita_sense.node.core import BaseNode, program_of
from amrita_sense.node.self_compile import SelfCompileInstruction
from amrita_sense.runtime.offload import run_batch_in_worker, run_in_worker
from amrita_sense.runtime.types import FLAG_HLT, FLAG_IF, FLAG_JMP, Flags, InterpreterContext, RunMark
from amrita_sense.streaming import SuspendObjectStream
from amrita_sense.types import DICache, LRUCache, PointerVector, Stack
from amrita_sense.utils import _fingerprint_args

PC_CHECKPOINT = "WorkflowInterpreter::each_node"
UNSET: Any = object()
_RUNNING: Any = _core.RUNNING
io_T = TypeVar("io_T", covariant=True)
fun_T = TypeVar("fun_T", bound=Callable[..., Any], covariant=True)  # exported as 1.1.3 does
_Method = TypeVar("_Method", bound=Callable[..., Any])

YIELD_INTERVAL = 0.001
"""Seconds of inline sync nodes after which a run hands the event loop a turn."""

_PRELOAD_LIMIT = 2048
"""At most this many functions are warmed by `WORKFLOW_DI_PRELOAD_CACHE`."""


def _rendered(graph: Any) -> Any:
    """A self-compiling instruction rendered; `TypeError` for anything else that is not a rendered graph."""
    if isinstance(graph, SelfCompileInstruction):
        rendered = graph.extract().render()
        if is_rendered_compose(rendered):
            return rendered
    raise InvalidOperand(f"WorkflowInterpreter needs a rendered graph (call .render()), not {type(graph).__name__}")


_MATCHER_HOOKS = (
    MatcherFactory.__dict__["_resolve_dependencies"],
    MatcherFactory.__dict__["_do_runtime_resolve"],
)


def matcher_hooks_replaced() -> bool:
    """True when code replaced `MatcherFactory._resolve_dependencies` or `_do_runtime_resolve`
    (1.1.3's own tests do, to make `_call()` fail)."""
    found = MatcherFactory.__dict__
    return (
        found.get("_resolve_dependencies") is not _MATCHER_HOOKS[0]
        or found.get("_do_runtime_resolve") is not _MATCHER_HOOKS[1]
    )


def _current_task() -> asyncio.Task | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running event loop in this thread
        return None


def check_fork_options(middleware: Any, object_io: Any, what: str) -> None:
    """The options of a forked interpreter (FUN_BLOCK, BATCH_RUN, `fork_interpreter`): `middleware`
    UNSET (inherit), None or a callable; `object_io` None (the parent's stream) or a stream."""
    if middleware is not UNSET and middleware is not None and not callable(middleware):
        raise InvalidMiddleware(
            f"{what}: middleware must be a callable taking a WorkflowInterpreter and returning an awaitable, "
            f"not {type(middleware).__name__}"
        )
    if object_io is not None:
        _core.check_stream(object_io, f"{what}: object_io")


_ALL_FLAGS = FLAG_IF | FLAG_HLT | FLAG_JMP


def _flag_bits(value: Any, name: str) -> int:
    if not isinstance(value, int):
        raise InvalidFlags(f"{name} must be Flags (an int), not {type(value).__name__}")
    if value & ~_ALL_FLAGS or value < 0:
        raise InvalidFlags(f"{name}: {value} has bits that are not Flags.IF, Flags.HLT or Flags.JMP")
    return int(value)


class WorkflowInterpreter(_core.InterpreterCore, Generic[io_T]):
    """Runs a rendered graph: the program counter, return stack, lock and run loop."""

    __slots__ = ("__weakref__", "_checkpoints", "_node_calls", "_parked_tag", "_stepped")

    def __init__(
        self,
        node_compose: AbstractCompose[AddressCalculator] | SelfCompileInstruction,
        object_io: Any = None,
        *,
        exception_ignored: tuple[type[BaseException], ...] = (),
        extra_args: tuple = (),
        extra_kwargs: dict[str, Any] | None = None,
        addr_stack: Stack | None = None,
        context_stack: Stack | None = None,
        middleware: Callable[[WorkflowInterpreter], Awaitable[Any]] | None = None,
        parent_interpreter: WorkflowInterpreter | None = None,
    ):
        if not is_rendered_compose(node_compose):
            node_compose = _rendered(node_compose)
        self._core_init(program_of(node_compose), addr_stack, context_stack, middleware)
        self._layer_init(
            node_compose,
            extra_args,
            extra_kwargs,
            exception_ignored,
            __flags__.DISABLE_EXC_IGNORED,
            shape_of,
            YIELD_INTERVAL,
        )
        if object_io is not None:
            self.object_io = object_io
        # Where the run stands, for `snapshot()`: sub-calls and `_call()`s in progress, the gate
        # parked at, a `run_step_by()` yield; `_checkpoints` is the automatic-checkpoint policy.
        self._node_calls = 0
        self._parked_tag: str | None = None
        self._stepped = False
        self._checkpoints = None
        if parent_interpreter is not None:
            self._attach_to_tree(parent_interpreter)

    def _attach_to_tree(self, parent: WorkflowInterpreter) -> None:
        if not isinstance(parent, WorkflowInterpreter):
            raise InvalidOperand(
                f"parent_interpreter must be a WorkflowInterpreter or None, not {type(parent).__name__}"
            )
        self._parent_interpreter = parent
        top = parent.top_interpreter
        self._top_interpreter = top
        self._sub_interpreters_all = None
        top._sub_interpreters_all[self.id] = self
        parent._sub_interpreters[self.id] = self

    @property
    def _glob_top_mod_lock(self) -> Any:
        """The lock the whole interpreter tree shares (its top interpreter's), made on first use."""
        top = self.top_interpreter
        lock = top._glob_lock_v
        if lock is None:
            lock = top._glob_lock_v = _core.InterpretLock()
        return lock

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

    # ----- identity and tree ----------------------------------------------------------

    def get_graph(self) -> Any:
        """The rendered graph this interpreter runs."""
        return self._graph

    @property
    def id(self) -> str:
        """A uuid4 hex string, made on first use."""
        if self._interpreter_id is None:
            self._interpreter_id = uuid4().hex
        return self._interpreter_id

    @property
    def parent(self) -> WorkflowInterpreter | None:
        return self._parent_interpreter

    @property
    def top_interpreter(self) -> WorkflowInterpreter:
        return self._top_interpreter or self

    @property
    def all_sub_interpreters(self) -> dict[str, WorkflowInterpreter]:
        if self._top_interpreter is not None:
            raise RuntimeError(
                f"{self.id} is not a top-level interpreter, "
                f"the real top-level interpreter is {self._top_interpreter.id}"
            )
        return self._sub_interpreters_all

    @property
    def sub_interpreters(self) -> dict[str, WorkflowInterpreter]:
        return self._sub_interpreters

    @property
    def object_io(self) -> Any:
        """The suspend/resume stream; created on first use."""
        if self._object_io is None:
            self.object_io = SuspendObjectStream()
        return self._object_io

    @object_io.setter
    def object_io(self, stream: Any) -> None:
        self._object_io = _core.check_stream(stream, "object_io")  # the core takes its suspend flag

    # ----- status register ------------------------------------------------------------

    @property
    def _flags(self) -> Flags:
        return Flags(self._flag_bits)

    @_flags.setter
    def _flags(self, value: int) -> None:
        self._flag_bits = _flag_bits(value, "_flags")

    @property
    def flags(self) -> Flags:
        """The status register (`Flags`)."""
        return Flags(self._flag_bits)

    @property
    def jump_marked(self) -> bool:
        return bool(self._flag_bits & FLAG_JMP)

    @property
    def if_flag(self) -> bool:
        return bool(self._flag_bits & FLAG_IF)

    @if_flag.setter
    def if_flag(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError("if_flag must be a boolean value")
        self._flag_bits = (self._flag_bits | FLAG_IF) if value else (self._flag_bits & ~FLAG_IF)

    @staticmethod
    def markup(fun: _Method) -> _Method:
        """Decorate a pointer-moving method: it runs only if no jump happened this cycle."""

        @functools.wraps(fun)
        def wrapper(self, *args, **kwargs):
            if self._mark_jump():
                return fun(self, *args, **kwargs)
            return None

        return cast("_Method", wrapper)

    def unmarkup(self) -> None:
        """Clear JMP so the loop advances the pointer again."""
        self._flag_bits &= ~FLAG_JMP

    @property
    def context_stack(self) -> Stack:
        return self._context_stack

    @property
    def pending_stop(self) -> bool:
        return self._pending_stop

    @property
    def outer_interpreting(self) -> bool:
        return self._outer_interpreting

    # ----- state ----------------------------------------------------------------------

    def get_exception(self) -> Exception | None:
        """The exception of the last panic, until the next run recovers."""
        return self._panic_exc

    def reset(self) -> None:
        """Clear the pointer, stacks, flags, panic record and pending stop."""
        fut = self._waiter
        if fut is not None and fut is not _RUNNING and not fut.done():
            fut.cancel("Reseted by manual.")
        self._waiter = None
        self._clear_state()

    def _clear_state(self) -> None:
        self._pointer.clear()
        self._pending_stop = False
        self._ret_addr_stack.clear()
        self._flag_bits = 0
        self._panic_exc = None
        self._context_stack.clear()

    def dump_interpreter(self, exclude_deps: bool = True, exclude_stack: bool = True) -> InterpreterContext:
        """Snapshot the state (HLT stripped) for PUSH_CONTEXT / INT / IRET."""
        return InterpreterContext(
            ptr=self._pointer.copy(),
            exception_ignored=self._exc_ignored,
            s_args=None if exclude_deps else self._ava_args_v,
            s_kwargs=None if exclude_deps else self._ava_kwargs_v,
            extra={},
            stack=None if exclude_stack else self._ret_addr_stack,
            exception=self._panic_exc,
            flags=Flags(self._flag_bits & ~FLAG_HLT),
        )

    def rebase_context(self, ctx: InterpreterContext) -> None:
        """Restore a snapshot: pointer, pass-through types, pools, stack, panic and flags.

        Everything is checked before anything is restored, so a bad snapshot changes nothing."""
        if not isinstance(ctx, InterpreterContext):
            raise InvalidOperand(f"rebase_context(ctx) needs an InterpreterContext, not {type(ctx).__name__}")
        ptr = ctx.ptr if isinstance(ctx.ptr, PointerVector) else address_list(ctx.ptr, "the context's ptr")
        ignored = _core.exception_types(ctx.exception_ignored, "the context's exception_ignored")
        stack = ctx.stack or self._ret_addr_stack
        if not isinstance(stack, Stack):
            raise InvalidOperand(f"the context's stack must be a Stack, not {type(stack).__name__}")
        if ctx.exception is not None and not isinstance(ctx.exception, BaseException):
            raise InvalidOperand(
                f"the context's exception must be an exception or None, not {type(ctx.exception).__name__}"
            )
        bits = _flag_bits(ctx.flags, "the context's flags")
        pools = None
        if ctx.s_args and ctx.s_kwargs:
            pools = (
                _core.args_pool(ctx.s_args, "the context's s_args"),
                _core.kwargs_pool(ctx.s_kwargs, "the context's s_kwargs"),
            )
        self.rebase_ptr(ptr)
        self._exc_ignored = ignored
        if pools is not None:
            self._ava_args, self._ava_kwargs = pools
        self._ret_addr_stack = stack
        self._panic_exc = ctx.exception
        self._flag_bits = bits

    def rebase_ptr(self, ptr: list[int] | PointerVector) -> None:
        """Point at `ptr` (clears HLT; not a marked jump, so the loop still advances)."""
        self._flag_bits &= ~FLAG_HLT
        self._rebase_to(ptr)

    def resume_from_halt(self) -> bool:
        """Step past the node the run halted on; False when nothing follows."""
        self._flag_bits &= ~FLAG_HLT
        return self.advance_pointer()

    # ----- durable runs (amrita_sense.durable) ----------------------------------------

    def snapshot(self, codec: Any = None) -> bytes:
        """The run's engine state as bytes (versioned format, no pickle: see `amrita_sense.durable`).

        Works between runs, after a panic or a halt, at a suspend gate, between
        nodes and in a middleware before `_call()`; raises `SnapshotUnavailable`
        while a node runs. `codec` (an object with `dumps`/`loads`, such as
        `pickle`) also stores the injection pools and the panic exception.
        """
        from amrita_sense.durable.snapshot import take_snapshot

        return take_snapshot(self, codec)

    @classmethod
    def restore(
        cls,
        graph: Any,
        data: bytes,
        *,
        extra_args: Any = UNSET,
        extra_kwargs: Any = UNSET,
        codec: Any = None,
        object_io: Any = None,
        exception_ignored: Any = UNSET,
        middleware: Callable[[WorkflowInterpreter], Awaitable[Any]] | None = None,
        accept_passed_edits: bool = False,
    ) -> WorkflowInterpreter:
        """A new interpreter on `graph` in the state `data` (from `snapshot()`) describes.

        `run()` on it continues where the snapshotted run would have gone. The
        pools default to the snapshot's when it stored them and `codec` is
        given, else to empty; `exception_ignored` defaults to the snapshot's
        classes. Raises `GraphMismatch` when `graph` is not the snapshot's graph
        (unless `accept_passed_edits` and every edit lies before where the run
        stands), a `SnapshotFormatError` for bad data, `RestoreError` /
        `CodecError` when the state cannot be applied; nothing is changed then.
        """
        from amrita_sense.durable.restore import restore_interpreter

        return restore_interpreter(
            cls,
            graph,
            data,
            extra_args=extra_args,
            extra_kwargs=extra_kwargs,
            codec=codec,
            object_io=object_io,
            exception_ignored=exception_ignored,
            middleware=middleware,
            accept_passed_edits=accept_passed_edits,
            unset=UNSET,
        )

    @property
    def graph_fingerprint(self) -> str:
        """The stable fingerprint of this interpreter's graph (`amrita_sense.durable.graph_fingerprint`)."""
        from amrita_sense.durable.fingerprint import graph_fingerprint

        return graph_fingerprint(self._graph)

    @property
    def checkpointing(self) -> Any:
        """The automatic-checkpoint policy (`amrita_sense.durable.Checkpointing`) `run()` follows, or None."""
        return self._checkpoints

    @checkpointing.setter
    def checkpointing(self, policy: Any) -> None:
        if policy is not None and not callable(getattr(policy, "run", None)):
            raise InvalidOperand("checkpointing takes an amrita_sense.durable.Checkpointing policy or None")
        self._checkpoints = policy

    # ----- navigation -----------------------------------------------------------------

    def find_node_alias(self, alias: str) -> Any:
        """The node (or segment) registered under `alias`."""
        calc = self._graph.calc
        return calc.find_addr(calc.resolve_alias(alias))

    def _find_addr_or_none(self, addr: list[int]) -> Any:
        return self._graph.calc.find_addr_safe(addr)

    # ----- sub-calls ------------------------------------------------------------------

    async def call_offset(self, offset: int, *ag: Any, interrupt: bool = False, **kw: Any) -> Any:
        return await self.call_sub(self._pointer.copy().offset(offset), *ag, interrupt=interrupt, **kw)

    async def call_offset_far(self, offset: list[int], *ag: Any, interrupt: bool = False, **kw: Any) -> Any:
        return await self.call_sub(self._pointer.copy().offset_far(offset), *ag, interrupt=interrupt, **kw)

    async def call_near(self, addr: int, *ag: Any, interrupt: bool = False, **kw: Any) -> Any:
        return await self.call_sub(self._pointer.copy().near_to(addr), *ag, interrupt=interrupt, **kw)

    async def call_sub(self, addr: Any, /, *extra_arg: Any, interrupt: bool = False, **extra_kwargs: Any) -> Any:
        """Run the one node at `addr` as a subroutine, then restore the pointer.

        `interrupt=True` takes the interpreter lock first, so a call from
        outside runs between two nodes; `interrupt=False` needs the caller to
        hold the lock already (as a node in the main loop does).
        """
        if not isinstance(addr, PointerVector):
            addr = PointerVector(address_list(addr, "call_sub(addr)"))
        lock = self._interpret_lock
        if not interrupt and not lock.async_owned():
            raise RuntimeError(
                "Subroutine call detected, but lock is not acquired by current coroutine and caller is "
                "not in interrupt mode. Set `interrupt` to True to use outer interrupt mode."
            )
        if interrupt:
            await lock.async_acquire()
        try:
            return await self._run_subroutine(addr, extra_arg, extra_kwargs)
        finally:
            if interrupt:
                lock.async_release()

    async def _run_subroutine(self, addr: PointerVector, extra_arg: tuple, extra_kwargs: dict) -> Any:
        self._enter_subcall()
        try:
            self._ret_addr_stack.push(self._pointer)
        except BaseException:
            self._subcalls -= 1
            raise
        self._pointer = addr
        self._outer_interpreting = True
        try:
            if self._middleware is not None:
                return await self._middleware(self)
            return await self._call(None, *extra_arg, **extra_kwargs)
        finally:
            self._subcalls -= 1
            self._outer_interpreting = False
            saved = self._ret_addr_stack.pop()
            if not self._flag_bits & FLAG_JMP:
                self.rebase_ptr(saved)

    # ----- one node, the slow and general path ----------------------------------------

    async def _call(
        self, addr_getter: Any = None, *extra_args: Any, no_cache: bool = False, **extra_kwargs: Any
    ) -> Any:
        """Run the node at the pointer (entering segments first) and return its result."""
        self._node_calls += 1
        try:
            if addr_getter is None or getattr(addr_getter, "__func__", None) is AddressCalculator.find_addr:
                row = self._descend_current()
                if not (extra_args or extra_kwargs or no_cache):
                    if not self._plans_valid_v:
                        node = self._prog.nodes[row]
                        self._note_uncached_call(node)
                        if matcher_hooks_replaced():
                            return await self._call_through_matcher(node)
                    return await self._run_row(row)
                node = self._prog.nodes[row]
            else:
                node = self._descend_with(addr_getter)
                if node is None:
                    return None
                if not (extra_args or extra_kwargs or no_cache or self._plans_valid_v):
                    self._note_uncached_call(node)
                    if matcher_hooks_replaced():
                        return await self._call_through_matcher(node)
            if self._signal.pending:
                await self._gate(node.tag)
            if self._has_pre_check(node):
                node._pre_check(self)
            plan = await self._make_plan(node, extra_args, extra_kwargs, no_cache=no_cache)
            return await self._invoke(node, plan)
        finally:
            self._node_calls -= 1

    async def _call_through_matcher(self, node: BaseNode) -> Any:
        """`_call()` of `node` resolved as 1.1.3 resolves it, through `MatcherFactory._resolve_dependencies`
        and `_do_runtime_resolve` (used outside the plans when code replaced them)."""
        if self._signal.pending:
            await self._gate(node.tag)
        if self._has_pre_check(node):
            node._pre_check(self)
        args, kwargs = self._ava_args_v, self._ava_kwargs_v
        failed, values, factories = MatcherFactory._resolve_dependencies(self._meta_of(node), args, kwargs)
        if failed is not None:
            raise DependsResolveFailed(
                f"Function {callable_name(node.func)} in {node.tag} could not be resolved due to reason `{failed.value}`"
            )
        if not factories:
            return await self._invoke_plain(node, node.func, None, values)
        values = dict(values)
        if not any(factory.is_lifecycle for factory in factories.values()):
            await self._resolve_through_matcher(node, factories, values, self._lifecycles)
            return await self._invoke_plain(node, node.func, None, values)
        async with LifecycleScope(Scope.CALL) as call_scope:
            await self._resolve_through_matcher(node, factories, values, {**self._lifecycles, Scope.CALL: call_scope})
            return await self._invoke_plain(node, node.func, None, values)

    async def _resolve_through_matcher(self, node: BaseNode, factories: dict, values: dict, lifecycles: Any) -> None:
        resolved = await MatcherFactory._do_runtime_resolve(
            runtime_args={},
            runtime_kwargs=dict(factories),
            args2update=[],
            kwargs2update=values,
            session_args=list(self._ava_args_v),
            session_kwargs=self._ava_kwargs_v,
            exception_ignored=self._exc_ignored,
            store=self._dep_store,
            lifecycles=lifecycles,
            default_scope=Scope.WORKFLOW,
        )
        if not resolved:
            raise DependsInjectFailed(f"Runtime resolve failed for kwargs: {', '.join(factories)}")

    def _descend_with(self, addr_getter: Callable[[list[int]], Any]) -> BaseNode | None:
        target = addr_getter(self._pointer.base_addr)
        while is_rendered_compose(target):
            if not target:
                return None
            self._pointer.append(0)
            target = addr_getter(self._pointer.base_addr)
        return target

    @staticmethod
    def _has_pre_check(node: BaseNode) -> bool:
        return not getattr(node._pre_check, "__isabstractmethod__", False)

    async def _invoke(self, node: BaseNode, plan: tuple) -> Any:
        args, kwargs, factories = plan
        if factories:
            return await self._invoke_with_factories(node, plan, None, None)
        return await self._invoke_plain(node, node.func, args, kwargs)

    async def _invoke_plain(self, node: BaseNode, func: Any, args: tuple | None, kwargs: dict | None) -> Any:
        if node.is_coro:
            return await (func(*args) if args is not None else func(**(kwargs or {})))
        if node.wrap_to_async and not __flags__.FORCE_NOT_WRAP_TO_ASYNC:
            return await self._offload(func, args, kwargs)
        return func(*args) if args is not None else func(**(kwargs or {}))

    async def _offload(self, func: Any, args: tuple | None, kwargs: dict | None) -> Any:
        """Run a sync node body in a worker thread, with the caller's context variables."""
        return await run_in_worker(asyncio.get_running_loop(), func, args, kwargs)

    async def _offload_batch(self, batch: Callable[[asyncio.Future], Any]) -> Any:
        """Run a batch of worker-thread nodes (the core's `_batch_in_worker`) in a worker thread."""
        return await run_batch_in_worker(asyncio.get_running_loop(), batch)

    async def _gate(self, tag: str | None) -> bool:
        self._parked_tag = tag
        try:
            top = self._top_interpreter or self
            if top._checkpoints is not None:
                await top._checkpoints.before_gate(top, self, tag)
            return await self.object_io._wait_for_continue(tag)
        finally:
            self._parked_tag = None

    # ----- dependency injection ---------------------------------------------------------

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
                if len(nodes) >= _PRELOAD_LIMIT:
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
        if self._shape is not None and not __flags__.WORKFLOW_DI_NO_CACHE:
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
        return sign_func(node.func) if __flags__.NO_DEPENDENCY_META_CACHE else node.fun_sign

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
        if no_cache or __flags__.WORKFLOW_DI_NO_CACHE or shape is None:
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
        if node.is_coro or (node.wrap_to_async and not __flags__.FORCE_NOT_WRAP_TO_ASYNC):
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
            if node.wrap_to_async and not __flags__.FORCE_NOT_WRAP_TO_ASYNC:
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
            or (node.wrap_to_async and not __flags__.FORCE_NOT_WRAP_TO_ASYNC)
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

    async def _resolve_session_factories(self) -> None:
        """At run start: `Depends` objects in the pools resolve and replace themselves; then the optional preload."""
        args, kwargs = self._ava_args_v, self._ava_kwargs_v
        if any(isinstance(v, DependsFactory) for v in args) or any(
            isinstance(v, DependsFactory) for v in kwargs.values()
        ):
            new_args, new_kwargs = list(args), dict(kwargs)
            ok = await MatcherFactory._do_runtime_resolve(
                runtime_args={i: v for i, v in enumerate(new_args) if isinstance(v, DependsFactory)},
                runtime_kwargs={k: v for k, v in new_kwargs.items() if isinstance(v, DependsFactory)},
                args2update=new_args,
                kwargs2update=new_kwargs,
                session_args=new_args,
                session_kwargs=new_kwargs,
                exception_ignored=self._exc_ignored,
            )
            if not ok:
                raise RuntimeError("Runtime arguments cannot be resolved")
            self._ava_args = tuple(new_args)
            self._ava_kwargs = new_kwargs
            self.rehash_args()
        if __flags__.WORKFLOW_DI_PRELOAD_CACHE:
            await self._refresh_di_cache_full()

    async def _refresh_di_cache_full(self) -> None:
        """Make every node's plan and `use_cache` results now, in graph order and in batches
        (needs a trusted args hash)."""
        if self._shape is None:
            raise DependsResolveFailed("Args hash is not trustable! Call `rehash_args()` first.")
        if not self._plans_valid_v:  # in a run with the cache on, `_di_cache` lists every node anyway
            self._own_di_record().preloaded = True
        args, kwargs = self._ava_args_v, self._ava_kwargs_v
        size = max(1, int(__flags__.WORKFLOW_DI_PRELOAD_BATCH) + 1)  # 1.1.3 gathers once a batch exceeds the flag
        plans: list = []
        seen: set[int] = set()
        for node in program_of(self._graph).nodes:
            if not isinstance(node, BaseNode) or id(node.func) in seen:
                continue
            if len(seen) >= _PRELOAD_LIMIT:
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

    # ----- running --------------------------------------------------------------------

    async def run(self) -> None:
        """Run the workflow to its end (or to a suspend, a stop or an interrupt).

        With a `checkpointing` policy set, the run saves checkpoints as the policy says.
        """
        if self._checkpoints is not None:
            return await self._checkpoints.run(self)
        mark = RunMark()
        try:  # both `try` lines come before the claim (a `try` line is outside its handlers)
            outcome: BaseException | None = None
            try:
                if self._open_run(mark) and not await self._start_work():
                    return
                await self._execute()
            except BaseException as exc:
                outcome = exc
                if self._claim_v is not mark or not self._absorbs(exc):
                    raise
            finally:
                if self._claim_v is mark and self._finish_run(outcome):
                    await self._end_scope()
        except BaseException as exc:
            await self._end_cut_run(mark, exc)
            raise

    async def run_step_by(self) -> AsyncGenerator[Any, None]:
        """Run step by step, yielding the result of each main-loop node."""
        mark = RunMark()
        try:  # both `try` lines come before the claim (a `try` line is outside its handlers)
            outcome: BaseException | None = None
            lock = self._interpret_lock
            try:
                if not await self._begin_run(mark):
                    return
                while True:
                    if self._signal.pending:
                        await self._gate(PC_CHECKPOINT)
                    if self._pending_stop:
                        self._pending_stop = False
                        break
                    await self._take_lock()
                    try:
                        state = self._enter_step()
                        if state == _core.STEP_END:
                            break
                        if state == _core.STEP_SKIPPED:
                            continue
                        result = await self._run_current()
                        self._stepped = True
                        try:
                            yield result
                        finally:
                            self._stepped = False
                        if not self._leave_step():
                            break
                    finally:
                        lock.async_release()
            except BaseException as exc:
                outcome = exc
                if self._claim_v is not mark or not self._absorbs(exc):
                    raise
            finally:
                if self._claim_v is mark:
                    await self._end_run(outcome)
        except BaseException as exc:
            await self._end_cut_run(mark, exc)
            raise

    async def _begin_run(self, mark: RunMark) -> bool:
        """Start a run (`_open_run`, then `_start_work` when needed); False when that already ended it."""
        return not self._open_run(mark) or await self._start_work()

    def _open_run(self, mark: RunMark) -> bool:
        """Start a run claimed with `mark` (`_start_run`); True when run-start work must be awaited
        next (`_start_work`). The caller calls `_end_cut_run(mark, exc)` on every exception."""
        if self._panic_exc is not None:
            logger.debug("Recovered from panic.")
            self._panic_exc = None
        return self._start_run(__flags__, mark)

    async def _end_cut_run(self, mark: RunMark, exc: BaseException) -> None:
        """End the run claimed with `mark` if it still holds the claim while `exc` propagates: an
        asynchronous exception (a KeyboardInterrupt) cut its end short. A start that was refused
        never held the claim, so another run's is never touched."""
        if self._claim_v is mark:
            await self._end_run(exc)

    async def _start_work(self) -> bool:
        """The run's first work (`Depends` in the pools, the optional preload). What it raises ends
        the run as a step's exception would (`_absorbs`: recorded as the panic, or an InterruptNotice
        ending it quietly, as in 1.1.3); False when the run is over."""
        try:
            await self._resolve_session_factories()
        except BaseException as exc:
            absorbed = self._absorbs(exc)
            await self._end_run(exc)
            if not absorbed:
                raise
            return False
        return True

    def _absorbs(self, exc: BaseException) -> bool:
        """Route what ended a run: True when it ends the run quietly (InterruptNotice), False when it
        propagates (an Exception is recorded as the panic first)."""
        if isinstance(exc, InterruptKeepContext):
            self._flag_bits |= FLAG_HLT
            return True
        if isinstance(exc, InterruptNotice):
            if engine_debug_enabled():
                logger.debug(f"Interrupt notice at {self._pointer}: {exc.message}")
            self._clear_state()
            return True
        if isinstance(exc, Exception):
            self._panic_exc = exc
            if engine_debug_enabled():
                logger.debug(f"workflow panic: {exc!r} at {self._pointer}\n{self._make_traceback()}")
        return False

    async def _end_run(self, outcome: BaseException | None) -> None:
        if self._finish_run(outcome):
            await self._end_scope()

    async def _end_scope(self) -> None:
        try:
            await self._close_workflow_scope()
        finally:
            _core.restore_async_library()

    def _workflow_scope_open(self) -> bool:
        """True when the workflow scope holds something to tear down (the store is cleared either way)."""
        if self._dep_store_v is not None:
            self._dep_store_v.clear()
        scopes = self._lifecycles_v
        return scopes is not None and not scopes[Scope.WORKFLOW].unused

    async def _close_workflow_scope(self) -> None:
        """Tear down the workflow-scoped dependencies (last opened first) and start a fresh scope; idempotent."""
        if not self._workflow_scope_open():
            return
        scopes = self._lifecycles
        scope = scopes[Scope.WORKFLOW]
        scopes[Scope.WORKFLOW] = LifecycleScope(Scope.WORKFLOW)
        await scope.aclose()

    @property
    def is_running(self) -> bool:
        fut = self._waiter
        return fut is _RUNNING or (fut is not None and not fut.done())

    @property
    def _waiter_fut(self) -> asyncio.Future | None:
        """The current run's future (made when first asked for), None while idle."""
        fut = self._waiter
        if fut is _RUNNING:
            task = self._run_task
            loop = task.get_loop() if task is not None else asyncio.get_running_loop()
            fut = self._waiter = loop.create_future()
        return fut

    @_waiter_fut.setter
    def _waiter_fut(self, fut: asyncio.Future | None) -> None:
        if fut is not None and not isinstance(fut, asyncio.Future):
            raise InvalidOperand(f"_waiter_fut must be an asyncio.Future or None, not {type(fut).__name__}")
        self._waiter = fut

    @property
    def wait(self) -> asyncio.Future:
        """The current run's future; resolves (or fails with the panic) when the run ends.

        From inside the run itself (a node awaiting it would wait for itself) it raises `IllegalState`.
        """
        if self._waiter is None:
            raise IllegalState("Interpreter is not running.")
        self._refuse_waiting_for_own_run("wait")
        fut = self._waiter_fut
        assert fut is not None, "a run is on: it has a future"
        return fut

    def _refuse_waiting_for_own_run(self, what: str, caller: Any = UNSET) -> None:
        """`IllegalState` when `caller` (default: the current task) drives this interpreter's run:
        waiting for the run's end from inside it can never finish (like `run()` from inside a node)."""
        task = self._run_task
        if task is not None and task is (_current_task() if caller is UNSET else caller):
            raise IllegalState(f"{what} from inside this interpreter's own run would wait for itself forever")

    # ----- sub-interpreters -----------------------------------------------------------

    def fork_interpreter(
        self,
        compose: Any = None,
        middleware: Any = UNSET,
        object_io: Any = None,
        ava_args: tuple | None = None,
        ava_kwargs: dict[str, Any] | None = None,
    ) -> WorkflowInterpreter:
        """A child interpreter sharing this one's stream, pass-through types, pools and middleware."""
        check_fork_options(middleware, object_io, "fork_interpreter")
        if middleware is UNSET:
            middleware = None if __flags__.NO_SHARED_MIDDLEWARE else self._middleware
        args = self._ava_args_v
        if ava_args is not None:
            args = (*_core.args_pool(ava_args, "ava_args"), *args[1:])
        kwargs = self._ava_kwargs_v
        if ava_kwargs is not None:
            kwargs = {**kwargs, **_core.kwargs_pool(ava_kwargs, "ava_kwargs")}
        return WorkflowInterpreter(
            compose if compose is not None else self._graph,
            object_io=object_io or self.object_io,
            exception_ignored=self._exc_ignored,
            middleware=middleware,
            extra_args=args,
            extra_kwargs=kwargs,
            parent_interpreter=self,
        )

    async def terminate(self, eol: bool = True) -> None:
        """Stop at the next checkpoint and wait for the run to end; `eol` leaves the tree.

        From inside the run itself it raises `IllegalState` (it would wait for itself).
        """
        await self._terminate(eol, _current_task())

    async def _terminate(self, eol: bool, caller: asyncio.Task | None) -> None:
        """`terminate()` on behalf of the task `caller` (the `*_all*` helpers run it in tasks of their own)."""
        if self.is_running:
            self._refuse_waiting_for_own_run("terminate()", caller)
        fut = self._waiter_fut
        if fut is not None and not fut.done() and not self._pending_stop:
            self._pending_stop = True
            await asyncio.wait([fut])
        await self._close_workflow_scope()
        if eol:
            self._leave_tree()

    def _leave_tree(self) -> None:
        parent = self._parent_interpreter
        if parent is not None:
            parent._sub_interpreters.pop(self.id, None)
        top = self.top_interpreter
        if top is not self:
            top._sub_interpreters_all.pop(self.id, None)
        self._parent_interpreter = None

    def terminate_all_forks(self, eol: bool = True, exclude_self: bool = False) -> asyncio.Future:
        """Terminate this interpreter (unless excluded) and its direct children concurrently."""
        targets = ([] if exclude_self else [self]) + list(self._sub_interpreters.values())
        caller = _current_task()
        return asyncio.gather(*(t._terminate(eol, caller) for t in targets), return_exceptions=True)

    async def terminate_all(self, eol: bool = True, exclude_self: bool = False) -> list:
        """Terminate every interpreter of the tree (top level only)."""
        if self.top_interpreter is not self:
            raise IllegalState("This interpreter is not top level.")
        targets = ([] if exclude_self else [self]) + list(self._sub_interpreters_all.values())
        caller = _current_task()
        return await asyncio.gather(*(t._terminate(eol, caller) for t in targets), return_exceptions=True)

    async def wait_all_forks(self, return_exc: bool = False, exclude_self: bool = False) -> list | None:
        """Wait for this run (unless excluded) and every running descendant.

        A run driven by the calling task (its own, or a FUN_BLOCK's parent) fails with `IllegalState`.
        """
        return await self._wait_forks(_current_task(), return_exc, exclude_self)

    async def _wait_forks(
        self, caller: asyncio.Task | None, return_exc: bool, exclude_self: bool = False
    ) -> list | None:
        waits: list = []
        if not exclude_self and self.is_running:
            self._refuse_waiting_for_own_run("wait_all_forks()", caller)
            waits.append(self._waiter_fut)
        waits += [sub._wait_forks(caller, return_exc) for sub in self._sub_interpreters.values()]
        results = await asyncio.gather(*waits, return_exceptions=return_exc)
        return results if return_exc else None

    async def wait_all(self, return_exc: bool = False, exclude_self: bool = False) -> list | None:
        """Wait for every running interpreter of the tree (top level only)."""
        if self.top_interpreter is not self:
            raise IllegalState("Only top-level interpreter can wait all interpreters.")
        members = ([] if exclude_self else [self]) + list(self._sub_interpreters_all.values())
        results = await asyncio.gather(*(m.wait for m in members if m.is_running), return_exceptions=return_exc)
        return results if return_exc else None

    # ----- diagnostics ----------------------------------------------------------------

    def _make_traceback(self) -> str:
        """A readable runtime traceback: interpreter chain, return stack, context stack, node."""
        text = StringIO()
        text.write("Sense Runtime Traceback (most recent call last):\n")
        for interp in reversed(list(self._interpreter_chain())):
            label = (
                interp.id
                + (" [Current]" if interp is self else "")
                + (" [Root]" if interp.top_interpreter is interp else "")
            )
            text.write(f"Interpreter -> {label} at {id(interp):#x}\n")
        text.write("\nReturning Stack:\n")
        entries = list(reversed(self._ret_addr_stack.stack))
        for i, entry in enumerate(entries):
            text.write(f"    {i}. {entry!s}\n")
        if not entries:
            text.write("    (EMPTY_STACK)\n")
        text.write(f"    {len(entries)}. {self._pointer!s} (Current)\n\nContext Stack:\n")
        for i, ctx in enumerate(self._context_stack.stack):
            text.write(f"    {i}. {ctx.ptr}\n")
        if not self._context_stack:
            text.write("    (EMPTY_STACK)\n")
        node = self._graph.calc.find_addr_safe(self._pointer.base_addr)
        described = (
            f"{node.tag}->{getattr(node.func, '__name__', node.func)}" if isinstance(node, BaseNode) else "<INVALID>"
        )
        text.write(f"Failed at node: {described}")
        return text.getvalue()

    def _interpreter_chain(self):
        interp: WorkflowInterpreter | None = self
        while interp is not None:
            yield interp
            interp = interp.parent


__all__ = ["PC_CHECKPOINT", "WorkflowInterpreter", "fun_T", "io_T"]
