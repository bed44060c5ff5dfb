"""The snapshot of a plain run, taken and packed in one call: the hot part of a checkpoint's save.

A checkpointed chain saves between its nodes with nothing on its stacks (no return address, context,
panic, node state or step in flight). `plain_snapshot` writes such a run's engine document straight
as text (the very text `capture._capture` and `capture._document_text` write for the same state) and
packs it (`pack`: the bytes `format.encode` makes of the same sections), signed as it is packed with
a seal (`signing.Keyring.mac_for`). For any other run it returns None, having done nothing, and
`capture.take_snapshot` takes the general path (which writes the same bytes, slower).

One source for both builds: Cython compiles it with `_plain_snapshot.pxd` into
`amrita_sense.durable.snapshots._plain_snapshot` (the interpreter's fields read as the core's C
fields, the header packed in C); the pure build runs it as
`amrita_sense.durable.snapshots.pure_plain_snapshot`. `capture` takes the one of the build the core
loaded from (`amrita_sense.IMPLEMENTATION`). tests/test_durable_plain_snapshot.py compares both with
the general path and `format.encode`.
"""

from __future__ import annotations

import zlib
from typing import Any

try:
    import cython
except ModuleNotFoundError:  # a pure build without Cython installed
    from amrita_sense.core import cython_shim as cython  # type: ignore[no-redef,unused-ignore]

if not cython.compiled and __name__.rpartition(".")[2] == "_plain_snapshot":
    # imported as Python under the compiled module's name: the extension is not built here
    raise ImportError(
        "the compiled save path is not built here; the pure build is amrita_sense.durable.snapshots.pure_plain_snapshot"
    )

from amrita_sense import core as _core
from amrita_sense.durable.errors import CodecError
from amrita_sense.durable.snapshots import fingerprint as _fingerprint
from amrita_sense.durable.snapshots import format as fmt
from amrita_sense.durable.snapshots.migrate import pointer_anchors_text
from amrita_sense.durable.snapshots.panic import type_name
from amrita_sense.durable.snapshots.signing import _HmacSha256

if cython.compiled:
    from cython.cimports.amrita_sense.durable.snapshots._pack_capi import packed_header, packed_of, sections_of

if fmt.FORMAT_VERSION != 2 or fmt.MAGIC != b"ASRS":  # what `_pack_capi.packed_header` writes
    raise ImportError("the compiled save path packs format version 2 (b'ASRS'): update it with `format`")

MAX_ADDRESS = 4096
"""The longest address (pointer depth) a snapshot stores (`capture.MAX_ADDRESS`)."""
_SIGNED = fmt.SIGNED
_FLAG_HLT = _core.FLAG_HLT
_InterpreterCore: Any = _core.InterpreterCore
"""The loaded core's interpreter class (the compiled one's fields are `CoreState`'s C fields)."""
_COMPRESS_ABOVE = fmt.COMPRESS_ABOVE
_FORMAT_VERSION = fmt.FORMAT_VERSION
_STATUS_CODES = {status: code for code, status in enumerate(fmt.STATUSES)}
_HEAD = fmt._HEAD
_CRC = fmt._CRC
_ONE_BLOB = fmt._ONE_BLOB
_FORMAT_SLOTS = vars(fmt)
"""`format`'s globals: `pack` records the snapshot it made in `format._made`, as `format.encode` does."""
_new_header = tuple.__new__
_Header = fmt.Header
_crc32 = zlib.crc32


def pack(status: str, fingerprint: str, engine: bytes, outline: bytes, blobs: list, seal: Any = None) -> bytes:
    """`format.encode(status, fingerprint, engine, outline, blobs, seal)`: the same bytes, recorded
    as the snapshot this process packed last (`format.read_header` of them needs no check)."""
    flags = 0 if seal is None else _SIGNED
    if len(engine) > _COMPRESS_ABOVE:
        engine, flags = fmt._compress(engine), flags | 1
    nblobs = len(blobs)
    if nblobs == 0:
        user, blob, user_len = b"", b"", 0
    elif nblobs == 1:  # the pools: the count and the length, then the blob (written with it below)
        blob = blobs[0]
        user, user_len = b"", 8 + len(blob)
    else:
        user, blob = fmt._pack_blobs(blobs), b""
        user_len = len(user)
    code = _STATUS_CODES.get(status)
    if code is None:
        code = fmt.STATUSES.index(status)  # raises ValueError, as `format.encode` does
    raw, hex_fingerprint = fmt._FINGERPRINTS.get(fingerprint) or fmt._fingerprint(fingerprint)
    engine_len, outline_len = len(engine), len(outline)
    head = None
    if cython.compiled:  # the header written in C
        head = packed_header(code, flags, raw, engine_len, outline_len, user_len)
    if head is None:
        head = _HEAD.pack(fmt.MAGIC, _FORMAT_VERSION, code, flags, raw, engine_len, outline_len, user_len)
    exact = type(engine) is bytes and type(outline) is bytes and type(blob) is bytes
    if cython.compiled and exact:  # joined in C
        sections = sections_of(engine, outline, user, blob, nblobs == 1)
    else:
        if nblobs == 1:
            user = _ONE_BLOB.pack(1, len(blob))
        sections = b"".join((engine, outline, user, blob))  # checksummed and hashed in one call each
    crc = _crc32(sections, _crc32(head))
    if seal is None:
        if cython.compiled:
            packed = packed_of(head, crc, sections, b"")
        else:
            packed = b"".join((head, _CRC.pack(crc), sections))
    else:
        signer = seal[0]
        if type(signer) is _HmacSha256:  # `signer.signed_trailer(seal[1], head, sections)`, inline
            inner = signer.inner.copy()
            inner.update(seal[1])
            inner.update(head)
            inner.update(sections)
            outer = signer.outer.copy()
            outer.update(inner.digest())
            trailer = signer.trailer + outer.digest()
        else:
            trailer = signer.signed_trailer(seal[1], head, sections)
        if cython.compiled and type(trailer) is bytes:
            packed = packed_of(head, _crc32(trailer, crc), sections, trailer)
        else:
            packed = b"".join((head, _CRC.pack(_crc32(trailer, crc)), sections, trailer))
    _FORMAT_SLOTS["_made"] = (
        packed,
        _new_header(_Header, (_FORMAT_VERSION, status, hex_fingerprint, engine_len, outline_len, user_len, flags)),
    )
    return packed


def plain_snapshot(interp: Any, codec: Any, seal: Any) -> bytes | None:
    """`capture.take_snapshot(interp, codec, seal)` of a run between two nodes with nothing on its
    stacks (see the module docstring), without a trace to carry (the caller checked); None, having
    done nothing, for any other run (the general path then writes the same bytes)."""
    if not isinstance(interp, _InterpreterCore):
        return None  # not an interpreter of the loaded core: the general path says what it lacks
    state = interp  # the core's fields, read as C fields where compiled (`CoreState`)
    prog = state._prog_v
    if prog._successor is not None:
        return None
    last = _fingerprint._last  # `outline_of_program(prog)` of the table saved last, without the call
    outline = last[1] if last[0] is prog and last[1] is not None else _fingerprint.outline_of_program(prog)
    blobs: list = []
    found = plain_document(interp, outline, codec, blobs)
    if found is None:
        return None
    return pack(found[0], outline.fingerprint, found[1], outline.packed, blobs, seal)


def plain_document(interp: Any, outline: Any, codec: Any, blobs: list) -> tuple[str, bytes] | None:
    """`(status, engine document)` of a run between two nodes (running, its lock free, no
    `run_step_by()` yield pending) or idle, with nothing on its stacks, written straight as text
    (`capture._plain_document` writes the same); None, having done nothing, for any other run (or a
    wait to record: the general path writes those)."""
    if not isinstance(interp, _InterpreterCore):
        return None  # not an interpreter of the loaded core: the general path says what it lacks
    state = interp
    ret = state._ret_addr_stack_v
    contexts = state._context_stack_v
    if ret._items or (contexts is not None and contexts._items) or state._panic_exc_v is not None:
        return None
    if outline.memo_rows or outline.attempt_rows:
        return None
    lock = state._interpret_lock_v
    if interp._stepped:
        return None  # at a `run_step_by()` yield (`capture._pointer_and_flags` finds what comes next)
    if lock._owner is not None:
        return None  # in a step, a sub-call or an injected call (`capture.position_of` finds where)
    running = interp.is_running
    if interp._durable_wait is not None:
        return None
    steps = interp._durable_steps
    if type(steps) is not int:
        return None
    if contexts is None:
        contexts = interp._context_stack  # made on first use, as the general path makes it
    pointer = state._pointer_v
    if pointer._items is None:  # bound to a row: the table's own address
        address = pointer._prog.addrs[pointer._row]
    else:
        address = _address(pointer._items)
        if address is None:
            return None  # not an address: the general path says why
    tag = interp._parked_tag
    if codec is None:
        pools, codec_text = None, "null"
    else:  # `capture._pools_blob`
        pools = user_blob((tuple(state._pool_args[1:]), dict(state._pool_kwargs)), codec, blobs, "the injection pools")
        codec_text = codec_text_of(codec)
    run_id = state._interpreter_id_s or interp.id
    id_text = _STRING_TEXTS.get(run_id)
    if id_text is None:
        id_text = string_text(run_id)
    classes = state._exc_ignored_s
    last = _last_names
    names_text = last[1] if last[0] is classes else class_names_text(classes)
    text = "".join(
        (
            '{"interp":{"id":',
            id_text,
            ',"position":"between","parked":' if running else ',"position":"idle","parked":',
            "null" if tag is None else fmt.json_text(tag),
            ',"ptr":[',
            _pointer_text(address),
            '],"flags":',
            str(state._flag_bits),
            middle_text(state._pending_stop, ret._limit, contexts._limit, names_text, pools, codec_text),
            outline.anchor_texts.get((address,)) or pointer_anchors_text(outline, list(address)),
            f',"durable":{{"steps":{steps},"wait":null}}' if steps else "",
            "}",
        )
    )
    # `capture._status` (no panic, no wait here)
    if tag is not None:
        status = "suspended"
    elif running:
        status = "running"
    elif state._flag_bits & _FLAG_HLT:
        status = "halted"
    else:
        status = "ready" if address else "finished"
    return status, text.encode()


def _address(items: Any) -> tuple | None:
    """The address of a pointer's own list (`capture._address`), or None when it is none."""
    address = tuple(items)
    if len(address) > MAX_ADDRESS:
        return None
    for index in address:
        if type(index) is not int:
            return None
    return address


def _pointer_text(address: tuple) -> str:
    """`",".join(map(str, address))`, kept per address (a graph's rows are saved over and over)."""
    text = _POINTER_TEXTS.get(address)
    if text is None:
        if len(_POINTER_TEXTS) >= 4096:
            _POINTER_TEXTS.clear()
        text = _POINTER_TEXTS[address] = ",".join(map(str, address))
    return text


_POINTER_TEXTS: dict = {}


def middle_text(stop: Any, ret_limit: Any, ctx_limit: Any, names_text: str, pools: Any, codec_text: str) -> str:
    """The plain document's text from `,"stop":` to `,"identity":`, of its fields (stop, the two
    stacks' limits, the pass-through names' and the codec's texts, the pools' blob), kept for the
    fields asked last: every save of a run writes the same (the general snapshot, `capture`, writes
    its plain documents with it too). threads: the fields and their text are one tuple, replaced
    whole (a reader sees one save's, never a mix)."""
    global _last_middle
    stop = bool(stop)
    last = _last_middle
    if (
        last[0] is stop
        and last[1] == ret_limit
        and last[2] == ctx_limit
        and last[3] is names_text
        and last[4] == pools
        and last[5] is codec_text
    ):
        return last[6]
    text = "".join(
        (
            ',"stop":',
            "true" if stop else "false",
            ',"ret":{"limit":',
            str(ret_limit),
            ',"items":[]},"ctx":{"limit":',
            str(ctx_limit),
            ',"items":[]},"stacks":[],"exc_ignored":',
            names_text,
            ',"panic":null,"pools":',
            "null" if pools is None else str(pools),
            ',"memo":[],"attempts":[],"children":null},"codec":',
            codec_text,
            ',"identity":',
        )
    )
    _last_middle = (stop, ret_limit, ctx_limit, names_text, pools, codec_text, text)
    return text


_last_middle: tuple = (None, None, None, None, None, None, "")
"""The fields `middle_text` wrote last, and their text (nothing written yet: no field matches)."""


def string_text(value: str) -> str:
    """`fmt.json_text(value)` of a string, kept (an interpreter's id, a codec's name: every save
    of a run writes the same ones)."""
    text = _STRING_TEXTS.get(value)
    if text is None:
        if len(_STRING_TEXTS) >= 1024:
            _STRING_TEXTS.clear()
        text = _STRING_TEXTS[value] = fmt.json_text(value)
    return text


_STRING_TEXTS: dict = {}


def codec_name(codec: Any) -> str | None:
    if codec is None:
        return None
    return getattr(codec, "__name__", None) or type(codec).__qualname__


def codec_text_of(codec: Any) -> str:
    """`fmt.json_text(codec_name(codec))`, kept for the codec named last (a run saves with one)."""
    global _last_codec
    last = _last_codec
    if last[0] is codec:
        return last[1]
    text = string_text(codec_name(codec))  # type: ignore[arg-type]
    _last_codec = (codec, text)
    return text


_last_codec: tuple = (None, "null")
"""The codec `codec_text_of` named last, and its text (the codec kept alive: a module, as a rule;
threads: one tuple, replaced whole)."""


_NAMES: dict = {}
"""The names of the pass-through class tuples seen, and as JSON text (a run keeps the same one:
saves name it once)."""


def class_names_text(classes: Any) -> str:
    global _last_names
    last = _last_names
    if last[0] is classes:  # a run saves the same tuple every time (tuples are immutable)
        return last[1]
    text = class_names_and_text(classes)[1]
    if type(classes) is tuple:
        _last_names = (classes, text)
    return text


_last_names: tuple = (None, "")
"""The pass-through class tuple `class_names_text` named last, and its text (the tuple kept alive;
threads: one tuple, replaced whole)."""


def class_names_and_text(classes: Any) -> tuple:
    key = tuple(classes)
    found = _NAMES.get(key)
    if found is None:
        if len(_NAMES) > 256:
            _NAMES.clear()
        names = [type_name(cls) for cls in key]
        found = _NAMES[key] = (names, fmt.json_text(names))
    return found


def user_blob(value: Any, codec: Any, blobs: list, what: str) -> int:
    """`value` encoded by `codec` as the next user blob; its index."""
    if codec is None:
        raise CodecError(f"{what} hold user objects: pass a codec (for example pickle) to snapshot them")
    try:
        blob = codec.dumps(value)
    except Exception as exc:  # noqa: BLE001
        raise CodecError(f"the codec could not encode {what}: {exc!r}") from exc
    if type(blob) is not bytes:
        if not isinstance(blob, (bytes, bytearray)):
            raise CodecError(f"the codec's dumps() returned {type(blob).__name__}, not bytes")
        blob = bytes(blob)
    blobs.append(blob)
    return len(blobs) - 1
