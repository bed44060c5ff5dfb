# Augments src/amrita_sense/core/_structures.py when Cython compiles it into
# `amrita_sense.core._structures` (the shared stem is how Cython finds this file). The compiled core
# (`_sense_core.pxd`) cimports these types and functions: it reads and writes the fields below as C
# struct members. A class declared here becomes an extension type with these fields in place of its
# __slots__; a typed field refuses what the pure build's code would never store there (TypeError).

cimport cython
from cpython.pythread cimport PyThread_type_lock

cdef Py_ssize_t ROW_WIDTH, _TABLES_PER_PROGRAM

cdef class CallPlan:
    cdef readonly bint cached  # its only providers are use_cache ones: the core runs it once their results exist
    cdef readonly object entry  # the di.plans.PlanEntry it was made from (the Python layer runs slow plans from it)
    cdef readonly object fetch  # fetch(pool, kwargs) -> the argument values (the pure build's path)
    cdef readonly object fetch_with  # the same with the use_cache results (cached plans), else None
    cdef readonly bint keyed  # some argument comes from the keyword pool
    cdef readonly object names  # None: a positional call; else the parameter names of a keyword call
    cdef readonly bint slow  # providers or use_cache values: the Python layer runs it (`_invoke_slow`)
    cdef readonly tuple srcs  # per argument: pool position (int), keyword name (str) or use_cache result ((name,))
    cdef Py_ssize_t n  # len(srcs), the length of cidx
    cdef Py_ssize_t *cidx  # per argument: a position in the positional pool, KEYWORD or RESULT (_capi.pxd)


cdef class Program:
    # one entry per row (a node, or an empty segment execution can land on), in depth-first order
    cdef readonly object graph  # the rendered graph this table was compiled from
    cdef readonly tuple nodes
    cdef readonly tuple funcs  # each node's function (what the loop calls)
    cdef readonly tuple bits  # ROW_CORO / ROW_THREAD / ROW_PRECHECK / ROW_EMPTY per row (cbits in C)
    cdef readonly tuple static_plans  # the CallPlan of a node that takes no injection, else None
    cdef readonly tuple ops  # the opcode per row (cops in C; opcodes.py)
    cdef readonly tuple operands  # the operand record per row (opcodes.py's named fields), or None
    cdef readonly tuple landings  # the address a step onto this row lands at when it is not the row's own
    cdef readonly tuple addrs  # each row's address (a tuple of ints)
    cdef public object row_of  # address -> row, built on the first lookup (None until then)
    cdef readonly dict seg_row  # a segment's address -> the row execution enters it at
    cdef readonly Py_ssize_t nrows
    cdef readonly Program _successor  # the table that replaced this one after an in-place slot swap
    cdef readonly dict tables  # pool shape -> the shared plan table of that shape (bounded)
    cdef int *cbits  # bits, ops and the dense rows (ROW_WIDTH per row: FIRST, SECOND, EXIT, THEN; -1
    cdef int *cops   # where a field has no row) as C arrays, which the compiled loop indexes
    cdef int *crows

    cdef inline int _alloc_rows(self, Py_ssize_t nrows) except -1

    cdef inline list _table_for(self, object shape)


cdef class Stack:
    cdef public list _items  # bottom first
    cdef public Py_ssize_t _limit  # the capacity (1.1.3's `ovf`): a push beyond it raises

    cdef inline list _items_ref(self)
    cdef inline int _push(self, object item) except -1
    cdef inline object _pop(self)


cdef class SuspendFlag:
    cdef public bint pending
    cdef public tuple tags  # the request's tag filter when the stream parks by it alone, else None


cpdef object wake(object fut, unsigned long owner, object value=*)
cdef unsigned long _thread_ident() noexcept


cdef class StreamGate(SuspendFlag):
    cdef PyThread_type_lock _mutex  # guards the fields below (taken by every method)
    cdef readonly bint by_tags  # the stream's gate methods are SuspendObjectStream's own
    cdef public object request  # the requester's future, or None
    cdef public unsigned long owner  # the thread whose loop awaits `request`
    cdef public tuple request_tags  # its tag filter (empty: every gate)
    cdef public bint fired  # a gate took `request`
    cdef public list parked  # the parked gates' (future, thread) pairs, or None
    cdef public object parked_for  # the request they parked for

    cdef inline int _acquire(self) except -1
    cdef inline void _release(self) noexcept
    cpdef object request_for(self, object tag)
    cdef inline object _request_of(self, object stream, object tag)
    cdef int _unpark(self, list parked, tuple entry) except -1


cdef class PointerVector:
    # the view fields: written by the core's C code only (Python sees them read-only)
    cdef readonly object _items
    cdef readonly Program _prog
    cdef readonly Py_ssize_t _row

    cdef inline list _list(self)
    cdef inline list _materialised(self)
    cdef inline int _set_list(self, object items) except -1
    cdef inline object _copied(self)
    cdef inline object _bound_addr(self)


cdef class InterpretLock:
    cdef public object _owner  # the task holding the lock, or None
    cdef public list _queue  # the futures of the tasks waiting for it, first come first served

    cdef inline bint _try_take(self, object owner) except -1
    cdef inline int _release(self) except -1


# module-level C functions (no Python module attribute in the compiled core)


@cython.locals(vec=PointerVector)
cdef PointerVector _bound_pointer(Program prog, Py_ssize_t row)
cdef PointerVector _start_pointer(Program prog)


@cython.locals(lock=InterpretLock)
cdef InterpretLock _new_lock()


@cython.locals(stack=Stack)
cdef Stack _new_stack()


cdef dict _TASK_TABLE  # asyncio's current-task table where reading it is what `current_task` does, else None
cdef object _running_loop
cdef bint _still_at(PointerVector ptr, Program prog, Py_ssize_t row) except -1
cdef list _offset_far(list base, list offset)


cpdef object _current_task()
