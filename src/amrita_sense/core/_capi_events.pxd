# C helpers of the compiled event dispatch only (`_events.py` cimports them): kept out of `_capi.pxd`,
# whose verbatim C every compiled module of the core includes, so that the other modules' C (and the
# instructions GCC makes of it) does not change with them.

cdef extern from *:
    """
    /* The version tag of the class `cls`'s attribute cache (`tp_version_tag`), 0 when it has none (or
       `cls` is not a class). CPython clears it (`PyType_Modified`) on every write or delete of an
       attribute of the class or of one of its bases, and gives the class a fresh tag, never used
       before, at its next attribute look-up: an unchanged non-zero tag means no attribute of the
       class changed in between. */
    CYTHON_UNUSED static unsigned int amrita_class_tag(PyObject *cls) {
        PyTypeObject *type;
        if (!PyType_Check(cls)) return 0;
        type = (PyTypeObject *)cls;
    #ifdef Py_TPFLAGS_VALID_VERSION_TAG
        if (!PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) return 0;
    #endif
    #ifdef Py_GIL_DISABLED
        return _Py_atomic_load_uint32_relaxed(&type->tp_version_tag);
    #else
        return type->tp_version_tag;
    #endif
    }
    """
    unsigned int class_tag "amrita_class_tag"(object cls)


cdef extern from *:
    """
    /* `PyObject_IsTrue(obj)` without the call for an object of a type with none of the slots that
       can make it false (`nb_bool`, `mp_length`, `sq_length`; None, False and 0 have one): such an
       object is true, as PyObject_IsTrue finds after the same three looks. */
    CYTHON_UNUSED static inline int amrita_is_true(PyObject *obj) {
        PyTypeObject *type = Py_TYPE(obj);
        if ((type->tp_as_number == NULL || type->tp_as_number->nb_bool == NULL)
            && (type->tp_as_mapping == NULL || type->tp_as_mapping->mp_length == NULL)
            && (type->tp_as_sequence == NULL || type->tp_as_sequence->sq_length == NULL))
            return 1;
        return PyObject_IsTrue(obj);
    }
    """
    bint is_true "amrita_is_true"(object obj) except -1


cdef extern from *:
    """
    /* Whether each list of the tuple `lists` holds exactly the items of the tuple at the same index of
       `copies` (identity, in order). `lists` holds lists and is as long as `copies` (the caller's
       invariant). With the GIL only: no list changes during this C loop, which reads borrowed items. */
    CYTHON_UNUSED static int amrita_same_items(PyObject *lists, PyObject *copies) {
        Py_ssize_t g, i, size, n = PyTuple_GET_SIZE(copies);
        PyObject *items, *held;
        for (g = 0; g < n; g++) {
            items = PyTuple_GET_ITEM(lists, g);
            held = PyTuple_GET_ITEM(copies, g);
            size = PyTuple_GET_SIZE(held);
            if (PyList_GET_SIZE(items) != size) return 0;
            for (i = 0; i < size; i++) {
                if (PyList_GET_ITEM(items, i) != PyTuple_GET_ITEM(held, i)) return 0;
            }
        }
        return 1;
    }
    """
    bint same_items "amrita_same_items"(tuple lists, tuple copies) noexcept
