# C-level helpers of the compiled core (`_core_py.py`, compiled with `_sense_core.pxd`): the few
# paths that need the C API. The core cimports them in its `if cython.compiled:` blocks; its `else`
# blocks hold the Python paths the pure build runs. Nothing imports this at run time.

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE, PyList_SET_ITEM
from cpython.ref cimport PyObject, Py_DECREF, Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.type cimport PyType_IsSubtype


cdef extern from *:
    """
    /* PyWeakref_GetRef is new in 3.13; PyWeakref_GetObject (a borrowed reference) is gone in 3.15. */
    #if PY_VERSION_HEX < 0x030D0000
    static int amrita_weakref_getref(PyObject *ref, PyObject **target) {
        PyObject *obj = PyWeakref_GetObject(ref);
        if (obj == NULL) { *target = NULL; return -1; }
        if (obj == Py_None) { *target = NULL; return 0; }
        Py_INCREF(obj);
        *target = obj;
        return 1;
    }
    #else
    #define amrita_weakref_getref PyWeakref_GetRef
    #endif
    """
    int amrita_weakref_getref(object ref, PyObject **target) except -1


cdef extern from *:
    """
    /* A free-threaded build (no GIL): the paths below that rely on running as one C call under the GIL
       take another way there. A constant: the compiler drops the branch a build does not take. */
    #ifdef Py_GIL_DISABLED
    #define AMRITA_FREE_THREADED 1
    #else
    #define AMRITA_FREE_THREADED 0
    #endif

    /* `d[key]` as a new reference in *out: 1 found, 0 missing, -1 an error. With the GIL a borrowed
       look-up is safe (nothing runs before the caller takes its reference); without it another thread
       may drop the value in between, so the look-up itself takes the reference (PyDict_GetItemRef). */
    static int amrita_dict_getref(PyObject *d, PyObject *key, PyObject **out) {
    #ifdef Py_GIL_DISABLED
        return PyDict_GetItemRef(d, key, out);
    #else
        *out = PyDict_GetItemWithError(d, key);
        if (*out == NULL) return PyErr_Occurred() ? -1 : 0;
        Py_INCREF(*out);
        return 1;
    #endif
    }
    """
    bint FREE_THREADED "AMRITA_FREE_THREADED"
    int amrita_dict_getref(object d, object key, PyObject **out)
    int dict_getref_or_raise "amrita_dict_getref"(object d, object key, PyObject **out) except -1


cdef extern from "Python.h":
    ctypedef struct PyListObject:
        Py_ssize_t allocated
    void Py_SET_SIZE(object, Py_ssize_t)
    object PyObject_Vectorcall(object callable_object, PyObject **args, size_t nargsf, PyObject *kwnames)
    PyObject *PyObject_Call(object callable_object, object args, PyObject *kwargs)
    void PyErr_Fetch(PyObject **ptype, PyObject **pvalue, PyObject **ptraceback)
    void PyErr_NormalizeException(PyObject **ptype, PyObject **pvalue, PyObject **ptraceback)
    int PyException_SetTraceback(PyObject *exc, PyObject *tb)
    PyObject *PyException_GetTraceback(PyObject *exc)
    void PyErr_GetExcInfo(PyObject **ptype, PyObject **pvalue, PyObject **ptraceback)
    void PyErr_SetExcInfo(PyObject *ptype, PyObject *pvalue, PyObject *ptraceback)


cdef extern from *:
    """
    /* One step of a native coroutine (`PyIter_Send` of None): 1 it returned (*result: its value),
       0 it suspended (*result: what it yielded), -1 it raised (the exception is set). Unlike an
       `await` of it from a compiled coroutine, no `__await__` wrapper is made and its return
       does not go through a StopIteration. */
    static int amrita_coro_step(PyObject *coro, PyObject **result) {
        PySendResult status = PyIter_Send(coro, Py_None, result);
        return status == PYGEN_RETURN ? 1 : (status == PYGEN_NEXT ? 0 : -1);
    }

    /* The rest of a native coroutine that `amrita_coro_step` ran up to a suspension: awaited, it
       yields what the coroutine yielded (`first`), then passes sends (`am_send`: a compiled
       coroutine awaiting it sends through this, so the coroutine's return value comes back without
       a StopIteration), throws and close on to the coroutine, as `await` of it does. */
    typedef struct {
        PyObject_HEAD
        PyObject *coro;
        PyObject *first; /* until yielded on */
    } AmritaRest;

    static PySendResult amrita_rest_send_impl(PyObject *self, PyObject *arg, PyObject **result) {
        AmritaRest *rest = (AmritaRest *)self;
        if (rest->first != NULL) {
            *result = rest->first;
            rest->first = NULL;
            return PYGEN_NEXT;
        }
        return PyIter_Send(rest->coro, arg, result);
    }

    static PyObject *amrita_rest_result(PySendResult status, PyObject *result) {
        /* `send`'s and `__next__`'s protocol: the value yielded, else NULL with StopIteration(value) */
        PyObject *stop;
        if (status == PYGEN_NEXT) return result;
        if (status == PYGEN_RETURN) {
            if (result != Py_None) {
                stop = PyObject_CallOneArg(PyExc_StopIteration, result);
                if (stop != NULL) {
                    PyErr_SetObject(PyExc_StopIteration, stop);
                    Py_DECREF(stop);
                }
            }
            Py_DECREF(result);
        }
        return NULL;
    }

    static PyObject *amrita_rest_next(PyObject *self) {
        PyObject *result = NULL;
        PySendResult status = amrita_rest_send_impl(self, Py_None, &result);
        return amrita_rest_result(status, result);
    }

    static PyObject *amrita_rest_send(PyObject *self, PyObject *arg) {
        PyObject *result = NULL;
        PySendResult status = amrita_rest_send_impl(self, arg, &result);
        return amrita_rest_result(status, result);
    }

    static PyObject *amrita_rest_throw(PyObject *self, PyObject *args) {
        AmritaRest *rest = (AmritaRest *)self;
        PyObject *method, *result;
        Py_CLEAR(rest->first);
        method = PyObject_GetAttrString(rest->coro, "throw");
        if (method == NULL) return NULL;
        result = PyObject_Call(method, args, NULL);
        Py_DECREF(method);
        return result;
    }

    static PyObject *amrita_rest_close(PyObject *self, PyObject *unused) {
        AmritaRest *rest = (AmritaRest *)self;
        Py_CLEAR(rest->first);
        return PyObject_CallMethod(rest->coro, "close", NULL);
    }

    static PyObject *amrita_rest_await(PyObject *self) {
        Py_INCREF(self);
        return self;
    }

    static int amrita_rest_traverse(PyObject *self, visitproc visit, void *arg) {
        Py_VISIT(((AmritaRest *)self)->coro);
        Py_VISIT(((AmritaRest *)self)->first);
        return 0;
    }

    static int amrita_rest_clear(PyObject *self) {
        Py_CLEAR(((AmritaRest *)self)->coro);
        Py_CLEAR(((AmritaRest *)self)->first);
        return 0;
    }

    static void amrita_rest_dealloc(PyObject *self) {
        PyObject_GC_UnTrack(self);
        amrita_rest_clear(self);
        PyObject_GC_Del(self);
    }

    static PyMethodDef amrita_rest_methods[] = {
        {"send", (PyCFunction)amrita_rest_send, METH_O, NULL},
        {"throw", (PyCFunction)amrita_rest_throw, METH_VARARGS, NULL},
        {"close", (PyCFunction)amrita_rest_close, METH_NOARGS, NULL},
        {NULL, NULL, 0, NULL}
    };

    static PyAsyncMethods amrita_rest_async = {amrita_rest_await, 0, 0, amrita_rest_send_impl};

    static PyTypeObject amrita_rest_type = {
        PyVarObject_HEAD_INIT(NULL, 0)
        "amrita_sense.core._Rest",                /* tp_name */
        sizeof(AmritaRest),                        /* tp_basicsize */
    };

    /* CYTHON_UNUSED leads: under C23 it is [[maybe_unused]], which must begin the declaration
       (Debian's GCC 15, C23 by default, refuses it after `static`) */
    CYTHON_UNUSED static int amrita_rest_ready(void) {
        /* at the module's import: the type's slots, then PyType_Ready */
        if (amrita_rest_type.tp_flags & Py_TPFLAGS_READY) return 0;
        amrita_rest_type.tp_dealloc = amrita_rest_dealloc;
        amrita_rest_type.tp_as_async = &amrita_rest_async;
        amrita_rest_type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
        amrita_rest_type.tp_doc = "The rest of a native coroutine run up to its first suspension.";
        amrita_rest_type.tp_traverse = amrita_rest_traverse;
        amrita_rest_type.tp_clear = amrita_rest_clear;
        amrita_rest_type.tp_iter = PyObject_SelfIter;
        amrita_rest_type.tp_iternext = amrita_rest_next;
        amrita_rest_type.tp_methods = amrita_rest_methods;
        return PyType_Ready(&amrita_rest_type);
    }

    CYTHON_UNUSED static PyObject *amrita_rest_new(PyObject *coro, PyObject *first) {
        /* steals `first` */
        AmritaRest *rest = PyObject_GC_New(AmritaRest, &amrita_rest_type);
        if (rest == NULL) {
            Py_DECREF(first);
            return NULL;
        }
        Py_INCREF(coro);
        rest->coro = coro;
        rest->first = first;
        PyObject_GC_Track((PyObject *)rest);
        return (PyObject *)rest;
    }
    """
    int coro_step "amrita_coro_step"(object coro, PyObject **result) except -1
    object rest_of "amrita_rest_new"(object coro, PyObject *first)
    int rest_type_ready "amrita_rest_ready"() except -1
    bint PyCoro_CheckExact(object)
    PyObject *PyFunction_GET_CODE(object)


cdef extern from *:
    """
    #ifndef AMRITA_SENSE_DEBUG
    #define AMRITA_SENSE_DEBUG 0
    #endif
    """
    int AMRITA_SENSE_DEBUG  # 1 in the debug build (setup.py defines it), else 0


cdef enum:
    MAX_STACK_ARGS = 8  # a positional call of at most this many arguments is made from the C stack
    KEYWORD = -1  # a plan's argument index: read from the keyword pool
    RESULT = -2  # a plan's argument index: the interpreter's `use_cache` result of that parameter


cdef inline object call_from_pools(object func, Py_ssize_t *cidx, Py_ssize_t n, tuple srcs, tuple pool,
                                   dict kwargs):
    """`func(*values)`: per argument `i`, `pool[cidx[i]]` when `cidx[i] >= 0`, else `kwargs[srcs[i]]`
    (a plan without `RESULT` arguments); a vectorcall straight from the pools (`n <= MAX_STACK_ARGS`)."""
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
            Py_INCREF(<object> item)  # the pools may change while the call runs
        elif amrita_dict_getref(kwargs, srcs[i], &item) <= 0:  # found: a new reference
            for k in range(i):
                Py_DECREF(<object> argv[k])
            raise KeyError(srcs[i])
        argv[i] = item
    try:
        return PyObject_Vectorcall(func, argv, n, NULL)
    finally:
        for i in range(n):
            Py_DECREF(<object> argv[i])


cdef inline object keyword_call(object func, tuple names, Py_ssize_t n, unsigned int picks, object first,
                                object other):
    """`func(**{names[i]: first if bit i of picks else other})` (`n = len(names) <= MAX_STACK_ARGS`),
    a vectorcall from the C stack."""
    cdef PyObject *argv[MAX_STACK_ARGS]
    cdef Py_ssize_t i
    for i in range(n):
        argv[i] = <PyObject *> first if picks & (1u << i) else <PyObject *> other
    return PyObject_Vectorcall(func, argv, 0, <PyObject *> names if n else NULL)


cdef inline object picks_call(object func, Py_ssize_t n, unsigned int picks, object first, object other):
    """`func(*[first if bit i of picks else other for i in range(n)])` (`n <= MAX_STACK_ARGS`), a
    vectorcall from the C stack: `keyword_call` when the names are `func`'s first parameters."""
    cdef PyObject *argv[MAX_STACK_ARGS]
    cdef Py_ssize_t i
    for i in range(n):
        argv[i] = <PyObject *> first if picks & (1u << i) else <PyObject *> other
    return PyObject_Vectorcall(func, argv, n, NULL)


cdef inline bint has_code(object func, object code):
    """Whether the plain function `func` has the code object `code` (`func.__code__ is code`)."""
    return PyFunction_GET_CODE(func) == <PyObject *> code


cdef inline object coro_start(object coro):
    """Run the native coroutine `coro` up to its first suspension: None when it returned (its value
    dropped), else the rest of it to await (`amrita_rest_new`); raises what it raised."""
    cdef PyObject *result = NULL
    if coro_step(coro, &result):
        Py_XDECREF(result)
        return None
    return rest_of(coro, result)  # takes the step's reference to what it yielded


cdef inline int list_push(list items, object item) except -1:
    """`items.append(item)`, in place while the list has room: a push/pop pair around a sub-call
    never reallocates."""
    cdef Py_ssize_t size = PyList_GET_SIZE(items)
    if FREE_THREADED:  # the list's own append: it locks the list, as its readers expect
        items.append(item)
    elif (<PyListObject *> items).allocated > size:
        Py_INCREF(item)
        PyList_SET_ITEM(items, size, item)
        Py_SET_SIZE(items, size + 1)
    else:
        items.append(item)
    return 0


cdef inline object list_pop(list items):
    """`items.pop()` of a non-empty list, keeping its capacity (`list.pop` shrinks an emptied list)."""
    cdef Py_ssize_t size = PyList_GET_SIZE(items)
    if FREE_THREADED:  # the list's own pop: it locks the list, as its readers expect
        return items.pop()
    item = <object> PyList_GET_ITEM(items, size - 1)
    Py_SET_SIZE(items, size - 1)
    Py_DECREF(item)  # the slot's reference: ours now (`item` holds its own)
    return item


cdef inline int bounded_push(list items, Py_ssize_t limit, object item) except -1:
    """`Stack._push` (the Stack's `_items` and `_limit`): OverflowError when it is full."""
    if len(items) >= limit:
        raise OverflowError("Stack overflow")
    return list_push(items, item)


cdef inline object checked_pop(list items):
    """`Stack._pop` (the Stack's `_items`): IndexError when it is empty."""
    if not items:
        raise IndexError("Stack is empty")
    return list_pop(items)


cdef inline bint is_subclass(object kind, object cls) noexcept:
    """`issubclass(kind, cls)` of two types, without `__subclasscheck__` (for classes whose metaclass
    is `type`, the only ones the core asks about)."""
    return PyType_IsSubtype(<type> kind, <type> cls)


cdef inline object weak_target(object ref):
    """What the weak reference `ref` refers to, or None, without calling it (a new reference: the
    target cannot die between the look-up and its use, with or without the GIL)."""
    cdef PyObject *target
    if amrita_weakref_getref(ref, &target) == 0:
        return None
    result = <object> target
    Py_DECREF(<object> target)
    return result


cdef inline object dict_get(dict d, object key):
    """`d.get(key)` for a dict other threads may write: the look-up takes the reference (Cython's own
    `dict.get` reads a borrowed one, which a free-threaded build's other threads can free first)."""
    cdef PyObject *value
    if dict_getref_or_raise(d, key, &value) == 0:
        return None
    result = <object> value
    Py_DECREF(<object> value)
    return result


cdef inline tuple plan_values(Py_ssize_t *cidx, Py_ssize_t n, tuple srcs, tuple pool, dict kwargs, dict results,
                              dict extra):
    """A plan's argument values: per argument `i`, `pool[cidx[i]]` when `cidx[i] >= 0`, the `use_cache`
    result `results[srcs[i][0]]` when it is `RESULT`, else the keyword `srcs[i]` from `extra` (a call's
    own keywords, None for none) or the keyword pool."""
    cdef Py_ssize_t i, k
    if n == 0:
        return ()
    values = []
    for i in range(n):
        k = cidx[i]
        if k >= 0:
            values.append(pool[k])
        elif k == RESULT:
            values.append(results[srcs[i][0]])
        elif extra is not None and srcs[i] in extra:
            values.append(extra[srcs[i]])
        else:
            values.append(kwargs[srcs[i]])
    return tuple(values)


cdef inline object call_catching(object func, tuple args, object kwargs):
    """Call `func(*args, **kwargs)`; return None, or the exception it raised (its traceback attached),
    caught without a traceback entry of the caller's own, as a Python `except` there would see it."""
    cdef PyObject *result
    cdef PyObject *kind = NULL
    cdef PyObject *value = NULL
    cdef PyObject *trace = NULL
    if kwargs is None:
        result = PyObject_Call(func, args, NULL)
    else:
        result = PyObject_Call(func, args, <PyObject *> kwargs)
    if result != NULL:
        Py_DECREF(<object> result)
        return None
    PyErr_Fetch(&kind, &value, &trace)
    PyErr_NormalizeException(&kind, &value, &trace)
    if trace != NULL:
        PyException_SetTraceback(value, trace)
    exc = <object> value
    Py_XDECREF(kind)
    Py_XDECREF(value)
    Py_XDECREF(trace)
    return exc


cdef struct HandledState:  # the exception that was being handled before `start_handling`
    PyObject *kind
    PyObject *value
    PyObject *trace


cdef inline HandledState start_handling(object exc):
    """Make `exc` the exception being handled (what `sys.exc_info()` and a bare `raise` see, and the
    `__context__` of anything raised), as inside an `except` block; `end_handling` restores the old one."""
    cdef HandledState saved
    kind = type(exc)
    PyErr_GetExcInfo(&saved.kind, &saved.value, &saved.trace)
    Py_INCREF(kind)
    Py_INCREF(exc)
    PyErr_SetExcInfo(<PyObject *> kind, <PyObject *> exc, PyException_GetTraceback(<PyObject *> exc))
    return saved


cdef inline void end_handling(HandledState saved) noexcept:
    PyErr_SetExcInfo(saved.kind, saved.value, saved.trace)
