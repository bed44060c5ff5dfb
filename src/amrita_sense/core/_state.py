"""The interpreter's state (`CoreState`): the registers and fields the step loop reads and writes,
the checked properties through which Python sees them, the checks of the Python layer's fields, the
bookkeeping of a run (start, finish), and the contract of the calls the core makes up into the
layer above (`LAYER_CONTRACT`). Cold code: it runs when an interpreter is made, a field is written
from Python, or a run starts or ends, never per step.

One source for both builds: Cython compiles it with `_state.pxd` into `amrita_sense.core._state`,
whose class the compiled core's `InterpreterCore` extends (the fields are C struct members of both);
the pure build runs it as `amrita_sense.core.pure_state`.
"""

from __future__ import annotations

import asyncio
from operator import attrgetter
from typing import Any

try:
    import cython
except ModuleNotFoundError:  # a pure build without Cython installed
    from amrita_sense.core import cython_shim as cython  # type: ignore[no-redef,unused-ignore]

if not cython.compiled and __name__.rpartition(".")[2] == "_state":
    # imported as Python under the compiled module's name: the extension is not built here
    raise ImportError("the compiled core is not built here; the pure build is amrita_sense.core.pure_state")

if not cython.compiled:  # the pure build (type checkers read these)
    from amrita_sense.core.pure_async_pin import (
        pin_async_library,
        restore_async_library,
    )
    from amrita_sense.core.pure_checks import (  # type: ignore[attr-defined]
        _checked,
        _checked_middleware,
        _checked_seconds,
        _optional,
        _provided,
        _refuse_delete,
        args_pool,
        check_stream,
        exception_types,
        kwargs_pool,
    )
    from amrita_sense.core.pure_structures import (  # type: ignore[attr-defined]
        ALWAYS_PENDING,
        NEVER_PENDING,
        InterpretLock,
        PointerVector,
        Program,
        Stack,
        SuspendFlag,
        _current_task,
        _new_lock,
        _new_stack,
        _start_pointer,
    )
else:
    from cython.cimports.amrita_sense.core._async_pin import pin_async_library, restore_async_library
    from cython.cimports.amrita_sense.core._checks import (
        _checked,
        _checked_middleware,
        _checked_seconds,
        _optional,
        _provided,
        _refuse_delete,
        args_pool,
        check_stream,
        exception_types,
        kwargs_pool,
    )
    from cython.cimports.amrita_sense.core._structures import (
        InterpretLock,
        PointerVector,
        Program,
        Stack,
        SuspendFlag,
        _current_task,
        _new_lock,
        _new_stack,
        _start_pointer,
    )

    from amrita_sense.core._structures import ALWAYS_PENDING, NEVER_PENDING

from amrita_sense.exceptions import (
    BreakLoop,
    IllegalState,
    InterruptKeepContext,
    InterruptNotice,
    InvalidOperand,
)

RUNNING: object = object()
"""`_waiter` of a run whose future nobody asked for yet."""


# ----- checked at the write: what the fields Python can write may hold -----------------------------
# (as in the compiled core; the pools' checks are also the Python layer's)


def _checked_waiter(value):
    """`_waiter`: None (no run), RUNNING (a run whose future nobody asked for) or its future."""
    if value is not None and value is not RUNNING and not isinstance(value, asyncio.Future):
        raise InvalidOperand(f"_waiter must be an asyncio.Future, RUNNING or None, not {type(value).__name__}")
    return value


def _checked_graph(value, name):
    if getattr(value, "__rendered_compose__", False) is not True:
        raise InvalidOperand(f"{name} must be a rendered graph, not {type(value).__name__}")
    return value


# ----- checked at the write: the Python layer's fields (made in CoreState's body) ------


def _checked_field(storage: str, name: str, check: Any) -> Any:
    """A field kept in the attribute `storage` whose writes are checked (`check(interp, value, name)`
    gives what to store) and which cannot be deleted; a read is `attrgetter(storage)` (C code)."""

    def write(interp, value):
        setattr(interp, storage, check(interp, value, name))

    def refuse(interp):
        _refuse_delete(name)

    return property(attrgetter(storage), write, refuse)


def _optional_of(kind, what):
    """A check for a field that holds None or a `kind` (a class, or the name of a provided one)."""
    if isinstance(kind, str):
        return lambda interp, value, name: _optional(value, _provided(kind), name, what)
    return lambda interp, value, name: _optional(value, kind, name, what)


def _check_stream_field(interp, value, name):
    """A stream, whose suspend flag the loop then reads (a gate without one: every step asks it)."""
    if value is None:
        interp._signal_v = NEVER_PENDING
    else:
        check_stream(value, name)
        flag = getattr(value, "_suspend_flag", None)
        interp._signal_v = flag if isinstance(flag, SuspendFlag) else ALWAYS_PENDING
    return value


def _check_parent(interp, value, name):
    _optional(value, CoreState, name, "an interpreter")
    ancestor = value
    while ancestor is not None:  # followed by the tree's walks (tracebacks, the debugger)
        if ancestor is interp:
            raise ValueError(f"{name} would make a cycle")
        ancestor = ancestor._parent_interpreter
    return value


_FIELD_CHECKS = {
    "_shape": _optional_of("PoolShape", "a PoolShape"),
    "_exc_ignored": lambda interp, value, name: exception_types(value, name),
    "_ava_args_v": lambda interp, value, name: args_pool(value, name),
    "_ava_kwargs_v": lambda interp, value, name: kwargs_pool(value, name),
    "_args_hash": _optional_of(int, "an int"),
    "_dep_store_v": _optional_of("DependencyStore", "a DependencyStore"),
    "_di_record": _optional_of("DIRecord", "a DIRecord"),
    "_glob_lock_v": _optional_of(InterpretLock, "an InterpretLock"),
    "_graph": lambda interp, value, name: _checked_graph(value, name),
    "_interpreter_id": _optional_of(str, "a string"),
    "_lifecycles_v": _optional_of(dict, "a dict"),
    "_object_io": _check_stream_field,
    "_parent_interpreter": _check_parent,
    "_provider_values": _optional_of(dict, "a dict"),
    "_sub_interpreters": lambda interp, value, name: _checked(value, dict, name, "a dict"),
    "_sub_interpreters_all": _optional_of(dict, "a dict"),
    "_top_interpreter": lambda interp, value, name: _optional(value, CoreState, name, "an interpreter"),
    "_values_key": _optional_of(tuple, "a tuple"),
    "_waiter": lambda interp, value, name: _checked_waiter(value),
}


LAYER_CONTRACT: dict[str, tuple[str, str]] = {
    # the calls the core makes up into its subclass (`WorkflowInterpreter` and its `di.interpreter.Injection`
    # base): name -> (how it is called, what it promises). tests/test_layers.py checks that the core calls
    # nothing else on `self` that it does not define, and that the interpreter implements each of these.
    "_shared_plan": ("sync", "the node's plan for the pools' shape, shared by every interpreter of it, or UNSHARED"),
    "_run_unshared": ("async", "inject and call a node whose plan is UNSHARED (the per-interpreter path); its result"),
    "_invoke_slow": ("async", "call a node whose table plan needs providers or use_cache results; its result"),
    "_invoke_slow_now": ("sync", "_invoke_slow done at once: None, an awaitable that finishes it, or NOT_NOW"),
    "_offload": ("async", "run a sync node body in a worker thread with the caller's context; its result"),
    "_offload_batch": ("async", "run a batch of worker-thread nodes (`_batch_in_worker`) in one worker thread"),
    "_gate": ("async", "the suspend gate for `tag` (the stream's and checkpointing's); True when it parked"),
    "_pools_hold_factories": ("sync", "True when a Depends object sits in the pools (run start resolves it)"),
    "_workflow_scope_open": ("sync", "True when the workflow scope holds providers to tear down (store cleared)"),
    "call_near": ("async", "1.1.3's call_near: run the node `addr` slots away as a sub-call; its result"),
    "call_sub": ("async", "1.1.3's call_sub: run the node at `addr` as a sub-call, pointer restored; its result"),
}


class CoreState:
    """The interpreter's state: the registers and fields the step loop (`InterpreterCore`, which
    subclasses this) reads and writes, each behind a checked property for Python, and the
    bookkeeping of a run (its start and its end)."""

    __slots__ = (
        "_args_hash_s",
        "_batch_ctx",
        "_context_stack_v",
        "_dep_store_s",
        "_di_record_s",
        "_exc_ignored_s",
        "_exc_plans",
        "_flag_bits",
        "_force_inline_v",
        "_glob_lock_s",
        "_graph_s",
        "_interpret_lock_v",
        "_interpreter_id_s",
        "_lifecycles_s",
        "_middleware_v",
        "_native_rest",
        "_object_io_s",
        "_outer_interpreting",
        "_panic_exc_v",
        "_parent_interpreter_s",
        "_pending_stop",
        "_plans_v",
        "_plans_valid_v",
        "_pointer_v",
        "_pool_args",
        "_pool_kwargs",
        "_prog_v",
        "_provider_values_s",
        "_ret_addr_stack_v",
        "_run_task_v",
        "_claim_v",
        "_shape_s",
        "_signal_v",
        "_spare_pointer",
        "_squashed_loops_v",
        "_subcalls",
        "_sub_interpreters_s",
        "_sub_interpreters_all_s",
        "_top_interpreter_s",
        "_values_key_s",
        "_waiter_s",
        "_yield_interval_v",
    )

    def _core_init(self, prog, addr_stack, context_stack, middleware):
        self._prog_v = _checked(prog, Program, "the program", "a Program")
        self._pointer_v = _start_pointer(prog)
        self._ret_addr_stack_v = (
            _new_stack() if addr_stack is None else _checked(addr_stack, Stack, "addr_stack", "a Stack")
        )
        self._context_stack_v = (
            None if context_stack is None else _checked(context_stack, Stack, "context_stack", "a Stack")
        )
        self._middleware_v = _checked_middleware(middleware, "middleware")
        self._interpret_lock_v = _new_lock()
        self._signal_v = NEVER_PENDING
        self._yield_interval_v = 0.001
        if not cython.compiled:  # the compiled core's C fields start as None, 0 and False
            self._flag_bits = 0
            self._spare_pointer = None
            self._batch_ctx = None
            self._native_rest = None
            self._outer_interpreting = False
            self._pending_stop = False
            self._subcalls = 0
            self._plans_v = None
            self._exc_plans = None
            self._plans_valid_v = False
            self._run_task_v = None
            self._claim_v = None
            self._force_inline_v = False
            self._squashed_loops_v = False
            # the Python layer's fields (`_layer_init` fills some)
            self._args_hash_s = None
            self._dep_store_s = None
            self._di_record_s = None
            self._glob_lock_s = None
            self._graph_s = None
            self._interpreter_id_s = None
            self._lifecycles_s = None
            self._object_io_s = None
            self._parent_interpreter_s = None
            self._provider_values_s = None
            self._sub_interpreters_s = None
            self._sub_interpreters_all_s = None
            self._top_interpreter_s = None
            self._values_key_s = None
            self._waiter_s = None
            self._shape_s = None
            self._exc_ignored_s = None
            self._panic_exc_v = None
            self._pool_args = None
            self._pool_kwargs = None

    # ----- kept attributes: writes are checked (the compiled core's loop reads them unchecked) ---
    # The core itself reads and writes the storage behind them (`_v` / `_s` names).

    @property
    def _pointer(self):
        """The program counter (a PointerVector)."""
        return self._pointer_v

    @_pointer.setter
    def _pointer(self, value):
        self._pointer_v = _checked(value, PointerVector, "_pointer", "a PointerVector")

    @_pointer.deleter
    def _pointer(self):
        _refuse_delete("_pointer")

    @property
    def _ret_addr_stack(self):
        """The return stack (a Stack of PointerVectors)."""
        return self._ret_addr_stack_v

    @_ret_addr_stack.setter
    def _ret_addr_stack(self, value):
        self._ret_addr_stack_v = _checked(value, Stack, "_ret_addr_stack", "a Stack")

    @_ret_addr_stack.deleter
    def _ret_addr_stack(self):
        _refuse_delete("_ret_addr_stack")

    @property
    def _context_stack(self):
        """The context stack of PUSH_CONTEXT / INT (a Stack), made on first use."""
        if self._context_stack_v is None:
            self._context_stack_v = Stack()
        return self._context_stack_v

    @_context_stack.setter
    def _context_stack(self, value):
        self._context_stack_v = _checked(value, Stack, "_context_stack", "a Stack")

    @_context_stack.deleter
    def _context_stack(self):
        _refuse_delete("_context_stack")

    @property
    def _middleware(self):
        """Runs every main-loop step instead of the node (an async callable), or None."""
        return self._middleware_v

    @_middleware.setter
    def _middleware(self, value):
        self._middleware_v = _checked_middleware(value, "_middleware")

    @_middleware.deleter
    def _middleware(self):
        _refuse_delete("_middleware")

    @property
    def _interpret_lock(self):
        """The interpreter lock (an InterpretLock)."""
        return self._interpret_lock_v

    @_interpret_lock.setter
    def _interpret_lock(self, value):
        self._interpret_lock_v = _checked(value, InterpretLock, "_interpret_lock", "an InterpretLock")

    @_interpret_lock.deleter
    def _interpret_lock(self):
        _refuse_delete("_interpret_lock")

    @property
    def _yield_interval(self):
        """Seconds of inline sync nodes after which a run hands the event loop a turn."""
        return self._yield_interval_v

    @_yield_interval.setter
    def _yield_interval(self, value):
        self._yield_interval_v = _checked_seconds(value, "_yield_interval")

    @_yield_interval.deleter
    def _yield_interval(self):
        _refuse_delete("_yield_interval")

    @property
    def _panic_exc(self):
        """The exception of the last panic (an exception), or None."""
        return self._panic_exc_v

    @_panic_exc.setter
    def _panic_exc(self, value):
        if value is not None and not isinstance(value, BaseException):
            raise InvalidOperand(f"_panic_exc must be an exception or None, not {type(value).__name__}")
        self._panic_exc_v = value

    @_panic_exc.deleter
    def _panic_exc(self):
        _refuse_delete("_panic_exc")

    @property
    def _plans(self):
        """A copy of the per-row injection plans (None when there are none)."""
        return None if self._plans_v is None else list(self._plans_v)

    @_plans.setter
    def _plans(self, value):
        if value is not None:
            raise TypeError("_plans can only be reset to None")
        self._plans_v = None

    @_plans.deleter
    def _plans(self):
        _refuse_delete("_plans")

    @property
    def _signal(self):
        """The suspend-request flag of the stream (a SuspendFlag)."""
        return self._signal_v

    @_signal.setter
    def _signal(self, value):
        self._signal_v = _checked(value, SuspendFlag, "_signal", "a SuspendFlag")

    @_signal.deleter
    def _signal(self):
        _refuse_delete("_signal")

    # The core's own bookkeeping: read-only from Python.
    _prog = property(attrgetter("_prog_v"), doc="The node table the interpreter runs (a Program).")
    _run_task = property(attrgetter("_run_task_v"), doc="The task driving the current run, or None.")
    _plans_valid = property(attrgetter("_plans_valid_v"), doc="Plans are cached in this run.")
    _force_inline = property(attrgetter("_force_inline_v"), doc="This run calls worker-thread nodes inline.")
    _squashed_loops = property(attrgetter("_squashed_loops_v"), doc="This run runs native loops as nodes.")

    # The Python layer's fields: each kept in an attribute `<name>_s` (the core reads that), every
    # write checked (`_FIELD_CHECKS`), deletes refused.
    _args_hash = _checked_field("_args_hash_s", "_args_hash", _FIELD_CHECKS["_args_hash"])
    _dep_store_v = _checked_field("_dep_store_s", "_dep_store_v", _FIELD_CHECKS["_dep_store_v"])
    _di_record = _checked_field("_di_record_s", "_di_record", _FIELD_CHECKS["_di_record"])
    _glob_lock_v = _checked_field("_glob_lock_s", "_glob_lock_v", _FIELD_CHECKS["_glob_lock_v"])
    _graph = _checked_field("_graph_s", "_graph", _FIELD_CHECKS["_graph"])
    _interpreter_id = _checked_field("_interpreter_id_s", "_interpreter_id", _FIELD_CHECKS["_interpreter_id"])
    _lifecycles_v = _checked_field("_lifecycles_s", "_lifecycles_v", _FIELD_CHECKS["_lifecycles_v"])
    _object_io = _checked_field("_object_io_s", "_object_io", _FIELD_CHECKS["_object_io"])
    _parent_interpreter = _checked_field(
        "_parent_interpreter_s", "_parent_interpreter", _FIELD_CHECKS["_parent_interpreter"]
    )
    _provider_values = _checked_field("_provider_values_s", "_provider_values", _FIELD_CHECKS["_provider_values"])
    _sub_interpreters = _checked_field("_sub_interpreters_s", "_sub_interpreters", _FIELD_CHECKS["_sub_interpreters"])
    _sub_interpreters_all = _checked_field(
        "_sub_interpreters_all_s", "_sub_interpreters_all", _FIELD_CHECKS["_sub_interpreters_all"]
    )
    _top_interpreter = _checked_field("_top_interpreter_s", "_top_interpreter", _FIELD_CHECKS["_top_interpreter"])
    _values_key = _checked_field("_values_key_s", "_values_key", _FIELD_CHECKS["_values_key"])
    _waiter = _checked_field("_waiter_s", "_waiter", _FIELD_CHECKS["_waiter"])
    _shape = _checked_field("_shape_s", "_shape", _FIELD_CHECKS["_shape"])
    _exc_ignored = _checked_field("_exc_ignored_s", "_exc_ignored", _FIELD_CHECKS["_exc_ignored"])
    _ava_args_v = _checked_field("_pool_args", "_ava_args_v", _FIELD_CHECKS["_ava_args_v"])
    _ava_kwargs_v = _checked_field("_pool_kwargs", "_ava_kwargs_v", _FIELD_CHECKS["_ava_kwargs_v"])

    def _start_run(self, flags, mark):
        """Start a run (its bookkeeping and the engine `flags` it reads); True when run-start work
        (`Depends` in the pools, the preload) must be awaited next. `mark` (an object the caller
        made for this run) names the claim: once this returned or raised, the run is the caller's
        to end (`_finish_run`) exactly when `_claim_v is mark`, whatever cut the start short."""
        waiter = self._waiter_s
        if waiter is RUNNING or (waiter is not None and not waiter.done()):
            raise IllegalState("Cannot start a new workflow while one is already running")
        # The claim is one statement that calls nothing, so nothing runs between its test and its
        # writes: no other thread (the GIL), no signal handler, no trace function (runs started from
        # two threads at once: one wins; a KeyboardInterrupt lands before it or after it). In the
        # pure build an asynchronous exception can still land between its two stores (a trace
        # function raising at an opcode; a store's decref running Python code): the claim is
        # stored first and the running mark last, so a cut between them leaves the interpreter not
        # running and the claim the caller's, who ends the run. The other way round left it marked
        # running with nobody's claim: running for good (issue 43).
        self._claim_v, self._waiter_s = (mark, RUNNING) if self._waiter_s is waiter else (self._claim_v, self._waiter_s)
        if self._claim_v is not mark:
            raise IllegalState("Cannot start a new workflow while one is already running")
        task = self._run_task_v = _current_task()
        pin_async_library(task)
        self._force_inline_v = bool(flags.FORCE_NOT_WRAP_TO_ASYNC)
        self._squashed_loops_v = bool(flags.SQUASHED_LOOP)
        self._plans_valid_v = not (flags.WORKFLOW_DI_NO_CACHE or flags.NO_DEPENDENCY_META_CACHE)
        self._c_refresh_plans()
        if flags.WORKFLOW_DI_PRELOAD_CACHE:
            return True
        shape = self._shape_s
        if shape is not None and not shape.private and not self._pool_kwargs:
            return shape.holds_factories
        return self._pools_hold_factories()  # type: ignore[attr-defined]  # LAYER_CONTRACT

    def _finish_run(self, outcome):
        """End a run's bookkeeping (its future gets `outcome`); True when the workflow scope must be
        torn down next (then `restore_async_library()` is the caller's), else the run is over."""
        # Every step up to the claim's release can be done again: when an asynchronous exception
        # (KeyboardInterrupt) cuts this short, the claim is still the caller's and it calls again.
        lock = self._interpret_lock_v
        if lock._owner is not None and lock._owner is self._run_task_v:
            lock._release_held_by(self._run_task_v)  # a KeyboardInterrupt cut the loop's last release short
        fut = self._waiter_s
        if fut is not None and fut is not RUNNING and not fut.done():
            if isinstance(outcome, Exception):
                fut.set_exception(outcome)
                fut.exception()
            else:
                fut.set_result(None)
        # One statement: the release, the claim stored last (a cut before it leaves the run the
        # caller's to end again, which finds nothing left to undo but this statement).
        self._run_task_v, self._waiter_s, self._claim_v = None, None, None
        if outcome is None or (isinstance(outcome, InterruptNotice) and not isinstance(outcome, InterruptKeepContext)):
            if (self._lifecycles_s is not None or self._dep_store_s is not None) and self._workflow_scope_open():  # type: ignore[attr-defined]  # LAYER_CONTRACT
                return True
        restore_async_library()
        return False

    def _layer_init(self, graph, extra_args, extra_kwargs, exception_ignored, no_passing, shape_of, yield_interval):
        """The Python layer's first fields in one call (the others start as None): the graph (the
        program's), the pools (the interpreter itself, then `extra_args`; a copy of `extra_kwargs`),
        the pass-through exception types (none with `no_passing`), the pools' shape (`shape_of`, which
        must give a PoolShape), the tree's child maps. The arguments are checked as `args_pool` /
        `kwargs_pool` / `exception_types` do."""
        if graph is not self._prog_v.graph:
            raise TypeError("_layer_init(graph): the graph must be the one the interpreter's program was made from")
        args = (self,) + (extra_args if type(extra_args) is tuple else args_pool(extra_args, "extra_args"))
        kwargs = {} if extra_kwargs is None else dict(kwargs_pool(extra_kwargs, "extra_kwargs"))
        if type(exception_ignored) is not tuple or exception_ignored:
            exception_ignored = exception_types(exception_ignored, "exception_ignored")
        shape = shape_of(args, kwargs)
        if type(shape) is not _provided("PoolShape"):
            raise TypeError(f"_layer_init(shape_of) must give a PoolShape, not {type(shape).__name__}")
        self._yield_interval_v = _checked_seconds(yield_interval, "yield_interval")
        passing = () if no_passing else exception_ignored + (InterruptNotice, BreakLoop)
        self._graph_s = graph  # each checked above
        self._pool_args = args
        self._pool_kwargs = kwargs
        self._exc_ignored_s = passing
        self._shape_s = shape
        self._sub_interpreters_s = {}
        self._sub_interpreters_all_s = {}

    def _refresh_plans(self):
        """Take the program's plan table for the pools' shape, or none when plans are off."""
        self._c_refresh_plans()

    def _c_refresh_plans(self):
        shape = self._shape_s
        self._plans_v = self._prog_v._table_for(shape) if self._plans_valid_v and shape is not None else None
        self._exc_plans = None
