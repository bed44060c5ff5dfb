# Augments src/amrita_sense/durable/snapshots/_plain_snapshot.py when Cython compiles it into
# `amrita_sense.durable.snapshots._plain_snapshot` (the shared stem is how Cython finds this file):
# the interpreter read through the core's C fields (`CoreState` and its structures), the kept texts
# as C globals, the helpers as C calls.

cimport cython

from amrita_sense.core._state cimport CoreState
from amrita_sense.core._structures cimport InterpretLock, PointerVector, Program, Stack

cdef Py_ssize_t MAX_ADDRESS
cdef int _SIGNED, _FLAG_HLT
cdef Py_ssize_t _COMPRESS_ABOVE
cdef object _FORMAT_VERSION
cdef dict _STATUS_CODES
cdef object _HEAD, _CRC, _ONE_BLOB, _Header, _new_header, _crc32, _InterpreterCore
cdef dict _FORMAT_SLOTS
cdef dict _POINTER_TEXTS, _STRING_TEXTS, _NAMES
# the kept texts of the last save (`_last_middle`, `_last_codec`, `_last_names`) stay module globals:
# each a tuple replaced whole, a dict store (threads: no torn pair on a free-threaded build)


@cython.locals(
    flags=int, nblobs=Py_ssize_t, engine_len=Py_ssize_t, outline_len=Py_ssize_t, user_len=Py_ssize_t, exact=bint
)
cpdef bytes pack(object status, object fingerprint, object engine, object outline, object blobs, object seal=*)


@cython.locals(state=CoreState, prog=Program, blobs=list)
cpdef object plain_snapshot(object interp, object codec, object seal)


@cython.locals(
    state=CoreState,
    ret=Stack,
    contexts=Stack,
    lock=InterpretLock,
    pointer=PointerVector,
    address=tuple,
    running=bint,
    last=tuple,
)
cpdef object plain_document(object interp, object outline, object codec, list blobs)


@cython.locals(index=object)
cdef tuple _address(object items)
cdef str _pointer_text(tuple address)


@cython.locals(last=tuple)
cpdef str middle_text(bint stop, Py_ssize_t ret_limit, Py_ssize_t ctx_limit, str names_text, object pools, str codec_text)
cpdef str string_text(object value)
cpdef object codec_name(object codec)


@cython.locals(last=tuple)
cpdef str codec_text_of(object codec)


@cython.locals(last=tuple)
cpdef str class_names_text(object classes)
cpdef tuple class_names_and_text(object classes)
cpdef Py_ssize_t user_blob(object value, object codec, list blobs, str what) except -1
