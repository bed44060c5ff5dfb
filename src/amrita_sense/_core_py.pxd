# Augments src/amrita_sense/_core_py.py when Cython compiles it as the single-source core
# (AMRITA_SENSE_BUILD_SINGLE_SOURCE=1 python setup.py build_ext --inplace; see setup.py). The pure
# build never reads this file. A class declared here becomes an extension type with these fields in
# place of its __slots__; the fields stay `object` and public, so the twin's Python semantics (what
# a write may hold, what a read gives) are unchanged and the test suite is the same on both builds.
#
# Issue 18's feasibility step: only the classes whose checks live in their own class body can be
# declared here. PointerVector, SuspendFlag, InterpretLock and InterpreterCore install their checked
# fields as properties after the class statement (over the slots' descriptors), which an extension
# type refuses; they stay Python classes until those properties move into the class bodies.

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
