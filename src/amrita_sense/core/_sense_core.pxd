# Augments src/amrita_sense/core/_sense_core.py when Cython compiles it into the compiled core, the
# module `amrita_sense.core._sense_core` (the shared stem is how Cython finds this file; see setup.py). The pure
# build never reads this file. A class declared here becomes an extension type with these fields in
# place of its __slots__: what a field may hold is what the pure build's code stores there (a typed
# field refuses anything else with a TypeError, as the compiled core's fields do).

cimport cython

from amrita_sense.core._capi cimport HandledState

cdef int EXIT, EXTRA, FIRST, FIRST_RESUME, OP_BRANCH, OP_CALL, OP_CALLSUB, OP_DO, OP_DO_CHECK, OP_ELSE, OP_INVOKE, OP_JUMP, OP_LOOP_CONTROL, OP_LOOP_HEAD, OP_NATIVE_IF, OP_NOP, OP_RET, OP_TRY, OP_WHILE, SECOND, SECOND_RESUME, THEN
cdef int C_FLAG_IF, C_FLAG_HLT, C_FLAG_JMP, C_ROW_CORO, C_ROW_THREAD, C_ROW_PRECHECK, C_ROW_EMPTY, C_STEP_RAN, C_STEP_SKIPPED, C_STEP_END
cdef int NATIVE_DONE, NATIVE_NOT_READY, NATIVE_AWAIT
cdef Py_ssize_t _CHECK_CLOCK_EVERY, _TABLES_PER_PROGRAM, ROW_WIDTH, SUBCALL_DEPTH_FLOOR, FRAMES_PER_SUBCALL


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

    cdef inline int _push(self, object item) except -1
    cdef inline object _pop(self)


cdef class SuspendFlag:
    cdef public bint pending


cdef class PointerVector:
    # the view fields: written by the core's C code only (Python sees them read-only)
    cdef readonly object _items
    cdef readonly Program _prog
    cdef readonly Py_ssize_t _row

    cdef inline list _list(self)
    cdef inline object _bound_addr(self)
    cdef inline void _set_row(self, Program prog, Py_ssize_t row)


cdef class InterpretLock:
    cdef public object _owner  # the task holding the lock, or None
    cdef public list _queue  # the futures of the tasks waiting for it, first come first served

    cdef inline bint _try_take(self, object owner) except -1
    cdef inline int _release(self) except -1


# The calls the core makes up into WorkflowInterpreter (Python-level, looked up on the subclass):
# `LAYER_CONTRACT` in _sense_core.py lists each with its contract: _shared_plan, _run_unshared,
# _invoke_slow, _invoke_slow_now, _offload, _offload_batch, _gate, _pools_hold_factories,
# _workflow_scope_open, call_near, call_sub. Nothing else above the core is called from it.
cdef class InterpreterCore:
    # the core's own state
    cdef public Program _prog_v  # the node table the pointer indexes (the newest successor, once it moved)
    cdef public PointerVector _pointer_v
    cdef public Stack _ret_addr_stack_v
    cdef public Stack _context_stack_v  # None until first used
    cdef public int _flag_bits  # C_FLAG_IF | C_FLAG_HLT | C_FLAG_JMP (the `Flags` register)
    cdef public object _middleware_v
    cdef public object _native_rest  # a native opcode's continuation the loop awaits next (NATIVE_AWAIT)
    cdef public bint _outer_interpreting  # a node's function is running a sub-call (no snapshot inside it)
    cdef public Py_ssize_t _subcalls  # sub-calls running now, nested (inline frames and `call_sub`)
    cdef public bint _pending_stop
    cdef public InterpretLock _interpret_lock_v
    cdef public list _plans_v  # the shared plan table of the pools' shape (row -> CallPlan), or None: no table
    cdef public list _exc_plans  # the same for CATCH handlers (the pools plus exc_type / exc_val / exc_tb)
    cdef public bint _plans_valid_v  # this run reads the plan tables (off: DI cache off or pools untrusted)
    cdef public object _run_task_v  # the task running the current run
    cdef readonly object _claim_v  # the mark the run holding the claim passed to `_start_run`, or None
    cdef public SuspendFlag _signal_v
    cdef PointerVector _spare_pointer  # a pointer a finished inline sub-call left for the next one to reuse
    cdef object _batch_ctx  # while a worker-thread batch runs: the caller's context (`_batch_in_worker`)
    cdef public bint _force_inline_v  # this run calls worker-thread nodes inline (FORCE_NOT_WRAP_TO_ASYNC)
    cdef public bint _squashed_loops_v  # this run runs loops as 1.1.3 squashes them (the SQUASHED_LOOP flag)
    cdef public double _yield_interval_v  # seconds of inline nodes after which the loop yields to the event loop
    cdef public object _panic_exc_v  # the recorded panic, or None
    cdef public tuple _pool_args  # the positional injection pool (`_ava_args`)
    cdef public dict _pool_kwargs  # the keyword injection pool (`_ava_kwargs`)
    # the Python layer's fields (each behind a checked property of its name without `_s`)
    cdef public object _args_hash_s
    cdef public object _dep_store_s
    cdef public object _di_record_s
    cdef public object _exc_ignored_s
    cdef public object _glob_lock_s
    cdef public object _graph_s
    cdef public object _interpreter_id_s
    cdef public object _lifecycles_s
    cdef public object _object_io_s
    cdef public object _parent_interpreter_s
    cdef public object _provider_values_s
    cdef public object _shape_s
    cdef public object _sub_interpreters_s
    cdef public object _sub_interpreters_all_s
    cdef public object _top_interpreter_s
    cdef public object _values_key_s
    cdef public object _waiter_s

    # the step loop's C-level methods (the Python layer calls the `def` wrappers without `_c`)
    cdef inline (Py_ssize_t, bint) _locate_current(self) except *

    @cython.locals(row=Py_ssize_t, exact=bint)
    cdef inline Py_ssize_t _c_descend_current(self) except -1

    @cython.locals(row=Py_ssize_t, exact=bint, items=list)
    cdef inline bint _c_advance(self, PointerVector ptr) except -1

    @cython.locals(other=PointerVector)
    cdef inline int _c_rebase_to(self, object ptr) except -1
    cdef inline int _adopt_successor(self) except -1
    cdef inline int _c_refresh_plans(self) except -1
    cdef inline bint _c_mark_jump(self) except -1
    cdef inline int _move_to(self, object addr) except -1
    cdef inline object _check_last_index(self, object value, str method)

    cdef inline CallPlan _row_plan(self, Py_ssize_t row)
    cdef inline CallPlan _cached_plan(self, Py_ssize_t row)

    @cython.locals(plan=CallPlan)
    cdef inline CallPlan _exc_plan(self, Py_ssize_t row)

    @cython.locals(plan=CallPlan)
    cdef inline CallPlan _ready_plan(self, Py_ssize_t row)
    cdef inline object _plan_args(self, CallPlan plan, object extra)

    @cython.locals(held=dict)
    cdef inline object _results_for(self, CallPlan plan, Py_ssize_t row)
    cdef inline object _call_with_results(self, Py_ssize_t row, CallPlan plan, dict results)
    cdef inline object _call_plan(self, object func, CallPlan plan, object extra)

    @cython.locals(recompiled=bint, ptr=PointerVector)
    cdef inline int _c_enter_step(self) except -1
    cdef inline bint _c_leave_step(self) except -1
    cdef inline bint _advance_recompiled(self) except -1

    @cython.locals(ptr=PointerVector, lock=InterpretLock, prog=Program, following=Py_ssize_t)
    cdef inline Py_ssize_t _batch_next(self, Py_ssize_t row, object fut) except -2

    @cython.locals(prog=Program, op=int, at=Py_ssize_t, second=Py_ssize_t)
    cdef inline bint _batchable(self, Py_ssize_t row, bint make_plans) except -1

    @cython.locals(prog=Program, bits=int, plan=CallPlan)
    cdef inline bint _worker_callee(self, Py_ssize_t row, bint make_plans) except -1
    cdef inline CallPlan _batch_plan(self, Py_ssize_t row)

    @cython.locals(ptr=PointerVector)
    cdef inline bint _still_at(self, Py_ssize_t row) except -1

    @cython.locals(ptr=PointerVector)
    cdef inline bint _left_unmarked(self, Py_ssize_t row) except -1

    @cython.locals(ptr=PointerVector)
    cdef inline bint _left_block(self, Py_ssize_t row) except -1
    cdef inline int _finish_with(self, object rest) except -1
    cdef inline int _leave_body(self, Py_ssize_t row, Py_ssize_t target_row, int k, object broke) except -1

    @cython.locals(bits=int)
    cdef inline bint _inline_callable(self, Py_ssize_t row) except -1

    @cython.locals(plan=CallPlan)
    cdef inline CallPlan _inline_plan(self, Py_ssize_t row)
    cdef inline object _callee_plan(self, Py_ssize_t row)

    @cython.locals(plan=CallPlan)
    cdef inline CallPlan _planned_plan(self, Py_ssize_t row)

    @cython.locals(prog=Program, catches=tuple, handler=tuple)
    cdef inline bint _try_ready(self, Py_ssize_t row) except -1
    cdef inline int _run_native_sync(self, Py_ssize_t row, int op) except -1
    cdef inline int _goto(self, object target) except -1
    cdef inline int _native_jump(self, object target) except -1
    cdef inline int _jump_at(self, Py_ssize_t target_row, Py_ssize_t row, int k) except -1

    @cython.locals(parked=bint)
    cdef inline object _subcall_inline(self, Py_ssize_t row, object plan, object extra)

    @cython.locals(prog=Program)
    cdef inline object _call_inline(self, Py_ssize_t row, CallPlan plan, object extra)
    cdef inline object _call_resuming(self, Py_ssize_t callee, object plan, Py_ssize_t row, int k, bint near)
    cdef inline int _resume_at(self, Py_ssize_t row, int k, bint near) except -1

    @cython.locals(rows=cython.p_int, at=Py_ssize_t, cond=Py_ssize_t, body=Py_ssize_t, false_row=Py_ssize_t, then_row=Py_ssize_t)
    cdef inline int _native_branch(self, Py_ssize_t row) except -1

    @cython.locals(rows=cython.p_int, at=Py_ssize_t, body=Py_ssize_t, then_row=Py_ssize_t)
    cdef inline int _native_else(self, Py_ssize_t row) except -1

    @cython.locals(rows=cython.p_int, at=Py_ssize_t, cond=Py_ssize_t, body=Py_ssize_t, exit_row=Py_ssize_t, checkup_row=Py_ssize_t)
    cdef inline int _native_while(self, Py_ssize_t row) except -1

    @cython.locals(rows=cython.p_int, at=Py_ssize_t, body=Py_ssize_t, exit_row=Py_ssize_t, check_row=Py_ssize_t)
    cdef inline int _native_do(self, Py_ssize_t row) except -1

    @cython.locals(rows=cython.p_int, at=Py_ssize_t, cond=Py_ssize_t, exit_row=Py_ssize_t, back_row=Py_ssize_t)
    cdef inline int _native_do_check(self, Py_ssize_t row) except -1

    @cython.locals(rows=cython.p_int, at=Py_ssize_t, cond=Py_ssize_t, body=Py_ssize_t, false_row=Py_ssize_t, then_row=Py_ssize_t)
    cdef inline int _native_if(self, Py_ssize_t row) except -1

    @cython.locals(target=Py_ssize_t)
    cdef inline int _native_invoke(self, Py_ssize_t row) except -1

    @cython.locals(rows=cython.p_int, at=Py_ssize_t, cond=Py_ssize_t, head=Py_ssize_t, exit_row=Py_ssize_t, body_row=Py_ssize_t)
    cdef inline int _native_loop_head(self, Py_ssize_t row) except -1

    @cython.locals(bound=PointerVector)
    cdef inline int _native_loop_control(self, object operands) except -1

    cdef inline CallPlan _near_plan(self, Py_ssize_t row, bint with_exc)

    @cython.locals(plan=CallPlan)
    cdef inline CallPlan _exc_ready_plan(self, Py_ssize_t row)
    cdef inline object _run_part(self, Py_ssize_t target, CallPlan plan, object extra)
    cdef inline object _catch_for(self, tuple catches, object exc)

    @cython.locals(rows=cython.p_int, at=Py_ssize_t, handler=tuple, catches=tuple)
    cdef inline object _native_try_now(self, Py_ssize_t row, tuple operands, bint planned)

    @cython.locals(rows=cython.p_int, at=Py_ssize_t)
    cdef inline int _native_callsub(self, Py_ssize_t row) except -1
    cdef inline object _call_body_catching(self, Py_ssize_t target, CallPlan plan)

    @cython.locals(saved=HandledState)
    cdef inline int _run_handler(self, Py_ssize_t target, CallPlan plan, object raised) except -1
    cdef inline int _native_ret(self) except -1

    @cython.locals(depth=Py_ssize_t)
    cdef inline int _enter_frame(self, Py_ssize_t row) except -1
    cdef inline int _leave_frame(self) except -1
    cdef inline PointerVector _pointer_at(self, Py_ssize_t row)
    cdef inline void _recycle(self, object ptr) noexcept
    cdef inline int _push_ret(self, object item) except -1
    cdef inline object _pop_ret(self)
    cdef inline bint _keeps_lock(self, InterpretLock lock, Py_ssize_t steps) except -1


# module-level C functions (no Python module attribute in the compiled core)


@cython.locals(vec=PointerVector)
cdef PointerVector _bound_pointer(Program prog, Py_ssize_t row)
cdef PointerVector _start_pointer(Program prog)


@cython.locals(lock=InterpretLock)
cdef InterpretLock _new_lock()


@cython.locals(stack=Stack)
cdef Stack _new_stack()


cdef object _OBJECT_CLASS, _PLAIN_CLASS
cdef tuple _last_verdict
cdef dict _LATE, _TASK_TABLE
cdef object _running_loop
cdef bint _plain_class(type kind) except -1
cdef bint _is_instance(object obj, object spec) except -1
cdef bint _still_at(PointerVector ptr, Program prog, Py_ssize_t row) except -1
cdef CallPlan _checked_call_plan(object plan)
cdef dict _exc_keywords(object exc)
cdef bint _clashes(object kwargs) except -1
cdef list _offset_far(list base, list offset)
cdef object _row_outside(Program prog, Py_ssize_t row)
cdef int _check_subcall_depth(Py_ssize_t depth) except -1
cdef object _finish_now(object outcome)


cpdef object _current_task()


@cython.locals(i=Py_ssize_t, n=Py_ssize_t)
cpdef bint same_types(tuple values, tuple types) except -1
