# C-level helpers of the single-source core (`_core_py.py`, compiled with `_core_py.pxd`): the few
# paths that need the C API. The core cimports them in its `if cython.compiled:` blocks; its `else`
# blocks hold the Python paths the pure build runs. Nothing imports this at run time.

from cpython.dict cimport PyDict_GetItemWithError
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE, PyList_SET_ITEM
from cpython.ref cimport PyObject, Py_DECREF, Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE


cdef extern from "Python.h":
    ctypedef struct PyListObject:
        Py_ssize_t allocated
    void Py_SET_SIZE(object, Py_ssize_t)
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


cdef inline int list_push(list items, object item) except -1:
    """`items.append(item)`, in place while the list has room: a push/pop pair around a sub-call
    never reallocates."""
    cdef Py_ssize_t size = PyList_GET_SIZE(items)
    if (<PyListObject *> items).allocated > size:
        Py_INCREF(item)
        PyList_SET_ITEM(items, size, item)
        Py_SET_SIZE(items, size + 1)
    else:
        items.append(item)
    return 0


cdef inline object list_pop(list items):
    """`items.pop()` of a non-empty list, keeping its capacity (`list.pop` shrinks an emptied list)."""
    cdef Py_ssize_t size = PyList_GET_SIZE(items)
    item = <object> PyList_GET_ITEM(items, size - 1)
    Py_SET_SIZE(items, size - 1)
    Py_DECREF(item)  # the slot's reference: ours now (`item` holds its own)
    return item
