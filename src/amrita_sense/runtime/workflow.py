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
import os
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from io import StringIO
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from amrita_sense import core as _core
from amrita_sense._unsafe import __flags__
from amrita_sense.core import address_list
from amrita_sense.di import LifecycleScope, Scope
from amrita_sense.di.inject import (
    callable_name,
)
from amrita_sense.di.interpreter import Injection, read_flags_from
from amrita_sense.di.plans import shape_of
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
from amrita_sense.runtime import observe as _observe
from amrita_sense.runtime.offload import run_batch_in_worker, run_in_worker
from amrita_sense.runtime.steps import PC_CHECKPOINT, step_loop
from amrita_sense.runtime.types import FLAG_HLT, FLAG_IF, FLAG_JMP, Flags, InterpreterContext, RunMark
from amrita_sense.streaming import SuspendObjectStream
from amrita_sense.types import PointerVector, Stack

UNSET: Any = object()
_RUNNING: Any = _core.RUNNING
if TYPE_CHECKING:  # a default (PEP 696): `WorkflowInterpreter(graph)` without an `object_io` is `[Any]`
    from typing_extensions import TypeVar as _DefaultedTypeVar

    io_T = _DefaultedTypeVar("io_T", covariant=True, default=Any)
else:
    io_T = TypeVar("io_T", covariant=True)
fun_T = TypeVar("fun_T", bound=Callable[..., Any], covariant=True)  # exported as 1.1.3 does
_Method = TypeVar("_Method", bound=Callable[..., Any])

read_flags_from(globals())  # injection reads `__flags__` where 1.1.3 users replace it: here

YIELD_INTERVAL = 0.001
"""Seconds of inline sync nodes after which a run hands the event loop a turn."""


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


_durable_capture: list[Any] = [None]
"""`amrita_sense.durable.snapshots.capture.take_snapshot`, once `snapshot()` imported it (a floor above)."""


def uuid4_hex() -> str:
    """`uuid.uuid4().hex`, the same text from the same random bytes, without the `UUID` object (a
    quarter of the cost: every checkpointed run's snapshot reads its interpreter's id): 16 bytes of
    `os.urandom` with the version (4) and variant (RFC 4122) bits set as `UUID(..., version=4)` sets
    them."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4: the high nibble of byte 6
    raw[8] = (raw[8] & 0x3F) | 0x80  # variant RFC 4122: the two high bits of byte 8 are 10
    return raw.hex()


class WorkflowInterpreter(Injection, _core.InterpreterCore, Generic[io_T]):
    """Runs a rendered graph: the program counter, return stack, lock and run loop."""

    __slots__ = (
        "__weakref__",
        "_checkpoints",
        "_durable_steps",
        "_durable_wait",
        "_node_calls",
        "_parked_tag",
        "_stepped",
    )

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
        # Durable waits (`amrita_sense.durable.waits`): the wait the run is parked at, as
        # (topic or None, due_at or None), and the main-loop steps a checkpointed run completed
        # (`step_key`); both travel with the snapshot.
        self._durable_wait: tuple[str | None, float | None] | None = None
        self._durable_steps = 0
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

    # ----- identity and tree ----------------------------------------------------------

    def get_graph(self) -> Any:
        """The rendered graph this interpreter runs."""
        return self._graph

    @property
    def id(self) -> str:
        """A uuid4 hex string, made on first use."""
        if self._interpreter_id is None:
            self._interpreter_id = uuid4_hex()
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

    def snapshot(self, codec: Any = None, *, keyring: Any = None) -> bytes:
        """The run's engine state as bytes (versioned format, no pickle: see `amrita_sense.durable`).

        Works between runs, after a panic or a halt, at a suspend gate, between
        nodes and in a middleware before `_call()`; raises `SnapshotUnavailable`
        while a node runs. `codec` (an object with `dumps`/`loads`, such as
        `pickle`) also stores the injection pools and the panic exception.
        `keyring` (`amrita_sense.durable.Keyring`) signs the snapshot.
        """
        take = _durable_capture[0]
        if take is None:  # imported once: the import statement cost each checkpoint 2 us
            from amrita_sense.durable.snapshots.capture import take_snapshot

            take = _durable_capture[0] = take_snapshot
        data = take(self, codec)
        return data if keyring is None else keyring.sign_own(data)

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
        migrate: bool = False,
        context_migrations: Mapping[str, Callable[[tuple, dict], tuple[tuple, dict]]] | None = None,
        keyring: Any = None,
        allow_unsigned: bool = False,
    ) -> WorkflowInterpreter:
        """A new interpreter on `graph` in the state `data` (from `snapshot()`) describes.

        `run()` on it continues where the snapshotted run would have gone. The
        pools default to the snapshot's when it stored them and `codec` is
        given, else to empty; `exception_ignored` defaults to the snapshot's
        classes. Raises `GraphMismatch` when `graph` is not the snapshot's graph
        (unless `accept_passed_edits` and every edit lies before where the run
        stands), a `SnapshotFormatError` for bad data, `RestoreError` /
        `CodecError` when the state cannot be applied; nothing is changed then.

        With `migrate=True` a snapshot of another version of the graph is moved
        onto `graph`: every address it holds goes to the row with the same
        identity, or the restore raises `GraphMismatch` naming the slot that
        cannot move (`amrita_sense.durable.snapshots.migrate`; `plan_migration` is the dry
        run). `context_migrations` maps the fingerprint of an old graph to
        `fn(args, kwargs) -> (args, kwargs)`, applied to the injection pools
        decoded from a snapshot of that graph before they are installed.

        `keyring` checks the snapshot's signature before anything is decoded
        (`TamperedSnapshot` when it does not verify). Without one, a `codec` that
        can run code while it loads (pickle) is refused (`UntrustedSnapshot`)
        unless `allow_unsigned=True` says the data comes from where only you write.
        """
        from amrita_sense.durable.snapshots.restore import restore_interpreter

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
            migrate=migrate,
            context_migrations=context_migrations,
            keyring=keyring,
            allow_unsigned=allow_unsigned,
            unset=UNSET,
        )

    @property
    def graph_fingerprint(self) -> str:
        """The stable fingerprint of this interpreter's graph (`amrita_sense.durable.graph_fingerprint`)."""
        from amrita_sense.durable.snapshots.fingerprint import graph_fingerprint

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

    @property
    def step_key(self) -> str:
        """An idempotency key for the main-loop step running now: ``"<run id>#<n>"``.

        The same for one step of one checkpointed run when a crash makes the restored run execute
        that step again, different for every other step (every iteration of a loop too), so a node
        that charges a card or sends an email can pass it downstream and make its effect happen
        once. `n` counts the run's completed main-loop steps (plus one), and travels with its
        checkpoints. A node of a Try body, an IF condition or another sub-call gets the key of the
        main-loop step it runs in. Raises `amrita_sense.durable.WaitError` in a run without a
        `Checkpointing` policy (no run id, nothing persists the count) and in a FUN_BLOCK /
        BATCH_RUN sub-interpreter (its steps are not the run's).
        """
        from amrita_sense.durable.errors import WaitError

        if self._top_interpreter is not None:
            raise WaitError(
                "step_key is not available in a FUN_BLOCK / BATCH_RUN sub-interpreter: use it in the main run"
            )
        policy = self._checkpoints
        run_id = getattr(policy, "run_id", None)
        if not isinstance(run_id, str):
            raise WaitError(
                "step_key needs a checkpointed run: set interp.checkpointing = Checkpointing(store, run_id, ...)"
            )
        return f"{run_id}#{self._durable_steps + 1}"

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
            observer = _observe.current
            if observer is not None:
                observer.event(self, _observe.EVENT_INTERRUPT, {"amrita_sense.address": str(addr.base_addr)})
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
            observer = _observe.current
            if observer is None or not self._parks_at(tag):
                return await self._stream_gate(tag)
            observer.event(self, _observe.EVENT_SUSPEND, {"amrita_sense.gate": str(tag)})
            try:
                return await self._stream_gate(tag)
            finally:
                observer.event(self, _observe.EVENT_RESUME, {"amrita_sense.gate": str(tag)})
        finally:
            self._parked_tag = None

    def _stream_gate(self, tag: str | None) -> Awaitable[bool]:
        """The stream's gate `tag` (`_wait_for_continue(tag)`); for a stream whose gate methods are
        `SuspendObjectStream`'s own, the coroutine of its compiled gate, which they would await."""
        stream = self.object_io
        if getattr(stream, "_gates_by_tags", False):
            return stream._suspend_flag.wait(stream, tag)
        return stream._wait_for_continue(tag)

    def _parks_at(self, tag: str | None) -> bool:
        """Whether the stream will park this run at the gate `tag` (a stream that cannot tell: yes)."""
        would_park = getattr(self.object_io, "_would_park", None)
        return would_park is None or bool(would_park(tag))

    # ----- dependency injection: in di.interpreter (Injection); the pools' own providers here ---

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

    # ----- running --------------------------------------------------------------------

    async def run(self) -> None:
        """Run the workflow to its end (or to a suspend, a stop or an interrupt).

        With a `checkpointing` policy set, the run saves checkpoints as the policy says.
        """
        if self._checkpoints is not None:
            return await self._checkpoints.run(self)
        observer = _observe.current
        if observer is not None:
            spans = observer.node_steps(self)
            if spans is not None:
                return await self._run_steps(spans)
        mark = RunMark()
        try:  # both `try` lines come before the claim (a `try` line is outside its handlers)
            outcome: BaseException | None = None
            try:
                if self._open_run(mark, observer) and not await self._start_work():
                    return
                await self._execute()
            except BaseException as exc:
                outcome = exc
                if self._claim_v is not mark or not self._absorbs(exc):
                    raise
            finally:
                if self._claim_v is mark:
                    if observer is not None:
                        observer.run_over(self, outcome)
                    if self._finish_run(outcome):
                        await self._end_scope()
        except BaseException as exc:
            await self._end_cut_run(mark, exc)
            raise

    async def _run_steps(self, spans: Any) -> None:
        """`run()` through the general step loop, each step run by `spans` (telemetry's node spans)."""
        steps = step_loop(self, None, spans)
        try:
            async for _ in steps:
                pass
        finally:
            await steps.aclose()

    def run_step_by(self) -> AsyncGenerator[Any, None]:
        """Run step by step: an async generator yielding the result of each main-loop node (the
        general step loop, `runtime.steps.step_loop`)."""
        return step_loop(self)

    async def _begin_run(self, mark: RunMark) -> bool:
        """Start a run (`_open_run`, then `_start_work` when needed); False when that already ended it."""
        return not self._open_run(mark, _observe.current) or await self._start_work()

    def _open_run(self, mark: RunMark, observer: _observe.RunObserver | None) -> bool:
        """Start a run claimed with `mark` (`_start_run`) and tell `observer`; True when run-start
        work must be awaited next (`_start_work`). The caller calls `_end_cut_run(mark, exc)` on
        every exception."""
        recovered = self._panic_exc is not None
        if recovered:
            logger.debug("Recovered from panic.")
            self._panic_exc = None
        work = self._start_run(__flags__, mark)
        if observer is not None:
            observer.run_begun(self, recovered)
        return work

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
        observer = _observe.current
        if observer is not None:
            observer.run_over(self, outcome)
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
