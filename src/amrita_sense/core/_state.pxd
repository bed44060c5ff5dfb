# Augments src/amrita_sense/core/_state.py when Cython compiles it into `amrita_sense.core._state`
# (the shared stem is how Cython finds this file). The compiled core's InterpreterCore extends
# CoreState (`_sense_core.pxd`): the fields below are C struct members of both, which the loop reads
# and writes without a call; Python sees each behind a checked property of `_state.py`.

from amrita_sense.core._structures cimport InterpretLock, PointerVector, Program, Stack, SuspendFlag


# The calls the core makes up into WorkflowInterpreter (Python-level, looked up on the subclass):
# `LAYER_CONTRACT` in _state.py lists each with its contract: _shared_plan, _run_unshared,
# _invoke_slow, _invoke_slow_now, _offload, _offload_batch, _gate, _pools_hold_factories,
# _workflow_scope_open, call_near, call_sub. Nothing else above the core is called from it.
cdef class CoreState:
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

    cdef inline int _c_refresh_plans(self) except -1  # the run's plan tables from the program, for the pools' shape
