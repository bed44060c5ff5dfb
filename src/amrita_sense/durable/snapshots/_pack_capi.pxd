# C helpers of the compiled save path (`_plain_snapshot.py`), cimported by it alone.

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.string cimport memcpy


cdef inline void _put_u32(unsigned char *at, Py_ssize_t value) noexcept nogil:
    at[0] = value & 0xFF
    at[1] = (value >> 8) & 0xFF
    at[2] = (value >> 16) & 0xFF
    at[3] = (value >> 24) & 0xFF


cdef inline object packed_header(
    Py_ssize_t code, Py_ssize_t flags, bytes raw, Py_ssize_t engine_len, Py_ssize_t outline_len, Py_ssize_t user_len
):
    """`format._HEAD.pack(MAGIC, FORMAT_VERSION, code, flags, raw, engine_len, outline_len, user_len)`
    (the header without its checksum, 36 bytes, little-endian), or None for fields `struct` would
    refuse (the caller then asks `struct`, which raises as `format.encode` does)."""
    cdef bytes head
    cdef unsigned char *at
    if (
        not 0 <= code <= 0xFF or not 0 <= flags <= 0xFF or raw is None or len(raw) != 16
        or not 0 <= engine_len <= 0xFFFFFFFF or not 0 <= outline_len <= 0xFFFFFFFF
        or not 0 <= user_len <= 0xFFFFFFFF
    ):
        return None
    head = PyBytes_FromStringAndSize(NULL, 36)
    at = <unsigned char *>PyBytes_AS_STRING(head)
    memcpy(at, b"ASRS", 4)
    at[4] = 2  # FORMAT_VERSION, little-endian u16
    at[5] = 0
    at[6] = <unsigned char>code
    at[7] = <unsigned char>flags
    memcpy(at + 8, PyBytes_AS_STRING(raw), 16)
    _put_u32(at + 24, engine_len)
    _put_u32(at + 28, outline_len)
    _put_u32(at + 32, user_len)
    return head
