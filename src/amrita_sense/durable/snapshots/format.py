"""The snapshot container: a fixed header, the engine document, the graph outline, user blobs.

Format version 2 (all integers little-endian)::

    offset  size  field
    0       4     magic b"ASRS"
    4       2     format version (2; 1 is still read)
    6       1     status code (see STATUSES)
    7       1     flags: bit 0 = the engine document is zlib-compressed; bit 1 = signed (a
                  signature trailer follows the user section); bit 2 = encrypted (signed too:
                  the three sections are replaced by a 12-byte nonce and their AES-GCM
                  ciphertext, 16 bytes longer); other bits 0
    8       16    graph fingerprint (16 bytes, the 32 hex digits of `graph_fingerprint`)
    24      4     E: length of the engine document section
    28      4     O: length of the outline section (a multiple of 4)
    32      4     U: length of the user section
    36      4     CRC-32 of bytes [0, 36) followed by every byte after the header
    40      E     engine document: UTF-8 JSON (zlib-compressed when flag bit 0 is set)
    40+E    O     outline: one CRC-32 per row of the graph's node table
    40+E+O  U     user section: u32 count, then per blob a u32 length and the codec's bytes
    40+E+O+U T     signed only: u8 key id length K, the key id (ASCII), the 32-byte HMAC-SHA256
                  (`amrita_sense.durable.snapshots.signing`); T = 1 + K + 32

Version 2 compresses the engine document only when it is larger than `COMPRESS_ABOVE` bytes (a
small document costs more to compress than to store); version 1 always compressed it (flags 1).

The engine document and the outline are plain data (JSON, integers), so a
snapshot can be read without running anything it contains; only the user
section is handed to a codec, and only when the restoring code passes one.
The engine document's fields are described in `amrita_sense.durable.snapshots.capture`.

A reader rejects, before anything is restored: data that does not start with
the magic (`ForeignSnapshot`), a version above `FORMAT_VERSION`
(`UnsupportedSnapshotVersion`), data shorter than its header announces
(`TruncatedSnapshot`), and a checksum, flag, status, compression or JSON error
(`CorruptSnapshot`).
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any, NamedTuple

from amrita_sense.durable.errors import (
    CorruptSnapshot,
    EncryptedSnapshot,
    ForeignSnapshot,
    TruncatedSnapshot,
    UnsupportedSnapshotVersion,
)

MAGIC = b"ASRS"
FORMAT_VERSION = 2
STATUSES = ("ready", "running", "suspended", "halted", "panicked", "finished", "waiting")
"""Status codes 0-6: what the run was doing when the snapshot was taken.

ready: not running, nothing pending (never run, or stopped between nodes);
running: in a run, between two nodes (or in a middleware, before its node);
suspended: in a run, parked at a suspend gate; halted: stopped by SUSPEND /
`InterruptKeepContext`, the next run steps past the halting node; panicked:
stopped by an exception, the next run recovers; finished: the run ended;
waiting: parked at a WAIT / SLEEP (`amrita_sense.durable.waits`), the next run
continues at that wait, once a waker delivers its message or its timer is due.
"""

_HEADER = struct.Struct("<4sHBB16sIIII")
HEADER_SIZE = _HEADER.size
_CRC_AT = _HEADER.size - 4
_CRC = struct.Struct("<I")
_COMPRESSED = 1
SIGNED = 2
ENCRYPTED = 4
_KNOWN_FLAGS = {1: (_COMPRESSED,), 2: tuple(c | s for c in (0, _COMPRESSED) for s in (0, SIGNED, SIGNED | ENCRYPTED))}
MAC_SIZE = 32
NONCE_SIZE = 12
TAG_SIZE = 16
SEALED = NONCE_SIZE + TAG_SIZE
"""What encryption adds to the sections: the nonce before them, the tag after."""
"""The flag values each format version may carry."""
COMPRESS_ABOVE = 4096
"""An engine document longer than this is compressed."""
_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_C_ENCODER = getattr(json.encoder, "c_make_encoder", None)
# the C encoder made once (`JSONEncoder.encode` makes one per call); no cycle check: the engine
# document is built by this package from plain lists and dicts, never cyclic
_ONE_SHOT = (
    None
    if _C_ENCODER is None
    else _C_ENCODER(None, _JSON.default, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, False)
)
MAX_DOCUMENT = 4 * 1024 * 1024
"""The largest engine document a reader inflates and parses (a decompression bomb stops here; a real
document is a few KB, a run with 100,000 return addresses about 1 MB)."""
MAX_ELEMENTS = 500_000
"""The most JSON values (counted by their separators) a reader parses."""


class Header(NamedTuple):
    """A snapshot's header, as `read_header` found it (a named tuple: every save reads one)."""

    version: int
    status: str
    fingerprint: str
    engine_len: int
    outline_len: int
    user_len: int
    flags: int = _COMPRESSED

    @property
    def signed(self) -> bool:
        return bool(self.flags & SIGNED)

    @property
    def encrypted(self) -> bool:
        return bool(self.flags & ENCRYPTED)

    @property
    def sections_end(self) -> int:
        """Where the user section ends (a signed snapshot's trailer starts)."""
        sealed = SEALED if self.flags & ENCRYPTED else 0
        return _HEADER.size + self.engine_len + self.outline_len + self.user_len + sealed


@dataclass(frozen=True)
class Decoded:
    """A checked snapshot: its header, the engine document, the packed outline and the user blobs."""

    header: Header
    document: dict
    outline: bytes
    blobs: list[bytes]


_NOTHING: Any = object()
_made: tuple[Any, Any] = (_NOTHING, None)
"""The snapshot this process packed last and its `Header`: a save hands its store the very bytes
object a snapshot (or its signature) just made, whose framing and checksum are sound by
construction, so `read_header` of that object returns the header without checking them again
(bytes are immutable; the slot keeps that one snapshot alive until the next is made)."""


def made_header(data: Any) -> Header | None:
    """The header of `data` when it is the snapshot this process packed last (else None)."""
    made = _made
    return made[1] if made[0] is data else None


def remember(data: bytes, header: Header) -> None:
    """`data` (just packed, sound by construction) has `header` (see `_made`)."""
    global _made
    _made = (data, header)


def remember_signed(data: Any, signed: bytes, flags: int) -> None:
    """`signed`, just made from `data` with the header flags `flags`, is the snapshot to remember
    when `data` is (a save's signature: its store then reads `signed`'s header)."""
    global _made
    made = _made
    if made[0] is data:
        _made = (signed, _new_header(Header, (*made[1][:6], flags)))


def json_text(value: Any) -> str:
    """`value` as the engine document writes it (compact JSON, no NaN)."""
    return _JSON.encode(value) if _ONE_SHOT is None else "".join(_ONE_SHOT(value, 0))


def encode(status: str, fingerprint: str, engine: bytes, outline: bytes, blobs: list[bytes], seal: Any = None) -> bytes:
    """Pack a snapshot (see the module docstring for the layout); `engine` is the engine document
    as UTF-8 JSON text. With `seal` (`signing.Keyring.mac_for`: an HMAC key and what it signs for),
    the snapshot is packed signed at once: the bytes that keyring's `sign_for` makes of the unsigned
    one, without packing and checksumming that one first."""
    flags = 0 if seal is None else SIGNED
    if len(engine) > COMPRESS_ABOVE:
        engine, flags = _compress(engine), flags | _COMPRESSED
    if not blobs:
        user, blob, user_len = b"", b"", 0
    elif len(blobs) == 1:  # the pools: the count and the length, then the blob (joined below)
        blob = blobs[0]
        user, user_len = _ONE_BLOB.pack(1, len(blob)), 8 + len(blob)
    else:
        user, blob = _pack_blobs(blobs), b""
        user_len = len(user)
    code = _STATUS_CODES.get(status)
    raw, hex_fingerprint = _FINGERPRINTS.get(fingerprint) or _fingerprint(fingerprint)
    head = _HEAD.pack(
        MAGIC,
        FORMAT_VERSION,
        STATUSES.index(status) if code is None else code,
        flags,
        raw,
        len(engine),
        len(outline),
        user_len,
    )
    sections = b"".join((engine, outline, user, blob))  # checksummed and hashed in one call each
    crc = zlib.crc32(sections, zlib.crc32(head))
    if seal is None:
        packed = b"".join((head, _CRC.pack(crc), sections))
    else:
        trailer = seal[0].signed_trailer(seal[1], head, sections)
        packed = b"".join((head, _CRC.pack(zlib.crc32(trailer, crc)), sections, trailer))
    global _made
    _made = (
        packed,
        _new_header(Header, (FORMAT_VERSION, status, hex_fingerprint, len(engine), len(outline), user_len, flags)),
    )
    return packed


_new_header = tuple.__new__
"""`Header(...)` from a tuple of its seven fields, in one C call (`remember` and `encode`, per save)."""


_HEAD = struct.Struct("<4sHBB16sIII")
"""The header without its checksum field."""
_ONE_BLOB = struct.Struct("<II")
_STATUS_CODES = {status: code for code, status in enumerate(STATUSES)}
_FINGERPRINTS: dict[str, tuple[bytes, str]] = {}
"""A graph fingerprint's 16 bytes and their hex digits as the header holds them, per fingerprint
seen (a run saves the same one every time)."""


def _fingerprint(fingerprint: str) -> tuple[bytes, str]:
    found = _FINGERPRINTS.get(fingerprint)
    if found is None:
        raw = _HEAD.pack(MAGIC, 0, 0, 0, bytes.fromhex(fingerprint), 0, 0, 0)[8:24]  # "16s": cut or padded
        if len(_FINGERPRINTS) >= 256:
            _FINGERPRINTS.clear()
        found = _FINGERPRINTS[fingerprint] = (raw, raw.hex())
    return found


def with_checksum(head: bytes, *rest: Any) -> bytes:
    """A snapshot from its header without the checksum field (`head`) and the parts that follow it."""
    crc = zlib.crc32(head)
    for part in rest:
        crc = zlib.crc32(part, crc)
    return b"".join((head, _CRC.pack(crc), *rest))


def unsigned(data: bytes) -> bytes:
    """A signed (not encrypted) snapshot without its signature: the snapshot that was signed."""
    header = read_header(data)
    head = bytearray(data[:_CRC_AT])
    head[7] &= ~SIGNED
    return with_checksum(bytes(head), data[_HEADER.size : header.sections_end])


def _compress(data: bytes) -> bytes:
    # memLevel 1: a small hash table; for documents of a few hundred bytes, setting up the
    # default one costs more than compressing (13 us against 5 us)
    packer = zlib.compressobj(6, zlib.DEFLATED, 15, 1)
    return packer.compress(data) + packer.flush()


def _pack_blobs(blobs: list[bytes]) -> bytes:
    parts = [struct.pack("<I", len(blobs))]
    for blob in blobs:
        parts.append(struct.pack("<I", len(blob)))
        parts.append(blob)
    return b"".join(parts)


def read_header(data: Any) -> Header:
    """Check the framing and the checksum of `data`; the header. Raises a `SnapshotFormatError`."""
    made = _made
    if made[0] is data:
        return made[1]  # the snapshot just packed here: sound by construction
    if type(data) is bytes:
        header = _sound_header(data)
        if header is not None:
            return header
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"a snapshot is bytes, not {type(data).__name__}")
    view = memoryview(data).cast("B")
    if len(view) < len(MAGIC):
        if bytes(view) == MAGIC[: len(view)]:
            raise TruncatedSnapshot(f"{len(view)} bytes: shorter than the snapshot header")
        raise ForeignSnapshot("not a snapshot: the data does not start with the snapshot magic")
    if bytes(view[:4]) != MAGIC:
        raise ForeignSnapshot("not a snapshot: the data does not start with the snapshot magic")
    if len(view) < 6:
        raise TruncatedSnapshot(f"{len(view)} bytes: shorter than the snapshot header")
    version = struct.unpack_from("<H", view, 4)[0]
    if version > FORMAT_VERSION:
        raise UnsupportedSnapshotVersion(version, FORMAT_VERSION)
    if version == 0:
        raise CorruptSnapshot("format version 0 does not exist")
    if len(view) < _HEADER.size:
        raise TruncatedSnapshot(f"{len(view)} bytes: shorter than the {_HEADER.size}-byte snapshot header")
    _, _, status, flags, fingerprint, engine_len, outline_len, user_len, crc = _HEADER.unpack_from(view)
    total = _HEADER.size + engine_len + outline_len + user_len + (SEALED if flags & ENCRYPTED else 0)
    if flags & SIGNED and version > 1:
        if len(view) <= total:
            raise TruncatedSnapshot(f"{len(view)} bytes: a signed snapshot ends after its sections")
        total += 1 + view[total] + MAC_SIZE
    if len(view) < total:
        raise TruncatedSnapshot(f"{len(view)} bytes: the header announces {total}")
    if len(view) > total:
        raise CorruptSnapshot(f"{len(view) - total} bytes after the end the header announces")
    if zlib.crc32(view[_HEADER.size :], zlib.crc32(view[:_CRC_AT])) != crc:
        raise CorruptSnapshot("checksum mismatch: the snapshot was damaged")
    if status >= len(STATUSES) or flags not in _KNOWN_FLAGS[version] or outline_len % 4:
        raise CorruptSnapshot("invalid header fields (status, flags or outline length)")
    return Header(version, STATUSES[status], fingerprint.hex(), engine_len, outline_len, user_len, flags)


def _sound_header(data: bytes) -> Header | None:
    """The header of a sound snapshot (every check `read_header` makes, at once); None when a check
    fails (`read_header` then finds which, and says so)."""
    if len(data) < _HEADER.size:
        return None
    magic, version, status, flags, fingerprint, engine_len, outline_len, user_len, crc = _HEADER.unpack_from(data)
    total = _HEADER.size + engine_len + outline_len + user_len + (SEALED if flags & ENCRYPTED else 0)
    if flags & SIGNED and len(data) > total:
        total += 1 + data[total] + MAC_SIZE
    if (
        magic != MAGIC
        or not 0 < version <= FORMAT_VERSION
        or len(data) != total
        or zlib.crc32(data[_HEADER.size :], zlib.crc32(data[:_CRC_AT])) != crc
        or status >= len(STATUSES)
        or flags not in _KNOWN_FLAGS[version]
        or outline_len % 4
    ):
        return None
    return Header(version, STATUSES[status], fingerprint.hex(), engine_len, outline_len, user_len, flags)


def decode(data: Any) -> Decoded:
    """Check and unpack a whole snapshot. Raises a `SnapshotFormatError`; runs nothing it contains."""
    header = read_header(data)
    if header.encrypted:
        raise EncryptedSnapshot("the snapshot is encrypted: pass the keyring that wrote it (keyring=)")
    view = memoryview(data).cast("B")
    start = _HEADER.size
    engine = view[start : start + header.engine_len]
    outline = bytes(view[start + header.engine_len : start + header.engine_len + header.outline_len])
    user = view[start + header.engine_len + header.outline_len : header.sections_end]
    return Decoded(header, _read_document(engine, header.flags & _COMPRESSED), outline, _unpack_blobs(user))


def _read_document(engine: memoryview, compressed: int) -> dict:
    raw = _inflate(engine) if compressed else bytes(engine)
    if len(raw) > MAX_DOCUMENT:
        raise CorruptSnapshot("the engine document is larger than the reader accepts")
    if raw.count(b",") + raw.count(b"[") + raw.count(b"{") > MAX_ELEMENTS:
        raise CorruptSnapshot("the engine document holds more values than the reader accepts")
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise CorruptSnapshot(f"the engine document is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise CorruptSnapshot("the engine document is not a JSON object")
    return document


def _inflate(engine: memoryview) -> bytes:
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(engine, MAX_DOCUMENT)
    except zlib.error as exc:
        raise CorruptSnapshot(f"the engine document does not decompress: {exc}") from None
    if inflater.unconsumed_tail or not inflater.eof:
        raise CorruptSnapshot("the engine document is incomplete or larger than the reader accepts")
    return raw


def _unpack_blobs(user: memoryview) -> list[bytes]:
    if not len(user):
        return []
    if len(user) < 4:
        raise CorruptSnapshot("the user section is too short")
    count = struct.unpack_from("<I", user, 0)[0]
    blobs, at = [], 4
    for _ in range(count):
        if at + 4 > len(user):
            raise CorruptSnapshot("the user section ends inside a blob length")
        size = struct.unpack_from("<I", user, at)[0]
        at += 4
        if at + size > len(user):
            raise CorruptSnapshot("the user section ends inside a blob")
        blobs.append(bytes(user[at : at + size]))
        at += size
    if at != len(user):
        raise CorruptSnapshot("bytes after the last user blob")
    return blobs
