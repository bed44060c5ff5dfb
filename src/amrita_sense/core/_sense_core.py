"""The core, once: the pure build runs this file, and the compiled core is this file compiled.

Cython compiles it in pure Python mode with the augmenting `_sense_core.pxd` (C types,
C methods, C-typed locals) into the extension module `amrita_sense.core._sense_core`
(`make build`); the pure build runs it as `amrita_sense.core.pure`. The
`if cython.compiled:` blocks hold the C-API paths (helpers cimported from `_capi.pxd`);
their `else` blocks are what the pure build runs. `cython_shim` stands in for `cython`
where Cython is not installed.

The core owns the hot path: the flat node table (`Program`), the program
counter (`PointerVector`, a lazy view over a table row), the return stack
(`Stack`), the interpreter lock, and the step loop (`InterpreterCore`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import sys
import time
import weakref

try:
    import cython
except ModuleNotFoundError:  # a pure build without Cython installed
    from amrita_sense.core import cython_shim as cython  # type: ignore[no-redef,unused-ignore]

if not cython.compiled and __name__.rpartition(".")[2] == "_sense_core":
    # imported as Python under the compiled core's name: the extension is not built here
    raise ImportError("the compiled core is not built here; the pure build is amrita_sense.core.pure")

if cython.compiled:
    from cython.cimports.amrita_sense.core._capi import (
        AMRITA_SENSE_DEBUG,
        FREE_THREADED,
        MAX_STACK_ARGS,
        PyCoro_CheckExact,
        bounded_push,
        call_catching,
        call_from_pools,
        checked_pop,
        coro_start,
        end_handling,
        is_subclass,
        plan_values,
        rest_type_ready,
        start_handling,
        weak_target,
    )
    from cython.cimports.cpython.ref import Py_REFCNT

    rest_type_ready()

if not cython.compiled:  # the core's other parts, pure (type checkers read these)
    from amrita_sense.core.pure_checks import _check_index, _provided  # type: ignore[attr-defined]
    from amrita_sense.core.pure_state import CoreState
    from amrita_sense.core.pure_structures import (  # type: ignore[attr-defined]
        _EMPTY_POINTER,
        CallPlan,
        InterpretLock,
        PointerVector,
        Program,
        Stack,
        _bound_pointer,
        _start_pointer,
        _still_at,
        address_list,
    )

    FREE_THREADED = False  # the compiled core's constant (`_capi.pxd`), true only on a free-threaded build
else:  # compiled: their types' fields are C struct members here, their functions C calls
    from cython.cimports.amrita_sense.core._checks import _check_index, _provided
    from cython.cimports.amrita_sense.core._state import CoreState
    from cython.cimports.amrita_sense.core._structures import (
        CallPlan,
        InterpretLock,
        PointerVector,
        Program,
        Stack,
        _bound_pointer,
        _start_pointer,
        _still_at,
    )

    from amrita_sense.core._structures import _EMPTY_POINTER, address_list

from amrita_sense import _unsafe
from amrita_sense._classmemo import ClassMemo
from amrita_sense.core import opcodes as _opcodes
from amrita_sense.exceptions import (
    BreakLoop,
    InterruptKeepContext,
    InvalidOperand,
    NullPointerException,
)

IMPLEMENTATION: str = "cython" if cython.compiled else "python"
DEBUG_BUILD = False  # the compiled core's debug build
if cython.compiled:
    DEBUG_BUILD = bool(AMRITA_SENSE_DEBUG)

FLAG_IF = 1
FLAG_HLT = 2
FLAG_JMP = 4

ROW_CORO = 1
ROW_THREAD = 2
ROW_PRECHECK = 4
ROW_EMPTY = 8

NATIVE_DONE = 0
NATIVE_NOT_READY = 1
"""The opcode did nothing: run the node's own function."""
NATIVE_AWAIT = 2
"""The node's continuation finishes the opcode: await `_native_rest`."""

JUMP_CALLEE = ("jump",)
"""The plan `_callee_plan` gives a called jump row: the core runs its jump, not its function."""
BATCH_NOT_RUN = ("batch not run",)
"""What a batch that starts at an opcode returns when the opcode could not run there: the loop runs it."""
BATCH_AWAIT = ("batch await",)
"""What a batch returns when its last opcode left a continuation in `_native_rest` for the loop."""
TRY_CALLEE = ("try",)
"""The plan `_callee_plan` gives a called Try block whose parts can all run inline (`_try_ready`):
the core runs the block in the frame (`_native_try_now`), not the TryNode's coroutine."""
NOT_NOW: tuple = ("not now",)
"""What `_invoke_with_factories_now` returns when it did nothing: call `_invoke_with_factories`."""

STEP_RAN = 0
STEP_SKIPPED = 1
STEP_END = 2

_CHECK_CLOCK_EVERY = 64

# The opcodes and the operand record's fields, from the one table (`amrita_sense/_opcodes.py`); C ints
# in the compiled core (`_sense_core.pxd`), as are the other constants the loop reads.
EXIT = _opcodes.EXIT
EXTRA = _opcodes.EXTRA
FIRST = _opcodes.FIRST
FIRST_RESUME = _opcodes.FIRST_RESUME
OP_BRANCH = _opcodes.OP_BRANCH
OP_CALL = _opcodes.OP_CALL
OP_CALLSUB = _opcodes.OP_CALLSUB
OP_DO = _opcodes.OP_DO
OP_DO_CHECK = _opcodes.OP_DO_CHECK
OP_ELSE = _opcodes.OP_ELSE
OP_INVOKE = _opcodes.OP_INVOKE
OP_JUMP = _opcodes.OP_JUMP
OP_LOOP_CONTROL = _opcodes.OP_LOOP_CONTROL
OP_LOOP_HEAD = _opcodes.OP_LOOP_HEAD
OP_NATIVE_IF = _opcodes.OP_NATIVE_IF
OP_NOP = _opcodes.OP_NOP
OP_RET = _opcodes.OP_RET
OP_TRY = _opcodes.OP_TRY
OP_WHILE = _opcodes.OP_WHILE
SECOND = _opcodes.SECOND
SECOND_RESUME = _opcodes.SECOND_RESUME
THEN = _opcodes.THEN

# The exported constants above, as the loop reads them (C ints in the compiled core).
ROW_WIDTH = _opcodes.ROW_WIDTH

C_FLAG_IF = FLAG_IF
C_FLAG_HLT = FLAG_HLT
C_FLAG_JMP = FLAG_JMP
C_ROW_CORO = ROW_CORO
C_ROW_THREAD = ROW_THREAD
C_ROW_PRECHECK = ROW_PRECHECK
C_ROW_EMPTY = ROW_EMPTY
C_STEP_RAN = STEP_RAN
C_STEP_SKIPPED = STEP_SKIPPED
C_STEP_END = STEP_END

SUBCALL_DEPTH_FLOOR = 32
"""Nested sub-calls of one interpreter that never need the limit check (see `_check_subcall_depth`)."""
FRAMES_PER_SUBCALL = 12
"""Python frames one nested sub-call may take, with room for the node's own (the pure build takes
5 to 7 per level, the compiled core 4 to 6, a middleware one more)."""


PC_CHECKPOINT = "WorkflowInterpreter::each_node"


def _bind(ptr, prog, row):
    """Point `ptr` at `row` of `prog`, as a view: no list until someone reads it (`PointerVector._list`)."""
    if FREE_THREADED:
        # threads: every write of a vector's fields, and every read that keeps one, holds the vector's
        # critical section (`PointerVector`), so a thread reading it sees the fields of one bind and
        # never a list this write just dropped. With the GIL the three stores are one step already,
        # and this branch is compiled out (the section's reference would cost every step).
        with cython.critical_section(ptr):
            ptr._prog = prog
            ptr._row = row
            ptr._items = None
        return
    ptr._prog = prog
    ptr._row = row
    ptr._items = None


def _set_items(ptr, items):
    """Make `ptr` the unbound address `items` (a list the caller made for it)."""
    if FREE_THREADED:
        with cython.critical_section(ptr):  # threads: as in `_bind`
            ptr._items = items
        return
    ptr._items = items


def same_types(values, types):
    """True when `values` (a tuple) holds exactly one value of each type of `types`, in order."""
    n = len(values)
    if n != len(types):
        return False
    for i in range(n):
        if type(values[i]) is not types[i]:
            return False
    return True


def _reports_itself(kind):
    """True when instances of `kind` report `kind` as their `__class__` (no override in the MRO)."""
    descriptor = next(klass.__dict__["__class__"] for klass in kind.__mro__ if "__class__" in klass.__dict__)
    return descriptor is _OBJECT_CLASS


_OBJECT_CLASS = object.__dict__["__class__"]
_PLAIN_CLASS = ClassMemo(_reports_itself)  # threads: a race only recomputes the same verdict (ClassMemo)

# The class `_plain_class` was last asked about (a weak reference) and its verdict.
# threads: immutable once published: a (ref, verdict) tuple replaced in one store and read in one load,
# so a reader sees a matching pair; a race only recomputes the verdict. The compiled core's free-threaded
# build does not use it: there the read of a C global is no single step (load, then take a reference),
# and another thread's replacement could free the tuple in between.
_last_verdict = (None, False)


def _plain_class(kind):
    """`_reports_itself(kind)`, remembered for the last class asked about, without keeping it alive."""
    global _last_verdict
    if FREE_THREADED:  # see `_last_verdict`
        return _PLAIN_CLASS(kind)
    ref, verdict = _last_verdict
    if cython.compiled:
        last = None if ref is None else weak_target(ref)
    else:
        last = None if ref is None else ref()
    if last is kind:
        return verdict
    verdict = _PLAIN_CLASS(kind)
    _last_verdict = (weakref.ref(kind), verdict)  # type: ignore[assignment]  # (None, False) until the first
    return verdict


def _is_instance(obj, spec):
    """`isinstance(obj, spec)`. Compiled, when `obj` reports its own class, classes whose metaclass is
    `type` (no `__instancecheck__`) are tested as `isinstance` would, without its `__class__` lookup per
    class that does not match."""
    if cython.compiled:
        kind = type(obj)
        if _plain_class(kind):
            if type(spec) is not tuple:
                return is_subclass(kind, spec) if type(spec) is type else isinstance(obj, spec)
            for member in spec:
                if type(member) is type:
                    if is_subclass(kind, member):
                        return True
                elif isinstance(obj, member):
                    return True
            return False
    return isinstance(obj, spec)


def _exc_keywords(exc):
    """The keywords a CATCH handler is called with."""
    return {"exc_type": type(exc), "exc_val": exc, "exc_tb": exc.__traceback__}


def _clashes(kwargs):
    if not kwargs:
        return False
    return "exc_type" in kwargs or "exc_val" in kwargs or "exc_tb" in kwargs


class Parked(Exception):
    """Raised through a native opcode when a coroutine node it called inline suspended: `rest`
    awaits the rest of that node (and leaves its frame); the opcode hands it to the loop with what
    it does after that callee (`_cond_later`, `_body_later`). Never leaves the core."""

    def __init__(self, rest):
        self.rest = rest


class _Resumed:
    """The awaitable rest of a coroutine that was started with `send(None)` and yielded
    `yielded`: awaiting it goes on exactly where `await coroutine` would have."""

    __slots__ = ("_coro", "_yielded")

    def __init__(self, coro, yielded):
        self._coro = coro
        self._yielded = yielded

    def __await__(self):
        return self

    def __iter__(self):
        return self

    def __next__(self):
        return self.send(None)

    def send(self, value):
        yielded = self._yielded
        if yielded is not _SENT:
            self._yielded = _SENT
            return yielded
        return self._coro.send(value)

    def throw(self, *exc):
        self._yielded = _SENT
        return self._coro.throw(*exc)

    def close(self):
        self._coro.close()


_SENT = object()
"""`_Resumed._yielded` once the first yield went up to the task."""


def _finish_now(outcome):
    """Finish the outcome of a planned `_native_try_now` (None, or a coroutine that runs the block
    from where it stopped) without the event loop. A coroutine appears only when the interpreter's
    pools changed within the calling opcode, so a part's plan is no longer ready; it then has
    nothing to wait for unless such a part is a coroutine or a provider's."""
    if outcome is None:
        return None
    try:
        outcome.send(None)
    except StopIteration:
        return None
    outcome.close()
    raise RuntimeError("a Try block called inline had to wait: its parts changed within the calling step")


def _check_subcall_depth(depth):
    """`RecursionError` when `depth` nested sub-calls exceed `sys.getrecursionlimit() //
    FRAMES_PER_SUBCALL`: a run that recurses through sub-calls stops at the same depth on both
    builds, before either reaches Python's own limit (where each build would stop elsewhere)."""
    limit = sys.getrecursionlimit() // FRAMES_PER_SUBCALL
    if depth > limit and depth > SUBCALL_DEPTH_FLOOR:
        raise RecursionError(
            f"sub-calls nested {depth} deep: more than sys.getrecursionlimit() // {FRAMES_PER_SUBCALL} ({limit})"
        )


def _may_park(flag, tag):
    """Whether a gate tagged `tag` may park for the request `flag` says is pending: unless the
    stream parks by the request's tag filter alone (`flag.tags`, see `SuspendFlag`) and it excludes
    `tag`, as the stream's own test does. Then the gate is not called: it would neither park nor
    save (a checkpointing policy saves before a gate that will park) nor tell an observer."""
    if FREE_THREADED:
        return True  # the stream writes `tags` under its lock; reading it here would race
    tags = flag.tags
    if not tags:
        return True
    return tag is not None and tag in tags


def _rest_of(awaitable):
    """What is left to await of a gate's `awaitable`: compiled, its native coroutine runs here up
    to its first suspension (None: it returned, the gate did not park; else the rest of it,
    `_capi.coro_start`), as an `await` of it would, without the wrapper and the StopIteration of
    its result such an `await` costs the core's coroutine. Else, and in the pure build always,
    `awaitable` itself."""
    if cython.compiled:
        if PyCoro_CheckExact(awaitable):
            return coro_start(awaitable)
    return awaitable


def _row_outside(prog, row):
    """For the coroutines Python can call with a row (as the compiled core checks it)."""
    raise IndexError(f"row {row} is outside the node table of {prog.nrows} rows")


def _checked_call_plan(plan):
    """A plan the Python layer made for a table (`_shared_plan`), or one given to a step: a CallPlan
    (the compiled core's loop reads it unchecked)."""
    if type(plan) is not CallPlan:
        raise TypeError(f"an injection plan is a CallPlan, not {type(plan).__name__}")
    return plan


class InterpreterCore(CoreState):
    """The step loop over the interpreter's state (`CoreState`): the pointer's moves, the injection
    plans and calls, sub-calls, and the loop itself (`_execute`). The native opcodes are functions of
    the core below the class (`_native_while(core, row)`, ...), which `_run_native_sync` dispatches to.

    `amrita_sense.runtime.workflow.WorkflowInterpreter` subclasses this and adds the public API;
    it implements the calls of `LAYER_CONTRACT` (the Python-level slow paths), the only calls the
    core makes up into it.
    """

    __slots__ = ()

    # ----- pointer resolution and movement -------------------------------------------

    def _locate_current(self):
        """`(row, exact)` for the current pointer; row -1 when it resolves to nothing."""
        ptr = self._pointer_v
        if ptr._items is None and ptr._prog is self._prog_v:
            return ptr._row, True
        return self._prog_v.locate(ptr._list())

    def _descend_current(self):
        """Move the pointer onto the row it designates (entering segments) and return it."""
        return self._c_descend_current()

    def _c_descend_current(self):
        row, exact = self._locate_current()
        if row < 0:
            raise NullPointerException(f"address {self._pointer_v._list()} not found")
        if not exact:
            _bind(self._pointer_v, self._prog_v, row)
        if self._prog_v.cbits[row] & C_ROW_EMPTY:
            raise NullPointerException(f"address {list(self._prog_v.addrs[row])} not found")
        return row

    def advance_pointer(self, ptr=None):
        """Advance `ptr` (default: the interpreter's pointer) in place; False at the end."""
        if ptr is None:
            ptr = self._pointer_v
        elif not isinstance(ptr, PointerVector):
            raise InvalidOperand(f"advance_pointer(ptr) needs a PointerVector, not {type(ptr).__name__}")
        return self._c_advance(ptr)

    @cython.wraparound(False)  # rows are never negative
    def _c_advance(self, ptr):
        if ptr._items is None and ptr._prog is self._prog_v:
            row, exact = ptr._row, True
        else:
            items = ptr._list()
            if not items:
                return False
            row, exact = self._prog_v.locate(items)
            if row < 0:
                return self._prog_v.graph.calc.advance(ptr)
        if not exact:
            items.append(0)
            return True
        if row + 1 < self._prog_v.nrows:
            landing = self._prog_v.landings[row + 1]
            if landing is None:
                _bind(ptr, self._prog_v, row + 1)
            else:
                _set_items(ptr, list(landing))
            return True
        _set_items(ptr, [])
        return False

    def _rebase_to(self, ptr):
        """Make the pointer equal to `ptr` (an address or a PointerVector), without a jump mark."""
        self._c_rebase_to(ptr)

    def _c_rebase_to(self, ptr):
        other = ptr if isinstance(ptr, PointerVector) else None
        if other is not None and other._items is None:
            if other._prog is None:
                other._bound_addr()  # an uninitialised vector raises here
            _bind(self._pointer_v, other._prog, other._row)
        else:
            _set_items(self._pointer_v, address_list(ptr, "rebase_ptr(ptr)"))

    def _adopt_successor(self):
        """Follow a program that was recompiled in place (a hot-swapped slot)."""
        prog = self._prog_v
        while prog._successor is not None:
            prog = prog._successor
        self._prog_v = prog
        self._c_refresh_plans()

    def _mark_jump(self):
        """Set JMP and clear HLT; False when a jump already moved the pointer this cycle."""
        return self._c_mark_jump()

    def _c_mark_jump(self):
        bits = self._flag_bits
        if bits & C_FLAG_JMP:
            return False
        self._flag_bits = (bits | C_FLAG_JMP) & ~C_FLAG_HLT
        return True

    def _move_to(self, addr):
        """Point at `addr` (a list), binding to a row when the address is a node."""
        row, exact = self._prog_v.locate(addr)
        if row >= 0 and exact:
            _bind(self._pointer_v, self._prog_v, row)
        else:
            self._pointer_v.far_to(addr)

    def jump_to(self, addr):
        """Jump to an absolute address; `NullPointerException` if nothing is there."""
        if self._flag_bits & C_FLAG_JMP:
            return
        addr = address_list(addr, "jump_to(addr)")
        row, _ = self._prog_v.locate(addr)
        if row < 0 and self._prog_v.graph.calc.find_addr_safe(addr) is None:
            raise NullPointerException(f"{addr} is not a valid address")
        self._c_mark_jump()
        self._move_to(addr)

    # A refused jump (a bad argument, an empty pointer) raises before the jump is marked.

    def jump_near(self, addr):
        """Set the last coordinate of the pointer."""
        self._check_last_index(addr, "jump_near")
        if self._c_mark_jump():
            self._pointer_v.near_to(addr)

    def jump_offset(self, offset):
        """Add `offset` to the last coordinate of the pointer."""
        self._check_last_index(offset, "jump_offset")
        if self._c_mark_jump():
            self._pointer_v.offset(offset)

    def jump_far_ptr(self, offset):
        """Replace the whole address (absolute, not validated)."""
        offset = address_list(offset, "jump_far_ptr(offset)")
        if self._c_mark_jump():
            self._move_to(offset)

    def jump_offset_far(self, offset):
        """Add a vector element-wise to the pointer (see `PointerVector.offset_far`)."""
        offset = address_list(offset, "jump_offset_far(offset)")
        if self._c_mark_jump():
            self._pointer_v.offset_far(offset)

    def jump_to_top(self, addr):
        """Jump to `[addr]` at the top level."""
        _check_index(addr, "jump_to_top(addr)")
        if self._c_mark_jump():
            self._move_to([addr])

    def jump_offset_top(self, offset):
        """Jump to the top-level slot `offset` after the current one."""
        _check_index(offset, "jump_offset_top(offset)")
        if self._c_mark_jump():
            ptr = self._pointer_v
            second = ptr[1] if len(ptr) > 1 else 0
            ptr.offset_far([offset, -(second + 1)])

    def _check_last_index(self, value, method):
        """`value` can replace or move the pointer's last index: an int, and the pointer is not empty."""
        _check_index(value, f"{method}()")
        if not len(self._pointer_v):
            raise IndexError(_EMPTY_POINTER.format(method))

    # ----- one node -------------------------------------------------------------------

    @cython.wraparound(False)  # rows are never negative
    def _row_plan(self, row):
        """The plan of `row`: its static one, or the shared one for the pools' shape (made on
        first use and kept in the program's table); None when the Python layer resolves it."""
        plan = self._prog_v.static_plans[row]
        if plan is None:
            table = self._plans_v
            if table is None:
                return None
            plan = table[row]
            if plan is None:
                plan = table[row] = _checked_call_plan(self._shared_plan(self._prog_v.nodes[row], False))  # type: ignore[attr-defined]  # LAYER_CONTRACT
        # unchecked: both tables hold CallPlans only (the Program checks its static plans when made)
        return cython.cast(CallPlan, plan)

    def _cached_plan(self, row):
        """The plan of `row` (providers included) unless a suspend signal is pending."""
        if self._signal_v.pending:
            return None
        return self._row_plan(row)

    def _step_plan(self, row):
        """`_cached_plan` of a node's row for the step loop: also while a request is pending, when
        the node's gate cannot park for it (`_may_park`): `_run_row` would then only pass the gate."""
        if self._signal_v.pending and _may_park(self._signal_v, self._prog_v.nodes[row].tag):
            return None
        return self._row_plan(row)

    @cython.wraparound(False)  # rows are never negative
    def _exc_plan(self, row):
        """The plan of `row` called as a CATCH handler (with `exc_type` / `exc_val` / `exc_tb`)."""
        table = self._exc_plans
        if table is None:
            if self._plans_v is None:
                return None
            table = self._exc_plans = self._prog_v._table_for(self._shape_s.with_exc)  # type: ignore[union-attr]  # set by _layer_init before any run
        plan = table[row]
        if plan is None:
            plan = table[row] = _checked_call_plan(self._shared_plan(self._prog_v.nodes[row], True))  # type: ignore[attr-defined]  # LAYER_CONTRACT
        return plan

    def _ready_plan(self, row):
        """The cached plan of `row` when the core can run it itself (no providers), else None."""
        plan = self._cached_plan(row)
        if plan is None or plan.slow:
            return None
        return plan

    def _plan_args(self, plan, extra):
        """`(args, None)` or `(None, kwargs)`: the plan's values from the pools (and `extra` keywords)."""
        kwargs = self._pool_kwargs if extra is None else {**self._pool_kwargs, **extra}  # type: ignore[dict-item]  # the pools are set before any run
        values = plan.fetch(self._pool_args, kwargs)
        if plan.names is None:
            return values, None
        return None, dict(zip(plan.names, values))

    def _results_for(self, plan, row):
        """The interpreter's `use_cache` results for `plan` when the core can call the node of `row`
        with them itself: every provider of the plan is a cached one and has its result (made by the
        Python layer on the node's first call), and the node runs in the loop's thread. Else None."""
        held = self._provider_values_s
        if not plan.cached or held is None:
            return None
        if self._prog_v.cbits[row] & C_ROW_THREAD and not self._force_inline_v:
            return None
        results = held.get(plan.entry)
        return results if type(results) is dict else None

    def _call_with_results(self, row, plan, results):
        """Call the node of `row` with the plan's values: the pools and the `use_cache` results."""
        if cython.compiled:
            values = plan_values(plan.cidx, plan.n, plan.srcs, self._pool_args, self._pool_kwargs, results, None)
        else:
            values = plan.fetch_with(self._pool_args, self._pool_kwargs, results)
        func = self._prog_v.funcs[row]
        return func(*values) if plan.names is None else func(**dict(zip(plan.names, values)))

    def _call_plan(self, func, plan, extra):
        """Call `func` with the plan's values from the pools (and `extra` keywords)."""
        if cython.compiled:
            if (
                extra is None
                and plan.names is None
                and plan.n <= MAX_STACK_ARGS
                and self._pool_args is not None
                and self._pool_kwargs is not None
                and not plan.cached
            ):
                return call_from_pools(func, plan.cidx, plan.n, plan.srcs, self._pool_args, self._pool_kwargs)
            if self._pool_args is not None and self._pool_kwargs is not None and not plan.cached:
                values = plan_values(plan.cidx, plan.n, plan.srcs, self._pool_args, self._pool_kwargs, None, extra)
                return func(*values) if plan.names is None else func(**dict(zip(plan.names, values)))
        if extra is None and plan.names is None:
            return func(*plan.fetch(self._pool_args, self._pool_kwargs))
        args, kwargs = self._plan_args(plan, extra)
        return func(*args) if args is not None else func(**kwargs)

    @cython.locals(plan=CallPlan, prog=Program)
    async def _run_row(self, row):
        """Run the node of `row`: pre-execution gate, pre-check, injection, call."""
        prog = self._prog_v
        if row < 0 or row >= prog.nrows:
            _row_outside(prog, row)
        bits = prog.cbits[row]
        if self._signal_v.pending:
            tag = prog.nodes[row].tag
            if _may_park(self._signal_v, tag):
                rest = _rest_of(self._gate(tag))  # type: ignore[attr-defined]  # LAYER_CONTRACT
                if rest is not None:
                    await rest
        if bits & C_ROW_PRECHECK:
            prog.nodes[row]._pre_check(self)
        plan = self._row_plan(row)
        if plan is None:
            return await self._run_unshared(prog.nodes[row])  # type: ignore[attr-defined]  # LAYER_CONTRACT
        if plan.slow:
            return await self._invoke_slow(prog.nodes[row], plan)  # type: ignore[attr-defined]  # LAYER_CONTRACT
        func = prog.funcs[row]
        if bits & C_ROW_CORO:
            return await self._call_plan(func, plan, None)
        if bits & C_ROW_THREAD and not self._force_inline_v:
            return await self._offload(func, *self._plan_args(plan, None))  # type: ignore[attr-defined]  # LAYER_CONTRACT
        return self._call_plan(func, plan, None)

    # ----- the main loop ---------------------------------------------------------------

    def _enter_step(self):
        """Prepare a step with the lock held: C_STEP_RAN to run, C_STEP_SKIPPED, or C_STEP_END."""
        return self._c_enter_step()

    def _c_enter_step(self):
        recompiled = self._prog_v._successor is not None
        if recompiled:
            self._adopt_successor()
        ptr = self._pointer_v
        if ptr._items is not None and not ptr._items:
            if not self._prog_v.nrows:
                return C_STEP_END
            self._pointer_v = _start_pointer(self._prog_v)
        self._flag_bits &= ~C_FLAG_JMP
        if self._flag_bits & C_FLAG_HLT:
            self._flag_bits &= ~C_FLAG_HLT
            moved = self._advance_recompiled() if recompiled else self._c_advance(self._pointer_v)
            return C_STEP_SKIPPED if moved else C_STEP_END
        return C_STEP_RAN

    def _leave_step(self):
        """After a node ran: consume a marked jump or advance. False when the run is over."""
        return self._c_leave_step()

    def _c_leave_step(self):
        if self._flag_bits & C_FLAG_JMP:
            self._flag_bits &= ~C_FLAG_JMP
            return True
        if self._prog_v._successor is not None:
            return self._advance_recompiled()
        return self._c_advance(self._pointer_v)

    def _advance_recompiled(self):
        """Advance after the program was recompiled under the pointer (a hot-swapped slot, maybe
        the running node's own): from the same address in the new program, as 1.1.3 does, or, when
        that address is gone, to the next position after it (beside it, else after its segment)."""
        self._adopt_successor()
        addr = self._pointer_v._list()
        if not addr or self._prog_v.locate(addr)[0] >= 0:
            return self._c_advance(self._pointer_v)
        addr = list(addr)
        while addr:
            addr[-1] += 1
            if self._prog_v.locate(addr)[0] >= 0:
                self._move_to(addr)
                return True
            addr.pop()
        _set_items(self._pointer_v, [])
        return False

    async def _run_current(self):
        """What one main-loop step executes: the middleware, or the node at the pointer."""
        if self._middleware_v is not None:
            return await self._middleware_v(self)
        return await self._run_row(self._c_descend_current())

    async def _call_with_plan(self, row, plan):
        """A main-loop step with its plan; a worker-thread node starts a batch (`_batch_in_worker`)."""
        if type(plan) is not CallPlan:
            _checked_call_plan(plan)
        prog = self._prog_v
        if row < 0 or row >= prog.nrows:
            _row_outside(prog, row)
        bits = prog.cbits[row]
        if bits & C_ROW_PRECHECK:
            prog.nodes[row]._pre_check(self)
        func = prog.funcs[row]
        if bits & C_ROW_CORO:
            return await self._call_plan(func, plan, None)
        if bits & C_ROW_THREAD and not self._force_inline_v:
            batch = functools.partial(self._batch_in_worker, row, plan, contextvars.copy_context())
            return await self._offload_batch(batch)  # type: ignore[attr-defined]  # LAYER_CONTRACT
        return self._call_plan(func, plan, None)

    # ----- worker-thread batches ---------------------------------------------------------
    #
    # A run of consecutive worker-thread nodes costs one hand-off: the worker that ran one
    # node runs the next one itself while nothing needs the event loop, checking at each
    # boundary what the loop would check there (a suspend request, a stop, a lock waiter, a
    # middleware, a cancelled run) and stopping at anything else (a jump, a node that is not
    # a plain worker-thread node with a ready plan). It moves the pointer exactly as the
    # loop would; the last node's pointer is left for the loop to advance. Each body runs in
    # its own copy of the caller's context, as it would when handed over alone.

    @cython.locals(prog=Program, row=cython.Py_ssize_t, status=cython.int)
    def _batch_in_worker(self, row, plan, base, fut):
        """In a worker thread: run `row` (its node with `plan`, or with None its opcode, whose
        callees are worker-thread nodes), then what follows while the batch may go on (`fut`: the
        future the run awaits). Returns the last node's result, `BATCH_NOT_RUN` (the first
        opcode could not run here) or `BATCH_AWAIT` (an opcode left a continuation)."""
        if plan is not None:
            _checked_call_plan(plan)
        prog = self._prog_v
        if row < 0 or row >= prog.nrows:
            _row_outside(prog, row)
        self._batch_ctx = base
        try:
            result = None
            first = True
            while True:
                if plan is not None:
                    result = base.copy().run(self._run_plan_call, prog.funcs[row], plan, None)
                else:
                    status = self._run_native_sync(row, prog.cops[row])
                    if status == NATIVE_AWAIT:
                        return BATCH_AWAIT
                    if status == NATIVE_NOT_READY:
                        if first:
                            return BATCH_NOT_RUN
                        self._flag_bits |= C_FLAG_JMP  # as if jumped to: the loop runs `row` next
                        return result
                    result = None
                first = False
                row = self._batch_next(row, fut)
                if row < 0:
                    return result
                plan = self._batch_plan(row) if prog.cops[row] == OP_CALL else None
        finally:
            self._batch_ctx = None

    async def _run_not_ready(self, row):
        """An opcode whose callees cannot run inline now: in a worker-thread batch when they are
        all worker-thread nodes, else the node's own function (`_run_row`)."""
        if self._force_inline_v or not self._batchable(row, True):
            return await self._run_row(row)
        outcome = await self._offload_batch(  # type: ignore[attr-defined]  # LAYER_CONTRACT
            functools.partial(self._batch_in_worker, row, None, contextvars.copy_context())
        )
        if outcome is BATCH_NOT_RUN:
            await self._run_row(row)
        elif outcome is BATCH_AWAIT:
            rest, self._native_rest = self._native_rest, None
            await rest  # type: ignore[misc]  # set with the status that says so

    def _run_plan_call(self, func, plan, extra):
        """`_call_plan` for the worker thread's context run (a Python-callable method)."""
        return self._call_plan(func, plan, extra)

    def _batch_next(self, row, fut):
        """The row a batch that just ran `row` runs next, the pointer moved there as the loop would
        move it (the jump taken, else the next row); or -1: stop here, the loop goes on as after
        any step."""
        if fut.done() or self._signal_v.pending or self._pending_stop or self._middleware_v is not None:
            return -1
        lock = self._interpret_lock_v
        if lock._queue or lock._owner is not self._run_task_v or self._flag_bits & C_FLAG_HLT:
            return -1
        prog = self._prog_v
        ptr = self._pointer_v
        if prog._successor is not None:
            return -1
        if self._flag_bits & C_FLAG_JMP:
            if ptr._items is not None or ptr._prog is not prog:
                return -1
            following = ptr._row
        else:
            if not _still_at(ptr, prog, row):  # moved without a mark (RET, a rebase): the loop advances
                return -1
            following = row + 1
            if following >= prog.nrows or prog.landings[following] is not None:
                return -1
        if not self._batchable(following, False):
            return -1
        _bind(ptr, prog, following)
        self._flag_bits &= ~C_FLAG_JMP
        return following

    def _batchable(self, row, make_plans):
        """True when a worker-thread batch may run `row`: a plain worker-thread node, an opcode
        that only moves the pointer, or one whose callees are all worker-thread nodes (never an
        inline node: those run on the loop's thread). A batch never makes plans (`make_plans`:
        the loop's thread, about to start one, makes the first opcode's callees' plans)."""
        prog = self._prog_v
        op = prog.cops[row]
        if op == OP_CALL:
            return self._worker_callee(row, make_plans)
        if prog.cbits[row] & (C_ROW_PRECHECK | C_ROW_EMPTY):  # (an opcode's row is a coroutine node: its own function)
            return False
        if op == OP_NOP or op == OP_JUMP or op == OP_CALLSUB or op == OP_RET or op == OP_LOOP_CONTROL:
            return True
        at = ROW_WIDTH * row
        if op == OP_BRANCH or op == OP_NATIVE_IF or (op == OP_WHILE and not self._squashed_loops_v):
            second = prog.crows[at + SECOND]
            if second >= 0 and not self._worker_callee(second, make_plans):
                return False
        elif not (op == OP_ELSE or op == OP_DO or op == OP_DO_CHECK or op == OP_LOOP_HEAD or op == OP_INVOKE):
            return False
        if op == OP_DO and self._squashed_loops_v:
            return False
        return self._worker_callee(prog.crows[at + FIRST], make_plans)

    def _worker_callee(self, row, make_plans):
        """True when `row` can run in a worker-thread batch: a jump, or a worker-thread node whose
        plan is ready (`make_plans`: made now if missing)."""
        prog = self._prog_v
        if prog.cops[row] == OP_JUMP:
            return True
        bits = prog.cbits[row]
        if not bits & C_ROW_THREAD or bits & (C_ROW_CORO | C_ROW_PRECHECK | C_ROW_EMPTY) or prog.cops[row] != OP_CALL:
            return False
        plan = self._ready_plan(row) if make_plans else self._batch_plan(row)
        return plan is not None and not plan.slow

    @cython.wraparound(False)  # rows are never negative
    def _batch_plan(self, row):
        """The plan of `row` if its table has one already (a batch never makes plans)."""
        plan = self._prog_v.static_plans[row]
        if plan is None and self._plans_v is not None:
            plan = self._plans_v[row]
        return plan

    # ----- native opcodes: each mirrors its instruction node's Python function ----------
    #
    # An opcode first takes the plans of the nodes it calls; when one cannot run
    # synchronously right now it does nothing and returns NATIVE_NOT_READY, and the node's own
    # Python function runs instead (`_run_row`). After every node it calls, the opcode
    # checks that the pointer is still bound to its own row with no jump marked
    # (`_still_at`): only then are its compiled rows where the node's function would go.
    # Otherwise (the callee jumped, returned with RET, pushed a return address, restored
    # a context, rewrote the pointer...) the node's own continuation (`_after_condition` /
    # `_after_body`) finishes from where the pointer is; when that is a coroutine the
    # opcode returns NATIVE_AWAIT and the loop awaits it (`_native_rest`).

    def _push_ret(self, item):
        """Push `item` on the return stack (a Stack subclass's own `push` runs)."""
        stack = self._ret_addr_stack_v
        if cython.compiled and type(stack) is Stack:  # `Stack._push`, inlined (`_capi.pxd`)
            if FREE_THREADED:
                with cython.critical_section(stack):  # threads: as in `Stack.push`
                    bounded_push(stack._items, stack._limit, item)
            else:
                bounded_push(stack._items, stack._limit, item)
        else:
            stack.push(item)

    def _pop_ret(self):
        stack = self._ret_addr_stack_v
        if cython.compiled and type(stack) is Stack:
            if FREE_THREADED:
                with cython.critical_section(stack):
                    return checked_pop(stack._items)
            return checked_pop(stack._items)
        return stack.pop()

    def _still_at(self, row):
        """True when no jump is marked and the pointer is bound to `row`, where the running opcode
        left it: its compiled rows are then where the node's own function would go."""
        ptr = self._pointer_v
        return not self._flag_bits & C_FLAG_JMP and ptr._items is None and ptr._row == row and ptr._prog is self._prog_v

    def _left_unmarked(self, row):
        """True when the pointer left `row` without a marked jump (not `_still_at`, no jump marked):
        where a node's last move (one jump) goes from there, only the node can tell. With a jump
        marked that move is refused, as `_jump_at` refuses it."""
        ptr = self._pointer_v
        return not self._flag_bits & C_FLAG_JMP and not (
            ptr._items is None and ptr._row == row and ptr._prog is self._prog_v
        )

    def _inline_callable(self, row):
        """The node of `row` can be called here and now: not a coroutine function, not one for a worker thread."""
        bits = self._prog_v.cbits[row]
        return not (bits & C_ROW_CORO) and (
            not (bits & C_ROW_THREAD) or self._force_inline_v or self._batch_ctx is not None
        )

    def _inline_plan(self, row):
        """The plan of `row` when it can run synchronously right now, else None."""
        plan = self._ready_plan(row)
        if plan is not None and self._inline_callable(row):
            return plan
        return None

    def _planned_plan(self, row):
        """`_inline_plan` of `row` for a callee its opcode planned already: a suspend request made
        since does not stop it (the loop honours it after the opcode)."""
        plan = self._row_plan(row)
        if plan is None or plan.slow or not self._inline_callable(row):
            return None
        return plan

    def _callee_plan(self, row):
        """What `_subcall_inline` needs to run `row` now: its plan, `JUMP_CALLEE`, `TRY_CALLEE`, or None."""
        op = self._prog_v.cops[row]
        if op == OP_JUMP:
            return JUMP_CALLEE
        if op == OP_TRY:
            return TRY_CALLEE if self._try_ready(row) else None
        if self._prog_v.cbits[row] & C_ROW_CORO:
            return self._ready_plan(row)  # started inline, parked if it suspends (`_subcall_inline`)
        return self._inline_plan(row)

    def _try_ready(self, row):
        """True when the Try block at `row` can run as a sub-call without a coroutine: CATCH
        handlers only, and its body and every handler ready to run inline now."""
        prog = self._prog_v
        _, on_success, on_exit, catches = prog.operands[row][EXTRA]
        if on_success is not None or on_exit is not None or prog.cbits[row] & C_ROW_PRECHECK:
            return False
        if self._near_plan(prog.crows[ROW_WIDTH * row + FIRST], False) is None:
            return False
        for _, handler in catches:
            if self._near_plan(handler[1], True) is None:
                return False
        return True

    def _run_native_sync(self, row, op):
        """Run the opcode of `row` (not TRY): a NATIVE_* status."""
        if op == OP_JUMP:
            self._jump_at(self._prog_v.crows[ROW_WIDTH * row + THEN], row, THEN)
        elif op == OP_BRANCH:
            return _native_branch(self, row)
        elif op == OP_ELSE:
            return _native_else(self, row)
        elif op == OP_WHILE:
            return NATIVE_NOT_READY if self._squashed_loops_v else _native_while(self, row)
        elif op == OP_DO:
            return NATIVE_NOT_READY if self._squashed_loops_v else _native_do(self, row)
        elif op == OP_DO_CHECK:
            return _native_do_check(self, row)
        elif op == OP_CALLSUB:
            _native_callsub(self, row)
        elif op == OP_RET:
            _native_ret(self)
        elif op == OP_NATIVE_IF:
            return _native_if(self, row)
        elif op == OP_LOOP_HEAD:
            return _native_loop_head(self, row)
        elif op == OP_LOOP_CONTROL:
            _native_loop_control(self, self._prog_v.operands[row][EXTRA])
        elif op == OP_INVOKE:
            return _native_invoke(self, row)
        return NATIVE_DONE

    def _goto(self, target):
        """Point at a jump-target descriptor `(row, exact, address)`."""
        row, exact, addr = target[0], target[1], target[2]
        if row >= 0 and exact:
            _bind(self._pointer_v, self._prog_v, row)
        else:
            _set_items(self._pointer_v, list(addr))

    def _native_jump(self, target):
        if self._c_mark_jump():
            self._goto(target)

    def _jump_at(self, target_row, row, k):
        """Jump to the target in field `k` (EXIT or THEN) of `row`'s operands: straight to
        `target_row` when the target is one row, else through its descriptor."""
        if self._c_mark_jump():
            if target_row >= 0:
                _bind(self._pointer_v, self._prog_v, target_row)
            else:
                self._goto(self._prog_v.operands[row][k])

    def _subcall_inline(self, row, plan, extra):
        """`call_sub` of a row with its `_callee_plan` (and `extra` keywords): push the pointer,
        run the node there, restore unless it jumped."""
        if plan is JUMP_CALLEE:
            self._jump_at(self._prog_v.crows[ROW_WIDTH * row + THEN], row, THEN)
            return None
        self._enter_frame(row)
        parked = False
        try:
            if plan is TRY_CALLEE:
                return _finish_now(_native_try_now(self, row, self._prog_v.operands[row], True))
            result = self._call_inline(row, cython.cast(CallPlan, plan), extra)
            if not self._prog_v.cbits[row] & C_ROW_CORO:
                return result
            try:  # the coroutine node runs here until it finishes or first suspends, as `await` runs it
                yielded = result.send(None)
            except StopIteration as done:
                return done.value
            parked = True
            raise Parked(self._in_frame(_Resumed(result, yielded)))
        finally:
            if not parked:
                self._leave_frame()

    async def _in_frame(self, rest):
        """Await the rest of a parked callee, then leave its frame (`_subcall_inline`)."""
        try:
            return await rest
        finally:
            self._leave_frame()

    def _enter_frame(self, row):
        """The first half of `call_sub` of a row: save the pointer and point at the row."""
        depth = self._subcalls + 1
        if depth > SUBCALL_DEPTH_FLOOR:
            _check_subcall_depth(depth)
        self._push_ret(self._pointer_v)
        self._subcalls = depth
        self._pointer_v = self._pointer_at(row)
        self._outer_interpreting = True

    def _leave_frame(self):
        """The second half: restore the saved pointer unless the called node jumped."""
        self._subcalls -= 1
        self._outer_interpreting = False
        saved = self._pop_ret()
        if not self._flag_bits & C_FLAG_JMP:
            self._flag_bits &= ~C_FLAG_HLT
            self._c_rebase_to(saved)
        self._recycle(saved)

    def _enter_subcall(self):
        """Count a sub-call about to start (`call_sub`); `RecursionError` past the depth limit."""
        depth = self._subcalls + 1
        if depth > SUBCALL_DEPTH_FLOOR:
            _check_subcall_depth(depth)
        self._subcalls = depth

    def _pointer_at(self, row):
        """A new pointer bound to `row`: the recycled one when there is one."""
        ptr = self._spare_pointer
        if ptr is None:
            return _bound_pointer(self._prog_v, row)
        self._spare_pointer = None
        _bind(ptr, self._prog_v, row)
        return ptr

    def _recycle(self, ptr):
        """Keep a popped pointer nobody else holds for `_pointer_at` (the compiled core: ours
        is then the only reference)."""
        if cython.compiled:
            if Py_REFCNT(ptr) == 1 and type(ptr) is PointerVector:
                self._spare_pointer = ptr

    @cython.wraparound(False)  # rows are never negative
    def _call_inline(self, row, plan, extra):
        prog = self._prog_v
        if prog.cbits[row] & C_ROW_PRECHECK:
            prog.nodes[row]._pre_check(self)
        if prog.cbits[row] & C_ROW_THREAD and self._batch_ctx is not None:  # in a batch: its own context copy
            return self._batch_ctx.copy().run(self._run_plan_call, prog.funcs[row], plan, extra)
        return self._call_plan(prog.funcs[row], plan, extra)

    def _call_resuming(self, callee, plan, row, k, near):
        """`_subcall_inline` of `callee`; if it suspends, the run resumes at the slot in field `k`
        (FIRST_RESUME or SECOND_RESUME) of `row`'s operands (see `_resume_at`)."""
        try:
            return self._subcall_inline(callee, plan, None)
        except InterruptKeepContext:
            self._resume_at(row, k, near)
            raise
        except Parked as parked:
            parked.rest = self._resuming(parked.rest, row, k, near)
            raise

    async def _resuming(self, rest, row, k, near):
        """`rest` of a parked callee, resuming as `_call_resuming` does if it suspends the run."""
        try:
            return await rest
        except InterruptKeepContext:
            self._resume_at(row, k, near)
            raise

    def _resume_at(self, row, k, near):
        """A called node suspended: resume at the slot in field `k` of `row`'s operands (near: a slot of
        the segment; else an offset from the current slot)."""
        slot = self._prog_v.operands[row][k]
        if near:
            _provided("resume_near")(self, slot)
        else:
            _provided("resume_offset")(self, slot)

    # Operands: the named fields of `_opcodes`, filled by each instruction's `_native_op`; a dense row
    # unpacks as `first, second, exit_row, then_row`.

    def _near_plan(self, row, with_exc):
        """The plan for running the Try part at `row` inline (`with_exc`: as a CATCH handler, with
        the exception keywords), or None when it is not ready now."""
        if not with_exc:
            return self._inline_plan(row)
        if self._signal_v.pending:
            return None
        return self._exc_ready_plan(row)

    def _exc_ready_plan(self, row):
        """The plan for running the CATCH handler at `row` inline, or None when it cannot be."""
        if not self._inline_callable(row):
            return None
        plan = self._prog_v.static_plans[row]
        if plan is None:
            if _clashes(self._pool_kwargs):  # the call fails; `call_near` raises it
                return None
            plan = self._exc_plan(row)
        return None if plan is None or plan.slow else plan

    async def _take_lock(self):
        lock = self._interpret_lock_v
        if not lock._try_take(self._run_task_v):
            await lock._park(self._run_task_v, None)

    def _keeps_lock(self, lock, steps):
        """True when the next step may run without releasing the lock first: releasing and
        taking it again would change nothing (no waiter, no request, no stop, no clock check)."""
        return (
            steps % _CHECK_CLOCK_EVERY != 0
            and not self._signal_v.pending
            and not self._pending_stop
            and not lock._queue
            and lock._owner is self._run_task_v
        )

    @cython.locals(
        lock=InterpretLock,
        prog=Program,
        plan=CallPlan,
        steps=cython.Py_ssize_t,
        row=cython.Py_ssize_t,
        op=cython.int,
        status=cython.int,
        state=cython.int,
        last_yield=cython.double,
        now=cython.double,
    )
    @cython.wraparound(False)  # rows are never negative
    async def _execute(self):
        """Run steps until the workflow ends, a stop is requested, or something raises."""
        # Lock hand-over: the run takes the interpreter lock at the top of the loop and keeps it
        # across steps (`_keeps_lock`). It lets go, between two steps, only when that changes
        # something: a waiter (an external `call_sub(interrupt=True)`; `async_release` makes it the owner
        # at once, so this loop parks behind it), a suspend request (the PC_CHECKPOINT gate waits
        # with the lock free; a node's own tag gate, in `_run_row`, waits holding it, so an
        # interrupt runs only after the resumed step), a stop, the clock check. The `finally`
        # releases on every exit; a KeyboardInterrupt inside that release is repaired by
        # `_finish_run` (`_release_held_by`).
        lock = self._interpret_lock_v
        steps = 0
        last_yield = time.monotonic()
        while True:
            if self._signal_v.pending and _may_park(self._signal_v, PC_CHECKPOINT):
                rest = _rest_of(self._gate(PC_CHECKPOINT))  # type: ignore[attr-defined]  # LAYER_CONTRACT
                if rest is not None:
                    await rest
            if self._pending_stop:
                self._pending_stop = False
                return
            if not lock._try_take(self._run_task_v):
                await lock._park(self._run_task_v, None)
            try:
                while True:  # steps back to back while nobody else wants the lock, as the compiled loop
                    state = self._c_enter_step()
                    if state == C_STEP_END:
                        return
                    if state == C_STEP_RAN:
                        if self._middleware_v is not None:
                            await self._middleware_v(self)
                        else:  # the node at the pointer: `_run_row` with the fast paths inlined
                            row = self._c_descend_current()
                            prog = self._prog_v
                            op = prog.cops[row]
                            if op != OP_CALL and not self._signal_v.pending:
                                if op == OP_NOP:
                                    pass
                                elif op == OP_TRY:
                                    outcome = _native_try_now(self, row, prog.operands[row], False)
                                    if outcome is NOT_NOW:
                                        await _native_try(self, row, None, self._outer_interpreting)
                                    elif outcome is not None:
                                        await outcome
                                else:
                                    status = self._run_native_sync(row, op)
                                    if status == NATIVE_NOT_READY:
                                        await self._run_not_ready(row)
                                    elif status == NATIVE_AWAIT:
                                        rest, self._native_rest = self._native_rest, None
                                        await rest  # type: ignore[misc]  # set with the status that says so
                            else:
                                plan = self._step_plan(row) if op == OP_CALL else self._cached_plan(row)
                                if plan is None:
                                    await self._run_row(row)
                                elif plan.slow:
                                    if prog.cbits[row] & C_ROW_PRECHECK:
                                        prog.nodes[row]._pre_check(self)
                                    results = self._results_for(plan, row)
                                    if results is not None:
                                        outcome = self._call_with_results(row, plan, results)
                                        if prog.cbits[row] & C_ROW_CORO:
                                            await outcome
                                    else:
                                        outcome = self._invoke_slow_now(prog.nodes[row], plan)  # type: ignore[attr-defined]  # LAYER_CONTRACT
                                        if outcome is NOT_NOW:
                                            await self._invoke_slow(prog.nodes[row], plan)  # type: ignore[attr-defined]  # LAYER_CONTRACT
                                        elif outcome is not None:
                                            await outcome
                                elif self._inline_callable(row):
                                    self._call_inline(row, plan, None)
                                elif prog.cbits[row] & C_ROW_CORO:  # awaited here: no coroutine of the core's own
                                    if prog.cbits[row] & C_ROW_PRECHECK:
                                        prog.nodes[row]._pre_check(self)
                                    await self._call_plan(prog.funcs[row], plan, None)
                                else:
                                    await self._call_with_plan(row, plan)
                        if not self._c_leave_step():
                            return
                    steps += 1
                    if not self._keeps_lock(lock, steps):
                        break
            finally:
                lock._release()
            if steps % _CHECK_CLOCK_EVERY == 0:
                now = time.monotonic()
                if now - last_yield >= self._yield_interval_v:
                    await asyncio.sleep(0)
                    last_yield = time.monotonic()


# ----- the native opcodes -------------------------------------------------------------------
# Each opcode is a function of the core (`_run_native_sync` dispatches to them, `_execute` runs a
# Try block), written as the instruction node's Python function is, with the core's moves and calls.


def _finish_with(core, rest):
    """The status for a node's continuation `rest`: NATIVE_DONE when it finished (None), else
    NATIVE_AWAIT with it kept in `_native_rest` for the loop to await."""
    if rest is None:
        return NATIVE_DONE
    core._native_rest = rest
    return NATIVE_AWAIT


@cython.locals(core=InterpreterCore)
async def _cond_later(core, row, rest):
    """The opcode of `row` once its parked condition finishes: the node's own continuation."""
    after = core._prog_v.nodes[row]._after_condition(core, await rest)
    if after is not None:
        await after


@cython.locals(core=InterpreterCore)
async def _body_later(core, row, rest, target_row, exit_row, loop):
    """The opcode of `row` once its parked body finishes: `_leave_body` to `target_row` (THEN),
    or a loop's to `exit_row` (EXIT) when the body broke out."""
    if not loop:
        await rest
        _leave_body(core, row, target_row, THEN, None)
        return
    try:
        await rest
    except BreakLoop:
        _leave_body(core, row, exit_row, EXIT, True)
        return
    _leave_body(core, row, target_row, THEN, False)


def _native_branch(core, row):
    rows = core._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
    at = ROW_WIDTH * row
    cond = rows[at + FIRST]
    body = rows[at + SECOND]
    false_row = rows[at + EXIT]
    then_row = rows[at + THEN]
    cond_plan, body_plan = core._callee_plan(cond), core._callee_plan(body)
    if cond_plan is None or body_plan is None:
        return NATIVE_NOT_READY
    try:
        taken = core._call_resuming(cond, cond_plan, row, FIRST_RESUME, False)
    except Parked as parked:
        return _finish_with(core, _cond_later(core, row, parked.rest))
    if not core._still_at(row):
        return _finish_with(core, core._prog_v.nodes[row]._after_condition(core, taken))
    if not taken:
        core._jump_at(false_row, row, EXIT)
        return NATIVE_DONE
    try:
        core._call_resuming(body, body_plan, row, SECOND_RESUME, True)
    except Parked as parked:
        return _finish_with(core, _body_later(core, row, parked.rest, then_row, -1, False))
    _leave_body(core, row, then_row, THEN, None)
    return NATIVE_DONE


def _native_else(core, row):
    rows = core._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
    at = ROW_WIDTH * row
    body = rows[at + FIRST]
    then_row = rows[at + THEN]
    body_plan = core._callee_plan(body)
    if body_plan is None:
        return NATIVE_NOT_READY
    try:
        core._call_resuming(body, body_plan, row, FIRST_RESUME, False)
    except Parked as parked:
        return _finish_with(core, _body_later(core, row, parked.rest, then_row, -1, False))
    _leave_body(core, row, then_row, THEN, None)
    return NATIVE_DONE


def _leave_body(core, row, target_row, k, broke):
    """After a body the opcode of `row` called, go where the node's own function would: on to
    `target_row` (field `k`) unless the body moved the pointer without a jump mark; then the node's
    `_after_body` finishes from there (a loop's is told whether the body broke out: `broke`, None
    for a branch)."""
    if not core._left_unmarked(row):
        core._jump_at(target_row, row, k)
    elif broke is None:
        core._prog_v.nodes[row]._after_body(core)
    else:
        core._prog_v.nodes[row]._after_body(core, broke)


def _native_while(core, row):
    rows = core._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
    at = ROW_WIDTH * row
    cond = rows[at + FIRST]
    body = rows[at + SECOND]
    exit_row = rows[at + EXIT]
    checkup_row = rows[at + THEN]
    cond_plan, body_plan = core._callee_plan(cond), core._callee_plan(body)
    if cond_plan is None or body_plan is None:
        return NATIVE_NOT_READY
    try:
        truthy = core._call_resuming(cond, cond_plan, row, FIRST_RESUME, True)
    except Parked as parked:
        return _finish_with(core, _cond_later(core, row, parked.rest))
    if not core._still_at(row):
        return _finish_with(core, core._prog_v.nodes[row]._after_condition(core, truthy))
    if not truthy:
        core._jump_at(exit_row, row, EXIT)
        return NATIVE_DONE
    try:
        core._call_resuming(body, body_plan, row, SECOND_RESUME, True)
    except BreakLoop:
        _leave_body(core, row, exit_row, EXIT, True)
        return NATIVE_DONE
    except Parked as parked:
        return _finish_with(core, _body_later(core, row, parked.rest, checkup_row, exit_row, True))
    _leave_body(core, row, checkup_row, THEN, False)
    return NATIVE_DONE


def _native_do(core, row):
    rows = core._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
    at = ROW_WIDTH * row
    body = rows[at + FIRST]
    exit_row = rows[at + EXIT]
    check_row = rows[at + THEN]
    body_plan = core._callee_plan(body)
    if body_plan is None:
        return NATIVE_NOT_READY
    try:
        core._call_resuming(body, body_plan, row, FIRST_RESUME, True)
    except BreakLoop:
        _leave_body(core, row, exit_row, EXIT, True)
        return NATIVE_DONE
    except Parked as parked:
        return _finish_with(core, _body_later(core, row, parked.rest, check_row, exit_row, True))
    _leave_body(core, row, check_row, THEN, False)
    return NATIVE_DONE


def _native_do_check(core, row):
    rows = core._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
    at = ROW_WIDTH * row
    cond = rows[at + FIRST]
    exit_row = rows[at + EXIT]
    back_row = rows[at + THEN]
    cond_plan = core._callee_plan(cond)
    if cond_plan is None:
        return NATIVE_NOT_READY
    try:
        again = core._call_resuming(cond, cond_plan, row, FIRST_RESUME, True)
    except Parked as parked:
        return _finish_with(core, _cond_later(core, row, parked.rest))
    if not core._still_at(row):
        return _finish_with(core, core._prog_v.nodes[row]._after_condition(core, again))
    if again:
        core._jump_at(back_row, row, THEN)
    else:
        core._jump_at(exit_row, row, EXIT)
    return NATIVE_DONE


def _native_if(core, row):
    rows = core._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
    at = ROW_WIDTH * row
    cond = rows[at + FIRST]
    body = rows[at + SECOND]
    false_row = rows[at + EXIT]
    then_row = rows[at + THEN]
    cond_plan = core._callee_plan(cond)
    body_plan = core._callee_plan(body) if body >= 0 else None
    if cond_plan is None or (body >= 0 and body_plan is None):
        return NATIVE_NOT_READY
    try:
        taken = core._call_resuming(cond, cond_plan, row, FIRST_RESUME, True)
    except Parked as parked:
        return _finish_with(core, _cond_later(core, row, parked.rest))
    if not core._still_at(row):
        return _finish_with(core, core._prog_v.nodes[row]._after_condition(core, taken))
    if not taken:
        core._jump_at(false_row, row, EXIT)
        return NATIVE_DONE
    if body < 0:  # a compose body is entered by a jump
        core._jump_at(then_row, row, THEN)
        return NATIVE_DONE
    try:
        core._call_resuming(body, body_plan, row, SECOND_RESUME, True)
    except Parked as parked:
        return _finish_with(core, _body_later(core, row, parked.rest, then_row, -1, False))
    _leave_body(core, row, then_row, THEN, None)
    return NATIVE_DONE


def _native_invoke(core, row):
    target = core._prog_v.crows[ROW_WIDTH * row + FIRST]
    plan = core._callee_plan(target)
    if plan is None:
        return NATIVE_NOT_READY
    try:
        core._subcall_inline(target, plan, None)
    except Parked as parked:
        return _finish_with(core, parked.rest)
    return NATIVE_DONE


def _native_loop_head(core, row):
    rows = core._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
    at = ROW_WIDTH * row
    cond = rows[at + FIRST]
    head = rows[at + SECOND]
    exit_row = rows[at + EXIT]
    body_row = rows[at + THEN]
    cond_plan = core._callee_plan(cond)
    if cond_plan is None:
        return NATIVE_NOT_READY
    try:
        truthy = core._call_resuming(cond, cond_plan, row, FIRST_RESUME, True)
    except Parked as parked:
        return _finish_with(core, _cond_later(core, row, parked.rest))
    if not core._still_at(row):
        return _finish_with(core, core._prog_v.nodes[row]._after_condition(core, truthy))
    if not truthy:
        core._jump_at(exit_row, row, EXIT)
    else:
        core._push_ret(core._pointer_at(head))
        core._jump_at(body_row, row, THEN)
    return NATIVE_DONE


def _native_loop_control(core, operands):
    """BREAK_LOOP / CONTINUE: pop the loop's entry and jump to a slot beside it."""
    entry = core._pop_ret()
    slot, targets = operands
    bound = entry if type(entry) is PointerVector else None
    if bound is not None and bound._items is None and bound._prog is core._prog_v:
        target = targets.get(bound._row)
        if target is None:
            addr = [*bound._list()[:-1], slot]
            target = targets[bound._row] = (*core._prog_v.locate(addr), addr)
        core._native_jump(target)
    elif core._c_mark_jump():
        core._move_to([*entry.base_addr[:-1], slot])


@cython.locals(core=InterpreterCore)
async def _near_call(core, row, part, exc_kwargs):
    """A sub-call of the part `(slot, row)` of the Try block at `row`, at its own slot (as
    `TryNode`'s `call_part`): inline when the part can run now."""
    slot, target = part
    plan = core._near_plan(target, exc_kwargs is not None)
    if plan is not None:
        return _run_part(core, target, plan, exc_kwargs)
    if not core._still_at(row):
        return await _call_part_away(core, row, slot, exc_kwargs)
    return await core.call_near(slot, **(exc_kwargs or {}))


def _run_part(core, target, plan, extra):
    """`_subcall_inline` of the Try part at `target`; a jump an earlier part marked stays
    marked (the frame restores its target) unless this part moves the pointer itself."""
    if not core._flag_bits & C_FLAG_JMP:
        return core._subcall_inline(target, plan, extra)
    core._flag_bits &= ~C_FLAG_JMP
    before = list(core._pointer_v._list())
    try:
        return core._subcall_inline(target, plan, extra)
    finally:
        if not core._flag_bits & C_FLAG_JMP and core._pointer_v._list() == before:
            core._c_mark_jump()


@cython.locals(core=InterpreterCore)
async def _call_part_away(core, row, slot, exc_kwargs):
    """The part at `slot` of the Try block at `row` once an earlier part moved the pointer: a
    sub-call at the part's own slot; a jump marked before stays marked (the call restores its
    target) unless this part moves the pointer itself."""
    marked = core._flag_bits & C_FLAG_JMP
    core._flag_bits &= ~C_FLAG_JMP
    before = list(core._pointer_v._list()) if marked else None
    home = list(core._prog_v.addrs[row])
    home[-1] = slot
    try:
        return await core.call_sub(home, **(exc_kwargs or {}))
    finally:
        if marked and not core._flag_bits & C_FLAG_JMP and core._pointer_v._list() == before:
            core._c_mark_jump()


def _left_block(core, row):
    """True when a part of the Try block at `row` moved the pointer: a jump is marked, or the
    pointer designates another address (`TryNode`'s `_moved`)."""
    if core._flag_bits & C_FLAG_JMP:
        return True
    ptr = core._pointer_v
    if ptr._items is None:
        return ptr._row != row if ptr._prog is core._prog_v else ptr._bound_addr() != core._prog_v.addrs[row]
    return tuple(ptr._list()) != core._prog_v.addrs[row]


def _catch_for(core, catches, exc):
    """The part of the CATCH of `catches` that handles `exc`, or None (`TryNode._handler_for`)."""
    if _is_instance(exc, core._exc_ignored_s) and not _unsafe.__flags__.DISABLE_EXC_IGNORED:
        return None
    for exc_type, part in catches:
        if _is_instance(exc, exc_type):
            return part
    return None


def _native_try_now(core, row, operands, planned):
    """A Try block with CATCH handlers only, run without a coroutine: None when done, an
    awaitable that finishes it (the handler cannot run inline now), or NOT_NOW (nothing done).
    `planned`: a sub-call `_try_ready` found ready when the calling opcode started; then always
    None (its parts run with their plans even if a suspend request came since, as every
    opcode runs the callees it planned)."""
    escape_slot = operands[FIRST_RESUME]
    _, on_success, on_exit, catches = operands[EXTRA]
    rows = core._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
    at = ROW_WIDTH * row
    body_row = rows[at + FIRST]
    escape_row = rows[at + THEN]
    if on_success is not None or on_exit is not None:
        return NOT_NOW
    plan = core._near_plan(body_row, False) if not planned else core._planned_plan(body_row)
    if plan is None:
        return _native_try(core, row, None, core._outer_interpreting) if planned else NOT_NOW
    as_subcall = core._outer_interpreting
    try:
        if cython.compiled and not core._prog_v.cbits[body_row] & C_ROW_PRECHECK:
            # the same steps, with the body's exception caught where it was raised (a C `except`
            # would add a traceback entry per C function it passed) and the handler run while
            # it is the exception being handled
            raised = _call_body_catching(core, body_row, plan)
            if raised is not None:
                handler = _catch_for(core, catches, raised)
                if handler is None:
                    raise raised
                plan = core._exc_ready_plan(handler[1]) if planned else core._near_plan(handler[1], True)
                if plan is None:
                    return _native_try(core, row, raised, as_subcall)
                _run_handler(core, handler[1], plan, raised)
        else:
            try:
                core._subcall_inline(body_row, plan, None)
            except BaseException as exc_val:
                handler = _catch_for(core, catches, exc_val)
                if handler is None:
                    raise
                plan = core._exc_ready_plan(handler[1]) if planned else core._near_plan(handler[1], True)
                if plan is None:
                    return _native_try(core, row, exc_val, as_subcall)
                # a handler that reads no keyword needs no exception keywords (they are only ever keywords)
                _run_part(core, handler[1], plan, _exc_keywords(exc_val) if plan.keyed else None)
    except InterruptKeepContext:
        if not _left_block(core, row):
            _provided("resume_near")(core, escape_slot)
        raise
    if not as_subcall and not _left_block(core, row):
        core._jump_at(escape_row, row, THEN)
    return None


def _call_body_catching(core, target, plan):
    """`_subcall_inline` of a Try body (the compiled core): None, or the exception the body
    raised, as a Python `except` in the Try's caller would see it. A failure of the frame itself
    (the body emptied the return stack) is what the block catches then, the body's exception as
    its context."""
    if cython.compiled:  # the pure build catches in Python (`_native_try_now`)
        values = plan_values(plan.cidx, plan.n, plan.srcs, core._pool_args, core._pool_kwargs, None, None)
        func = core._prog_v.funcs[target]
        core._enter_frame(target)
        if plan.names is None:
            raised = call_catching(func, values, None)
        else:
            raised = call_catching(func, (), dict(zip(plan.names, values)))
        try:
            core._leave_frame()
        except BaseException as exc:
            if raised is not None and exc.__context__ is None:
                exc.__context__ = raised
            return exc
        return raised


def _run_handler(core, target, plan, raised):
    """A CATCH handler run inline while `raised` is the exception being handled (the compiled
    build; the pure build runs it inside its `except` block)."""
    if cython.compiled:
        exc_kwargs = _exc_keywords(raised) if plan.keyed else None
        saved = start_handling(raised)
        try:
            _run_part(core, target, plan, exc_kwargs)
        finally:
            end_handling(saved)


@cython.locals(core=InterpreterCore)
async def _native_try(core, row, raised, as_subcall):
    """Run the Try block of `row`; with `raised`, the body already ran and raised it."""
    if row < 0 or row >= core._prog_v.nrows:
        _row_outside(core._prog_v, row)
    operands = core._prog_v.operands[row]
    escape_slot = operands[FIRST_RESUME]
    body, on_success, on_exit, catches = operands[EXTRA]
    try:
        try:
            if raised is None:
                await _near_call(core, row, body, None)
            else:
                raise raised
        except BaseException as exc_val:
            handler = _catch_for(core, catches, exc_val)
            if handler is None:
                raise
            await _near_call(core, row, handler, _exc_keywords(exc_val))
        else:
            if on_success is not None:
                await _near_call(core, row, on_success, None)
        finally:
            if on_exit is not None:
                await _near_call(core, row, on_exit, None)
    except InterruptKeepContext:
        if not _left_block(core, row):
            _provided("resume_near")(core, escape_slot)
        raise
    if not as_subcall and not _left_block(core, row):
        core._jump_at(core._prog_v.crows[ROW_WIDTH * row + THEN], row, THEN)


def _native_callsub(core, row):
    """CALL: push the return address (compiled to a row when it is one) and jump."""
    rows = core._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
    at = ROW_WIDTH * row
    return_row = rows[at + SECOND]
    target_row = rows[at + THEN]
    if return_row >= 0:
        core._push_ret(core._pointer_at(return_row))
    else:
        core._push_ret(PointerVector(list(core._prog_v.nodes[row]._frm_addr)))
    core._jump_at(target_row, row, THEN)


def _native_ret(core):
    saved = core._pop_ret()
    core._flag_bits &= ~C_FLAG_HLT
    core._c_rebase_to(saved if isinstance(saved, PointerVector) else saved.base_addr)
    core._recycle(saved)
