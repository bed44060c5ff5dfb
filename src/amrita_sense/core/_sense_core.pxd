# Augments src/amrita_sense/core/_sense_core.py when Cython compiles it into the compiled core, the
# module `amrita_sense.core._sense_core` (the shared stem is how Cython finds this file; see setup.py). The pure
# build never reads this file. A class declared here becomes an extension type with these fields in
# place of its __slots__: what a field may hold is what the pure build's code stores there (a typed
# field refuses anything else with a TypeError, as the compiled core's fields do).

cimport cython

from amrita_sense.core._capi cimport HandledState
from amrita_sense.core._state cimport CoreState
from amrita_sense.core._structures cimport CallPlan, InterpretLock, PointerVector, Program, Stack, SuspendFlag

cdef int EXIT, EXTRA, FIRST, FIRST_RESUME, OP_BRANCH, OP_CALL, OP_CALLSUB, OP_DO, OP_DO_CHECK, OP_ELSE, OP_INVOKE, OP_JUMP, OP_LOOP_CONTROL, OP_LOOP_HEAD, OP_NATIVE_IF, OP_NOP, OP_RET, OP_TRY, OP_WHILE, SECOND, SECOND_RESUME, THEN
cdef int C_FLAG_IF, C_FLAG_HLT, C_FLAG_JMP, C_ROW_CORO, C_ROW_THREAD, C_ROW_PRECHECK, C_ROW_EMPTY, C_STEP_RAN, C_STEP_SKIPPED, C_STEP_END
cdef int NATIVE_DONE, NATIVE_NOT_READY, NATIVE_AWAIT
cdef Py_ssize_t _CHECK_CLOCK_EVERY, ROW_WIDTH, SUBCALL_DEPTH_FLOOR, FRAMES_PER_SUBCALL


# The step loop; its fields are its base's (`_state.pxd`).
cdef class InterpreterCore(CoreState):
    # the step loop's C-level methods (the Python layer calls the `def` wrappers without `_c`)
    cdef inline (Py_ssize_t, bint) _locate_current(self) except *

    @cython.locals(row=Py_ssize_t, exact=bint)
    cdef inline Py_ssize_t _c_descend_current(self) except -1

    @cython.locals(row=Py_ssize_t, exact=bint, items=list)
    cdef inline bint _c_advance(self, PointerVector ptr) except -1

    @cython.locals(other=PointerVector)
    cdef inline int _c_rebase_to(self, object ptr) except -1
    cdef inline int _adopt_successor(self) except -1
    cdef inline bint _c_mark_jump(self) except -1
    cdef inline int _move_to(self, object addr) except -1
    cdef inline object _check_last_index(self, object value, str method)

    cdef inline CallPlan _row_plan(self, Py_ssize_t row)
    cdef inline CallPlan _cached_plan(self, Py_ssize_t row)
    cdef inline CallPlan _step_plan(self, Py_ssize_t row)

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

    cdef inline CallPlan _near_plan(self, Py_ssize_t row, bint with_exc)

    @cython.locals(plan=CallPlan)
    cdef inline CallPlan _exc_ready_plan(self, Py_ssize_t row)

    @cython.locals(depth=Py_ssize_t)
    cdef inline int _enter_frame(self, Py_ssize_t row) except -1
    cdef inline int _leave_frame(self) except -1
    cdef inline PointerVector _pointer_at(self, Py_ssize_t row)
    cdef inline void _recycle(self, object ptr) noexcept
    cdef inline int _push_ret(self, object item) except -1
    cdef inline object _pop_ret(self)
    cdef inline bint _keeps_lock(self, InterpretLock lock, Py_ssize_t steps) except -1


# module-level C functions (no Python module attribute in the compiled core)


# the native opcodes (`_sense_core.py`'s functions of the core)
@cython.locals(ptr=PointerVector)
cdef inline bint _left_block(InterpreterCore core, Py_ssize_t row) except -1
cdef inline int _finish_with(InterpreterCore core, object rest) except -1
cdef inline int _leave_body(InterpreterCore core, Py_ssize_t row, Py_ssize_t target_row, int k, object broke) except -1


@cython.locals(rows=cython.p_int, at=Py_ssize_t, cond=Py_ssize_t, body=Py_ssize_t, false_row=Py_ssize_t, then_row=Py_ssize_t)
cdef inline int _native_branch(InterpreterCore core, Py_ssize_t row) except -1


@cython.locals(rows=cython.p_int, at=Py_ssize_t, body=Py_ssize_t, then_row=Py_ssize_t)
cdef inline int _native_else(InterpreterCore core, Py_ssize_t row) except -1


@cython.locals(rows=cython.p_int, at=Py_ssize_t, cond=Py_ssize_t, body=Py_ssize_t, exit_row=Py_ssize_t, checkup_row=Py_ssize_t)
cdef inline int _native_while(InterpreterCore core, Py_ssize_t row) except -1


@cython.locals(rows=cython.p_int, at=Py_ssize_t, body=Py_ssize_t, exit_row=Py_ssize_t, check_row=Py_ssize_t)
cdef inline int _native_do(InterpreterCore core, Py_ssize_t row) except -1


@cython.locals(rows=cython.p_int, at=Py_ssize_t, cond=Py_ssize_t, exit_row=Py_ssize_t, back_row=Py_ssize_t)
cdef inline int _native_do_check(InterpreterCore core, Py_ssize_t row) except -1


@cython.locals(rows=cython.p_int, at=Py_ssize_t, cond=Py_ssize_t, body=Py_ssize_t, false_row=Py_ssize_t, then_row=Py_ssize_t)
cdef inline int _native_if(InterpreterCore core, Py_ssize_t row) except -1


@cython.locals(target=Py_ssize_t)
cdef inline int _native_invoke(InterpreterCore core, Py_ssize_t row) except -1


@cython.locals(rows=cython.p_int, at=Py_ssize_t, cond=Py_ssize_t, head=Py_ssize_t, exit_row=Py_ssize_t, body_row=Py_ssize_t)
cdef inline int _native_loop_head(InterpreterCore core, Py_ssize_t row) except -1


@cython.locals(bound=PointerVector)
cdef inline int _native_loop_control(InterpreterCore core, object operands) except -1
cdef inline object _run_part(InterpreterCore core, Py_ssize_t target, CallPlan plan, object extra)
cdef inline object _catch_for(InterpreterCore core, tuple catches, object exc)


@cython.locals(rows=cython.p_int, at=Py_ssize_t, handler=tuple, catches=tuple)
cdef inline object _native_try_now(InterpreterCore core, Py_ssize_t row, tuple operands, bint planned)


@cython.locals(rows=cython.p_int, at=Py_ssize_t)
cdef inline int _native_callsub(InterpreterCore core, Py_ssize_t row) except -1
cdef inline object _call_body_catching(InterpreterCore core, Py_ssize_t target, CallPlan plan)


@cython.locals(saved=HandledState)
cdef inline int _run_handler(InterpreterCore core, Py_ssize_t target, CallPlan plan, object raised) except -1
cdef inline int _native_ret(InterpreterCore core) except -1


cdef object _OBJECT_CLASS, _PLAIN_CLASS
cdef tuple _last_verdict
cdef bint _plain_class(type kind) except -1
cdef inline void _bind(PointerVector ptr, Program prog, Py_ssize_t row) noexcept
cdef inline void _set_items(PointerVector ptr, list items) noexcept
cdef bint _is_instance(object obj, object spec) except -1
cdef CallPlan _checked_call_plan(object plan)
cdef dict _exc_keywords(object exc)
cdef bint _clashes(object kwargs) except -1
cdef object _row_outside(Program prog, Py_ssize_t row)
cdef bint _may_park(SuspendFlag flag, object tag) except -1
cdef object _rest_of(object awaitable)
cdef int _check_subcall_depth(Py_ssize_t depth) except -1
cdef object _finish_now(object outcome)


@cython.locals(i=Py_ssize_t, n=Py_ssize_t)
cpdef bint same_types(tuple values, tuple types) except -1
