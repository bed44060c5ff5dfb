# Augments src/amrita_sense/core/_checks.py when Cython compiles it into `amrita_sense.core._checks`
# (the shared stem is how Cython finds this file). The compiled core cimports these functions, so
# its calls to them are C calls; the cpdef ones are also the selector's Python functions.

cimport cython

cdef dict _PROVIDED  # part name -> what the layer above gave (`provide`), or the stand-in until then

cdef object _check_index(object value, str what)
cdef object _checked_items(object items, str what)
cdef object _checked(object value, object kind, str name, str what)
cdef object _refuse_delete(str name)


@cython.locals(row=Py_ssize_t)
cdef Py_ssize_t _row_index(object value, Py_ssize_t nrows, Py_ssize_t lowest) except? -2


cdef dict _row_map(object rows, Py_ssize_t nrows)
cdef object _checked_int(object value, str what)
cdef Py_ssize_t _ssize(object value) except? -1
cdef double _checked_seconds(object value, str name) except? -1.0
cdef object _checked_middleware(object value, str name)
cdef object _provided(str name)
cdef object _optional(object value, object kind, str name, str what)
cpdef tuple args_pool(object value, str name)
cpdef dict kwargs_pool(object value, str name)
cpdef tuple exception_types(object value, str name)
cpdef object check_stream(object stream, str name)
