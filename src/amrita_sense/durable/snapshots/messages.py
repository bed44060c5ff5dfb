"""Message payloads: what `store.send` keeps for a run, as bytes, and back.

A payload is kept in a small envelope::

    offset  size  field
    0       4     magic b"ASMP"
    4       1     envelope version (1)
    5       1     codec kind: 0 = plain JSON data (codec None), 1 = the run's codec (its `dumps`)
    6       1     flags: bit 0 = signed
    7       1     reserved (0)
    [signed] 1 + n + 32: key id length, key id (ASCII), HMAC-SHA256
    ...           the encoded payload

A signature (a `Keyring`'s current key) covers the envelope's first 8 bytes, the payload bytes and
what the message is for, the run id, the topic and the message id, under a domain string of its own
(a signed snapshot is never a valid signed message, nor the other way round): a payload copied to
another run, topic or message id does not verify. `decode_payload` checks the signature before the
payload is decoded; a codec that can run code while it loads (pickle) never decodes an unsigned
payload unless `allow_unsigned=True` (the same rule as snapshots, `signing.trusted`). JSON payloads
(the default) are safe to decode unsigned; with a keyring given, an unsigned one is still refused.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from amrita_sense.durable.errors import CodecError, TamperedMessage, UntrustedMessage
from amrita_sense.durable.snapshots.signing import Keyring, runs_code_on_load

MAGIC = b"ASMP"
VERSION = 1
KIND_JSON = 0
KIND_CODEC = 1
SIGNED = 1
_HEAD = 8
_MAC = 32
_DOMAIN = b"amrita-sense message mac 1\0"


def _context(run_id: str, topic: str, message_id: str, key_id: bytes) -> bytes:
    parts = (run_id, topic, message_id)
    return _DOMAIN + b"".join(p.encode("utf-8", "surrogatepass") + b"\0" for p in parts) + key_id + b"\0"


def _name(codec: Any) -> str:
    return getattr(codec, "__name__", type(codec).__name__)


def _where(run_id: str, topic: str, message_id: str) -> str:
    return f"the message {message_id!r} on topic {topic!r} of run {run_id!r}"


def encode_payload(
    payload: Any,
    *,
    codec: Any = None,
    keyring: Any = None,
    run_id: str,
    topic: str,
    message_id: str,
) -> bytes:
    """`payload` as the bytes a store keeps: encoded by `codec` (None: plain JSON data) and, with a
    `keyring`, signed with its current key for (`run_id`, `topic`, `message_id`).
    `CodecError` (naming the message) when the codec cannot encode it."""
    where = _where(run_id, topic, message_id)
    if codec is None:
        try:
            body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise CodecError(
                f"{where}: the payload is not plain JSON data ({exc}); pass a codec (for example pickle) to send it"
            ) from exc
        kind = KIND_JSON
    else:
        try:
            body = codec.dumps(payload)
        except Exception as exc:  # noqa: BLE001 - any codec failure is the codec's
            raise CodecError(f"{where}: the codec {_name(codec)} could not encode the payload: {exc!r}") from exc
        if not isinstance(body, (bytes, bytearray)):
            raise CodecError(f"{where}: the codec's dumps() returned {type(body).__name__}, not bytes")
        kind = KIND_CODEC
    if keyring is None:
        return bytes([*MAGIC, VERSION, kind, 0, 0]) + bytes(body)
    if not isinstance(keyring, Keyring):
        raise TypeError(f"keyring is a Keyring or None, not {type(keyring).__name__}")
    head = bytes([*MAGIC, VERSION, kind, SIGNED, 0])
    key_id = keyring.current.encode("ascii")
    mac = keyring._macs[keyring.current].digest(_context(run_id, topic, message_id, key_id), head, body)
    return head + bytes([len(key_id)]) + key_id + mac + bytes(body)


def decode_payload(
    data: Any,
    *,
    codec: Any = None,
    keyring: Any = None,
    allow_unsigned: bool = False,
    run_id: str,
    topic: str,
    message_id: str,
) -> Any:
    """The payload kept in `data` (`encode_payload`'s bytes), checked before it is decoded:

    - with a `keyring`, the signature must be one of its keys' for (`run_id`, `topic`, `message_id`)
      (`TamperedMessage` otherwise; an unsigned payload only with `allow_unsigned=True`);
    - without one, a codec that can run code while it loads refuses it (`UntrustedMessage`) unless
      `allow_unsigned=True`.

    `TamperedMessage` (a `CorruptSnapshot`) for bytes that are not an envelope, `CodecError` when the
    codec (or JSON) cannot decode the payload or the envelope names the other kind of codec."""
    where = _where(run_id, topic, message_id)
    if keyring is not None and not isinstance(keyring, Keyring):
        raise TypeError(f"keyring is a Keyring or None, not {type(keyring).__name__}")
    data = bytes(data) if isinstance(data, (bytearray, memoryview)) else data
    if not isinstance(data, bytes) or len(data) < _HEAD or data[:4] != MAGIC:
        raise TamperedMessage(f"{where} is not a message envelope")
    version, kind, flags = data[4], data[5], data[6]
    if version != VERSION or kind not in (KIND_JSON, KIND_CODEC) or flags & ~SIGNED or data[7]:
        raise TamperedMessage(f"{where} has an envelope this version cannot read (version {version}, kind {kind})")
    signed = bool(flags & SIGNED)
    body_at = _HEAD
    if signed:
        if len(data) < _HEAD + 1 or len(data) < _HEAD + 1 + data[_HEAD] + _MAC:
            raise TamperedMessage(f"{where} ends inside its signature")
        body_at = _HEAD + 1 + data[_HEAD] + _MAC
    if keyring is not None:
        if not signed:
            if not allow_unsigned:
                raise TamperedMessage(f"{where} is not signed (a keyring was given to check it)")
        else:
            key_id = data[_HEAD + 1 : _HEAD + 1 + data[_HEAD]]
            signer = keyring._macs.get(key_id.decode("ascii", "replace"))
            if signer is None:
                raise TamperedMessage(f"{where} is signed with key {key_id!r:.80}, not one of this keyring")
            mac = data[body_at - _MAC : body_at]
            expected = signer.digest(_context(run_id, topic, message_id, key_id), data[:_HEAD], data[body_at:])
            if not hmac.compare_digest(mac, expected):
                raise TamperedMessage(
                    f"{where} does not verify with key {key_id.decode('ascii', 'replace')!r}: it was changed, "
                    "or signed for another run, topic or message id"
                )
    elif kind == KIND_CODEC and runs_code_on_load(codec) and not allow_unsigned:
        raise UntrustedMessage(
            f"refusing to decode {where} with a codec that can run code while it loads ({_name(codec)}) "
            "without checking it: pass the keyring it was signed with (keyring=), or allow_unsigned=True "
            "for messages only you can send"
        )
    body = data[body_at:]
    if kind == KIND_JSON:
        try:
            return json.loads(body.decode("utf-8"))
        except ValueError as exc:
            raise CodecError(f"{where}: the payload is not JSON: {exc}") from exc
    if codec is None:
        raise CodecError(f"{where} was encoded by a codec: pass the run's codec to decode it")
    try:
        return codec.loads(body)
    except Exception as exc:  # noqa: BLE001 - any codec failure is the codec's
        raise CodecError(f"{where}: the codec {_name(codec)} could not decode the payload: {exc!r}") from exc
