# C-level helpers of the single-source core (`_core_py.py`, compiled with `_core_py.pxd`): the few
# paths that need the C API. The core cimports them in its `if cython.compiled:` blocks; its `else`
# blocks hold the Python paths the pure build runs. Nothing imports this at run time.

from cpython.dict cimport PyDict_GetItemWithError
from cpython.ref cimport PyObject, Py_DECREF, Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE


cdef extern from "Python.h":
    object PyObject_Vectorcall(object callable_object, PyObject **args, size_t nargsf, PyObject *kwnames)


cdef enum:
    MAX_STACK_ARGS = 8  # a positional call of at most this many arguments is made from the C stack


cdef inline object call_from_pools(object func, Py_ssize_t *cidx, Py_ssize_t n, tuple srcs, tuple pool,
                                   dict kwargs):
    """`func(*values)`: per argument `i`, `pool[cidx[i]]` when `cidx[i] >= 0`, else `kwargs[srcs[i]]`;
    a vectorcall straight from the pools (`n <= MAX_STACK_ARGS`)."""
    cdef PyObject *argv[MAX_STACK_ARGS]
    cdef PyObject *item
    cdef Py_ssize_t i, k
    for i in range(n):
        k = cidx[i]
        if k >= 0:
            if k >= PyTuple_GET_SIZE(pool):
                for k in range(i):
                    Py_DECREF(<object> argv[k])
                raise IndexError("tuple index out of range")
            item = PyTuple_GET_ITEM(pool, k)
        else:
            item = PyDict_GetItemWithError(kwargs, srcs[i])
            if item == NULL:
                for k in range(i):
                    Py_DECREF(<object> argv[k])
                raise KeyError(srcs[i])
        Py_INCREF(<object> item)  # the pools may change while the call runs
        argv[i] = item
    try:
        return PyObject_Vectorcall(func, argv, n, NULL)
    finally:
        for i in range(n):
            Py_DECREF(<object> argv[i])
