# Augments src/amrita_sense/core/_async_pin.py when Cython compiles it into
# `amrita_sense.core._async_pin` (the shared stem is how Cython finds this file).

cdef object _pin_state  # a threading.local: per thread, [runs in flight, the name found by the outermost]
cdef object _sniffio_local, _sniffio_cvar  # sniffio's per-thread answer and its context variable

cpdef object pin_async_library(object task)
cpdef object restore_async_library()
