# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled core of amrita-sense-turbo.

Same classes, algorithms and behaviour as the pure-Python twin
`amrita_sense/_core_py.py` (the readable reference); a fix in one needs the
matching fix in the other. See `_sense_core.pxd` for the typed layout.
Every C-level method is `@cython.final`: called directly, so the C compiler
can inline it, instead of through the method table.
"""

import asyncio
import contextvars
import functools
import threading

import sniffio

from amrita_sense import _opcodes

cimport cython
from time import monotonic

from cpython.dict cimport PyDict_GetItemWithError
from cpython.list cimport PyList_GET_ITEM, PyList_SET_ITEM
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyTypeObject
from cpython.ref cimport PyObject, Py_DECREF, Py_INCREF, Py_REFCNT, Py_XDECREF


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


IMPLEMENTATION = "cython"

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


cdef class CallPlan:
    """A shared injection plan as the core runs it (see the twin): `srcs` has one entry per
    argument, an int (a position in the positional pool) or a str (a keyword name)."""

    def __init__(self, tuple srcs, names, bint slow, entry):
        cdef Py_ssize_t i
        self.srcs = srcs
        self.names = names
        self.slow = slow
        self.entry = entry
        self.n = len(srcs)
        self.cidx = <Py_ssize_t *> PyMem_Malloc((self.n + 1) * sizeof(Py_ssize_t))
        if self.cidx == NULL:
            raise MemoryError()
        for i in range(self.n):
            self.cidx[i] = srcs[i] if type(srcs[i]) is int else -1

    def __dealloc__(self):
        PyMem_Free(self.cidx)


NO_ARGUMENTS = CallPlan((), None, False, None)  # a function without parameters: the same for every pool
UNSHARED = CallPlan((), None, True, None)  # a table's mark: the Python layer resolves this node per interpreter


cdef class Program:
    """The flat node table of one rendered graph (see the twin for the full story)."""

    def __init__(self, graph, list nodes, list funcs, list bits, list static_plans,
                 list ops, list operands, list rows, list landings, list addrs, row_of, dict seg_row):
        cdef Py_ssize_t i, k
        self.graph = graph
        self.nodes = nodes
        self.funcs = funcs
        self.bits = bits
        self.static_plans = static_plans
        self.ops = ops
        self.operands = operands
        self.landings = landings
        self.addrs = addrs
        self.row_of = row_of
        self.seg_row = seg_row
        self.nrows = len(nodes)
        self.successor = None
        self.tables = {}
        self.cbits = <int *> PyMem_Malloc((self.nrows + 1) * sizeof(int))
        self.cops = <int *> PyMem_Malloc((self.nrows + 1) * sizeof(int))
        self.crows = <int *> PyMem_Malloc((C_ROW_WIDTH * self.nrows + 1) * sizeof(int))
        if self.cbits == NULL or self.cops == NULL or self.crows == NULL:
            raise MemoryError()
        for i in range(self.nrows):
            self.cbits[i] = bits[i]
            self.cops[i] = ops[i]
            for k in range(C_ROW_WIDTH):
                self.crows[C_ROW_WIDTH * i + k] = rows[i][k]

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
        """The row table of plans for pools of `shape` (shared by every interpreter of that shape)."""
        return self._table_for(shape)

    def locate(self, items):
        """Row for an address list: `(row, exact)`, or `(-1, False)` if none."""
        cdef bint exact = False
        cdef Py_ssize_t row = self._locate(list(items), &exact)
        return row, exact


@cython.freelist(64)
cdef class PointerVector:
    """The program counter: a list of indices, a lazy view over a table row while bound."""

    def __init__(self, base=None):
        self._items = base or [0]
        self._row = -1
        self._prog = None

    @staticmethod
    def _at_row(prog, Py_ssize_t row):
        return _bound_pointer(prog, row)

    @cython.final
    cdef list _list(self):
        if self._items is None:
            self._items = list((<Program> self._prog).addrs[self._row])
        return <list> self._items

    @cython.final
    cdef void _set_row(self, Program prog, Py_ssize_t row):
        self._prog = prog
        self._row = row
        self._items = None

    @property
    def base_addr(self):
        return self._list()

    @base_addr.setter
    def base_addr(self, value):
        self._items = value

    def offset(self, offset):
        cdef list items = self._list()
        items[len(items) - 1] += offset
        return self

    def offset_far(self, offset):
        cdef list items = self._list()
        items[:] = _offset_far(items, list(offset))
        return self

    def near_to(self, short_offset):
        cdef list items = self._list()
        items[len(items) - 1] = short_offset
        return self

    def far_to(self, addr):
        self._list()[:] = list(addr)
        return self

    def pop(self):
        return self._list().pop()

    def append(self, node_ip):
        self._list().append(node_ip)

    def clear(self):
        self._items = []

    def copy(self):
        if self._items is None:
            return PointerVector._at_row(self._prog, self._row)
        return PointerVector(list(self._items))

    def __add__(self, other):
        return self.copy().offset_far(other.base_addr)

    def __sub__(self, other):
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
        self._list()[index] = value

    def __iter__(self):
        return iter(list(self._list()))

    def __len__(self):
        if self._items is None:
            return len((<Program> self._prog).addrs[self._row])
        return len(self._items)

    def __delitem__(self, key):
        raise ValueError("Cannot delete items from PointerVector")


cdef PointerVector _bound_pointer(Program prog, Py_ssize_t row):
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
        self.stack = []
        self.ovf = ovf

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
        self.ovf = size

    def copy(self):
        cdef Stack twin = type(self)(self.ovf)
        twin.stack = list(self.stack)
        return twin


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


cdef dict _PLAIN_CLASS = {}
cdef object _OBJECT_CLASS = object.__dict__["__class__"]
cdef tuple _last_verdict = (None, False)  # the type `_plain_class` was last asked about, and its verdict


cdef bint _plain_class(type kind) except -1:
    """True when instances of `kind` report `kind` as their `__class__` (no override in the MRO)."""
    global _last_verdict
    cdef tuple last = _last_verdict
    if last[0] is kind:
        return last[1]
    verdict = _PLAIN_CLASS.get(kind)
    if verdict is None:
        descriptor = next(klass.__dict__["__class__"] for klass in kind.__mro__ if "__class__" in klass.__dict__)
        if len(_PLAIN_CLASS) >= 4096:
            _PLAIN_CLASS.clear()
        verdict = _PLAIN_CLASS[kind] = descriptor is _OBJECT_CLASS
    _last_verdict = (kind, verdict)
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


cdef object _support():
    from amrita_sense.instructions import _support as support
    return support


cdef class InterpreterCore:
    """The interpreter state the hot path touches, and the step loop itself."""

    def _core_init(self, prog, addr_stack, context_stack, middleware):
        """Set up the core's fields (object fields not named here start as None)."""
        self._prog = prog
        self._pointer = _start_pointer(prog)
        self._ret_addr_stack = addr_stack if addr_stack is not None else _new_stack()
        self._context_stack_v = context_stack
        self._flag_bits = 0
        self._middleware = middleware
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
        if waiter is RUNNING or (waiter is not None and not waiter.done()):
            raise IllegalState("Cannot start a new workflow while one is already running")
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

    @property
    def _context_stack(self):
        """The context stack (PUSH_CONTEXT / INT), made on first use."""
        if self._context_stack_v is None:
            self._context_stack_v = _new_stack()
        return self._context_stack_v

    @_context_stack.setter
    def _context_stack(self, stack):
        self._context_stack_v = stack

    def _layer_init(self, graph, extra_args, extra_kwargs, exception_ignored, bint no_passing, shape_of,
                    double yield_interval):
        """The Python layer's first fields in one call (the others start as None): the graph, the
        pools (the interpreter itself, then `extra_args`; a copy of `extra_kwargs`), the pass-through
        exception types (none with `no_passing`), the pools' shape (`shape_of`), the tree's child maps."""
        args = (self,) + tuple(extra_args)
        kwargs = dict(extra_kwargs) if extra_kwargs else {}
        self._graph = graph
        self._ava_args_v = args
        self._ava_kwargs_v = kwargs
        self._exc_ignored = () if no_passing else tuple(exception_ignored) + (InterruptNotice, BreakLoop)
        self._shape = shape_of(args, kwargs)
        self._yield_interval = yield_interval
        self._sub_interpreters = {}
        self._sub_interpreters_all = {}

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
        """Make the pointer equal to `ptr` (a list or a PointerVector), without a jump mark."""
        self._c_rebase_to(ptr)

    @cython.final
    cdef int _c_rebase_to(self, object ptr) except -1:
        """Make the pointer equal to `ptr` (a list or a PointerVector), without a jump mark."""
        cdef PointerVector other
        if isinstance(ptr, PointerVector) and (<PointerVector> ptr)._items is None:
            other = <PointerVector> ptr
            self._pointer._set_row(other._prog, other._row)
        else:
            self._pointer._items = list(ptr)
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
        addr = list(addr)
        if self._prog._locate(addr, &exact) < 0 and self._prog.graph.calc.find_addr_safe(addr) is None:
            raise NullPointerException(f"{addr} is not a valid address")
        self._c_mark_jump()
        self._move_to(addr)

    def jump_near(self, addr):
        """Set the last coordinate of the pointer."""
        if self._c_mark_jump():
            self._pointer.near_to(addr)

    def jump_offset(self, offset):
        """Add `offset` to the last coordinate of the pointer."""
        if self._c_mark_jump():
            self._pointer.offset(offset)

    def jump_far_ptr(self, offset):
        """Replace the whole address (absolute, not validated)."""
        if self._c_mark_jump():
            self._move_to(list(offset))

    def jump_offset_far(self, offset):
        """Add a vector element-wise to the pointer (see `PointerVector.offset_far`)."""
        if self._c_mark_jump():
            self._pointer.offset_far(offset)

    def jump_to_top(self, addr):
        """Jump to `[addr]` at the top level."""
        if self._c_mark_jump():
            self._move_to([addr])

    def jump_offset_top(self, offset):
        """Jump to the top-level slot `offset` after the current one."""
        if self._c_mark_jump():
            ptr = self._pointer
            second = ptr[1] if len(ptr) > 1 else 0
            ptr.offset_far([offset, -(second + 1)])

    # ----- one node -------------------------------------------------------------------

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
            plan = self._shared_plan(self._prog.nodes[row], False)
            (<list> table)[row] = plan
        return plan

    @cython.final
    cdef object _cached_plan(self, Py_ssize_t row):
        """The plan of `row` (providers included) unless a suspend signal is pending."""
        if self._signal.pending:
            return None
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
            plan = self._shared_plan(self._prog.nodes[row], True)
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
    cdef tuple _plan_values(self, CallPlan plan, object extra):
        """The plan's argument values from the pools (a keyword is looked up in `extra` first)."""
        cdef Py_ssize_t i, k
        cdef tuple srcs = plan.srcs
        pool = self._ava_args_v
        kwargs = self._ava_kwargs_v
        values = []
        for i in range(plan.n):
            k = plan.cidx[i]
            if k >= 0:
                values.append(pool[k])
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
            values = self._plan_values(plan, extra)
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
    cdef inline bint _inline_callable(self, Py_ssize_t row):
        cdef int bits = self._prog.cbits[row]
        return not (bits & C_ROW_CORO) and (not (bits & C_ROW_THREAD) or self._force_inline)

    @cython.final
    cdef object _call_inline(self, Py_ssize_t row, CallPlan plan, object extra):
        if self._prog.cbits[row] & C_ROW_PRECHECK:
            self._prog.nodes[row]._pre_check(self)
        return self._call_plan(self._prog.funcs[row], plan, extra)

    async def _call_with_plan(self, Py_ssize_t row, CallPlan plan):
        """A main-loop step with its plan; a worker-thread node starts a batch (`_batch_in_worker`)."""
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

    def _batch_in_worker(self, Py_ssize_t row, CallPlan plan, base, fut):
        """In a worker thread: run `row`'s node, then the thread nodes after it while the batch
        may go on (`fut`: the future the run awaits). Returns the last node's result."""
        cdef Program prog = self._prog
        while True:
            result = base.copy().run(self._run_plan_call, prog.funcs[row], plan)
            row = self._batch_successor(row, fut)
            if row < 0:
                return result
            plan = self._batch_plan(row)
            self._pointer._set_row(prog, row)

    def _run_plan_call(self, func, CallPlan plan):
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

    def _offload_plan(self, func, CallPlan plan):
        """`_offload` of `func` with the plan's values."""
        values = self._plan_values(plan, None)
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
        values = self._plan_values(<CallPlan> plan, None)
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
                    return self._native_try(row, operands, raised, as_subcall)
                exc_kwargs = _exc_keywords(raised)
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

    async def _native_try(self, Py_ssize_t row, tuple operands, raised, bint as_subcall):
        """Run the Try block at `row`; with `raised`, the body already ran and raised it."""
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
        if self._prog.successor is not None:
            self._adopt_successor()
        cdef PointerVector ptr = self._pointer
        if ptr._items is not None and not ptr._items:
            if not self._prog.nrows:
                return C_STEP_END
            self._pointer = _start_pointer(self._prog)
        self._flag_bits &= ~C_FLAG_JMP
        if self._flag_bits & C_FLAG_HLT:
            self._flag_bits &= ~C_FLAG_HLT
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
        return self._advance(self._pointer)

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
                                        await self._native_try(row, self._prog.operands[row], None,
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
from amrita_sense.exceptions import (  # noqa: E402
    BreakLoop, IllegalState, InterruptKeepContext, InterruptNotice, NullPointerException,
)
