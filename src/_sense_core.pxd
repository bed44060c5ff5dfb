# The contract of the compiled core: typed fields and C-level methods of the hot path.
# The pure-Python twin (amrita_sense/_core_py.py) implements the same classes.

cdef class SuspendFlag:
    cdef public bint pending


cdef class CallPlan:
    cdef readonly tuple srcs
    cdef readonly object names
    cdef readonly bint slow
    cdef readonly object entry
    cdef readonly bint cached  # some argument is a `use_cache` result (a `(name,)` source)
    cdef readonly bint keyed  # some argument is read from the keyword pool (a str source)
    cdef Py_ssize_t n
    cdef Py_ssize_t *cidx  # per argument: a position in the positional pool, C_KEYWORD or C_RESULT


cdef class Program:
    # Everything the step loop indexes without bounds checks is fixed at construction: the per-row
    # tables are tuples (read-only from Python), the address maps and operands are not exposed.
    cdef readonly object graph
    cdef readonly tuple nodes
    cdef readonly tuple funcs
    cdef readonly tuple bits
    cdef readonly tuple static_plans
    cdef readonly tuple addrs
    cdef object row_of
    cdef dict seg_row
    cdef readonly Py_ssize_t nrows
    cdef Program successor  # a property of the same name checks writes: a Program, no cycle
    cdef readonly tuple ops
    cdef tuple operands
    cdef tuple landings
    cdef dict tables  # plan tables by pool shape (`_table_for`)
    cdef int *cbits
    cdef int *cops
    cdef int *crows

    cdef int _alloc_rows(self, Py_ssize_t nrows) except -1
    cdef Py_ssize_t _locate(self, list items, bint *exact) except -2
    cdef list _table_for(self, object shape)


cdef class PointerVector:
    # `_items` is None (bound: the address is `_prog.addrs[_row]`) or a list; only the core binds.
    cdef readonly object _items
    cdef readonly Py_ssize_t _row
    cdef readonly object _prog

    cdef list _list(self)
    cdef tuple _bound_addr(self)
    cdef void _set_row(self, Program prog, Py_ssize_t row)


cdef class Stack:
    cdef list stack  # a property of the same name checks writes: a list
    cdef Py_ssize_t ovf  # a property of the same name checks writes: an int

    cdef int _push(self, object item) except -1
    cdef object _pop(self)


cdef class InterpretLock:
    cdef public object _owner
    cdef public list _waiters

    cdef bint _try_take(self, object owner)
    cdef int _release(self) except -1


cdef class InterpreterCore:
    # The loop reads its fields unchecked, so every field Python can write is a property of the same
    # name whose setter checks the value ("checked at the write" in the .pyx); the bint and int fields
    # are public (any value is one), the core's own bookkeeping is readonly or private.
    cdef readonly Program _prog
    cdef PointerVector _pointer
    cdef object _ret_addr_stack
    cdef object _context_stack_v  # a Stack, or None until the `_context_stack` property makes one
    cdef public int _flag_bits
    cdef object _middleware
    cdef public bint _outer_interpreting
    cdef public bint _pending_stop
    cdef InterpretLock _interpret_lock
    cdef list _plans
    cdef list _exc_plans
    cdef object _shape
    cdef readonly bint _plans_valid
    cdef readonly object _run_task
    cdef SuspendFlag _signal
    cdef readonly bint _force_inline
    cdef readonly bint _squashed_loops
    cdef double _yield_interval
    cdef object _exc_ignored
    cdef object _ava_args_v
    cdef object _ava_kwargs_v
    cdef PointerVector _spare_pointer
    cdef object _native_rest  # a node's continuation the loop is about to await (C_NATIVE_AWAIT)
    # the Python layer's fields (WorkflowInterpreter): here so that a new interpreter has them None
    cdef object _args_hash
    cdef object _dep_store_v
    cdef object _di_cache
    cdef object _glob_lock_v
    cdef object _graph
    cdef object _interpreter_id
    cdef object _lifecycles_v
    cdef object _object_io
    cdef object _panic_exc
    cdef object _parent_interpreter
    cdef object _provider_values
    cdef object _sub_interpreters
    cdef object _sub_interpreters_all
    cdef object _top_interpreter
    cdef object _values_key
    cdef object _waiter

    cdef Py_ssize_t _locate_current(self, bint *exact) except -2
    cdef bint _advance(self, PointerVector ptr) except -1
    cdef int _check_row(self, Py_ssize_t row) except -1
    cdef object _row_plan(self, Py_ssize_t row)
    cdef object _cached_plan(self, Py_ssize_t row)
    cdef object _exc_plan(self, Py_ssize_t row)
    cdef object _ready_plan(self, Py_ssize_t row)
    cdef tuple _plan_values(self, CallPlan plan, object extra, object results)
    cdef object _results_for(self, CallPlan plan, Py_ssize_t row)
    cdef object _call_with_results(self, Py_ssize_t row, CallPlan plan, dict results)
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
    cdef int _check_last_index(self, object value, str method) except -1
    cdef Py_ssize_t _c_descend_current(self) except -1
    cdef bint _c_mark_jump(self)
    cdef int _c_enter_step(self) except -1
    cdef bint _c_leave_step(self) except -1
    cdef bint _advance_recompiled(self) except -1
