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


cdef inline bytes sections_of(bytes engine, bytes outline, bytes user, bytes blob, bint counted):
    """`engine + outline + user + blob`, with `counted` the user section's count and length of
    one blob written first (`format._ONE_BLOB.pack(1, len(blob))`: `user` is then empty)."""
    cdef Py_ssize_t e = len(engine), o = len(outline), u = len(user), b = len(blob)
    cdef Py_ssize_t prefix = 8 if counted else 0
    cdef bytes out = PyBytes_FromStringAndSize(NULL, e + o + u + prefix + b)
    cdef unsigned char *at = <unsigned char *>PyBytes_AS_STRING(out)
    memcpy(at, PyBytes_AS_STRING(engine), e)
    at += e
    memcpy(at, PyBytes_AS_STRING(outline), o)
    at += o
    memcpy(at, PyBytes_AS_STRING(user), u)
    at += u
    if counted:
        _put_u32(at, 1)
        _put_u32(at + 4, b)
        at += 8
    memcpy(at, PyBytes_AS_STRING(blob), b)
    return out


cdef inline bytes packed_of(bytes head, unsigned long crc, bytes sections, bytes trailer):
    """`head + _CRC.pack(crc) + sections + trailer` (the checksum little-endian)."""
    cdef Py_ssize_t h = len(head), s = len(sections), t = len(trailer)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, h + 4 + s + t)
    cdef unsigned char *at = <unsigned char *>PyBytes_AS_STRING(out)
    memcpy(at, PyBytes_AS_STRING(head), h)
    at += h
    _put_u32(at, <Py_ssize_t>(crc & 0xFFFFFFFF))
    at += 4
    memcpy(at, PyBytes_AS_STRING(sections), s)
    memcpy(at + s, PyBytes_AS_STRING(trailer), t)
    return out
