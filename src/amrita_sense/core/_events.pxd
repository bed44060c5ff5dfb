# Augments src/amrita_sense/core/_events.py when Cython compiles it into `amrita_sense.core._events`
# (the shared stem is how Cython finds this file): the dispatch lock's state and the fast plans'
# fields as C fields, the lock a `PyThread` lock taken without arguments to parse.

cimport cython
from cpython.pythread cimport PyThread_type_lock


cdef object _GUARD


cdef class DispatchLock:
    cdef object __weakref__
    cdef PyThread_type_lock _mutex  # held: the lock is taken (a free-threaded build's; with the GIL, `_is_held`)
    cdef bint _is_held  # held; with the GIL set and cleared by the C code that takes and frees it
    cdef public object _owner  # the task holding the lock (taken by `try_take` or `acquire`), or None
    cdef public object _running  # the fast dispatch holding it: the coroutine of the handler it awaits
    cdef public unsigned long _thread  # the fast dispatch holding it: its thread's ident, else 0
    cdef readonly object _waiters  # the futures of the waiting dispatches (a deque), first come first served

    cdef inline bint _take(self) except -1
    cdef inline int _free(self) except -1
    cdef int _release(self) except -1
    cdef inline int _hold_here(self) except -1


cdef class FastStep:
    cdef readonly object function, matcher  # the handler and its matcher
    cdef readonly bint block  # the matcher's `block` when the plan was made
    cdef readonly tuple names  # the keyword names of its call
    cdef readonly Py_ssize_t nargs  # len(names), at most MAX_FAST_ARGS
    cdef readonly unsigned int picks  # bit i: the i-th argument is the matcher (else the event)
    cdef readonly object code  # the function's code while a positional call binds as the keyword call, or None


cdef class FastPlan:
    cdef readonly str event_type
    cdef readonly object event_class, table
    cdef readonly DispatchLock lock
    cdef readonly object version  # the registry's version (an int)
    cdef readonly tuple groups  # the priority groups' lists
    cdef readonly tuple copies  # per priority group, its handlers then
    cdef readonly bint no_exc_ignored  # the flag DISABLE_EXC_IGNORED was set
    cdef readonly tuple steps  # FastStep per handler, in run order
    cdef readonly tuple slow_steps  # the hook layer's steps, for `run_rest`
    cdef unsigned int table_tag  # the registry class's version tag while its table was `table`, or 0


cdef class _Hook:
    cdef object cancel, matcher_error, passed, log_failure, run_rest, slow, registry
    cdef list version


cdef dict _plans
cdef list _last
cdef list _hook
cdef Py_ssize_t _PLAN_LIMIT


cdef object _positional_code(object function, tuple names)
cdef inline FastStep _step_at(tuple steps, Py_ssize_t index)
cdef inline bint _current(_Hook hook, FastPlan plan) except -1
cdef bint _fits(_Hook hook, FastPlan plan, object event_type) except -1
cdef unsigned int _table_tag(object registry, object table) except? 0
cdef inline bint _same_table(_Hook hook, FastPlan plan) except -1


@cython.locals(g=Py_ssize_t, i=Py_ssize_t, handlers=list, held=tuple)
cdef bint _same_handlers(tuple groups, tuple copies) except -1


cdef object _call(DispatchLock lock, FastStep step, object event)
cdef object _start(object awaitable)
