# Augments src/amrita_sense/_core_py.py when Cython compiles it as the single-source core
# (AMRITA_SENSE_BUILD_SINGLE_SOURCE=1 python setup.py build_ext --inplace; see setup.py). The pure
# build never reads this file. A class declared here becomes an extension type with these fields in
# place of its __slots__: what a field may hold is what the pure build's code stores there (a typed
# field refuses anything else with a TypeError, as the compiled core's fields do).

cdef class CallPlan:
    cdef public object cached
    cdef public object entry
    cdef public object fetch
    cdef public object fetch_with
    cdef public object keyed
    cdef public object names
    cdef public object slow
    cdef public object srcs


cdef class Program:
    cdef public object addrs
    cdef public object bits
    cdef public object funcs
    cdef public object graph
    cdef public object landings
    cdef public object nodes
    cdef public object nrows
    cdef public object operands
    cdef public object ops
    cdef public object row_of
    cdef public object rows
    cdef public object seg_row
    cdef public object static_plans
    cdef public object _successor
    cdef public object tables


cdef class Stack:
    cdef public object _items
    cdef public object _limit


cdef class SuspendFlag:
    cdef public object pending


cdef class PointerVector:
    cdef public object _items
    cdef public Program _prog
    cdef public Py_ssize_t _row


cdef class InterpretLock:
    cdef public object _owner
    cdef public list _queue


cdef class InterpreterCore:
    # the core's own state
    cdef public Program _prog_v
    cdef public PointerVector _pointer_v
    cdef public Stack _ret_addr_stack_v
    cdef public Stack _context_stack_v
    cdef public int _flag_bits
    cdef public object _middleware_v
    cdef public object _native_rest
    cdef public bint _outer_interpreting
    cdef public bint _pending_stop
    cdef public InterpretLock _interpret_lock_v
    cdef public list _plans_v
    cdef public list _exc_plans
    cdef public bint _plans_valid_v
    cdef public object _run_task_v
    cdef public SuspendFlag _signal_v
    cdef public bint _force_inline_v
    cdef public bint _squashed_loops_v
    cdef public double _yield_interval_v
    cdef public object _panic_exc_v
    cdef public tuple _pool_args
    cdef public dict _pool_kwargs
    # the Python layer's fields (each behind a checked property of its name without `_s`)
    cdef public object _args_hash_s
    cdef public object _dep_store_s
    cdef public object _di_cache_s
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
