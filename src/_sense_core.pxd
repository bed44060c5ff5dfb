# The contract of the compiled core: typed fields and C-level methods of the hot path.
# The pure-Python twin (amrita_sense/_core_py.py) implements the same classes.

cdef class SuspendFlag:
    cdef public bint pending


cdef class CallPlan:
    cdef readonly tuple srcs
    cdef readonly object names
    cdef readonly bint slow
    cdef readonly object entry
    cdef Py_ssize_t n
    cdef Py_ssize_t *cidx


cdef class Program:
    cdef public object graph
    cdef public list nodes
    cdef public list funcs
    cdef public list bits
    cdef public list static_plans
    cdef public list addrs
    cdef public object row_of
    cdef public dict seg_row
    cdef public Py_ssize_t nrows
    cdef public object successor
    cdef public list ops
    cdef public list operands
    cdef public list landings
    cdef public dict tables
    cdef int *cbits
    cdef int *cops
    cdef int *crows

    cdef Py_ssize_t _locate(self, list items, bint *exact) except -2
    cdef list _table_for(self, object shape)


cdef class PointerVector:
    cdef public object _items
    cdef public Py_ssize_t _row
    cdef public object _prog

    cdef list _list(self)
    cdef void _set_row(self, Program prog, Py_ssize_t row)


cdef class Stack:
    cdef public list stack
    cdef public Py_ssize_t ovf

    cdef int _push(self, object item) except -1
    cdef object _pop(self)


cdef class InterpretLock:
    cdef public object _owner
    cdef public list _waiters

    cdef bint _try_take(self, object owner)
    cdef int _release(self) except -1


cdef class InterpreterCore:
    cdef public Program _prog
    cdef public PointerVector _pointer
    cdef public object _ret_addr_stack
    cdef object _context_stack_v
    cdef public int _flag_bits
    cdef public object _middleware
    cdef public bint _outer_interpreting
    cdef public bint _pending_stop
    cdef public InterpretLock _interpret_lock
    cdef public object _plans
    cdef public object _exc_plans
    cdef public object _shape
    cdef public bint _plans_valid
    cdef public object _run_task
    cdef public SuspendFlag _signal
    cdef public bint _force_inline
    cdef public bint _squashed_loops
    cdef public double _yield_interval
    cdef public object _exc_ignored
    cdef public object _ava_args_v
    cdef public object _ava_kwargs_v
    cdef PointerVector _spare_pointer
    cdef object _native_rest  # a node's continuation the loop is about to await (C_NATIVE_AWAIT)
    # the Python layer's fields (WorkflowInterpreter): here so that a new interpreter has them None
    cdef public object _args_hash
    cdef public object _dep_store_v
    cdef public object _di_cache
    cdef public object _glob_lock_v
    cdef public object _graph
    cdef public object _interpreter_id
    cdef public object _lifecycles_v
    cdef public object _object_io
    cdef public object _panic_exc
    cdef public object _parent_interpreter
    cdef public object _provider_values
    cdef public object _sub_interpreters
    cdef public object _sub_interpreters_all
    cdef public object _top_interpreter
    cdef public object _values_key
    cdef public object _waiter

    cdef Py_ssize_t _locate_current(self, bint *exact) except -2
    cdef bint _advance(self, PointerVector ptr) except -1
    cdef object _row_plan(self, Py_ssize_t row)
    cdef object _cached_plan(self, Py_ssize_t row)
    cdef object _exc_plan(self, Py_ssize_t row)
    cdef object _ready_plan(self, Py_ssize_t row)
    cdef tuple _plan_values(self, CallPlan plan, object extra)
    cdef object _call_plan(self, object func, CallPlan plan, object extra)
    cdef int _refresh_tables(self) except -1
    cdef Py_ssize_t _batch_successor(self, Py_ssize_t row, object fut) except -2
    cdef object _batch_plan(self, Py_ssize_t row)
    cdef bint _inline_callable(self, Py_ssize_t row)
    cdef object _call_inline(self, Py_ssize_t row, CallPlan plan, object extra)
    cdef int _push_ret(self, object item) except -1
    cdef object _pop_ret(self)
    cdef object _inline_plan(self, Py_ssize_t row)
    cdef object _callee_plan(self, Py_ssize_t row)
    cdef bint _still_at(self, Py_ssize_t row) noexcept
    cdef bint _left_unmarked(self, Py_ssize_t row) noexcept
    cdef int _finish_with(self, object rest) except -1
    cdef int _run_native_sync(self, Py_ssize_t row, int op) except -1
    cdef int _goto(self, tuple target) except -1
    cdef int _native_jump(self, tuple target) except -1
    cdef int _jump_at(self, Py_ssize_t target_row, Py_ssize_t row, int k) except -1
    cdef object _call_resuming(self, Py_ssize_t callee, object plan, Py_ssize_t row, int k, bint near)
    cdef int _resume_at(self, Py_ssize_t row, int k, bint near) except -1
    cdef PointerVector _pointer_at(self, Py_ssize_t row)
    cdef void _recycle(self, object ptr)
    cdef bint _keeps_lock(self, InterpretLock lock, Py_ssize_t steps)
    cdef int _enter_frame(self, Py_ssize_t row) except -1
    cdef int _leave_frame(self) except -1
    cdef object _subcall_inline(self, Py_ssize_t row, object plan, object extra)
    cdef int _native_branch(self, Py_ssize_t row) except -1
    cdef int _native_else(self, Py_ssize_t row) except -1
    cdef int _native_while(self, Py_ssize_t row) except -1
    cdef int _native_do(self, Py_ssize_t row) except -1
    cdef int _native_do_check(self, Py_ssize_t row) except -1
    cdef object _near_plan(self, Py_ssize_t row, bint with_exc)
    cdef object _catch_for(self, tuple catches, object exc)
    cdef int _call_body(self, Py_ssize_t target, CallPlan plan) except -1
    cdef bint _frame_leaves_cleanly(self) noexcept
    cdef object _leave_body_frame(self, object raised)
    cdef object _native_try_now(self, Py_ssize_t row, tuple operands)
    cdef bint _run_near_inline(self, Py_ssize_t row, tuple part, object exc_kwargs) except -1
    cdef int _native_callsub(self, Py_ssize_t row) except -1
    cdef int _native_ret(self) except -1
    cdef int _native_if(self, Py_ssize_t row) except -1
    cdef int _native_invoke(self, Py_ssize_t row) except -1
    cdef int _native_loop_head(self, Py_ssize_t row) except -1
    cdef int _native_loop_control(self, tuple operands) except -1
    cdef int _c_rebase_to(self, object ptr) except -1
    cdef Py_ssize_t _c_descend_current(self) except -1
    cdef bint _c_mark_jump(self)
    cdef int _c_enter_step(self) except -1
    cdef bint _c_leave_step(self) except -1
