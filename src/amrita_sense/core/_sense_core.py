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
import threading
import time
import weakref
from operator import attrgetter

try:
    import cython
except ModuleNotFoundError:  # a pure build without Cython installed
    from amrita_sense.core import cython_shim as cython  # type: ignore[no-redef]

if not cython.compiled and __name__.rpartition(".")[2] == "_sense_core":
    # imported as Python under the compiled core's name: the extension is not built here
    raise ImportError("the compiled core is not built here; the pure build is amrita_sense.core.pure")

if cython.compiled:
    from cython.cimports.amrita_sense.core._capi import (
        AMRITA_SENSE_DEBUG,
        KEYWORD,
        MAX_STACK_ARGS,
        RESULT,
        call_catching,
        call_from_pools,
        end_handling,
        is_subclass,
        list_pop,
        list_push,
        plan_values,
        start_handling,
        weak_target,
    )
    from cython.cimports.cpython.mem import PyMem_Free, PyMem_Malloc
    from cython.cimports.cpython.ref import Py_REFCNT

if cython.compiled:  # the cold checks: C calls into their own compiled module
    from cython.cimports.amrita_sense.core._async_pin import pin_async_library, restore_async_library
    from cython.cimports.amrita_sense.core._checks import (
        _check_index,
        _checked,
        _checked_int,
        _checked_items,
        _checked_middleware,
        _checked_seconds,
        _optional,
        _provided,
        _refuse_delete,
        _row_index,
        _row_map,
        _ssize,
        args_pool,
        check_stream,
        exception_types,
        kwargs_pool,
    )

    from amrita_sense.core import _async_pin as async_pin  # noqa: F401  # the selector's
    from amrita_sense.core import _checks as checks  # noqa: F401  # the selector's Python-level checks
else:
    from amrita_sense.core import pure_async_pin as async_pin  # noqa: F401  # the same, pure
    from amrita_sense.core import pure_checks as checks  # noqa: F401  # the same, pure
    from amrita_sense.core.pure_async_pin import (  # type: ignore[attr-defined]
        pin_async_library,
        restore_async_library,
    )
    from amrita_sense.core.pure_checks import (  # type: ignore[attr-defined]
        _check_index,
        _checked,
        _checked_int,
        _checked_items,
        _checked_middleware,
        _checked_seconds,
        _optional,
        _provided,
        _refuse_delete,
        _row_index,
        _row_map,
        _ssize,
        args_pool,
        check_stream,
        exception_types,
        kwargs_pool,
    )

from amrita_sense import _unsafe
from amrita_sense._classmemo import ClassMemo
from amrita_sense.core import opcodes as _opcodes
from amrita_sense.core import portable as _portable
from amrita_sense.exceptions import (
    BreakLoop,
    IllegalState,
    InterruptKeepContext,
    InterruptNotice,
    InvalidOperand,
    NullPointerException,
)

IMPLEMENTATION: str = "cython" if cython.compiled else "python"
DEBUG_BUILD = bool(AMRITA_SENSE_DEBUG) if cython.compiled else False  # the compiled core's debug build

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
_TABLES_PER_PROGRAM = 64

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


class CallPlan:
    """A shared injection plan as the core runs it: where each argument comes from.

    `srcs` holds one entry per argument: an int (a position in the positional
    pool), a str (a name in the keyword pool, or in the call's extra
    keywords) or a 1-tuple `(name,)` (the calling interpreter's `use_cache`
    result for the parameter `name`). `names` is None for a positional call,
    else the parameter names of a keyword call. `slow` plans (providers,
    `use_cache` values) are run by the Python layer from `entry` (a
    `runtime.plans.PlanEntry`), except that a `cached` plan (its only providers
    are `use_cache` ones) is run by the core once the interpreter has their
    results (`fetch_with`). `keyed`: some argument is read from the keyword pool.
    """

    __slots__ = ("cached", "entry", "fetch", "fetch_with", "keyed", "names", "slow", "srcs")

    def __init__(self, srcs, names, slow, entry):
        self.srcs = srcs
        self.names = names
        self.slow = slow
        self.entry = entry
        self.fetch = _fetcher(srcs)
        self.cached = any(type(src) is tuple and len(src) == 1 for src in srcs)
        self.keyed = any(type(src) is not int and not (type(src) is tuple and len(src) == 1) for src in srcs)
        self.fetch_with = _results_fetcher(srcs) if self.cached else None
        if cython.compiled:  # per argument, as the C loop reads it: a pool position, KEYWORD or RESULT
            PyMem_Free(self.cidx)  # a second __init__ replaces the first one's
            self.n = len(srcs)
            self.cidx = cython.cast(cython.p_Py_ssize_t, PyMem_Malloc((self.n + 1) * cython.sizeof(cython.Py_ssize_t)))
            if self.cidx == cython.NULL:
                raise MemoryError()
            for i in range(self.n):
                src = srcs[i]
                if type(src) is int and src >= 0:
                    self.cidx[i] = src
                else:
                    self.cidx[i] = RESULT if type(src) is tuple and len(src) == 1 else KEYWORD

    def __dealloc__(self):
        if cython.compiled:
            PyMem_Free(self.cidx)


def _fetcher(srcs):
    """`fetch(pool, kwargs)` -> the argument values, specialised for up to two positional sources."""
    if not srcs:
        return lambda pool, kwargs: ()
    if all(type(src) is int for src in srcs):
        if len(srcs) == 1:
            (i,) = srcs
            return lambda pool, kwargs: (pool[i],)
        if len(srcs) == 2:
            i, j = srcs
            return lambda pool, kwargs: (pool[i], pool[j])
    return lambda pool, kwargs: tuple(kwargs[src] if type(src) is str else pool[src] for src in srcs)


def _results_fetcher(srcs):
    """`fetch_with(pool, kwargs, results)` -> the argument values of a plan with `use_cache` sources."""

    def value(src, pool, kwargs, results):
        if type(src) is int:
            return pool[src]
        return results[src[0]] if type(src) is tuple else kwargs[src]

    return lambda pool, kwargs, results: tuple(value(src, pool, kwargs, results) for src in srcs)


NO_ARGUMENTS: CallPlan = CallPlan((), None, False, None)
"""The plan of a function without parameters: the same for every pool."""
UNSHARED: CallPlan = CallPlan((), None, True, None)
"""A table's mark for a node whose plan cannot be shared: the Python layer resolves it per interpreter."""


class SuspendFlag:
    """A cell that says whether a suspend request is outstanding on a stream (`pending`, a bool)."""

    __slots__ = ("pending",)

    def __init__(self) -> None:
        self.pending = False


NEVER_PENDING: SuspendFlag = SuspendFlag()
ALWAYS_PENDING: SuspendFlag = SuspendFlag()
ALWAYS_PENDING.pending = True

PC_CHECKPOINT = "WorkflowInterpreter::each_node"


class Program:
    """The flat node table of one rendered graph.

    One row per executable slot in depth-first order (a node, or an empty
    segment that execution can land on). Plain advancement is `row + 1`:
    entering nested segments and leaving exhausted ones is already folded
    into the order. Each row has an opcode (`ops`), its operands, and the
    rows the opcode works with (`rows`); see `_opcodes` for both layouts.
    """

    __slots__ = (
        "addrs",
        "bits",
        "cbits",
        "cops",
        "crows",
        "funcs",
        "graph",
        "landings",
        "nodes",
        "nrows",
        "operands",
        "ops",
        "row_of",
        "seg_row",
        "static_plans",
        "_successor",
        "tables",
    )

    @cython.locals(i=cython.Py_ssize_t, k=cython.Py_ssize_t, nrows=cython.Py_ssize_t)
    def __init__(self, graph, nodes, funcs, bits, static_plans, ops, operands, rows, landings, addrs, row_of, seg_row):
        nrows = len(nodes)
        if getattr(self, "nodes", None) is not None:  # interpreters index the tables they were made with
            raise TypeError("a Program is initialised once")
        for table in (funcs, bits, static_plans, ops, operands, rows, landings, addrs):
            if len(table) != nrows:
                raise ValueError(f"Program: every per-row table needs {nrows} rows, one has {len(table)}")
        for plan in static_plans:
            if plan is not None and type(plan) is not CallPlan:
                raise TypeError(f"Program: a static plan is a CallPlan or None, not {type(plan).__name__}")
        # Row layout: `rows[i]` is the dense row of row i, the ROW_WIDTH fields FIRST, SECOND, EXIT, THEN
        # (`_opcodes.dense_row`, built by node.table). Each entry is a row of this table or -1
        # (`_row_index` checks it here), so the native opcodes index the tables with it once they
        # tested for -1. `cbits` / `cops` / `crows` are what the loop indexes: C arrays in the
        # compiled core (filled here, before any field is set), tuples in the pure build.
        if cython.compiled:
            self._alloc_rows(nrows)
            for i in range(nrows):
                self.cbits[i] = _checked_int(bits[i], "Program: a row's bits")
                self.cops[i] = _checked_int(ops[i], "Program: a row's opcode")
                for k in range(ROW_WIDTH):
                    self.crows[ROW_WIDTH * i + k] = _row_index(rows[i][k], nrows, -1)
        else:
            dense = tuple(_row_index(rows[i][k], nrows, -1) for i in range(nrows) for k in range(ROW_WIDTH))
            for i in range(nrows):
                _checked_int(bits[i], "Program: a row's bits")
                _checked_int(ops[i], "Program: a row's opcode")
        self.graph = graph
        self.nodes = tuple(nodes)
        self.funcs = tuple(funcs)
        self.bits = tuple(bits)
        self.static_plans = tuple(static_plans)
        self.ops = tuple(ops)
        self.operands = tuple(operands)
        self.landings = tuple(landings)
        self.addrs = tuple(addrs)
        self.row_of = None if row_of is None else _row_map(row_of, nrows)
        self.seg_row = _row_map(seg_row, nrows)
        if not cython.compiled:
            self.cbits = self.bits
            self.cops = self.ops
            self.crows = dense  # the dense rows one after another, ROW_WIDTH ints per row
        self.nrows = nrows
        self._successor = None
        self.tables = {}

    def _alloc_rows(self, nrows):
        """The C arrays for `nrows` rows (the compiled core); those of an initialisation that
        failed are freed first."""
        PyMem_Free(self.cbits)
        PyMem_Free(self.cops)
        PyMem_Free(self.crows)
        self.cbits = cython.cast(cython.p_int, PyMem_Malloc((nrows + 1) * cython.sizeof(cython.int)))
        self.cops = cython.cast(cython.p_int, PyMem_Malloc((nrows + 1) * cython.sizeof(cython.int)))
        self.crows = cython.cast(cython.p_int, PyMem_Malloc((ROW_WIDTH * nrows + 1) * cython.sizeof(cython.int)))
        if self.cbits == cython.NULL or self.cops == cython.NULL or self.crows == cython.NULL:
            raise MemoryError()

    def __dealloc__(self):
        if cython.compiled:
            PyMem_Free(self.cbits)
            PyMem_Free(self.cops)
            PyMem_Free(self.crows)

    @property
    def successor(self):
        """The program this one was recompiled into (a hot-swapped slot), or None."""
        return self._successor

    @successor.setter
    def successor(self, value):
        if value is not None and not isinstance(value, Program):
            raise TypeError(f"Program.successor must be a Program or None, not {type(value).__name__}")
        prog = value
        while prog is not None:  # followed to its end by every interpreter of this program
            if prog is self:
                raise ValueError("Program.successor would make a cycle")
            prog = prog._successor
        self._successor = value

    @successor.deleter
    def successor(self):
        _refuse_delete("successor")

    def table_for(self, shape):
        """A copy of the row table of plans for pools of `shape` (the core's own is kept from Python,
        as in the compiled core, whose loop runs its plans unchecked)."""
        return tuple(self._table_for(shape))

    def _table_for(self, shape):
        """The row table of plans for pools of `shape` (shared by every interpreter of that shape)."""
        table = self.tables.get(shape)
        if table is None:
            if len(self.tables) >= _TABLES_PER_PROGRAM:
                self.tables.clear()
            table = self.tables[shape] = [None] * self.nrows
        return table

    def locate(self, items):
        """Row for an address list: `(row, exact)`, or `(-1, False)` if none.

        `exact` is False when the address names a non-empty segment whose
        first executable row is `row`.
        """
        key = tuple(items)
        if self.row_of is None:
            self.row_of = {addr: row for row, addr in enumerate(self.addrs)}
        row = self.row_of.get(key)
        if row is not None:
            return row, True
        row = self.seg_row.get(key)
        if row is not None:
            return row, False
        return -1, False


_EMPTY_POINTER = (
    "{}() on an empty pointer: after a finished run, reset(), pop() or clear() there is no current slot to move"
)


def address_list(value, what):
    """`value` (a PointerVector, or a list or tuple of ints) as a new list; `TypeError` naming `what`
    otherwise."""
    if isinstance(value, PointerVector):
        return _checked_items(list(cython.cast(PointerVector, value)._list()), what)
    if isinstance(value, (list, tuple)):
        return _checked_items(list(value), what)
    raise InvalidOperand(
        f"{what} needs an address (a list or tuple of ints, or a PointerVector), not {type(value).__name__}"
    )


# Thread safety, the contract of 1.1.3: each method of a PointerVector or a Stack is atomic with
# respect to other threads (a sequence of calls is not). The compiled core gets that from the GIL (each
# method is one C call that runs no Python code between its check and its write); here one lock for all
# of them does it, not one per object, so the objects carry only their state (they copy and pickle
# alike in both cores). Nothing is released or called back while it is held.
_ATOMIC = threading.Lock()


class PointerVector:
    """The program counter: a list of indices from the root segment down.

    While bound to a program it is a lazy view: the core moves `_row` and
    the list is materialised only when someone reads it. Every write is
    checked (a list of ints; `offset` / `near_to` need a current slot).
    """

    # No lock of its own: the module's `_ATOMIC` makes each mutator atomic (see there).
    __slots__ = ("_items", "_prog", "_row")

    def __init__(self, base=None):
        if base is None:
            self._items = [0]
        elif isinstance(base, list):  # kept, not copied, as in 1.1.3
            self._items = _checked_items(base, "PointerVector(base)") or [0]
        else:
            self._items = address_list(base, "PointerVector(base)") or [0]
        self._row = -1
        self._prog = None

    @staticmethod
    def _at_row(prog, row):
        """A vector bound to `row` of `prog`, as the loop leaves the pointer (restoring a saved one)."""
        _check_bindable(prog, row)
        return _bound_pointer(prog, row)

    def _list(self):
        # The view is materialised here, at the first read or write from Python (base_addr,
        # indexing, a mutator); the loop itself only rebinds (`_set_row`) and compares rows, so a
        # run nobody inspects builds no list. Once built, `_items` is the address: `_row` / `_prog`
        # are kept only for `_still_at`.
        items = self._items
        if items is None:
            items = list(self._bound_addr())
            self._items = items
        return items

    def _bound_addr(self):
        if self._prog is None:  # made by __new__ without __init__ (the pure build: an unset slot)
            raise TypeError("PointerVector was created without __init__ and holds no address")
        return self._prog.addrs[self._row]

    def _set_row(self, prog, row):
        self._prog = prog
        self._row = row
        self._items = None

    @property
    def base_addr(self):
        return self._list()

    @base_addr.setter
    def base_addr(self, value):
        if isinstance(value, list):
            self._items = _checked_items(value, "PointerVector.base_addr")
        else:
            self._items = address_list(value, "PointerVector.base_addr")

    @base_addr.deleter
    def base_addr(self):
        _refuse_delete("base_addr")

    def offset(self, offset):
        _check_index(offset, "PointerVector.offset(offset)")
        with _ATOMIC:
            items = self._list()
            if not items:
                raise IndexError(_EMPTY_POINTER.format("PointerVector.offset"))
            items[-1] += offset
            return self

    def offset_far(self, offset):
        offset = address_list(offset, "PointerVector.offset_far(offset)")
        with _ATOMIC:
            items = self._list()
            items[:] = _offset_far(items, offset)
            return self

    def near_to(self, short_offset):
        _check_index(short_offset, "PointerVector.near_to(short_offset)")
        with _ATOMIC:
            items = self._list()
            if not items:
                raise IndexError(_EMPTY_POINTER.format("PointerVector.near_to"))
            items[-1] = short_offset
            return self

    def far_to(self, addr):
        addr = address_list(addr, "PointerVector.far_to(addr)")
        with _ATOMIC:
            self._list()[:] = addr
            return self

    def pop(self):
        with _ATOMIC:
            return self._list().pop()

    def append(self, node_ip):
        _check_index(node_ip, "PointerVector.append(node_ip)")
        with _ATOMIC:
            self._list().append(node_ip)

    def clear(self):
        with _ATOMIC:
            self._items = []

    def copy(self):
        if self._items is None:
            self._bound_addr()  # an uninitialised vector raises here
            return _bound_pointer(self._prog, self._row)
        return PointerVector(list(self._items))

    def __reduce__(self):
        # copy, deepcopy and pickle keep the address, unbound, and load on either core (`_portable`)
        return _portable.pointer_reduce(self, list(self._list()))

    def __add__(self, other):
        if not isinstance(other, PointerVector):
            raise InvalidOperand(f"PointerVector + needs a PointerVector, not {type(other).__name__}")
        return self.copy().offset_far(other.base_addr)

    def __sub__(self, other):
        if not isinstance(other, PointerVector):
            raise InvalidOperand(f"PointerVector - needs a PointerVector, not {type(other).__name__}")
        return self.copy().offset_far([-i for i in other.base_addr])

    def __bool__(self):
        return self._items is None or bool(self._items)

    def __eq__(self, value):
        if not isinstance(value, type(self)):
            return False
        return self._list() == cython.cast(PointerVector, value)._list()

    def __hash__(self):
        return hash(tuple(self._list()))

    def __repr__(self):
        return f"PointerVector({self._list()})"

    def __getitem__(self, index):
        return self._list()[index]

    def __setitem__(self, index, value):
        if isinstance(index, slice):
            value = address_list(value, "PointerVector[...] = value")
        else:
            _check_index(value, "PointerVector[index] = value")
        with _ATOMIC:
            self._list()[index] = value

    def __iter__(self):
        return iter(list(self._list()))

    def __len__(self):
        if self._items is None:
            return len(self._bound_addr())
        return len(self._items)

    def __delitem__(self, key):
        raise ValueError("Cannot delete items from PointerVector")


def _bound_pointer(prog, row):
    """A vector bound to `row` of `prog` (the core's own, unchecked)."""
    vec = PointerVector.__new__(PointerVector)
    vec._items = None
    vec._row = row
    vec._prog = prog
    return vec


def _check_bindable(prog, row):
    if not isinstance(prog, Program):
        raise InvalidOperand(f"PointerVector._at_row(prog) needs a Program, not {type(prog).__name__}")
    _check_index(row, "PointerVector._at_row(row)")
    if not 0 <= row < prog.nrows:
        raise IndexError(f"row {row} is outside the node table of {prog.nrows} rows")


def _offset_far(base, offset):
    """Element-wise sum after zero-padding; cut at the first negative coordinate."""
    width = max(len(base), len(offset))
    base = base + [0] * (width - len(base))
    offset = offset + [0] * (width - len(offset))
    result = []
    for a, b in zip(base, offset):
        if a + b < 0:
            break
        result.append(a + b)
    return result


class Stack:
    """A bounded LIFO stack; `push` past the limit raises `OverflowError`."""

    __slots__ = ("_items", "_limit")

    def __init__(self, ovf=1024):
        _check_index(ovf, "Stack(ovf)")
        self._items = []
        self._limit = _ssize(ovf)

    @property
    def stack(self):
        """The items, bottom first (a list)."""
        return self._items

    @stack.setter
    def stack(self, value):
        if not isinstance(value, list):
            raise InvalidOperand(f"Stack.stack must be a list, not {type(value).__name__}")
        self._items = value

    @stack.deleter
    def stack(self):
        _refuse_delete("stack")

    @property
    def ovf(self):
        """The capacity: `push` on a stack this long raises `OverflowError`."""
        return self._limit

    @ovf.setter
    def ovf(self, value):
        _check_index(value, "Stack.ovf")
        self._limit = _ssize(value)

    @ovf.deleter
    def ovf(self):
        _refuse_delete("ovf")

    def __class_getitem__(cls, item):
        return cls

    def __len__(self):
        return len(self._items)

    def __repr__(self):
        return repr(self._items)

    def __str__(self):
        return str(self._items)

    def __bool__(self):
        return bool(self._items)

    def push(self, item):
        if cython.compiled:  # atomic by the GIL: no Python code runs between the check and the write
            self._push(item)
        else:
            with _ATOMIC:
                self._push(item)

    def pop(self):
        if cython.compiled:
            return self._pop()
        with _ATOMIC:
            return self._pop()

    def _push(self, item):
        if len(self._items) >= self._limit:
            raise OverflowError("Stack overflow")
        if cython.compiled:
            list_push(self._items, item)
        else:
            self._items.append(item)

    def _pop(self):
        if not self._items:
            raise IndexError("Stack is empty")
        if cython.compiled:
            return list_pop(self._items)
        return self._items.pop()

    def clear(self):
        with _ATOMIC:
            dropped = self._items[:]  # the items' last references go after the lock: a __del__ may push
            self._items.clear()
        del dropped

    def resize(self, size):
        _check_index(size, "Stack.resize(size)")
        self.ovf = size

    def copy(self):
        """A shallow copy, a `Stack` also for a subclass (as 1.1.3 and `list.copy`); `copy.copy` keeps the class."""
        copied = Stack(self._limit)
        copied.stack = self._items.copy()
        return copied

    def __reduce__(self):
        return _portable.stack_reduce(self, self._limit, self._items)


class InterpretLock:
    """The interpreter lock: FIFO, owned by a task, handed over on release.

    Uncontended acquire and release are a few field writes. A contended
    acquirer parks on a future; `release` hands the lock straight to the
    first live waiter, so the main loop cannot take it back before an
    injected call has run.
    """

    __slots__ = ("_owner", "_queue")

    def __init__(self):
        self._owner = None
        self._queue = []  # (future, owner) in arrival order; a list or None, as the compiled core's field

    @property
    def owner(self):
        return self._owner

    @property
    def _waiters(self):
        """The parked acquirers, `(future, owner)` in arrival order (a list), or None before the first."""
        return self._queue

    @_waiters.setter
    def _waiters(self, value):
        self._queue = _optional(value, list, "_waiters", "a list")

    @_waiters.deleter
    def _waiters(self):
        _refuse_delete("_waiters")

    def locked(self):
        return self._owner is not None

    def async_owned(self):
        return self._owner is not None and self._owner is _current_task()

    def _try_take(self, owner):
        if self._owner is None and not self._queue:
            self._owner = owner
            return True
        return False

    async def async_acquire(self, blocking=True, timeout=None):
        owner = _current_task()
        if owner is not None and self._owner is owner:
            raise RuntimeError("the current task is already holding this lock")
        if self._try_take(owner):
            return True
        if not blocking:
            return False
        return await self._park(owner, timeout)

    async def _park(self, owner, timeout):
        fut = asyncio.get_running_loop().create_future()
        entry = (fut, owner)
        if self._queue is None:
            self._queue = []
        self._queue.append(entry)
        try:
            if timeout is None:
                await fut
            else:
                await asyncio.wait_for(asyncio.shield(fut), timeout)
            return True
        except BaseException:
            self._abandon(entry)
            raise

    def _abandon(self, entry):
        fut = entry[0]
        if fut.done() and not fut.cancelled():
            self.async_release()
            return
        fut.cancel()
        try:
            self._queue.remove(entry)
        except ValueError:
            pass

    def async_release(self):
        self._release()

    def _release(self):
        # Each step leaves a state `_release_held_by` can finish if an asynchronous exception
        # (KeyboardInterrupt) stops the release half-way: a waiter is woken before it is made the
        # owner and removed, so a woken waiter is never lost.
        waiters = self._queue
        while waiters:
            fut, owner = waiters[0]
            if fut.done():  # cancelled: it gave up waiting
                waiters.pop(0)
                continue
            fut.set_result(True)
            self._owner = owner
            waiters.pop(0)
            break
        else:
            self._owner = None

    def _release_held_by(self, holder):
        """Release the lock if `holder` (a run that has ended) still owns it, that is, its last
        release was cut short; a waiter it had already woken becomes the owner."""
        if holder is None or self._owner is not holder:
            return
        waiters = self._queue
        if waiters and waiters[0][0].done() and not waiters[0][0].cancelled():
            self._owner = waiters.pop(0)[1]
            return
        self._release()

    acquire = async_acquire
    release = async_release

    async def __aenter__(self):
        await self.async_acquire()
        return self

    async def __aexit__(self, exc_type, exc, tb):
        self.async_release()


def _new_lock():
    """`InterpretLock()` without the call protocol; its waiter list is made by the first waiter."""
    lock = InterpretLock.__new__(InterpretLock)
    lock._owner = None
    lock._queue = None
    return lock


def _new_stack():
    """`Stack()` without the call protocol."""
    stack = Stack.__new__(Stack)
    stack._items = []
    stack._limit = 1024
    return stack


def _task_table():
    """asyncio's table of each running loop's current task when `asyncio.current_task` is the Python
    function that only reads it (Python 3.10 and 3.11; from 3.12 it is C code, called as it is), else None."""
    table = getattr(asyncio.tasks, "_current_tasks", None)
    reader = asyncio.current_task
    if (
        type(table) is dict
        and getattr(reader, "__code__", None) is not None
        and reader.__globals__.get("_current_tasks") is table
    ):
        return table
    return None


_TASK_TABLE = _task_table()
_running_loop = asyncio.get_running_loop


def _current_task():
    """The running task, or None outside a running loop (a RecursionError, a RuntimeError too, is raised):
    `asyncio.current_task()`, without its Python frame where it has one (`_task_table`)."""
    try:
        if _TASK_TABLE is None:
            return asyncio.current_task()
        return _TASK_TABLE.get(_running_loop())
    except RecursionError:
        raise
    except RuntimeError:
        return None


def _start_pointer(prog):
    """`[0]`, bound to the first row when that row is the top-level slot 0."""
    if prog.nrows and len(prog.addrs[0]) == 1:
        return _bound_pointer(prog, 0)
    return PointerVector([0])


def _still_at(ptr, prog, row):
    """True when the pointer designates `row` of `prog` (bound to it, or a list equal to its address)."""
    if ptr._prog is not prog or ptr._row != row:
        return False
    return ptr._items is None or tuple(ptr._items) == prog.addrs[row]


def same_types(values, types):
    """True when `values` (a tuple) holds exactly one value of each type of `types`, in order."""
    n = len(values)
    if n != len(types):
        return False
    for i in range(n):
        if type(values[i]) is not types[i]:
            return False
    return True


RUNNING: object = object()
"""`_waiter` of a run whose future nobody asked for yet."""


def _reports_itself(kind):
    """True when instances of `kind` report `kind` as their `__class__` (no override in the MRO)."""
    descriptor = next(klass.__dict__["__class__"] for klass in kind.__mro__ if "__class__" in klass.__dict__)
    return descriptor is _OBJECT_CLASS


_OBJECT_CLASS = object.__dict__["__class__"]
_PLAIN_CLASS = ClassMemo(_reports_itself)

# The class `_plain_class` was last asked about (a weak reference) and its verdict.
_last_verdict = (None, False)


def _plain_class(kind):
    """`_reports_itself(kind)`, remembered for the last class asked about, without keeping it alive."""
    global _last_verdict
    ref, verdict = _last_verdict
    if ref is not None and (weak_target(ref) if cython.compiled else ref()) is kind:
        return verdict
    verdict = _PLAIN_CLASS(kind)
    _last_verdict = (weakref.ref(kind), verdict)
    return verdict


def _is_instance(obj, spec):
    """`isinstance(obj, spec)`. Compiled, when `obj` reports its own class, classes whose metaclass is
    `type` (no `__instancecheck__`) are tested as `isinstance` would, without its `__class__` lookup per
    class that does not match."""
    if not cython.compiled:
        return isinstance(obj, spec)
    kind = type(obj)
    if not _plain_class(kind):
        return isinstance(obj, spec)
    if type(spec) is not tuple:
        return is_subclass(kind, spec) if type(spec) is type else isinstance(obj, spec)
    for member in spec:
        if type(member) is type:
            if is_subclass(kind, member):
                return True
        elif isinstance(obj, member):
            return True
    return False


def _exc_keywords(exc):
    """The keywords a CATCH handler is called with."""
    return {"exc_type": type(exc), "exc_val": exc, "exc_tb": exc.__traceback__}


def _clashes(kwargs):
    if not kwargs:
        return False
    return "exc_type" in kwargs or "exc_val" in kwargs or "exc_tb" in kwargs


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


def _row_outside(prog, row):
    """For the coroutines Python can call with a row (as the compiled core checks it)."""
    raise IndexError(f"row {row} is outside the node table of {prog.nrows} rows")


def _checked_call_plan(plan):
    """A plan the Python layer made for a table (`_shared_plan`), or one given to a step: a CallPlan
    (the compiled core's loop reads it unchecked)."""
    if type(plan) is not CallPlan:
        raise TypeError(f"an injection plan is a CallPlan, not {type(plan).__name__}")
    return plan


# ----- checked at the write: the Python layer's fields (made in InterpreterCore's body) ------


def _checked_field(storage, name, check):
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
    _optional(value, InterpreterCore, name, "an interpreter")
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
    "_top_interpreter": lambda interp, value, name: _optional(value, InterpreterCore, name, "an interpreter"),
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


class InterpreterCore:
    """The interpreter state the hot path touches, and the step loop itself.

    `amrita_sense.runtime.workflow.WorkflowInterpreter` subclasses this and adds the public API;
    it implements the calls of `LAYER_CONTRACT` (the Python-level slow paths), the only calls the
    core makes up into it.
    """

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
        # two threads at once: one wins; a KeyboardInterrupt lands before it or after it).
        self._waiter_s, self._claim_v = (RUNNING, mark) if self._waiter_s is waiter else (self._waiter_s, self._claim_v)
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
        return self._pools_hold_factories()

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
        self._waiter_s, self._claim_v, self._run_task_v = None, None, None  # one statement: the release
        if outcome is None or (isinstance(outcome, InterruptNotice) and not isinstance(outcome, InterruptKeepContext)):
            if (self._lifecycles_s is not None or self._dep_store_s is not None) and self._workflow_scope_open():
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
            self._pointer_v._set_row(self._prog_v, row)
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
                ptr._set_row(self._prog_v, row + 1)
            else:
                ptr._items = list(landing)
            return True
        ptr._items = []
        return False

    def _rebase_to(self, ptr):
        """Make the pointer equal to `ptr` (an address or a PointerVector), without a jump mark."""
        self._c_rebase_to(ptr)

    def _c_rebase_to(self, ptr):
        other = ptr if isinstance(ptr, PointerVector) else None
        if other is not None and other._items is None:
            other._bound_addr()  # an uninitialised vector raises here
            self._pointer_v._set_row(other._prog, other._row)
        else:
            self._pointer_v._items = address_list(ptr, "rebase_ptr(ptr)")

    def _adopt_successor(self):
        """Follow a program that was recompiled in place (a hot-swapped slot)."""
        prog = self._prog_v
        while prog._successor is not None:
            prog = prog._successor
        self._prog_v = prog
        self._c_refresh_plans()

    def _refresh_plans(self):
        """Take the program's plan table for the pools' shape, or none when plans are off."""
        self._c_refresh_plans()

    def _c_refresh_plans(self):
        shape = self._shape_s
        self._plans_v = self._prog_v._table_for(shape) if self._plans_valid_v and shape is not None else None
        self._exc_plans = None

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
            self._pointer_v._set_row(self._prog_v, row)
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
                plan = table[row] = _checked_call_plan(self._shared_plan(self._prog_v.nodes[row], False))
        # unchecked: both tables hold CallPlans only (the Program checks its static plans when made)
        return cython.cast(CallPlan, plan)

    def _cached_plan(self, row):
        """The plan of `row` (providers included) unless a suspend signal is pending."""
        if self._signal_v.pending:
            return None
        return self._row_plan(row)

    @cython.wraparound(False)  # rows are never negative
    def _exc_plan(self, row):
        """The plan of `row` called as a CATCH handler (with `exc_type` / `exc_val` / `exc_tb`)."""
        table = self._exc_plans
        if table is None:
            if self._plans_v is None:
                return None
            table = self._exc_plans = self._prog_v._table_for(self._shape_s.with_exc)
        plan = table[row]
        if plan is None:
            plan = table[row] = _checked_call_plan(self._shared_plan(self._prog_v.nodes[row], True))
        return plan

    def _ready_plan(self, row):
        """The cached plan of `row` when the core can run it itself (no providers), else None."""
        plan = self._cached_plan(row)
        if plan is None or plan.slow:
            return None
        return plan

    def _plan_args(self, plan, extra):
        """`(args, None)` or `(None, kwargs)`: the plan's values from the pools (and `extra` keywords)."""
        kwargs = self._pool_kwargs if extra is None else {**self._pool_kwargs, **extra}
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
            await self._gate(prog.nodes[row].tag)
        if bits & C_ROW_PRECHECK:
            prog.nodes[row]._pre_check(self)
        plan = self._row_plan(row)
        if plan is None:
            return await self._run_unshared(prog.nodes[row])
        if plan.slow:
            return await self._invoke_slow(prog.nodes[row], plan)
        func = prog.funcs[row]
        if bits & C_ROW_CORO:
            return await self._call_plan(func, plan, None)
        if bits & C_ROW_THREAD and not self._force_inline_v:
            return await self._offload(func, *self._plan_args(plan, None))
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
        self._pointer_v._items = []
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
            return await self._offload_batch(batch)
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
        outcome = await self._offload_batch(
            functools.partial(self._batch_in_worker, row, None, contextvars.copy_context())
        )
        if outcome is BATCH_NOT_RUN:
            await self._run_row(row)
        elif outcome is BATCH_AWAIT:
            rest, self._native_rest = self._native_rest, None
            await rest

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
        ptr._set_row(prog, following)
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
        if cython.compiled and type(stack) is Stack:
            stack._push(item)
        else:
            stack.push(item)

    def _pop_ret(self):
        stack = self._ret_addr_stack_v
        if cython.compiled and type(stack) is Stack:
            return stack._pop()
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

    def _finish_with(self, rest):
        """The status for a node's continuation `rest`: NATIVE_DONE when it finished (None), else
        NATIVE_AWAIT with it kept in `_native_rest` for the loop to await."""
        if rest is None:
            return NATIVE_DONE
        self._native_rest = rest
        return NATIVE_AWAIT

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
            return self._native_branch(row)
        elif op == OP_ELSE:
            return self._native_else(row)
        elif op == OP_WHILE:
            return NATIVE_NOT_READY if self._squashed_loops_v else self._native_while(row)
        elif op == OP_DO:
            return NATIVE_NOT_READY if self._squashed_loops_v else self._native_do(row)
        elif op == OP_DO_CHECK:
            return self._native_do_check(row)
        elif op == OP_CALLSUB:
            self._native_callsub(row)
        elif op == OP_RET:
            self._native_ret()
        elif op == OP_NATIVE_IF:
            return self._native_if(row)
        elif op == OP_LOOP_HEAD:
            return self._native_loop_head(row)
        elif op == OP_LOOP_CONTROL:
            self._native_loop_control(self._prog_v.operands[row][EXTRA])
        elif op == OP_INVOKE:
            return self._native_invoke(row)
        return NATIVE_DONE

    def _goto(self, target):
        """Point at a jump-target descriptor `(row, exact, address)`."""
        row, exact, addr = target[0], target[1], target[2]
        if row >= 0 and exact:
            self._pointer_v._set_row(self._prog_v, row)
        else:
            self._pointer_v._items = list(addr)

    def _native_jump(self, target):
        if self._c_mark_jump():
            self._goto(target)

    def _jump_at(self, target_row, row, k):
        """Jump to the target in field `k` (EXIT or THEN) of `row`'s operands: straight to
        `target_row` when the target is one row, else through its descriptor."""
        if self._c_mark_jump():
            if target_row >= 0:
                self._pointer_v._set_row(self._prog_v, target_row)
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
                return _finish_now(self._native_try_now(row, self._prog_v.operands[row], True))
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
        ptr._set_row(self._prog_v, row)
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

    async def _cond_later(self, row, rest):
        """The opcode of `row` once its parked condition finishes: the node's own continuation."""
        after = self._prog_v.nodes[row]._after_condition(self, await rest)
        if after is not None:
            await after

    async def _body_later(self, row, rest, target_row, exit_row, loop):
        """The opcode of `row` once its parked body finishes: `_leave_body` to `target_row` (THEN),
        or a loop's to `exit_row` (EXIT) when the body broke out."""
        if not loop:
            await rest
            self._leave_body(row, target_row, THEN, None)
            return
        try:
            await rest
        except BreakLoop:
            self._leave_body(row, exit_row, EXIT, True)
            return
        self._leave_body(row, target_row, THEN, False)

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

    def _native_branch(self, row):
        rows = self._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
        at = ROW_WIDTH * row
        cond = rows[at + FIRST]
        body = rows[at + SECOND]
        false_row = rows[at + EXIT]
        then_row = rows[at + THEN]
        cond_plan, body_plan = self._callee_plan(cond), self._callee_plan(body)
        if cond_plan is None or body_plan is None:
            return NATIVE_NOT_READY
        try:
            taken = self._call_resuming(cond, cond_plan, row, FIRST_RESUME, False)
        except Parked as parked:
            return self._finish_with(self._cond_later(row, parked.rest))
        if not self._still_at(row):
            return self._finish_with(self._prog_v.nodes[row]._after_condition(self, taken))
        if not taken:
            self._jump_at(false_row, row, EXIT)
            return NATIVE_DONE
        try:
            self._call_resuming(body, body_plan, row, SECOND_RESUME, True)
        except Parked as parked:
            return self._finish_with(self._body_later(row, parked.rest, then_row, -1, False))
        self._leave_body(row, then_row, THEN, None)
        return NATIVE_DONE

    def _native_else(self, row):
        rows = self._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
        at = ROW_WIDTH * row
        body = rows[at + FIRST]
        then_row = rows[at + THEN]
        body_plan = self._callee_plan(body)
        if body_plan is None:
            return NATIVE_NOT_READY
        try:
            self._call_resuming(body, body_plan, row, FIRST_RESUME, False)
        except Parked as parked:
            return self._finish_with(self._body_later(row, parked.rest, then_row, -1, False))
        self._leave_body(row, then_row, THEN, None)
        return NATIVE_DONE

    def _leave_body(self, row, target_row, k, broke):
        """After a body the opcode of `row` called, go where the node's own function would: on to
        `target_row` (field `k`) unless the body moved the pointer without a jump mark; then the node's
        `_after_body` finishes from there (a loop's is told whether the body broke out: `broke`, None
        for a branch)."""
        if not self._left_unmarked(row):
            self._jump_at(target_row, row, k)
        elif broke is None:
            self._prog_v.nodes[row]._after_body(self)
        else:
            self._prog_v.nodes[row]._after_body(self, broke)

    def _native_while(self, row):
        rows = self._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
        at = ROW_WIDTH * row
        cond = rows[at + FIRST]
        body = rows[at + SECOND]
        exit_row = rows[at + EXIT]
        checkup_row = rows[at + THEN]
        cond_plan, body_plan = self._callee_plan(cond), self._callee_plan(body)
        if cond_plan is None or body_plan is None:
            return NATIVE_NOT_READY
        try:
            truthy = self._call_resuming(cond, cond_plan, row, FIRST_RESUME, True)
        except Parked as parked:
            return self._finish_with(self._cond_later(row, parked.rest))
        if not self._still_at(row):
            return self._finish_with(self._prog_v.nodes[row]._after_condition(self, truthy))
        if not truthy:
            self._jump_at(exit_row, row, EXIT)
            return NATIVE_DONE
        try:
            self._call_resuming(body, body_plan, row, SECOND_RESUME, True)
        except BreakLoop:
            self._leave_body(row, exit_row, EXIT, True)
            return NATIVE_DONE
        except Parked as parked:
            return self._finish_with(self._body_later(row, parked.rest, checkup_row, exit_row, True))
        self._leave_body(row, checkup_row, THEN, False)
        return NATIVE_DONE

    def _native_do(self, row):
        rows = self._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
        at = ROW_WIDTH * row
        body = rows[at + FIRST]
        exit_row = rows[at + EXIT]
        check_row = rows[at + THEN]
        body_plan = self._callee_plan(body)
        if body_plan is None:
            return NATIVE_NOT_READY
        try:
            self._call_resuming(body, body_plan, row, FIRST_RESUME, True)
        except BreakLoop:
            self._leave_body(row, exit_row, EXIT, True)
            return NATIVE_DONE
        except Parked as parked:
            return self._finish_with(self._body_later(row, parked.rest, check_row, exit_row, True))
        self._leave_body(row, check_row, THEN, False)
        return NATIVE_DONE

    def _native_do_check(self, row):
        rows = self._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
        at = ROW_WIDTH * row
        cond = rows[at + FIRST]
        exit_row = rows[at + EXIT]
        back_row = rows[at + THEN]
        cond_plan = self._callee_plan(cond)
        if cond_plan is None:
            return NATIVE_NOT_READY
        try:
            again = self._call_resuming(cond, cond_plan, row, FIRST_RESUME, True)
        except Parked as parked:
            return self._finish_with(self._cond_later(row, parked.rest))
        if not self._still_at(row):
            return self._finish_with(self._prog_v.nodes[row]._after_condition(self, again))
        if again:
            self._jump_at(back_row, row, THEN)
        else:
            self._jump_at(exit_row, row, EXIT)
        return NATIVE_DONE

    def _native_if(self, row):
        rows = self._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
        at = ROW_WIDTH * row
        cond = rows[at + FIRST]
        body = rows[at + SECOND]
        false_row = rows[at + EXIT]
        then_row = rows[at + THEN]
        cond_plan = self._callee_plan(cond)
        body_plan = self._callee_plan(body) if body >= 0 else None
        if cond_plan is None or (body >= 0 and body_plan is None):
            return NATIVE_NOT_READY
        try:
            taken = self._call_resuming(cond, cond_plan, row, FIRST_RESUME, True)
        except Parked as parked:
            return self._finish_with(self._cond_later(row, parked.rest))
        if not self._still_at(row):
            return self._finish_with(self._prog_v.nodes[row]._after_condition(self, taken))
        if not taken:
            self._jump_at(false_row, row, EXIT)
            return NATIVE_DONE
        if body < 0:  # a compose body is entered by a jump
            self._jump_at(then_row, row, THEN)
            return NATIVE_DONE
        try:
            self._call_resuming(body, body_plan, row, SECOND_RESUME, True)
        except Parked as parked:
            return self._finish_with(self._body_later(row, parked.rest, then_row, -1, False))
        self._leave_body(row, then_row, THEN, None)
        return NATIVE_DONE

    def _native_invoke(self, row):
        target = self._prog_v.crows[ROW_WIDTH * row + FIRST]
        plan = self._callee_plan(target)
        if plan is None:
            return NATIVE_NOT_READY
        try:
            self._subcall_inline(target, plan, None)
        except Parked as parked:
            return self._finish_with(parked.rest)
        return NATIVE_DONE

    def _native_loop_head(self, row):
        rows = self._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
        at = ROW_WIDTH * row
        cond = rows[at + FIRST]
        head = rows[at + SECOND]
        exit_row = rows[at + EXIT]
        body_row = rows[at + THEN]
        cond_plan = self._callee_plan(cond)
        if cond_plan is None:
            return NATIVE_NOT_READY
        try:
            truthy = self._call_resuming(cond, cond_plan, row, FIRST_RESUME, True)
        except Parked as parked:
            return self._finish_with(self._cond_later(row, parked.rest))
        if not self._still_at(row):
            return self._finish_with(self._prog_v.nodes[row]._after_condition(self, truthy))
        if not truthy:
            self._jump_at(exit_row, row, EXIT)
        else:
            self._push_ret(self._pointer_at(head))
            self._jump_at(body_row, row, THEN)
        return NATIVE_DONE

    def _native_loop_control(self, operands):
        """BREAK_LOOP / CONTINUE: pop the loop's entry and jump to a slot beside it."""
        entry = self._pop_ret()
        slot, targets = operands
        bound = entry if type(entry) is PointerVector else None
        if bound is not None and bound._items is None and bound._prog is self._prog_v:
            target = targets.get(bound._row)
            if target is None:
                addr = [*bound._list()[:-1], slot]
                target = targets[bound._row] = (*self._prog_v.locate(addr), addr)
            self._native_jump(target)
        elif self._c_mark_jump():
            self._move_to([*entry.base_addr[:-1], slot])

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

    async def _near_call(self, row, part, exc_kwargs):
        """A sub-call of the part `(slot, row)` of the Try block at `row`, at its own slot (as
        `TryNode`'s `call_part`): inline when the part can run now."""
        slot, target = part
        plan = self._near_plan(target, exc_kwargs is not None)
        if plan is not None:
            return self._run_part(target, plan, exc_kwargs)
        if not self._still_at(row):
            return await self._call_part_away(row, slot, exc_kwargs)
        return await self.call_near(slot, **(exc_kwargs or {}))

    def _run_part(self, target, plan, extra):
        """`_subcall_inline` of the Try part at `target`; a jump an earlier part marked stays
        marked (the frame restores its target) unless this part moves the pointer itself."""
        if not self._flag_bits & C_FLAG_JMP:
            return self._subcall_inline(target, plan, extra)
        self._flag_bits &= ~C_FLAG_JMP
        before = list(self._pointer_v._list())
        try:
            return self._subcall_inline(target, plan, extra)
        finally:
            if not self._flag_bits & C_FLAG_JMP and self._pointer_v._list() == before:
                self._c_mark_jump()

    async def _call_part_away(self, row, slot, exc_kwargs):
        """The part at `slot` of the Try block at `row` once an earlier part moved the pointer: a
        sub-call at the part's own slot; a jump marked before stays marked (the call restores its
        target) unless this part moves the pointer itself."""
        marked = self._flag_bits & C_FLAG_JMP
        self._flag_bits &= ~C_FLAG_JMP
        before = list(self._pointer_v._list()) if marked else None
        home = list(self._prog_v.addrs[row])
        home[-1] = slot
        try:
            return await self.call_sub(home, **(exc_kwargs or {}))
        finally:
            if marked and not self._flag_bits & C_FLAG_JMP and self._pointer_v._list() == before:
                self._c_mark_jump()

    def _left_block(self, row):
        """True when a part of the Try block at `row` moved the pointer: a jump is marked, or the
        pointer designates another address (`TryNode`'s `_moved`)."""
        if self._flag_bits & C_FLAG_JMP:
            return True
        ptr = self._pointer_v
        if ptr._items is None:
            return ptr._row != row if ptr._prog is self._prog_v else ptr._bound_addr() != self._prog_v.addrs[row]
        return tuple(ptr._items) != self._prog_v.addrs[row]

    def _catch_for(self, catches, exc):
        """The part of the CATCH of `catches` that handles `exc`, or None (`TryNode._handler_for`)."""
        if _is_instance(exc, self._exc_ignored_s) and not _unsafe.__flags__.DISABLE_EXC_IGNORED:
            return None
        for exc_type, part in catches:
            if _is_instance(exc, exc_type):
                return part
        return None

    def _native_try_now(self, row, operands, planned):
        """A Try block with CATCH handlers only, run without a coroutine: None when done, an
        awaitable that finishes it (the handler cannot run inline now), or NOT_NOW (nothing done).
        `planned`: a sub-call `_try_ready` found ready when the calling opcode started; then always
        None (its parts run with their plans even if a suspend request came since, as every
        opcode runs the callees it planned)."""
        escape_slot = operands[FIRST_RESUME]
        _, on_success, on_exit, catches = operands[EXTRA]
        rows = self._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
        at = ROW_WIDTH * row
        body_row = rows[at + FIRST]
        escape_row = rows[at + THEN]
        if on_success is not None or on_exit is not None:
            return NOT_NOW
        plan = self._near_plan(body_row, False) if not planned else self._planned_plan(body_row)
        if plan is None:
            return self._native_try(row, None, self._outer_interpreting) if planned else NOT_NOW
        as_subcall = self._outer_interpreting
        try:
            if cython.compiled and not self._prog_v.cbits[body_row] & C_ROW_PRECHECK:
                # the same steps, with the body's exception caught where it was raised (a C `except`
                # would add a traceback entry per C function it passed) and the handler run while
                # it is the exception being handled
                raised = self._call_body_catching(body_row, plan)
                if raised is not None:
                    handler = self._catch_for(catches, raised)
                    if handler is None:
                        raise raised
                    plan = self._exc_ready_plan(handler[1]) if planned else self._near_plan(handler[1], True)
                    if plan is None:
                        return self._native_try(row, raised, as_subcall)
                    self._run_handler(handler[1], plan, raised)
            else:
                try:
                    self._subcall_inline(body_row, plan, None)
                except BaseException as exc_val:
                    handler = self._catch_for(catches, exc_val)
                    if handler is None:
                        raise
                    plan = self._exc_ready_plan(handler[1]) if planned else self._near_plan(handler[1], True)
                    if plan is None:
                        return self._native_try(row, exc_val, as_subcall)
                    # a handler that reads no keyword needs no exception keywords (they are only ever keywords)
                    self._run_part(handler[1], plan, _exc_keywords(exc_val) if plan.keyed else None)
        except InterruptKeepContext:
            if not self._left_block(row):
                _provided("resume_near")(self, escape_slot)
            raise
        if not as_subcall and not self._left_block(row):
            self._jump_at(escape_row, row, THEN)
        return None

    def _call_body_catching(self, target, plan):
        """`_subcall_inline` of a Try body (the compiled core): None, or the exception the body
        raised, as a Python `except` in the Try's caller would see it. A failure of the frame itself
        (the body emptied the return stack) is what the block catches then, the body's exception as
        its context."""
        values = plan_values(plan.cidx, plan.n, plan.srcs, self._pool_args, self._pool_kwargs, None, None)
        func = self._prog_v.funcs[target]
        self._enter_frame(target)
        if plan.names is None:
            raised = call_catching(func, values, None)
        else:
            raised = call_catching(func, (), dict(zip(plan.names, values)))
        try:
            self._leave_frame()
        except BaseException as exc:
            if raised is not None and exc.__context__ is None:
                exc.__context__ = raised
            return exc
        return raised

    def _run_handler(self, target, plan, raised):
        """A CATCH handler run inline while `raised` is the exception being handled (the compiled
        build; the pure build runs it inside its `except` block)."""
        exc_kwargs = _exc_keywords(raised) if plan.keyed else None
        saved = start_handling(raised)
        try:
            self._run_part(target, plan, exc_kwargs)
        finally:
            end_handling(saved)

    async def _native_try(self, row, raised, as_subcall):
        """Run the Try block of `row`; with `raised`, the body already ran and raised it."""
        if row < 0 or row >= self._prog_v.nrows:
            _row_outside(self._prog_v, row)
        operands = self._prog_v.operands[row]
        escape_slot = operands[FIRST_RESUME]
        body, on_success, on_exit, catches = operands[EXTRA]
        try:
            try:
                if raised is None:
                    await self._near_call(row, body, None)
                else:
                    raise raised
            except BaseException as exc_val:
                handler = self._catch_for(catches, exc_val)
                if handler is None:
                    raise
                await self._near_call(row, handler, _exc_keywords(exc_val))
            else:
                if on_success is not None:
                    await self._near_call(row, on_success, None)
            finally:
                if on_exit is not None:
                    await self._near_call(row, on_exit, None)
        except InterruptKeepContext:
            if not self._left_block(row):
                _provided("resume_near")(self, escape_slot)
            raise
        if not as_subcall and not self._left_block(row):
            self._jump_at(self._prog_v.crows[ROW_WIDTH * row + THEN], row, THEN)

    def _native_callsub(self, row):
        """CALL: push the return address (compiled to a row when it is one) and jump."""
        rows = self._prog_v.crows  # this row's dense row: crows[at + FIRST .. at + THEN]
        at = ROW_WIDTH * row
        return_row = rows[at + SECOND]
        target_row = rows[at + THEN]
        if return_row >= 0:
            self._push_ret(self._pointer_at(return_row))
        else:
            self._push_ret(PointerVector(list(self._prog_v.nodes[row]._frm_addr)))
        self._jump_at(target_row, row, THEN)

    def _native_ret(self):
        saved = self._pop_ret()
        self._flag_bits &= ~C_FLAG_HLT
        self._c_rebase_to(saved if isinstance(saved, PointerVector) else saved.base_addr)
        self._recycle(saved)

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
            if self._signal_v.pending:
                await self._gate(PC_CHECKPOINT)
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
                                    outcome = self._native_try_now(row, prog.operands[row], False)
                                    if outcome is NOT_NOW:
                                        await self._native_try(row, None, self._outer_interpreting)
                                    elif outcome is not None:
                                        await outcome
                                else:
                                    status = self._run_native_sync(row, op)
                                    if status == NATIVE_NOT_READY:
                                        await self._run_not_ready(row)
                                    elif status == NATIVE_AWAIT:
                                        rest, self._native_rest = self._native_rest, None
                                        await rest
                            else:
                                plan = self._cached_plan(row)
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
                                        outcome = self._invoke_slow_now(prog.nodes[row], plan)
                                        if outcome is NOT_NOW:
                                            await self._invoke_slow(prog.nodes[row], plan)
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
