"""The compiled core of amrita-sense-turbo.

Same classes, algorithms and behaviour as the pure-Python twin
`amrita_sense/_core_py.py` (the readable reference); a fix in one needs the
matching fix in the other. See `_sense_core.pxd` for the typed layout.
Every C-level method is `@cython.final`: called directly, so the C compiler
can inline it, instead of through the method table.

The Cython directives are set by `setup.py` (`_core_build_options`): the release build indexes
without bounds checks and compiles the `assert`s out; the debug build (AMRITA_SENSE_DEBUG_BUILD=1)
checks every index and None access and keeps the assertions. `DEBUG_BUILD` says which one loaded.
"""

import asyncio
import contextvars
import functools
import importlib
import threading
from collections.abc import Mapping

import sniffio

from amrita_sense import _opcodes, _portable

cimport cython
from time import monotonic

from cpython.dict cimport PyDict_GetItemWithError
from cpython.list cimport PyList_GET_ITEM, PyList_SET_ITEM
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyTypeObject
from cpython.ref cimport PyObject, Py_DECREF, Py_INCREF, Py_REFCNT, Py_XDECREF
from cpython.weakref cimport PyWeakref_GetObject, PyWeakref_NewRef


cdef extern from *:
    bint unlikely(bint)  # Cython's branch hint macro: the slow paths stay out of the hot code


cdef extern from "Python.h":
    ctypedef struct PyListObject:
        Py_ssize_t allocated
    void Py_SET_SIZE(object, Py_ssize_t)
    PyTypeObject *Py_TYPE(object)
    PyObject *PyObject_Call(object callable_object, object args, PyObject *kwargs)
    object PyObject_Vectorcall(object callable_object, PyObject **args, size_t nargsf, PyObject *kwnames)
    bint PyType_CheckExact(object)
    bint PyType_IsSubtype(type a, type b)
    void PyErr_Fetch(PyObject **ptype, PyObject **pvalue, PyObject **ptraceback)
    void PyErr_NormalizeException(PyObject **ptype, PyObject **pvalue, PyObject **ptraceback)
    int PyException_SetTraceback(PyObject *exc, PyObject *tb)
    PyObject *PyException_GetTraceback(PyObject *exc)
    void PyErr_GetExcInfo(PyObject **ptype, PyObject **pvalue, PyObject **ptraceback)
    void PyErr_SetExcInfo(PyObject *ptype, PyObject *pvalue, PyObject *ptraceback)


cdef extern from *:
    """
    #ifndef AMRITA_SENSE_DEBUG
    #define AMRITA_SENSE_DEBUG 0
    #endif
    """
    int AMRITA_SENSE_DEBUG

IMPLEMENTATION = "cython"
DEBUG_BUILD = bool(AMRITA_SENSE_DEBUG)

cdef enum:
    C_FLAG_IF = 1
    C_FLAG_HLT = 2
    C_FLAG_JMP = 4
    C_ROW_CORO = 1
    C_ROW_THREAD = 2
    C_ROW_PRECHECK = 4
    C_ROW_EMPTY = 8
    C_NATIVE_DONE = 0
    C_NATIVE_NOT_READY = 1  # the opcode did nothing: run the node's own function
    C_NATIVE_AWAIT = 2  # the node's continuation finishes the opcode: await `_native_rest`
    C_STEP_RAN = 0
    C_STEP_SKIPPED = 1
    C_STEP_END = 2
    CHECK_CLOCK_EVERY = 64
    TABLES_PER_PROGRAM = 64
    MAX_STACK_ARGS = 8

# The opcodes and the operand record's fields, from the one table (`amrita_sense/_opcodes.py`),
# as C ints; a row's operands are `Program.operands[row]`, its dense row `crows[C_ROW_WIDTH * row:]`.
cdef int C_OP_CALL = _opcodes.OP_CALL
cdef int C_OP_NOP = _opcodes.OP_NOP
cdef int C_OP_JUMP = _opcodes.OP_JUMP
cdef int C_OP_BRANCH = _opcodes.OP_BRANCH
cdef int C_OP_ELSE = _opcodes.OP_ELSE
cdef int C_OP_WHILE = _opcodes.OP_WHILE
cdef int C_OP_CALLSUB = _opcodes.OP_CALLSUB
cdef int C_OP_RET = _opcodes.OP_RET
cdef int C_OP_TRY = _opcodes.OP_TRY
cdef int C_OP_DO = _opcodes.OP_DO
cdef int C_OP_DO_CHECK = _opcodes.OP_DO_CHECK
cdef int C_OP_NATIVE_IF = _opcodes.OP_NATIVE_IF
cdef int C_OP_LOOP_HEAD = _opcodes.OP_LOOP_HEAD
cdef int C_OP_LOOP_CONTROL = _opcodes.OP_LOOP_CONTROL
cdef int C_OP_INVOKE = _opcodes.OP_INVOKE
cdef int C_FIRST = _opcodes.FIRST
cdef int C_SECOND = _opcodes.SECOND
cdef int C_EXIT = _opcodes.EXIT
cdef int C_THEN = _opcodes.THEN
cdef int C_FIRST_RESUME = _opcodes.FIRST_RESUME
cdef int C_SECOND_RESUME = _opcodes.SECOND_RESUME
cdef int C_EXTRA = _opcodes.EXTRA
cdef Py_ssize_t C_ROW_WIDTH = _opcodes.ROW_WIDTH

JUMP_CALLEE = ("jump",)  # the plan `_callee_plan` gives a called jump row: run its jump, not its function
NOT_NOW = ("not now",)  # `_invoke_slow_now` did nothing: call `_invoke_slow`

FLAG_IF = C_FLAG_IF
FLAG_HLT = C_FLAG_HLT
FLAG_JMP = C_FLAG_JMP
ROW_CORO = C_ROW_CORO
ROW_THREAD = C_ROW_THREAD
ROW_PRECHECK = C_ROW_PRECHECK
ROW_EMPTY = C_ROW_EMPTY
STEP_RAN = C_STEP_RAN
STEP_SKIPPED = C_STEP_SKIPPED
STEP_END = C_STEP_END

PC_CHECKPOINT = "WorkflowInterpreter::each_node"


cdef class SuspendFlag:
    """A cell that says whether a suspend request is outstanding on a stream."""

    def __init__(self):
        self.pending = False


NEVER_PENDING = SuspendFlag()
ALWAYS_PENDING = SuspendFlag()
ALWAYS_PENDING.pending = True


cdef enum:
    C_KEYWORD = -1  # a CallPlan argument read from the keyword pool (or the call's extra keywords)
    C_RESULT = -2  # a CallPlan argument that is the interpreter's `use_cache` result of that name


cdef class CallPlan:
    """A shared injection plan as the core runs it (see the twin): `srcs` has one entry per
    argument, an int (a position in the positional pool), a str (a keyword name) or a 1-tuple
    `(name,)` (the calling interpreter's `use_cache` result for the parameter `name`)."""

    def __init__(self, tuple srcs, names, bint slow, entry):
        cdef Py_ssize_t i
        self.srcs = srcs
        self.names = names
        self.slow = slow
        self.entry = entry
        self.cached = self.keyed = False
        self.n = 0
        PyMem_Free(self.cidx)  # a second __init__ replaces the first one's indices
        self.cidx = NULL
        self.n = len(srcs)
        self.cidx = <Py_ssize_t *> PyMem_Malloc((self.n + 1) * sizeof(Py_ssize_t))
        if self.cidx == NULL:
            raise MemoryError()
        for i in range(self.n):
            src = srcs[i]
            if type(src) is int and src >= 0:
                self.cidx[i] = src
            elif type(src) is tuple and len(<tuple> src) == 1:
                self.cidx[i] = C_RESULT
                self.cached = True
            else:
                self.cidx[i] = C_KEYWORD
                self.keyed = True

    def __dealloc__(self):
        PyMem_Free(self.cidx)


NO_ARGUMENTS = CallPlan((), None, False, None)  # a function without parameters: the same for every pool
UNSHARED = CallPlan((), None, True, None)  # a table's mark: the Python layer resolves this node per interpreter


cdef class Program:
    """The flat node table of one rendered graph (see the twin for the full story)."""

    def __init__(self, graph, list nodes, list funcs, list bits, list static_plans,
                 list ops, list operands, list rows, list landings, list addrs, row_of, dict seg_row):
        cdef Py_ssize_t i, k, nrows = len(nodes)
        if self.cbits != NULL:  # interpreters index the tables they were made with
            raise TypeError("a Program is initialised once")
        for table in (funcs, bits, static_plans, ops, operands, rows, landings, addrs):
            if len(table) != nrows:
                raise ValueError(f"Program: every per-row table needs {nrows} rows, one has {len(table)}")
        for plan in static_plans:
            if plan is not None and type(plan) is not CallPlan:
                raise TypeError(f"Program: a static plan is a CallPlan or None, not {type(plan).__name__}")
        if row_of is not None:
            row_of = _row_map(row_of, nrows)
        self.graph = graph
        self.nodes = tuple(nodes)
        self.funcs = tuple(funcs)
        self.bits = tuple(bits)
        self.static_plans = tuple(static_plans)
        self.ops = tuple(ops)
        self.operands = tuple(operands)
        self.landings = tuple(landings)
        self.addrs = tuple(addrs)
        self.row_of = row_of
        self.seg_row = _row_map(seg_row, nrows)
        self.successor = None
        self.tables = {}
        self._alloc_rows(nrows)
        # Row layout: the dense row of row i is crows[C_ROW_WIDTH * i:][:C_ROW_WIDTH], the fields
        # FIRST, SECOND, EXIT, THEN (`_opcodes.dense_row`, built by node.table). Each entry is a row
        # of this table or -1 (`_row_index` checks it here), so the `_native_*` opcodes index the
        # tables with it unchecked once they tested for -1.
        for i in range(nrows):
            self.cbits[i] = bits[i]
            self.cops[i] = ops[i]
            for k in range(C_ROW_WIDTH):
                self.crows[C_ROW_WIDTH * i + k] = _row_index(rows[i][k], nrows, -1)
        self.nrows = nrows

    @cython.final
    cdef int _alloc_rows(self, Py_ssize_t nrows) except -1:
        """The C arrays for `nrows` rows."""
        self.nrows = 0
        self.cbits = <int *> PyMem_Malloc((nrows + 1) * sizeof(int))
        self.cops = <int *> PyMem_Malloc((nrows + 1) * sizeof(int))
        self.crows = <int *> PyMem_Malloc((C_ROW_WIDTH * nrows + 1) * sizeof(int))
        if self.cbits == NULL or self.cops == NULL or self.crows == NULL:
            raise MemoryError()
        return 0

    @property
    def successor(self):
        """The program this one was recompiled into (a hot-swapped slot), or None."""
        return self.successor

    @successor.setter
    def successor(self, value):
        cdef Program prog
        if value is not None and not isinstance(value, Program):
            raise TypeError(f"Program.successor must be a Program or None, not {type(value).__name__}")
        prog = value
        while prog is not None:  # followed to its end by every interpreter of this program
            if prog is self:
                raise ValueError("Program.successor would make a cycle")
            prog = prog.successor
        self.successor = value

    @successor.deleter
    def successor(self):
        _refuse_delete("successor")

    def __dealloc__(self):
        PyMem_Free(self.cbits)
        PyMem_Free(self.cops)
        PyMem_Free(self.crows)

    @cython.final
    cdef Py_ssize_t _locate(self, list items, bint *exact) except -2:
        key = tuple(items)
        if self.row_of is None:
            self.row_of = {addr: i for i, addr in enumerate(self.addrs)}
        row = self.row_of.get(key)
        if row is not None:
            exact[0] = True
            return row
        exact[0] = False
        row = self.seg_row.get(key)
        if row is not None:
            return row
        return -1

    @cython.final
    cdef list _table_for(self, object shape):
        table = self.tables.get(shape)
        if table is None:
            if len(self.tables) >= TABLES_PER_PROGRAM:
                self.tables.clear()
            table = self.tables[shape] = [None] * self.nrows
        return <list> table

    def table_for(self, shape):
        """A copy of the row table of plans for pools of `shape` (the core's own is not writable from
        Python: the loop runs its plans unchecked)."""
        return tuple(self._table_for(shape))

    def locate(self, items):
        """Row for an address list: `(row, exact)`, or `(-1, False)` if none."""
        cdef bint exact = False
        cdef Py_ssize_t row = self._locate(list(items), &exact)
        return row, exact


cdef Py_ssize_t _row_index(object value, Py_ssize_t nrows, Py_ssize_t lowest) except -2:
    """`value` as a row of a table of `nrows` rows (`lowest` is -1 where "no row" is allowed)."""
    cdef Py_ssize_t row = value
    if row < lowest or row >= nrows:
        raise ValueError(f"Program: row {row} is outside the table of {nrows} rows")
    return row


cdef dict _row_map(dict rows, Py_ssize_t nrows):
    """A copy of an address-to-row map whose rows all exist."""
    for row in rows.values():
        _row_index(row, nrows, 0)
    return dict(rows)


# ----- addresses: what a PointerVector may hold ------------------------------------------------

_EMPTY_POINTER = ("{}() on an empty pointer: after a finished run, reset(), pop() or clear() "
                  "there is no current slot to move")


cdef int _check_index(object value, str what) except -1:
    if not isinstance(value, int):
        raise TypeError(f"{what} needs an int, not {type(value).__name__}")
    return 0


cdef list _checked_items(list items, str what):
    for item in items:
        if not isinstance(item, int):
            raise TypeError(f"{what}: an address holds ints, not {type(item).__name__}")
    return items


cpdef list address_list(object value, str what):
    """`value` (a PointerVector, or a list or tuple of ints) as a new list; `TypeError` naming `what`
    otherwise."""
    if isinstance(value, PointerVector):
        return _checked_items(list((<PointerVector> value)._list()), what)
    if isinstance(value, (list, tuple)):
        return _checked_items(list(value), what)
    raise TypeError(
        f"{what} needs an address (a list or tuple of ints, or a PointerVector), not {type(value).__name__}"
    )


# Thread safety, the contract of 1.1.3: each method of a PointerVector or a Stack is atomic with
# respect to other threads (a sequence of calls is not). Here the GIL gives it without a lock: each
# method is one C call that runs no Python code between its check and its write (the values are
# checked ints first). The twin holds one module lock for the same.
@cython.freelist(64)
cdef class PointerVector:
    """The program counter: a list of indices, a lazy view over a table row while bound.

    Every write is checked (a list of ints; `offset`/`near_to` need a current slot), so the core's
    unchecked list operations only ever see a list, and the last index of a non-empty one."""

    def __init__(self, base=None):
        if base is None:
            self._items = [0]
        elif isinstance(base, list):  # kept, not copied, as in 1.1.3
            self._items = _checked_items(<list> base, "PointerVector(base)") or [0]
        else:
            self._items = address_list(base, "PointerVector(base)") or [0]
        self._row = -1
        self._prog = None

    @staticmethod
    def _at_row(prog, row):
        """A vector bound to `row` of `prog`, as the loop leaves the pointer (restoring a saved one)."""
        if not isinstance(prog, Program):
            raise TypeError(f"PointerVector._at_row(prog) needs a Program, not {type(prog).__name__}")
        _check_index(row, "PointerVector._at_row(row)")
        if not 0 <= row < (<Program> prog).nrows:
            raise IndexError(f"row {row} is outside the node table of {(<Program> prog).nrows} rows")
        return _bound_pointer(prog, row)

    @cython.final
    cdef list _list(self):
        # The view is materialised here, at the first read or write from Python (base_addr,
        # indexing, a mutator); the loop itself only rebinds (`_set_row`) and compares rows, so a
        # run nobody inspects builds no list. Once built, `_items` is the address: `_row` / `_prog`
        # are kept only for `_still_at`-style checks.
        if self._items is None:
            self._items = list(self._bound_addr())
        return <list> self._items

    @cython.final
    cdef tuple _bound_addr(self):
        if self._prog is None:  # made by __new__ without __init__
            raise TypeError("PointerVector was created without __init__ and holds no address")
        return <tuple> (<Program> self._prog).addrs[self._row]

    @cython.final
    cdef void _set_row(self, Program prog, Py_ssize_t row):
        assert prog is not None and 0 <= row < prog.nrows, "a vector bound to a row outside its table"
        self._prog = prog
        self._row = row
        self._items = None

    @property
    def base_addr(self):
        return self._list()

    @base_addr.setter
    def base_addr(self, value):
        if isinstance(value, list):
            self._items = _checked_items(<list> value, "PointerVector.base_addr")
        else:
            self._items = address_list(value, "PointerVector.base_addr")

    @base_addr.deleter
    def base_addr(self):
        _refuse_delete("base_addr")

    def offset(self, offset):
        _check_index(offset, "PointerVector.offset(offset)")
        cdef list items = self._list()
        if not items:
            raise IndexError(_EMPTY_POINTER.format("PointerVector.offset"))
        items[len(items) - 1] += offset
        return self

    def offset_far(self, offset):
        cdef list items = self._list()
        items[:] = _offset_far(items, address_list(offset, "PointerVector.offset_far(offset)"))
        return self

    def near_to(self, short_offset):
        _check_index(short_offset, "PointerVector.near_to(short_offset)")
        cdef list items = self._list()
        if not items:
            raise IndexError(_EMPTY_POINTER.format("PointerVector.near_to"))
        items[len(items) - 1] = short_offset
        return self

    def far_to(self, addr):
        self._list()[:] = address_list(addr, "PointerVector.far_to(addr)")
        return self

    def pop(self):
        return self._list().pop()

    def append(self, node_ip):
        _check_index(node_ip, "PointerVector.append(node_ip)")
        self._list().append(node_ip)

    def clear(self):
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
            return NotImplemented
        return self.copy().offset_far(other.base_addr)

    def __sub__(self, other):
        if not isinstance(other, PointerVector):
            return NotImplemented
        return self.copy().offset_far([-i for i in other.base_addr])

    def __bool__(self):
        return self._items is None or bool(self._items)

    def __eq__(self, value):
        if not isinstance(value, type(self)):
            return False
        return self._list() == (<PointerVector> value)._list()

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
        self._list()[index] = value

    def __iter__(self):
        return iter(list(self._list()))

    def __len__(self):
        if self._items is None:
            return len(self._bound_addr())
        return len(self._items)

    def __delitem__(self, key):
        raise ValueError("Cannot delete items from PointerVector")


cdef PointerVector _bound_pointer(Program prog, Py_ssize_t row):
    assert prog is not None and 0 <= row < prog.nrows, "a vector bound to a row outside its table"
    cdef PointerVector vec = PointerVector.__new__(PointerVector)
    vec._items = None
    vec._row = row
    vec._prog = prog
    return vec


cdef list _offset_far(list base, list offset):
    """Element-wise sum after zero-padding; cut at the first negative coordinate."""
    cdef Py_ssize_t width = max(len(base), len(offset))
    base = base + [0] * (width - len(base))
    offset = offset + [0] * (width - len(offset))
    cdef list result = []
    for a, b in zip(base, offset):
        if a + b < 0:
            break
        result.append(a + b)
    return result


cdef list _beside(list items, object slot):
    """The address of `slot` in the segment of `items`."""
    cdef list result = items[:len(items) - 1]
    result.append(slot)
    return result


cdef class Stack:
    """A bounded LIFO stack; `push` past the limit raises `OverflowError`."""

    def __init__(self, ovf=1024):
        _check_index(ovf, "Stack(ovf)")
        self.stack = []
        self.ovf = ovf

    @property
    def stack(self):
        """The items, bottom first (a list)."""
        return self.stack

    @stack.setter
    def stack(self, value):
        if not isinstance(value, list):
            raise TypeError(f"Stack.stack must be a list, not {type(value).__name__}")
        self.stack = value

    @stack.deleter
    def stack(self):
        _refuse_delete("stack")

    @property
    def ovf(self):
        """The capacity: `push` on a stack this long raises `OverflowError`."""
        return self.ovf

    @ovf.setter
    def ovf(self, value):
        _check_index(value, "Stack.ovf")
        self.ovf = value

    @ovf.deleter
    def ovf(self):
        _refuse_delete("ovf")

    @classmethod
    def __class_getitem__(cls, item):
        return cls

    def __len__(self):
        return len(self.stack)

    def __repr__(self):
        return repr(self.stack)

    def __str__(self):
        return str(self.stack)

    def __bool__(self):
        return len(self.stack) > 0

    def push(self, item):
        self._push(item)

    def pop(self):
        return self._pop()

    @cython.final
    cdef int _push(self, object item) except -1:
        cdef list items = self.stack
        cdef Py_ssize_t size = len(items)
        if size >= self.ovf:
            raise OverflowError("Stack overflow")
        if (<PyListObject *> items).allocated > size:
            # room left: store in place, so a push/pop pair around a sub-call never reallocates
            Py_INCREF(item)
            PyList_SET_ITEM(items, size, item)
            Py_SET_SIZE(items, size + 1)
        else:
            items.append(item)
        return 0

    @cython.final
    cdef object _pop(self):
        cdef list items = self.stack
        cdef Py_ssize_t size = len(items)
        if size == 0:
            raise IndexError("Stack is empty")
        item = <object> PyList_GET_ITEM(items, size - 1)
        # keep the capacity (list.pop would shrink an emptied list); the slot's reference is ours now
        Py_SET_SIZE(items, size - 1)
        Py_DECREF(item)
        return item

    def clear(self):
        del self.stack[:]

    def resize(self, size):
        _check_index(size, "Stack.resize(size)")
        self.ovf = size

    def copy(self):
        """A shallow copy, a `Stack` also for a subclass (as 1.1.3 and `list.copy`); `copy.copy` keeps the class."""
        cdef Stack twin = _new_stack()
        twin.ovf = self.ovf
        twin.stack = list(self.stack)
        return twin

    def __reduce__(self):
        return _portable.stack_reduce(self, self.ovf, self.stack)


cdef Stack _new_stack():
    """`Stack()`, without the call protocol."""
    cdef Stack stack = Stack.__new__(Stack)
    stack.stack = []
    stack.ovf = 1024
    return stack


cdef object _current_task():
    """The running task, or None outside a running loop (a RecursionError, a RuntimeError too, is raised)."""
    try:
        return asyncio.current_task()
    except RecursionError:
        raise
    except RuntimeError:
        return None


cdef class InterpretLock:
    """The interpreter lock: FIFO, owned by a task, handed over on release."""

    def __init__(self):
        self._owner = None
        self._waiters = []

    @property
    def owner(self):
        return self._owner

    def locked(self):
        return self._owner is not None

    def async_owned(self):
        return self._owner is not None and self._owner is _current_task()

    @cython.final
    cdef bint _try_take(self, object owner):
        if self._owner is None and not self._waiters:
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
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(entry)
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
            self._waiters.remove(entry)
        except ValueError:
            pass

    def async_release(self):
        self._release()

    def _release_held_by(self, holder):
        """Release the lock if `holder` (a run that has ended) still owns it, that is, its last
        release was cut short; a waiter it had already woken becomes the owner."""
        if holder is None or self._owner is not holder:
            return
        waiters = self._waiters
        if waiters and waiters[0][0].done() and not waiters[0][0].cancelled():
            self._owner = waiters.pop(0)[1]
            return
        self._release()

    @cython.final
    cdef int _release(self) except -1:
        cdef list waiters = self._waiters
        if not waiters:
            self._owner = None
            return 0
        while waiters:
            fut, owner = waiters.pop(0)
            if not fut.done():
                self._owner = owner
                fut.set_result(True)
                return 0
        self._owner = None
        return 0

    acquire = async_acquire
    release = async_release

    async def __aenter__(self):
        await self.async_acquire()
        return self

    async def __aexit__(self, exc_type, exc, tb):
        self.async_release()


cdef InterpretLock _new_lock():
    """`InterpretLock()`, without the call protocol."""
    cdef InterpretLock lock = InterpretLock.__new__(InterpretLock)
    lock._owner = None
    lock._waiters = None  # made by the first waiter
    return lock


cdef PointerVector _start_pointer(Program prog):
    """`[0]`, bound to the first row when that row is the top-level slot 0."""
    if prog.nrows and len(prog.addrs[0]) == 1:
        return _bound_pointer(prog, 0)
    return PointerVector([0])


def same_types(tuple values, tuple types):
    """True when `values` holds exactly one value of each type of `types`, in order."""
    cdef Py_ssize_t i, n = PyTuple_GET_SIZE(values)
    if n != PyTuple_GET_SIZE(types):
        return False
    for i in range(n):
        if <PyObject *> Py_TYPE(<object> PyTuple_GET_ITEM(values, i)) != PyTuple_GET_ITEM(types, i):
            return False
    return True


RUNNING = object()  # `_waiter` of a run whose future nobody asked for yet


class _PinState(threading.local):
    """Per thread: `cell` is `[runs in flight, the sniffio name the outermost one found]`."""

    cell = None


cdef object _pin_state = _PinState()


def pin_async_library(task):
    """Record the running async library in `sniffio.thread_local` for the outermost run of this
    thread (`task`: the current asyncio task, so the answer is sniffio's without asking it)."""
    state = _pin_state
    cell = state.cell
    if cell is None:
        cell = state.cell = [0, None]
    depth = cell[0]
    cell[0] = depth + 1
    if depth == 0:
        tlocal = sniffio.thread_local
        previous = cell[1] = tlocal.name
        if previous is None:
            name = sniffio.current_async_library_cvar.get()
            if name is None and task is not None:
                name = "asyncio"
            if name is None:
                try:
                    name = sniffio.current_async_library()
                except sniffio.AsyncLibraryNotFoundError:
                    pass
            tlocal.name = name


def restore_async_library():
    """Undo `pin_async_library()`: the outermost run of the thread restores the previous name."""
    cell = _pin_state.cell
    if cell[0] > 1:
        cell[0] -= 1
        return
    cell[0] = 0
    sniffio.thread_local.name = cell[1]


cdef dict _exc_keywords(object exc):
    """The keywords a CATCH handler is called with."""
    return {"exc_type": type(exc), "exc_val": exc, "exc_tb": exc.__traceback__}


cdef bint _clashes(object kwargs) except -1:
    if type(kwargs) is dict:
        if not <dict> kwargs:
            return False
        return "exc_type" in <dict> kwargs or "exc_val" in <dict> kwargs or "exc_tb" in <dict> kwargs
    return "exc_type" in kwargs or "exc_val" in kwargs or "exc_tb" in kwargs


cdef object _OBJECT_CLASS = object.__dict__["__class__"]
# The type `_plain_class` was last asked about (a weak reference) and its verdict.
cdef tuple _last_verdict = (None, False)


def _reports_itself(kind):
    """True when instances of `kind` report `kind` as their `__class__` (no override in the MRO)."""
    descriptor = next(klass.__dict__["__class__"] for klass in kind.__mro__ if "__class__" in klass.__dict__)
    return descriptor is _OBJECT_CLASS


cdef bint _plain_class(type kind) except -1:
    """`_reports_itself(kind)`, remembered per class without keeping the class alive."""
    global _last_verdict
    cdef tuple last = _last_verdict
    if last[0] is not None and <object> PyWeakref_GetObject(last[0]) is kind:
        return last[1]
    verdict = _PLAIN_CLASS(kind)
    _last_verdict = (PyWeakref_NewRef(kind, None), verdict)
    return verdict


cdef bint _is_instance(object obj, object spec) except -1:
    """`isinstance(obj, spec)`; when `obj` has a plain `__class__`, plain classes (whose metaclass is
    `type`, so no `__instancecheck__`) are tested the way `isinstance` would, without its lookups."""
    cdef type kind = type(obj)
    if not _plain_class(kind):
        return isinstance(obj, spec)
    if type(spec) is not tuple:
        return PyType_IsSubtype(kind, <type> spec) if PyType_CheckExact(spec) else isinstance(obj, spec)
    for member in <tuple> spec:
        if PyType_CheckExact(member):
            if PyType_IsSubtype(kind, <type> member):
                return True
        elif isinstance(obj, member):
            return True
    return False


cdef object _call_catching(object func, tuple args, object kwargs):
    """Call `func(*args, **kwargs)`; return None, or the exception it raised (its traceback
    attached), caught without adding a traceback entry for this frame, as a Python `except`
    in the caller would see it."""
    cdef PyObject *result
    cdef PyObject *kind = NULL
    cdef PyObject *value = NULL
    cdef PyObject *trace = NULL
    if kwargs is None:
        result = PyObject_Call(func, args, NULL)
    else:
        result = PyObject_Call(func, args, <PyObject *> kwargs)
    if result != NULL:
        Py_DECREF(<object> result)
        return None
    PyErr_Fetch(&kind, &value, &trace)
    PyErr_NormalizeException(&kind, &value, &trace)
    if trace != NULL:
        PyException_SetTraceback(value, trace)
    exc = <object> value
    Py_XDECREF(kind)
    Py_XDECREF(value)
    Py_XDECREF(trace)
    return exc


cdef int _start_handling(object exc, PyObject **saved) except -1:
    """Make `exc` the exception being handled (what `sys.exc_info()` and a bare `raise` see, and
    the `__context__` of anything raised), as inside an `except` block; `saved` keeps the old one."""
    kind = type(exc)
    PyErr_GetExcInfo(&saved[0], &saved[1], &saved[2])
    Py_INCREF(kind)
    Py_INCREF(exc)
    PyErr_SetExcInfo(<PyObject *> kind, <PyObject *> exc, PyException_GetTraceback(<PyObject *> exc))
    return 0


cdef void _end_handling(PyObject **saved):
    PyErr_SetExcInfo(saved[0], saved[1], saved[2])


cdef CallPlan _checked_call_plan(object plan):
    """A plan the Python layer made for a table (`_shared_plan`): a CallPlan, which the loop reads unchecked."""
    if type(plan) is not CallPlan:
        raise TypeError(f"an injection plan is a CallPlan, not {type(plan).__name__}")
    return <CallPlan> plan


cdef int _refuse_delete(str name) except -1:
    raise AttributeError(f"{name} cannot be deleted")


cdef object _checked(object value, type kind, str name, str what):
    """`value` if it is a `kind`, else `TypeError` naming `name`."""
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be {what}, not {type(value).__name__}")
    return value


cdef double _checked_seconds(object value, str name) except? -1.0:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    return value


cdef object _checked_middleware(object value, str name):
    if value is not None and not callable(value):
        raise TypeError(
            f"{name} must be a callable taking a WorkflowInterpreter and returning an awaitable, "
            f"or None, not {type(value).__name__}"
        )
    return value


# ----- checked at the write: what the fields Python can write may hold -----------------------------
# (the same functions in the twin; the pools' checks are also the Python layer's)

cdef dict _LATE = {}


cdef object _late(str spec):
    """The object `module:name` names, imported on first use (those modules import this one)."""
    found = _LATE.get(spec)
    if found is None:
        module, _, name = spec.partition(":")
        found = _LATE[spec] = getattr(importlib.import_module(module), name)
    return found


cdef object _optional(object value, object kind, str name, str what):
    """`value` if it is None or a `kind`, else `TypeError` naming `name`."""
    if value is not None and not isinstance(value, kind):
        raise TypeError(f"{name} must be {what} or None, not {type(value).__name__}")
    return value


def args_pool(value, str name):
    """A positional injection pool: a tuple (a list or another iterable becomes one); `TypeError`
    naming `name` otherwise."""
    if type(value) is tuple:
        return value
    if value is None or isinstance(value, (str, bytes, dict)):
        raise TypeError(f"{name} must be a tuple of values, not {type(value).__name__}")
    try:
        return tuple(value)
    except TypeError:
        raise TypeError(f"{name} must be a tuple of values, not {type(value).__name__}") from None


def kwargs_pool(value, str name):
    """A keyword injection pool: a dict (kept), or another mapping (copied); `TypeError` naming `name`
    otherwise."""
    if type(value) is dict:
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a dict of values by name, not {type(value).__name__}")
    return dict(value)


def exception_types(value, str name):
    """Exception classes that pass through the workflow's handlers (`exception_ignored`), as a tuple."""
    kinds = args_pool(value, name)
    for kind in kinds:
        if not (isinstance(kind, type) and issubclass(kind, BaseException)):
            raise TypeError(f"{name} holds exception classes, not {kind!r}")
    return kinds


def check_stream(stream, str name):
    """`stream` if it can be an interpreter's `object_io` (a SuspendObjectStream, or another gate with
    `_wait_for_continue`), else `TypeError` naming `name`."""
    if not isinstance(stream, _late("amrita_sense.streaming:SuspendObjectStream")) \
            and not callable(getattr(stream, "_wait_for_continue", None)):
        raise TypeError(
            f"{name} must be a SuspendObjectStream (or another gate with `_wait_for_continue`), "
            f"not {type(stream).__name__}"
        )
    return stream


cdef object _checked_waiter(object value):
    """`_waiter`: None (no run), RUNNING (a run whose future nobody asked for) or its future."""
    if value is not None and value is not RUNNING and not isinstance(value, asyncio.Future):
        raise TypeError(f"_waiter must be an asyncio.Future, RUNNING or None, not {type(value).__name__}")
    return value


cdef object _checked_graph(object value, str name):
    if getattr(value, "__rendered_compose__", False) is not True:
        raise TypeError(f"{name} must be a rendered graph, not {type(value).__name__}")
    return value


cdef object _PoolShape = None  # runtime.plans.PoolShape, imported by the first `_layer_init`


cdef object _support():
    from amrita_sense.instructions import _support as support
    return support


cdef class InterpreterCore:
    """The interpreter state the hot path touches, and the step loop itself."""

    def _core_init(self, prog, addr_stack, context_stack, middleware):
        """Set up the core's fields (object fields not named here start as None)."""
        self._prog = _checked(prog, Program, "the program", "a Program")
        self._pointer = _start_pointer(prog)
        self._ret_addr_stack = (
            _new_stack() if addr_stack is None else _checked(addr_stack, Stack, "addr_stack", "a Stack")
        )
        self._context_stack_v = (
            None if context_stack is None else _checked(context_stack, Stack, "context_stack", "a Stack")
        )
        self._flag_bits = 0
        self._middleware = _checked_middleware(middleware, "middleware")
        self._outer_interpreting = False
        self._pending_stop = False
        self._interpret_lock = _new_lock()
        self._plans_valid = False
        self._signal = NEVER_PENDING
        self._force_inline = False
        self._squashed_loops = False
        self._yield_interval = 0.001

    def _start_run(self, flags):
        """Start a run (its bookkeeping and the engine `flags` it reads); True when run-start work
        (`Depends` in the pools, the preload) must be awaited next."""
        waiter = self._waiter
        if waiter is RUNNING or (waiter is not None and not waiter.done()) or self._waiter is not waiter:
            raise IllegalState("Cannot start a new workflow while one is already running")
        # The claim: no Python code runs between the test just above and this write, so under the
        # GIL a run started from another thread at the same time sees RUNNING (or fails that test).
        self._waiter = RUNNING
        task = self._run_task = _current_task()
        pin_async_library(task)
        self._force_inline = flags.FORCE_NOT_WRAP_TO_ASYNC
        self._squashed_loops = flags.SQUASHED_LOOP
        self._plans_valid = not (flags.WORKFLOW_DI_NO_CACHE or flags.NO_DEPENDENCY_META_CACHE)
        self._refresh_tables()
        if flags.WORKFLOW_DI_PRELOAD_CACHE:
            return True
        shape = self._shape
        if shape is not None and not shape.private and not self._ava_kwargs_v:
            return shape.holds_factories
        return self._pools_hold_factories()

    def _finish_run(self, outcome):
        """End a run's bookkeeping (its future gets `outcome`); True when the workflow scope must be
        torn down next (then `restore_async_library()` is the caller's), else the run is over."""
        cdef InterpretLock lock = self._interpret_lock
        if lock._owner is not None and lock._owner is self._run_task:
            lock._release_held_by(self._run_task)  # a KeyboardInterrupt cut the loop's last release short
        fut = self._waiter
        self._waiter = None
        self._run_task = None
        if fut is not None and fut is not RUNNING and not fut.done():
            if isinstance(outcome, Exception):
                fut.set_exception(outcome)
                fut.exception()
            else:
                fut.set_result(None)
        if outcome is None or (isinstance(outcome, InterruptNotice) and not isinstance(outcome, InterruptKeepContext)):
            if (self._lifecycles_v is not None or self._dep_store_v is not None) and self._workflow_scope_open():
                return True
        restore_async_library()
        return False

    def _layer_init(self, graph, extra_args, extra_kwargs, exception_ignored, bint no_passing, shape_of,
                    double yield_interval):
        """The Python layer's first fields in one call (the others start as None): the graph (the
        program's), the pools (the interpreter itself, then `extra_args`; a copy of `extra_kwargs`),
        the pass-through exception types (none with `no_passing`), the pools' shape (`shape_of`, which
        must give a PoolShape), the tree's child maps. The arguments are checked as `args_pool` /
        `kwargs_pool` / `exception_types` do."""
        global _PoolShape
        if graph is not self._prog.graph:
            raise TypeError("_layer_init(graph): the graph must be the one the interpreter's program was made from")
        args = (self,) + (<tuple> extra_args if type(extra_args) is tuple else args_pool(extra_args, "extra_args"))
        if extra_kwargs is None:
            kwargs = {}
        else:
            kwargs = dict(extra_kwargs if type(extra_kwargs) is dict else kwargs_pool(extra_kwargs, "extra_kwargs"))
        if type(exception_ignored) is not tuple or exception_ignored:
            exception_ignored = exception_types(exception_ignored, "exception_ignored")
        shape = shape_of(args, kwargs)
        if _PoolShape is None:
            _PoolShape = _late("amrita_sense.runtime.plans:PoolShape")
        if type(shape) is not _PoolShape:
            raise TypeError(f"_layer_init(shape_of) must give a PoolShape, not {type(shape).__name__}")
        self._graph = graph
        self._ava_args_v = args
        self._ava_kwargs_v = kwargs
        self._exc_ignored = () if no_passing else <tuple> exception_ignored + (InterruptNotice, BreakLoop)
        self._shape = shape
        self._yield_interval = yield_interval
        self._sub_interpreters = {}
        self._sub_interpreters_all = {}

    # ----- kept attributes: writes are checked, because the loop reads them unchecked --------

    @property
    def _pointer(self):
        """The program counter (a PointerVector)."""
        return self._pointer

    @_pointer.setter
    def _pointer(self, value):
        self._pointer = _checked(value, PointerVector, "_pointer", "a PointerVector")

    @_pointer.deleter
    def _pointer(self):
        _refuse_delete("_pointer")

    @property
    def _ret_addr_stack(self):
        """The return stack (a Stack of PointerVectors)."""
        return self._ret_addr_stack

    @_ret_addr_stack.setter
    def _ret_addr_stack(self, value):
        self._ret_addr_stack = _checked(value, Stack, "_ret_addr_stack", "a Stack")

    @_ret_addr_stack.deleter
    def _ret_addr_stack(self):
        _refuse_delete("_ret_addr_stack")

    @property
    def _context_stack(self):
        """The context stack of PUSH_CONTEXT / INT (a Stack), made on first use."""
        if self._context_stack_v is None:
            self._context_stack_v = _new_stack()
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
        return self._middleware

    @_middleware.setter
    def _middleware(self, value):
        self._middleware = _checked_middleware(value, "_middleware")

    @_middleware.deleter
    def _middleware(self):
        _refuse_delete("_middleware")

    @property
    def _interpret_lock(self):
        """The interpreter lock (an InterpretLock)."""
        return self._interpret_lock

    @_interpret_lock.setter
    def _interpret_lock(self, value):
        self._interpret_lock = _checked(value, InterpretLock, "_interpret_lock", "an InterpretLock")

    @_interpret_lock.deleter
    def _interpret_lock(self):
        _refuse_delete("_interpret_lock")

    @property
    def _signal(self):
        """The suspend-request flag of the stream (a SuspendFlag)."""
        return self._signal

    @_signal.setter
    def _signal(self, value):
        self._signal = _checked(value, SuspendFlag, "_signal", "a SuspendFlag")

    @_signal.deleter
    def _signal(self):
        _refuse_delete("_signal")

    @property
    def _yield_interval(self):
        """Seconds of inline sync nodes after which a run hands the event loop a turn."""
        return self._yield_interval

    @_yield_interval.setter
    def _yield_interval(self, value):
        self._yield_interval = _checked_seconds(value, "_yield_interval")

    @_yield_interval.deleter
    def _yield_interval(self):
        _refuse_delete("_yield_interval")

    @property
    def _plans(self):
        """A copy of the per-row injection plans (None when there are none)."""
        return None if self._plans is None else list(self._plans)

    @_plans.setter
    def _plans(self, value):
        if value is not None:
            raise TypeError("_plans can only be reset to None")
        self._plans = None

    @_plans.deleter
    def _plans(self):
        _refuse_delete("_plans")

    @property
    def _panic_exc(self):
        """The exception of the last panic (an exception), or None."""
        return self._panic_exc

    @_panic_exc.setter
    def _panic_exc(self, value):
        if value is not None and not isinstance(value, BaseException):
            raise TypeError(f"_panic_exc must be an exception or None, not {type(value).__name__}")
        self._panic_exc = value

    @_panic_exc.deleter
    def _panic_exc(self):
        _refuse_delete("_panic_exc")

    @property
    def _shape(self):
        """The pools' shape (a runtime.plans.PoolShape), or None while the pools are not trusted."""
        return self._shape

    @_shape.setter
    def _shape(self, value):
        self._shape = _optional(value, _late("amrita_sense.runtime.plans:PoolShape"), "_shape", "a PoolShape")

    @_shape.deleter
    def _shape(self):
        _refuse_delete("_shape")

    @property
    def _exc_ignored(self):
        """The exception classes that pass through the workflow's handlers (a tuple)."""
        return self._exc_ignored

    @_exc_ignored.setter
    def _exc_ignored(self, value):
        self._exc_ignored = exception_types(value, "_exc_ignored")

    @_exc_ignored.deleter
    def _exc_ignored(self):
        _refuse_delete("_exc_ignored")

    @property
    def _ava_args_v(self):
        """The positional injection pool (a tuple; the interpreter first)."""
        return self._ava_args_v

    @_ava_args_v.setter
    def _ava_args_v(self, value):
        self._ava_args_v = args_pool(value, "_ava_args_v")

    @_ava_args_v.deleter
    def _ava_args_v(self):
        _refuse_delete("_ava_args_v")

    @property
    def _ava_kwargs_v(self):
        """The keyword injection pool (a dict)."""
        return self._ava_kwargs_v

    @_ava_kwargs_v.setter
    def _ava_kwargs_v(self, value):
        self._ava_kwargs_v = kwargs_pool(value, "_ava_kwargs_v")

    @_ava_kwargs_v.deleter
    def _ava_kwargs_v(self):
        _refuse_delete("_ava_kwargs_v")

    @property
    def _args_hash(self):
        """The pools' type fingerprint (an int), or None until asked for."""
        return self._args_hash

    @_args_hash.setter
    def _args_hash(self, value):
        self._args_hash = _optional(value, int, "_args_hash", "an int")

    @_args_hash.deleter
    def _args_hash(self):
        _refuse_delete("_args_hash")

    @property
    def _dep_store_v(self):
        """The values of workflow-scoped providers (a DependencyStore), or None until made."""
        return self._dep_store_v

    @_dep_store_v.setter
    def _dep_store_v(self, value):
        self._dep_store_v = _optional(value, _late("amrita_sense.di:DependencyStore"), "_dep_store_v", "a DependencyStore")

    @_dep_store_v.deleter
    def _dep_store_v(self):
        _refuse_delete("_dep_store_v")

    @property
    def _di_cache(self):
        """The interpreter's own record of plans (a DICache), or None until made."""
        return self._di_cache

    @_di_cache.setter
    def _di_cache(self, value):
        self._di_cache = _optional(value, _late("amrita_sense.types:DICache"), "_di_cache", "a DICache")

    @_di_cache.deleter
    def _di_cache(self):
        _refuse_delete("_di_cache")

    @property
    def _glob_lock_v(self):
        """The lock of the interpreter tree (an InterpretLock, on the top interpreter), or None until made."""
        return self._glob_lock_v

    @_glob_lock_v.setter
    def _glob_lock_v(self, value):
        self._glob_lock_v = _optional(value, InterpretLock, "_glob_lock_v", "an InterpretLock")

    @_glob_lock_v.deleter
    def _glob_lock_v(self):
        _refuse_delete("_glob_lock_v")

    @property
    def _graph(self):
        """The rendered graph the interpreter runs."""
        return self._graph

    @_graph.setter
    def _graph(self, value):
        self._graph = _checked_graph(value, "_graph")

    @_graph.deleter
    def _graph(self):
        _refuse_delete("_graph")

    @property
    def _interpreter_id(self):
        """The interpreter's id (a string), or None until asked for."""
        return self._interpreter_id

    @_interpreter_id.setter
    def _interpreter_id(self, value):
        self._interpreter_id = _optional(value, str, "_interpreter_id", "a string")

    @_interpreter_id.deleter
    def _interpreter_id(self):
        _refuse_delete("_interpreter_id")

    @property
    def _lifecycles_v(self):
        """The lifecycle scopes of the runs (a dict), or None until made."""
        return self._lifecycles_v

    @_lifecycles_v.setter
    def _lifecycles_v(self, value):
        self._lifecycles_v = _optional(value, dict, "_lifecycles_v", "a dict")

    @_lifecycles_v.deleter
    def _lifecycles_v(self):
        _refuse_delete("_lifecycles_v")

    @property
    def _provider_values(self):
        """The `use_cache` provider results (a dict by plan), or None."""
        return self._provider_values

    @_provider_values.setter
    def _provider_values(self, value):
        self._provider_values = _optional(value, dict, "_provider_values", "a dict")

    @_provider_values.deleter
    def _provider_values(self):
        _refuse_delete("_provider_values")

    @property
    def _sub_interpreters(self):
        """The child interpreters by id (a dict)."""
        return self._sub_interpreters

    @_sub_interpreters.setter
    def _sub_interpreters(self, value):
        self._sub_interpreters = _checked(value, dict, "_sub_interpreters", "a dict")

    @_sub_interpreters.deleter
    def _sub_interpreters(self):
        _refuse_delete("_sub_interpreters")

    @property
    def _sub_interpreters_all(self):
        """Every interpreter of the tree by id (a dict, on the top interpreter), else None."""
        return self._sub_interpreters_all

    @_sub_interpreters_all.setter
    def _sub_interpreters_all(self, value):
        self._sub_interpreters_all = _optional(value, dict, "_sub_interpreters_all", "a dict")

    @_sub_interpreters_all.deleter
    def _sub_interpreters_all(self):
        _refuse_delete("_sub_interpreters_all")

    @property
    def _top_interpreter(self):
        """The top interpreter of the tree (an interpreter), None on the top one itself."""
        return self._top_interpreter

    @_top_interpreter.setter
    def _top_interpreter(self, value):
        self._top_interpreter = _optional(value, InterpreterCore, "_top_interpreter", "an interpreter")

    @_top_interpreter.deleter
    def _top_interpreter(self):
        _refuse_delete("_top_interpreter")

    @property
    def _values_key(self):
        """The shape key the `use_cache` results were made for (a tuple), or None."""
        return self._values_key

    @_values_key.setter
    def _values_key(self, value):
        self._values_key = _optional(value, tuple, "_values_key", "a tuple")

    @_values_key.deleter
    def _values_key(self):
        _refuse_delete("_values_key")

    @property
    def _waiter(self):
        """The run's future, RUNNING while nobody asked for it yet, None while idle."""
        return self._waiter

    @_waiter.setter
    def _waiter(self, value):
        self._waiter = _checked_waiter(value)

    @_waiter.deleter
    def _waiter(self):
        _refuse_delete("_waiter")

    @property
    def _object_io(self):
        """The suspend/resume stream, or None until made."""
        return self._object_io

    @_object_io.setter
    def _object_io(self, value):
        """A stream, whose suspend flag the loop then reads (a gate without one: every step asks it)."""
        if value is None:
            self._signal = NEVER_PENDING
        else:
            check_stream(value, "_object_io")
            flag = getattr(value, "_suspend_flag", None)
            self._signal = flag if isinstance(flag, SuspendFlag) else ALWAYS_PENDING
        self._object_io = value

    @_object_io.deleter
    def _object_io(self):
        _refuse_delete("_object_io")

    @property
    def _parent_interpreter(self):
        """The interpreter this one was forked from, or None."""
        return self._parent_interpreter

    @_parent_interpreter.setter
    def _parent_interpreter(self, value):
        _optional(value, InterpreterCore, "_parent_interpreter", "an interpreter")
        ancestor = value
        while ancestor is not None:  # followed by the tree's walks (tracebacks, the debugger)
            if ancestor is self:
                raise ValueError("_parent_interpreter would make a cycle")
            ancestor = (<InterpreterCore> ancestor)._parent_interpreter
        self._parent_interpreter = value

    @_parent_interpreter.deleter
    def _parent_interpreter(self):
        _refuse_delete("_parent_interpreter")

    # ----- pointer resolution and movement -------------------------------------------

    @cython.final
    cdef Py_ssize_t _locate_current(self, bint *exact) except -2:
        cdef PointerVector ptr = self._pointer
        if ptr._items is None and ptr._prog is self._prog:
            exact[0] = True
            return ptr._row
        return self._prog._locate(ptr._list(), exact)

    def _descend_current(self):
        """Move the pointer onto the row it designates (entering segments) and return it."""
        return self._c_descend_current()

    @cython.final
    cdef Py_ssize_t _c_descend_current(self) except -1:
        """Move the pointer onto the row it designates (entering segments) and return it."""
        cdef bint exact = False
        cdef Py_ssize_t row = self._locate_current(&exact)
        if row < 0:
            raise NullPointerException(f"address {self._pointer._list()} not found")
        assert row < self._prog.nrows, "the current row is outside the table"
        if not exact:
            self._pointer._set_row(self._prog, row)
        if self._prog.cbits[row] & C_ROW_EMPTY:
            raise NullPointerException(f"address {list(self._prog.addrs[row])} not found")
        return row

    @cython.final
    cdef bint _advance(self, PointerVector ptr) except -1:
        cdef bint exact = True
        cdef Py_ssize_t row
        cdef list items
        if ptr._items is None and ptr._prog is self._prog:
            row = ptr._row
        else:
            items = ptr._list()
            if not items:
                return False
            row = self._prog._locate(items, &exact)
            if row < 0:
                return self._prog.graph.calc.advance(ptr)
        if not exact:
            items.append(0)
            return True
        if row + 1 < self._prog.nrows:
            landing = self._prog.landings[row + 1]
            if landing is None:
                ptr._set_row(self._prog, row + 1)
            else:
                ptr._items = list(landing)
            return True
        ptr._items = []
        return False

    def advance_pointer(self, ptr=None):
        """Advance `ptr` (default: the interpreter's pointer) in place; False at the end."""
        return self._advance(self._pointer if ptr is None else ptr)

    def _rebase_to(self, ptr):
        """Make the pointer equal to `ptr` (an address or a PointerVector), without a jump mark."""
        self._c_rebase_to(ptr)

    @cython.final
    cdef int _c_rebase_to(self, object ptr) except -1:
        """Make the pointer equal to `ptr` (an address or a PointerVector), without a jump mark."""
        cdef PointerVector other
        if isinstance(ptr, PointerVector) and (<PointerVector> ptr)._items is None:
            other = <PointerVector> ptr
            other._bound_addr()  # an uninitialised vector raises here
            self._pointer._set_row(other._prog, other._row)
        else:
            self._pointer._items = address_list(ptr, "rebase_ptr(ptr)")
        return 0

    def _adopt_successor(self):
        """Follow a program that was recompiled in place (a hot-swapped slot)."""
        prog = self._prog
        while prog.successor is not None:
            prog = prog.successor
        self._prog = prog
        self._refresh_tables()

    def _refresh_plans(self):
        """Take the program's plan table for the pools' shape, or none when plans are off."""
        self._refresh_tables()

    @cython.final
    cdef int _refresh_tables(self) except -1:
        shape = self._shape
        self._plans = self._prog._table_for(shape) if self._plans_valid and shape is not None else None
        self._exc_plans = None
        return 0

    def _mark_jump(self):
        """Set JMP and clear HLT; False when a jump already moved the pointer this cycle."""
        return self._c_mark_jump()

    @cython.final
    cdef bint _c_mark_jump(self):
        """Set JMP and clear HLT; False when a jump already moved the pointer this cycle."""
        cdef int bits = self._flag_bits
        if bits & C_FLAG_JMP:
            return False
        self._flag_bits = (bits | C_FLAG_JMP) & ~C_FLAG_HLT
        return True

    def _move_to(self, addr):
        """Point at `addr` (a list), binding to a row when the address is a node."""
        cdef bint exact = False
        cdef Py_ssize_t row = self._prog._locate(addr, &exact)
        if row >= 0 and exact:
            self._pointer._set_row(self._prog, row)
        else:
            self._pointer.far_to(addr)

    def jump_to(self, addr):
        """Jump to an absolute address; `NullPointerException` if nothing is there."""
        cdef bint exact = False
        if self._flag_bits & C_FLAG_JMP:
            return
        addr = address_list(addr, "jump_to(addr)")
        if self._prog._locate(addr, &exact) < 0 and self._prog.graph.calc.find_addr_safe(addr) is None:
            raise NullPointerException(f"{addr} is not a valid address")
        self._c_mark_jump()
        self._move_to(addr)

    # A refused jump (a bad argument, an empty pointer) raises before the jump is marked.

    def jump_near(self, addr):
        """Set the last coordinate of the pointer."""
        self._check_last_index(addr, "jump_near")
        if self._c_mark_jump():
            self._pointer.near_to(addr)

    def jump_offset(self, offset):
        """Add `offset` to the last coordinate of the pointer."""
        self._check_last_index(offset, "jump_offset")
        if self._c_mark_jump():
            self._pointer.offset(offset)

    def jump_far_ptr(self, offset):
        """Replace the whole address (absolute, not validated)."""
        offset = address_list(offset, "jump_far_ptr(offset)")
        if self._c_mark_jump():
            self._move_to(offset)

    def jump_offset_far(self, offset):
        """Add a vector element-wise to the pointer (see `PointerVector.offset_far`)."""
        offset = address_list(offset, "jump_offset_far(offset)")
        if self._c_mark_jump():
            self._pointer.offset_far(offset)

    def jump_to_top(self, addr):
        """Jump to `[addr]` at the top level."""
        _check_index(addr, "jump_to_top(addr)")
        if self._c_mark_jump():
            self._move_to([addr])

    def jump_offset_top(self, offset):
        """Jump to the top-level slot `offset` after the current one."""
        _check_index(offset, "jump_offset_top(offset)")
        if self._c_mark_jump():
            ptr = self._pointer
            second = ptr[1] if len(ptr) > 1 else 0
            ptr.offset_far([offset, -(second + 1)])

    @cython.final
    cdef int _check_last_index(self, object value, str method) except -1:
        """`value` can replace or move the pointer's last index: an int, and the pointer is not empty."""
        _check_index(value, f"{method}()")
        if not len(self._pointer):
            raise IndexError(_EMPTY_POINTER.format(method))
        return 0

    # ----- one node -------------------------------------------------------------------

    @cython.final
    cdef int _check_row(self, Py_ssize_t row) except -1:
        """For the coroutines Python can call with a row: the row exists."""
        if row < 0 or row >= self._prog.nrows:
            raise IndexError(f"row {row} is outside the node table of {self._prog.nrows} rows")
        return 0

    @cython.final
    cdef object _row_plan(self, Py_ssize_t row):
        """The plan of `row`: its static one, or the shared one for the pools' shape (made on
        first use and kept in the program's table); None when the Python layer resolves it."""
        plan = self._prog.static_plans[row]
        if plan is not None:
            return plan
        table = self._plans
        if table is None:
            return None
        plan = (<list> table)[row]
        if plan is None:
            plan = _checked_call_plan(self._shared_plan(self._prog.nodes[row], False))
            (<list> table)[row] = plan
        return plan

    @cython.final
    cdef object _cached_plan(self, Py_ssize_t row):
        """The plan of `row` (providers included) unless a suspend signal is pending."""
        if self._signal.pending:
            return None
        assert 0 <= row < self._prog.nrows, "a plan asked for a row outside the table"
        return self._row_plan(row)

    @cython.final
    cdef object _exc_plan(self, Py_ssize_t row):
        """The plan of `row` called as a CATCH handler (with `exc_type` / `exc_val` / `exc_tb`)."""
        table = self._exc_plans
        if table is None:
            if self._plans is None:
                return None
            table = self._exc_plans = self._prog._table_for(self._shape.with_exc)
        plan = (<list> table)[row]
        if plan is None:
            plan = _checked_call_plan(self._shared_plan(self._prog.nodes[row], True))
            (<list> table)[row] = plan
        return plan

    @cython.final
    cdef object _ready_plan(self, Py_ssize_t row):
        """The cached plan of `row` when the core can run it itself (no providers), else None."""
        plan = self._cached_plan(row)
        if plan is None or (<CallPlan> plan).slow:
            return None
        return plan

    @cython.final
    cdef tuple _plan_values(self, CallPlan plan, object extra, object results):
        """The plan's argument values from the pools (a keyword is looked up in `extra` first), and
        from `results` (the interpreter's `use_cache` results for the plan) for a cached plan."""
        cdef Py_ssize_t i, k
        cdef tuple srcs = plan.srcs
        if plan.n == 0:
            return ()
        pool = self._ava_args_v
        kwargs = self._ava_kwargs_v
        values = []
        for i in range(plan.n):
            k = plan.cidx[i]
            if k >= 0:
                values.append(pool[k])
            elif k == C_RESULT:
                values.append(results[srcs[i][0]])
            elif extra is not None and srcs[i] in <dict> extra:
                values.append((<dict> extra)[srcs[i]])
            else:
                values.append(kwargs[srcs[i]])
        return tuple(values)

    @cython.final
    cdef object _call_plan(self, object func, CallPlan plan, object extra):
        """Call `func` with the plan's values from the pools (and `extra` keywords): a vectorcall
        straight from the pools for a positional call of a few arguments."""
        cdef PyObject *argv[MAX_STACK_ARGS]
        cdef PyObject *item
        cdef Py_ssize_t i, k, n = plan.n
        if plan.names is not None or n > MAX_STACK_ARGS or extra is not None \
                or type(self._ava_args_v) is not tuple or type(self._ava_kwargs_v) is not dict:
            values = self._plan_values(plan, extra, None)
            if plan.names is None:
                return func(*values)
            return func(**dict(zip(plan.names, values)))
        pool = <tuple> self._ava_args_v
        for i in range(n):
            k = plan.cidx[i]
            if k >= 0:
                if k >= PyTuple_GET_SIZE(pool):
                    raise IndexError("tuple index out of range")
                item = PyTuple_GET_ITEM(pool, k)
            else:
                item = PyDict_GetItemWithError(<dict> self._ava_kwargs_v, plan.srcs[i])
                if item == NULL:
                    for k in range(i):
                        Py_DECREF(<object> argv[k])
                    raise KeyError(plan.srcs[i])
            Py_INCREF(<object> item)  # the pools may change while the call runs
            argv[i] = item
        try:
            return PyObject_Vectorcall(func, argv, n, NULL)
        finally:
            for i in range(n):
                Py_DECREF(<object> argv[i])

    @cython.final
    cdef object _results_for(self, CallPlan plan, Py_ssize_t row):
        """The interpreter's `use_cache` results for `plan` when the core can call the node of `row`
        with them itself: every provider of the plan is a cached one and has its result (made by the
        Python layer on the node's first call), and the node runs in the loop's thread. Else None."""
        if not plan.cached or self._provider_values is None:
            return None
        if self._prog.cbits[row] & C_ROW_THREAD and not self._force_inline:
            return None
        results = (<dict> self._provider_values).get(plan.entry)
        return results if type(results) is dict else None

    @cython.final
    cdef object _call_with_results(self, Py_ssize_t row, CallPlan plan, dict results):
        """Call the node of `row` with the plan's values: the pools and the `use_cache` results."""
        func = self._prog.funcs[row]
        values = self._plan_values(plan, None, results)
        if plan.names is None:
            return func(*values)
        return func(**dict(zip(plan.names, values)))

    @cython.final
    cdef inline bint _inline_callable(self, Py_ssize_t row):
        cdef int bits = self._prog.cbits[row]
        return not (bits & C_ROW_CORO) and (not (bits & C_ROW_THREAD) or self._force_inline)

    @cython.final
    cdef object _call_inline(self, Py_ssize_t row, CallPlan plan, object extra):
        if self._prog.cbits[row] & C_ROW_PRECHECK:
            self._prog.nodes[row]._pre_check(self)
        return self._call_plan(self._prog.funcs[row], plan, extra)

    async def _call_with_plan(self, Py_ssize_t row, CallPlan plan not None):
        """A main-loop step with its plan; a worker-thread node starts a batch (`_batch_in_worker`)."""
        self._check_row(row)
        cdef int bits = self._prog.cbits[row]
        if bits & C_ROW_PRECHECK:
            self._prog.nodes[row]._pre_check(self)
        func = self._prog.funcs[row]
        if bits & C_ROW_CORO:
            return await self._call_plan(func, plan, None)
        if bits & C_ROW_THREAD and not self._force_inline:
            batch = functools.partial(self._batch_in_worker, row, plan, contextvars.copy_context())
            return await self._offload_batch(batch)
        return self._call_plan(func, plan, None)

    # ----- worker-thread batches (see the twin for the protocol) -------------------------

    def _batch_in_worker(self, Py_ssize_t row, CallPlan plan not None, base, fut):
        """In a worker thread: run `row`'s node, then the thread nodes after it while the batch
        may go on (`fut`: the future the run awaits). Returns the last node's result."""
        self._check_row(row)
        cdef Program prog = self._prog
        while True:
            result = base.copy().run(self._run_plan_call, prog.funcs[row], plan)
            row = self._batch_successor(row, fut)
            if row < 0:
                return result
            plan = self._batch_plan(row)
            self._pointer._set_row(prog, row)

    def _run_plan_call(self, func, CallPlan plan not None):
        return self._call_plan(func, plan, None)

    @cython.final
    cdef Py_ssize_t _batch_successor(self, Py_ssize_t row, object fut) except -2:
        """The row a batch that just ran `row` runs next, or -1: stop here."""
        if fut.done() or self._signal.pending or self._pending_stop or self._middleware is not None:
            return -1
        cdef InterpretLock lock = self._interpret_lock
        if lock._waiters or lock._owner is not self._run_task or self._flag_bits & (C_FLAG_JMP | C_FLAG_HLT):
            return -1
        cdef Program prog = self._prog
        cdef PointerVector ptr = self._pointer
        cdef Py_ssize_t following = row + 1
        if ptr._prog is not prog or ptr._row != row or prog.successor is not None \
                or following >= prog.nrows or prog.landings[following] is not None:
            return -1
        if ptr._items is not None and tuple(ptr._items) != prog.addrs[row]:  # read, or moved by the node
            return -1
        cdef int bits = prog.cbits[following]
        if bits & (C_ROW_CORO | C_ROW_PRECHECK | C_ROW_EMPTY) or not bits & C_ROW_THREAD \
                or prog.cops[following] != C_OP_CALL:
            return -1
        plan = self._batch_plan(following)
        if plan is None or (<CallPlan> plan).slow:
            return -1
        return following

    @cython.final
    cdef object _batch_plan(self, Py_ssize_t row):
        """The plan of `row` if its table has one already (a batch never makes plans)."""
        plan = self._prog.static_plans[row]
        if plan is None and self._plans is not None:
            plan = (<list> self._plans)[row]
        return plan

    def _offload_plan(self, func, CallPlan plan not None):
        """`_offload` of `func` with the plan's values."""
        values = self._plan_values(plan, None, None)
        if plan.names is None:
            return self._offload(func, values, None)
        return self._offload(func, None, dict(zip(plan.names, values)))

    # ----- native opcodes: each mirrors its instruction node's Python function ----------
    # (see the twin for the protocol: ops run only when every called node is ready to run
    # synchronously; after each callee, unless the pointer is still bound to the op's row with
    # no jump marked, the node's own `_after_condition` / `_after_body` finishes the op.)

    @cython.final
    cdef int _push_ret(self, object item) except -1:
        stack = self._ret_addr_stack
        if type(stack) is Stack:
            return (<Stack> stack)._push(item)
        stack.push(item)
        return 0

    @cython.final
    cdef object _pop_ret(self):
        stack = self._ret_addr_stack
        if type(stack) is Stack:
            return (<Stack> stack)._pop()
        return stack.pop()

    @cython.final
    cdef object _inline_plan(self, Py_ssize_t row):
        """The plan of `row` when it can run synchronously right now, else None."""
        plan = self._ready_plan(row)
        if plan is not None and self._inline_callable(row):
            return plan
        return None

    @cython.final
    cdef object _callee_plan(self, Py_ssize_t row):
        """What `_subcall_inline` needs to run `row` now: its plan, `JUMP_CALLEE`, or None."""
        if self._prog.cops[row] == C_OP_JUMP:
            return JUMP_CALLEE
        return self._inline_plan(row)

    @cython.final
    cdef inline bint _still_at(self, Py_ssize_t row) noexcept:
        """True when no jump is marked and the pointer is bound to `row`, where the running opcode
        left it: its compiled rows are then where the node's own function would go."""
        return (not self._flag_bits & C_FLAG_JMP and self._pointer._items is None
                and self._pointer._row == row and self._pointer._prog is self._prog)

    @cython.final
    cdef inline bint _left_unmarked(self, Py_ssize_t row) noexcept:
        """True when the pointer left `row` without a marked jump (not `_still_at`, no jump marked):
        where a node's last move (one jump) goes from there, only the node can tell. With a jump
        marked that move is refused, as `_jump_at` refuses it."""
        return not self._flag_bits & C_FLAG_JMP and not (
            self._pointer._items is None and self._pointer._row == row and self._pointer._prog is self._prog)

    @cython.final
    cdef int _finish_with(self, object rest) except -1:
        """The status for a node's continuation `rest`: C_NATIVE_DONE when it finished (None), else
        C_NATIVE_AWAIT with it kept in `_native_rest` for the loop to await."""
        if rest is None:
            return C_NATIVE_DONE
        self._native_rest = rest
        return C_NATIVE_AWAIT

    @cython.final
    cdef int _run_native_sync(self, Py_ssize_t row, int op) except -1:
        """Run the opcode of `row` (not TRY): a C_NATIVE_* status."""
        if op == C_OP_JUMP:
            self._jump_at(self._prog.crows[C_ROW_WIDTH * row + C_THEN], row, C_THEN)
        elif op == C_OP_BRANCH:
            return self._native_branch(row)
        elif op == C_OP_ELSE:
            return self._native_else(row)
        elif op == C_OP_WHILE:
            return C_NATIVE_NOT_READY if self._squashed_loops else self._native_while(row)
        elif op == C_OP_DO:
            return C_NATIVE_NOT_READY if self._squashed_loops else self._native_do(row)
        elif op == C_OP_DO_CHECK:
            return self._native_do_check(row)
        elif op == C_OP_CALLSUB:
            self._native_callsub(row)
        elif op == C_OP_RET:
            self._native_ret()
        elif op == C_OP_NATIVE_IF:
            return self._native_if(row)
        elif op == C_OP_LOOP_HEAD:
            return self._native_loop_head(row)
        elif op == C_OP_LOOP_CONTROL:
            self._native_loop_control((<tuple> self._prog.operands[row])[C_EXTRA])
        elif op == C_OP_INVOKE:
            return self._native_invoke(row)
        return C_NATIVE_DONE

    @cython.final
    cdef int _goto(self, tuple target) except -1:
        """Point at a jump-target descriptor `(row, exact, address)`."""
        cdef Py_ssize_t row = target[0]
        assert row < self._prog.nrows, "a jump target outside the table"
        if row >= 0 and target[1]:
            self._pointer._set_row(self._prog, row)
        else:
            self._pointer._items = list(target[2])
        return 0

    @cython.final
    cdef int _native_jump(self, tuple target) except -1:
        if self._c_mark_jump():
            self._goto(target)
        return 0

    @cython.final
    cdef int _jump_at(self, Py_ssize_t target_row, Py_ssize_t row, int k) except -1:
        """Jump to the target in field `k` (C_EXIT or C_THEN) of `row`'s operands: straight to
        `target_row` when the target is one row, else through its descriptor."""
        assert target_row < self._prog.nrows, "a jump target outside the table"
        if self._c_mark_jump():
            if target_row >= 0:
                self._pointer._set_row(self._prog, target_row)
            else:
                self._goto((<tuple> self._prog.operands[row])[k])
        return 0

    @cython.final
    cdef PointerVector _pointer_at(self, Py_ssize_t row):
        """A new pointer bound to `row`: the recycled one when there is one."""
        cdef PointerVector ptr = self._spare_pointer
        if ptr is None:
            return _bound_pointer(self._prog, row)
        self._spare_pointer = None
        ptr._set_row(self._prog, row)
        return ptr

    @cython.final
    cdef inline void _recycle(self, object ptr):
        """Keep a popped pointer nobody else holds (ours is the only reference) for `_pointer_at`."""
        if Py_REFCNT(ptr) == 1 and type(ptr) is PointerVector:
            self._spare_pointer = <PointerVector> ptr

    @cython.final
    cdef int _enter_frame(self, Py_ssize_t row) except -1:
        """The first half of `call_sub` of a row: save the pointer and point at the row."""
        self._push_ret(self._pointer)
        self._pointer = self._pointer_at(row)
        self._outer_interpreting = True
        return 0

    @cython.final
    cdef int _leave_frame(self) except -1:
        """The second half: restore the saved pointer unless the called node jumped."""
        self._outer_interpreting = False
        saved = self._pop_ret()
        if not self._flag_bits & C_FLAG_JMP:
            self._flag_bits &= ~C_FLAG_HLT
            self._c_rebase_to(saved)
        self._recycle(saved)
        return 0

    @cython.final
    cdef object _subcall_inline(self, Py_ssize_t row, object plan, object extra):
        """`call_sub` of a row with its `_callee_plan`: push the pointer, run the node there,
        restore unless it jumped."""
        if plan is JUMP_CALLEE:
            self._jump_at(self._prog.crows[C_ROW_WIDTH * row + C_THEN], row, C_THEN)
            return None
        self._enter_frame(row)
        try:
            return self._call_inline(row, <CallPlan> plan, extra)
        finally:
            self._leave_frame()

    @cython.final
    cdef object _call_resuming(self, Py_ssize_t callee, object plan, Py_ssize_t row, int k, bint near):
        """`_subcall_inline` of `callee`; if it suspends, the run resumes at the slot in field `k`
        (C_FIRST_RESUME or C_SECOND_RESUME) of `row`'s operands (see `_resume_at`)."""
        try:
            return self._subcall_inline(callee, plan, None)
        except InterruptKeepContext:
            self._resume_at(row, k, near)
            raise

    @cython.final
    cdef int _resume_at(self, Py_ssize_t row, int k, bint near) except -1:
        """A called node suspended: resume at the slot in field `k` of `row`'s operands (near: a slot of
        the segment; else an offset from the current slot)."""
        slot = (<tuple> self._prog.operands[row])[k]
        if near:
            _support().resume_near(self, slot)
        else:
            _support().resume_offset(self, slot)
        return 0

    # Operands: the named fields of `amrita_sense/_opcodes.py`, filled by each instruction's `_native_op`.

    @cython.final
    cdef int _native_branch(self, Py_ssize_t row) except -1:
        cdef int *rows = &self._prog.crows[C_ROW_WIDTH * row]
        cond_plan = self._callee_plan(rows[C_FIRST])
        body_plan = self._callee_plan(rows[C_SECOND])
        if cond_plan is None or body_plan is None:
            return C_NATIVE_NOT_READY
        taken = self._call_resuming(rows[C_FIRST], cond_plan, row, C_FIRST_RESUME, False)
        if unlikely(not self._still_at(row)):
            return self._finish_with(self._prog.nodes[row]._after_condition(self, taken))
        if not taken:
            self._jump_at(rows[C_EXIT], row, C_EXIT)
            return C_NATIVE_DONE
        self._call_resuming(rows[C_SECOND], body_plan, row, C_SECOND_RESUME, True)
        if unlikely(self._left_unmarked(row)):
            self._prog.nodes[row]._after_body(self)
        else:
            self._jump_at(rows[C_THEN], row, C_THEN)
        return C_NATIVE_DONE

    @cython.final
    cdef int _native_else(self, Py_ssize_t row) except -1:
        cdef int *rows = &self._prog.crows[C_ROW_WIDTH * row]
        body_plan = self._callee_plan(rows[C_FIRST])
        if body_plan is None:
            return C_NATIVE_NOT_READY
        self._call_resuming(rows[C_FIRST], body_plan, row, C_FIRST_RESUME, False)
        if unlikely(self._left_unmarked(row)):
            self._prog.nodes[row]._after_body(self)
        else:
            self._jump_at(rows[C_THEN], row, C_THEN)
        return C_NATIVE_DONE

    @cython.final
    cdef int _native_while(self, Py_ssize_t row) except -1:
        cdef int *rows = &self._prog.crows[C_ROW_WIDTH * row]
        cond_plan = self._callee_plan(rows[C_FIRST])
        body_plan = self._callee_plan(rows[C_SECOND])
        if cond_plan is None or body_plan is None:
            return C_NATIVE_NOT_READY
        truthy = self._call_resuming(rows[C_FIRST], cond_plan, row, C_FIRST_RESUME, True)
        if unlikely(not self._still_at(row)):
            return self._finish_with(self._prog.nodes[row]._after_condition(self, truthy))
        if not truthy:
            self._jump_at(rows[C_EXIT], row, C_EXIT)
            return C_NATIVE_DONE
        try:
            self._call_resuming(rows[C_SECOND], body_plan, row, C_SECOND_RESUME, True)
        except BreakLoop:
            if unlikely(self._left_unmarked(row)):
                self._prog.nodes[row]._after_body(self, True)
            else:
                self._jump_at(rows[C_EXIT], row, C_EXIT)
            return C_NATIVE_DONE
        if unlikely(self._left_unmarked(row)):
            self._prog.nodes[row]._after_body(self, False)
        else:
            self._jump_at(rows[C_THEN], row, C_THEN)
        return C_NATIVE_DONE

    @cython.final
    cdef int _native_do(self, Py_ssize_t row) except -1:
        cdef int *rows = &self._prog.crows[C_ROW_WIDTH * row]
        body_plan = self._callee_plan(rows[C_FIRST])
        if body_plan is None:
            return C_NATIVE_NOT_READY
        try:
            self._call_resuming(rows[C_FIRST], body_plan, row, C_FIRST_RESUME, True)
        except BreakLoop:
            if unlikely(self._left_unmarked(row)):
                self._prog.nodes[row]._after_body(self, True)
            else:
                self._jump_at(rows[C_EXIT], row, C_EXIT)
            return C_NATIVE_DONE
        if unlikely(self._left_unmarked(row)):
            self._prog.nodes[row]._after_body(self, False)
        else:
            self._jump_at(rows[C_THEN], row, C_THEN)
        return C_NATIVE_DONE

    @cython.final
    cdef int _native_do_check(self, Py_ssize_t row) except -1:
        cdef int *rows = &self._prog.crows[C_ROW_WIDTH * row]
        cond_plan = self._callee_plan(rows[C_FIRST])
        if cond_plan is None:
            return C_NATIVE_NOT_READY
        again = self._call_resuming(rows[C_FIRST], cond_plan, row, C_FIRST_RESUME, True)
        if unlikely(not self._still_at(row)):
            return self._finish_with(self._prog.nodes[row]._after_condition(self, again))
        if again:
            self._jump_at(rows[C_THEN], row, C_THEN)
        else:
            self._jump_at(rows[C_EXIT], row, C_EXIT)
        return C_NATIVE_DONE

    @cython.final
    cdef int _native_if(self, Py_ssize_t row) except -1:
        cdef int *rows = &self._prog.crows[C_ROW_WIDTH * row]
        cdef bint compose_body = rows[C_SECOND] < 0
        cond_plan = self._callee_plan(rows[C_FIRST])
        body_plan = None if compose_body else self._callee_plan(rows[C_SECOND])
        if cond_plan is None or (not compose_body and body_plan is None):
            return C_NATIVE_NOT_READY
        taken = self._call_resuming(rows[C_FIRST], cond_plan, row, C_FIRST_RESUME, True)
        if unlikely(not self._still_at(row)):
            return self._finish_with(self._prog.nodes[row]._after_condition(self, taken))
        if not taken:
            self._jump_at(rows[C_EXIT], row, C_EXIT)
            return C_NATIVE_DONE
        if compose_body:  # entered by a jump
            self._jump_at(rows[C_THEN], row, C_THEN)
            return C_NATIVE_DONE
        self._call_resuming(rows[C_SECOND], body_plan, row, C_SECOND_RESUME, True)
        if unlikely(self._left_unmarked(row)):
            self._prog.nodes[row]._after_body(self)
        else:
            self._jump_at(rows[C_THEN], row, C_THEN)
        return C_NATIVE_DONE

    @cython.final
    cdef int _native_invoke(self, Py_ssize_t row) except -1:
        cdef Py_ssize_t target = self._prog.crows[C_ROW_WIDTH * row + C_FIRST]
        plan = self._callee_plan(target)
        if plan is None:
            return C_NATIVE_NOT_READY
        self._subcall_inline(target, plan, None)
        return C_NATIVE_DONE

    @cython.final
    cdef int _native_loop_head(self, Py_ssize_t row) except -1:
        cdef int *rows = &self._prog.crows[C_ROW_WIDTH * row]
        cond_plan = self._callee_plan(rows[C_FIRST])
        if cond_plan is None:
            return C_NATIVE_NOT_READY
        truthy = self._call_resuming(rows[C_FIRST], cond_plan, row, C_FIRST_RESUME, True)
        if unlikely(not self._still_at(row)):
            return self._finish_with(self._prog.nodes[row]._after_condition(self, truthy))
        if not truthy:
            self._jump_at(rows[C_EXIT], row, C_EXIT)
        else:
            self._push_ret(self._pointer_at(rows[C_SECOND]))
            self._jump_at(rows[C_THEN], row, C_THEN)
        return C_NATIVE_DONE

    @cython.final
    cdef int _native_loop_control(self, tuple operands) except -1:
        """BREAK_LOOP / CONTINUE: pop the loop's entry and jump to a slot beside it."""
        cdef PointerVector bound
        cdef bint exact = False
        entry = self._pop_ret()
        slot, targets = operands
        if type(entry) is PointerVector and (<PointerVector> entry)._items is None \
                and (<PointerVector> entry)._prog is self._prog:
            bound = <PointerVector> entry
            target = (<dict> targets).get(bound._row)
            if target is None:
                addr = _beside(bound._list(), slot)
                target = (self._prog._locate(addr, &exact), exact, addr)
                (<dict> targets)[bound._row] = target
            self._native_jump(target)
        elif self._c_mark_jump():
            self._move_to(_beside(list(entry.base_addr), slot))
        return 0

    @cython.final
    cdef object _near_plan(self, Py_ssize_t row, bint with_exc):
        """The plan for running `call_near` of the Try part at `row` inline (`with_exc`: as a CATCH
        handler, with the exception keywords), or None when it is not ready. Valid only while the
        pointer is on the Try row (`_still_at`), as it is when the body starts."""
        if not with_exc:
            return self._inline_plan(row)
        if not self._inline_callable(row) or self._signal.pending:
            return None
        plan = self._prog.static_plans[row]
        if plan is None:
            if _clashes(self._ava_kwargs_v):  # the call fails; `call_near` raises it
                return None
            plan = self._exc_plan(row)
        if plan is None or (<CallPlan> plan).slow:
            return None
        return plan

    @cython.final
    cdef bint _run_near_inline(self, Py_ssize_t row, tuple part, object exc_kwargs) except -1:
        """`call_near` of a part `(slot, row)` of the Try block at `row` (a CATCH handler when
        `exc_kwargs` is given), run inline when it can be; False when it cannot."""
        cdef Py_ssize_t target = part[1]
        if not self._still_at(row):
            return False
        plan = self._near_plan(target, exc_kwargs is not None)
        if plan is None:
            return False
        self._subcall_inline(target, plan, exc_kwargs)
        return True

    @cython.final
    cdef object _catch_for(self, tuple catches, object exc):
        """The part of the CATCH of `catches` that handles `exc`, or None (`TryNode._handler_for`)."""
        if _is_instance(exc, self._exc_ignored) and not _unsafe.__flags__.DISABLE_EXC_IGNORED:
            return None
        for exc_type, part in catches:
            if _is_instance(exc, exc_type):
                return part
        return None

    @cython.final
    cdef int _call_body(self, Py_ssize_t target, CallPlan plan) except -1:
        """`call_near` of a Try body with its plan."""
        self._enter_frame(target)
        try:
            if self._prog.cbits[target] & C_ROW_PRECHECK:
                self._prog.nodes[target]._pre_check(self)
            self._call_plan(self._prog.funcs[target], plan, None)
        finally:
            self._leave_frame()
        return 0

    @cython.final
    cdef inline bint _frame_leaves_cleanly(self) noexcept:
        """True when `_leave_frame` cannot fail: the return stack is a `Stack` with a pointer on top."""
        if type(self._ret_addr_stack) is not Stack:
            return False
        cdef list items = (<Stack> self._ret_addr_stack).stack
        return items is not None and len(items) > 0 and type(<object> PyList_GET_ITEM(items, len(items) - 1)) is PointerVector

    @cython.final
    cdef object _leave_body_frame(self, object raised):
        """`_leave_frame` after a Try body that raised `raised` (or None): what the block catches. The
        frame's own failure (its pop, when the body emptied the return stack) is raised inside the
        block, as `call_sub`'s `finally` would raise it, with the body's exception as its context."""
        try:
            self._leave_frame()
        except BaseException as exc:
            if raised is not None and exc.__context__ is None:
                exc.__context__ = raised
            return exc
        return raised

    @cython.final
    cdef object _native_try_now(self, Py_ssize_t row, tuple operands):
        """A Try block with CATCH handlers only, run without a coroutine: None when done, an
        awaitable that finishes it (the handler cannot run inline now), or NOT_NOW (nothing done)."""
        cdef int *rows = &self._prog.crows[C_ROW_WIDTH * row]
        cdef tuple handler
        cdef Py_ssize_t target = rows[C_FIRST]
        cdef PyObject *saved[3]
        _, on_success, on_exit, catches = <tuple> operands[C_EXTRA]
        if on_success is not None or on_exit is not None or self._prog.cbits[target] & C_ROW_PRECHECK:
            return NOT_NOW
        plan = self._near_plan(target, False)
        if plan is None:
            return NOT_NOW
        cdef bint as_subcall = self._outer_interpreting
        values = self._plan_values(<CallPlan> plan, None, None)
        names = (<CallPlan> plan).names
        raised = None
        self._enter_frame(target)
        try:
            if names is None:
                raised = _call_catching(self._prog.funcs[target], values, None)
            else:
                raised = _call_catching(self._prog.funcs[target], (), dict(zip(names, values)))
        finally:
            if self._frame_leaves_cleanly():
                self._leave_frame()
            else:
                raised = self._leave_body_frame(raised)
        try:
            if raised is not None:
                handler = self._catch_for(catches, raised)
                if handler is None:
                    raise raised
                plan = self._near_plan(handler[1], True) if self._still_at(row) else None
                if plan is None:
                    return self._native_try(row, raised, as_subcall)
                # a handler that reads no keyword needs no exception keywords (they are only ever keywords)
                exc_kwargs = _exc_keywords(raised) if (<CallPlan> plan).keyed else None
                _start_handling(raised, saved)
                try:
                    self._subcall_inline(handler[1], plan, exc_kwargs)
                finally:
                    _end_handling(saved)
        except InterruptKeepContext:
            _support().resume_near(self, operands[C_FIRST_RESUME])
            raise
        if not as_subcall:
            if unlikely(self._left_unmarked(row)):
                self.jump_near(operands[C_FIRST_RESUME])
            else:
                self._jump_at(rows[C_THEN], row, C_THEN)
        return None

    async def _native_try(self, Py_ssize_t row, raised, bint as_subcall):
        """Run the Try block of `row`; with `raised`, the body already ran and raised it."""
        self._check_row(row)
        cdef tuple operands = self._prog.operands[row]
        cdef tuple body
        body, on_success, on_exit, catches = <tuple> operands[C_EXTRA]
        cdef Py_ssize_t target
        try:
            try:
                if raised is not None:
                    raise raised
                target = body[1]
                plan = self._near_plan(target, False)
                if plan is not None:
                    self._call_body(target, <CallPlan> plan)
                else:
                    await self.call_near(body[0])
            except BaseException as exc_val:
                handler = self._catch_for(catches, exc_val)
                if handler is None:
                    raise
                exc_kwargs = _exc_keywords(exc_val)
                if not self._run_near_inline(row, handler, exc_kwargs):
                    await self.call_near(handler[0], **exc_kwargs)
            else:
                part = on_success
                if part is not None and not self._run_near_inline(row, part, None):
                    await self.call_near(part[0])
            finally:
                part = on_exit
                if part is not None and not self._run_near_inline(row, part, None):
                    await self.call_near(part[0])
        except InterruptKeepContext:
            _support().resume_near(self, operands[C_FIRST_RESUME])
            raise
        if not as_subcall:
            if unlikely(self._left_unmarked(row)):
                self.jump_near(operands[C_FIRST_RESUME])
            else:
                self._jump_at(self._prog.crows[C_ROW_WIDTH * row + C_THEN], row, C_THEN)

    @cython.final
    cdef int _native_callsub(self, Py_ssize_t row) except -1:
        """CALL: push the return address (compiled to a row when it is one) and jump."""
        cdef int *rows = &self._prog.crows[C_ROW_WIDTH * row]
        if rows[C_SECOND] >= 0:
            self._push_ret(self._pointer_at(rows[C_SECOND]))
        else:
            self._push_ret(PointerVector(list(self._prog.nodes[row]._frm_addr)))
        self._jump_at(rows[C_THEN], row, C_THEN)
        return 0

    @cython.final
    cdef int _native_ret(self) except -1:
        saved = self._pop_ret()
        self._flag_bits &= ~C_FLAG_HLT
        self._c_rebase_to(saved if isinstance(saved, PointerVector) else saved.base_addr)
        self._recycle(saved)
        return 0

    async def _run_row(self, Py_ssize_t row):
        """Run the node of `row`: pre-execution gate, pre-check, injection, call."""
        self._check_row(row)
        cdef Program prog = self._prog
        if self._signal.pending:
            await self._gate(prog.nodes[row].tag)
        if prog.cbits[row] & C_ROW_PRECHECK:
            prog.nodes[row]._pre_check(self)
        plan = self._row_plan(row)
        if plan is None:
            return await self._run_unshared(prog.nodes[row])
        if (<CallPlan> plan).slow:
            return await self._invoke_slow(prog.nodes[row], plan)
        func = prog.funcs[row]
        cdef int bits = prog.cbits[row]
        if bits & C_ROW_CORO:
            return await self._call_plan(func, <CallPlan> plan, None)
        if bits & C_ROW_THREAD and not self._force_inline:
            return await self._offload_plan(func, plan)
        return self._call_plan(func, <CallPlan> plan, None)

    # ----- the main loop ---------------------------------------------------------------

    def _enter_step(self):
        """Prepare a step with the lock held: STEP_RAN to run, STEP_SKIPPED, or STEP_END."""
        return self._c_enter_step()

    @cython.final
    cdef int _c_enter_step(self) except -1:
        """Prepare a step with the lock held: STEP_RAN to run, STEP_SKIPPED, or STEP_END."""
        cdef bint recompiled = self._prog.successor is not None
        if recompiled:
            self._adopt_successor()
        cdef PointerVector ptr = self._pointer
        if ptr._items is not None and not ptr._items:
            if not self._prog.nrows:
                return C_STEP_END
            self._pointer = _start_pointer(self._prog)
        self._flag_bits &= ~C_FLAG_JMP
        if self._flag_bits & C_FLAG_HLT:
            self._flag_bits &= ~C_FLAG_HLT
            if recompiled:
                return C_STEP_SKIPPED if self._advance_recompiled() else C_STEP_END
            return C_STEP_SKIPPED if self._advance(self._pointer) else C_STEP_END
        return C_STEP_RAN

    def _leave_step(self):
        """After a node ran: consume a marked jump or advance. False when the run is over."""
        return self._c_leave_step()

    @cython.final
    cdef bint _c_leave_step(self) except -1:
        """After a node ran: consume a marked jump or advance. False when the run is over."""
        if self._flag_bits & C_FLAG_JMP:
            self._flag_bits &= ~C_FLAG_JMP
            return True
        if self._prog.successor is not None:
            return self._advance_recompiled()
        return self._advance(self._pointer)

    @cython.final
    cdef bint _advance_recompiled(self) except -1:
        """Advance after the program was recompiled under the pointer (a hot-swapped slot, maybe
        the running node's own): from the same address in the new program, as 1.1.3 does, or, when
        that address is gone, to the next position after it (beside it, else after its segment)."""
        cdef bint exact = False
        self._adopt_successor()
        cdef list addr = self._pointer._list()
        if not addr or self._prog._locate(addr, &exact) >= 0:
            return self._advance(self._pointer)
        addr = list(addr)
        while addr:
            addr[len(addr) - 1] += 1
            if self._prog._locate(addr, &exact) >= 0:
                self._move_to(addr)
                return True
            addr.pop()
        self._pointer._items = []
        return False

    async def _run_current(self):
        """What one main-loop step executes: the middleware, or the node at the pointer."""
        if self._middleware is not None:
            return await self._middleware(self)
        return await self._run_row(self._c_descend_current())

    async def _take_lock(self):
        if not self._interpret_lock._try_take(self._run_task):
            await self._interpret_lock._park(self._run_task, None)

    @cython.final
    cdef inline bint _keeps_lock(self, InterpretLock lock, Py_ssize_t steps):
        """True when the next step may run without releasing the lock first: releasing and
        taking it again would change nothing (no waiter, no request, no stop, no clock check)."""
        return (steps % CHECK_CLOCK_EVERY != 0 and not self._signal.pending and not self._pending_stop
                and not lock._waiters and lock._owner is self._run_task)

    async def _execute(self):
        """Run steps until the workflow ends, a stop is requested, or something raises."""
        # Lock hand-over: the run takes the interpreter lock at the top of the loop and keeps it
        # across steps (`_keeps_lock`). It lets go, between two steps, only when that changes
        # something: a waiter (an external `call_sub(interrupt=True)`; `_release` makes it the owner
        # at once, so this loop parks behind it), a suspend request (the PC_CHECKPOINT gate waits
        # with the lock free; a node's own tag gate, in `_run_row`, waits holding it, so an
        # interrupt runs only after the resumed step), a stop, the clock check. The `finally`
        # releases on every exit; a KeyboardInterrupt inside that release is repaired by
        # `_finish_run` (`_release_held_by`).
        cdef InterpretLock lock = self._interpret_lock
        cdef Py_ssize_t steps = 0
        cdef Py_ssize_t row
        cdef int state, op, status
        cdef double last_yield = monotonic()
        cdef double now
        while True:
            if self._signal.pending:
                await self._gate(PC_CHECKPOINT)
            if self._pending_stop:
                self._pending_stop = False
                return
            if not lock._try_take(self._run_task):
                await lock._park(self._run_task, None)
            try:
                while True:  # steps back to back while nobody else wants the lock
                    state = self._c_enter_step()
                    if state == C_STEP_END:
                        return
                    if state == C_STEP_RAN:
                        if self._middleware is not None:
                            await self._middleware(self)
                        else:
                            row = self._c_descend_current()
                            op = self._prog.cops[row]
                            if op != C_OP_CALL and not self._signal.pending:
                                if op == C_OP_NOP:
                                    pass
                                elif op == C_OP_TRY:
                                    outcome = self._native_try_now(row, self._prog.operands[row])
                                    if outcome is NOT_NOW:
                                        await self._native_try(row, None,
                                                               self._outer_interpreting)
                                    elif outcome is not None:
                                        await outcome
                                else:
                                    status = self._run_native_sync(row, op)
                                    if status == C_NATIVE_NOT_READY:
                                        await self._run_row(row)
                                    elif status == C_NATIVE_AWAIT:
                                        rest, self._native_rest = self._native_rest, None
                                        await rest
                            else:
                                plan = self._cached_plan(row)
                                if plan is None:
                                    await self._run_row(row)
                                elif (<CallPlan> plan).slow:
                                    if self._prog.cbits[row] & C_ROW_PRECHECK:
                                        self._prog.nodes[row]._pre_check(self)
                                    results = self._results_for(<CallPlan> plan, row)
                                    if results is not None:
                                        outcome = self._call_with_results(row, <CallPlan> plan, results)
                                        if self._prog.cbits[row] & C_ROW_CORO:
                                            await outcome
                                    else:
                                        outcome = self._invoke_slow_now(self._prog.nodes[row], plan)
                                        if outcome is NOT_NOW:
                                            await self._invoke_slow(self._prog.nodes[row], plan)
                                        elif outcome is not None:
                                            await outcome
                                elif self._inline_callable(row):
                                    self._call_inline(row, <CallPlan> plan, None)
                                elif self._prog.cbits[row] & C_ROW_CORO:
                                    if self._prog.cbits[row] & C_ROW_PRECHECK:
                                        self._prog.nodes[row]._pre_check(self)
                                    await self._call_plan(self._prog.funcs[row], <CallPlan> plan, None)
                                else:
                                    await self._call_with_plan(row, plan)
                        if not self._c_leave_step():
                            return
                    steps += 1
                    if not self._keeps_lock(lock, steps):
                        break
            finally:
                lock._release()
            if steps % CHECK_CLOCK_EVERY == 0:
                now = monotonic()
                if now - last_yield >= self._yield_interval:
                    await asyncio.sleep(0)
                    last_yield = monotonic()


# Imported last: importing `amrita_sense` runs its selector, which reads this module's names,
# so `import _sense_core` on its own must find them defined by then.
from amrita_sense import _unsafe  # noqa: E402
from amrita_sense._classmemo import ClassMemo  # noqa: E402
from amrita_sense.exceptions import (  # noqa: E402
    BreakLoop, IllegalState, InterruptKeepContext, InterruptNotice, NullPointerException,
)

_PLAIN_CLASS = ClassMemo(_reports_itself)
