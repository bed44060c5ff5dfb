"""Signed snapshots: a `Keyring` signs what a run saves and checks what it restores.

A store is shared infrastructure: whoever can write one of its rows can hand a resuming process
any bytes. A snapshot written with a keyring carries an HMAC-SHA256 (format flag bit 1, a trailer
after the user section: the key id and the MAC) over all its bytes and over what it is for: the run
id and the version it is saved as, so a row copied to another run or another version does not
verify. A reader with the keyring checks the MAC before anything is decoded; any failure, a byte
changed anywhere, a signature stripped, a key the keyring does not hold, is `TamperedSnapshot`
naming the run and the key id. Keys rotate without a migration: the keyring signs with its current
key and verifies with every key it holds.

What a keyring protects: a snapshot's integrity and what it is bound to, so a codec that can run code
(pickle) only ever sees bytes this deployment wrote. What it does not: confidentiality (snapshots
are readable; keep personal data out of them or encrypt the store), replay of an older version of the
same run at the same version number (a store's own fencing and its history decide which version is
the latest), and anyone who holds a key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import struct
import zlib
from collections.abc import Mapping
from typing import Any

from amrita_sense.durable.errors import SnapshotFormatError, TamperedSnapshot, UntrustedSnapshot
from amrita_sense.durable.snapshots import format as fmt

MIN_KEY_BYTES = 16
_CRC_AT = fmt.HEADER_SIZE - 4
_CRC = struct.Struct("<I")
_SIGNED_FLAG_BYTES = tuple(bytes((flags | fmt.SIGNED,)) for flags in range(256))
_SEALED_FLAG_BYTES = tuple(bytes((flags | fmt.SIGNED | fmt.ENCRYPTED,)) for flags in range(256))
"""A header's flags byte, signed (and sealed), by its value before."""
_DOMAIN = b"amrita-sense snapshot mac 1\0"
_UNBOUND = ("", 0)
"""What `interp.snapshot(keyring=)` signs for: no run, no version."""


class Keyring:
    """Named secret keys: `current` signs, every key verifies (rotate by adding a new current key and
    keeping the old ones until their rows are gone).

    Args:
        keys: key id -> secret (bytes, at least 16 of them; ids of 1 to 64 printable ASCII characters
            without `:` or `,`).
        current: the id that signs (default: the first key given).
        encrypt: also encrypt what it signs (AES-GCM with a key derived from the secret; the extra
            `[crypto]`, `cryptography`), for contexts that hold personal data. A store then keeps
            only ciphertext (and gains nothing from incremental frames); reading needs the keyring.
    """

    __slots__ = ("_bound", "_keys", "_macs", "current", "encrypt")

    def __init__(self, keys: Mapping[str, bytes], current: str | None = None, *, encrypt: bool = False) -> None:
        if not isinstance(keys, Mapping) or not keys:
            raise ValueError("a keyring holds at least one key: {key id: secret bytes}")
        self._keys = {_checked_id(key_id): _checked_secret(key_id, secret) for key_id, secret in keys.items()}
        self._macs = {key_id: _HmacSha256(secret, key_id) for key_id, secret in self._keys.items()}
        self.current = next(iter(self._keys)) if current is None else current
        if self.current not in self._keys:
            raise ValueError(f"the current key {self.current!r} is not among the keyring's keys")
        self.encrypt = bool(encrypt)
        if self.encrypt:
            _aead()  # fail now, not at the first save, when `cryptography` is missing
        self._bound: tuple[tuple[str, int], ...] = (_UNBOUND,)

    @classmethod
    def generate(cls, key_id: str = "generated", *, encrypt: bool = False) -> Keyring:
        """A keyring with one new random key (32 bytes from `secrets`)."""
        return cls({key_id: secrets.token_bytes(32)}, encrypt=encrypt)

    @classmethod
    def from_env(
        cls, variable: str = "AMRITA_SENSE_KEYS", environ: Mapping[str, str] | None = None, *, encrypt: bool = False
    ) -> Keyring:
        """The keyring in an environment variable: `id:base64-secret` entries separated by commas,
        the current (signing) key first, e.g. `AMRITA_SENSE_KEYS="2026-12:...,2026-06:..."`."""
        text = (os.environ if environ is None else environ).get(variable)
        if not text:
            raise ValueError(f"the environment has no {variable} (id:base64-secret entries, the current first)")
        keys: dict[str, bytes] = {}
        for entry in text.split(","):
            key_id, sep, encoded = entry.strip().partition(":")
            if not sep:
                raise ValueError(f"{variable}: an entry is id:base64-secret, not {key_id[:12]!r}...")
            try:
                keys[key_id] = base64.b64decode(encoded, validate=True)
            except ValueError:
                raise ValueError(f"{variable}: the secret of key {key_id!r} is not base64") from None
        return cls(keys, encrypt=encrypt)

    def __repr__(self) -> str:
        encrypting = ", encrypt=True" if self.encrypt else ""
        return f"Keyring(current={self.current!r}, keys={sorted(self._keys)!r}{encrypting})"  # never the secrets

    def __reduce__(self) -> tuple:
        return (_rebuild, (self._keys, self.current, self._bound, self.encrypt))

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(self._keys)

    def bound_to(self, run_id: str, version: int, *also: tuple[str, int]) -> Keyring:
        """This keyring signing for, and accepting, snapshots of `run_id` at `version` (and of the
        `(run id, version)` pairs in `also`, such as the entry a run was forked from)."""
        bound = Keyring.__new__(Keyring)
        bound._keys, bound._macs, bound.current, bound.encrypt = self._keys, self._macs, self.current, self.encrypt
        bound._bound = ((run_id, version), *also)
        return bound

    def sign(self, data: bytes) -> bytes:
        """`data` (an unsigned snapshot) signed with the current key for what this keyring is bound to."""
        if fmt.read_header(data).signed:
            raise ValueError("the snapshot is signed already")
        return self.sign_own(data)

    def sign_own(self, data: bytes) -> bytes:
        """`sign` for an unsigned snapshot this process just took (its bytes are not checked again)."""
        run_id, version = self._bound[0]
        return self.sign_for(run_id, version, data)

    def sign_for(self, run_id: str, version: int, data: bytes) -> bytes:
        """`bound_to(run_id, version).sign_own(data)`, without making the bound keyring (a checkpoint
        policy signs every save so)."""
        signer = self._macs[self.current]
        if type(data) is not bytes:
            data = bytes(data)
        head = data[:7] + (_SEALED_FLAG_BYTES if self.encrypt else _SIGNED_FLAG_BYTES)[data[7]] + data[8:_CRC_AT]
        sections: Any = memoryview(data)[fmt.HEADER_SIZE :]  # hashed and joined without a copy
        context = signer.context(run_id, version)
        if self.encrypt:
            sections = _seal(self._keys[self.current], context + head, sections)
        trailer = signer.signed_trailer(context, head, sections)
        crc = zlib.crc32(trailer, zlib.crc32(sections, zlib.crc32(head)))
        signed = b"".join((head, _CRC.pack(crc), sections, trailer))
        fmt.remember_signed(data, signed, head[7])  # the store's check of what a save hands it finds its header
        return signed

    def mac_for(self, run_id: str, version: int) -> tuple[_HmacSha256, bytes] | None:
        """What `sign_for(run_id, version, data)` signs `data` with, for `format.encode(seal=)` to pack
        a new snapshot signed at once (the same bytes): the current key's HMAC and what it signs for
        (`_HmacSha256.signed_trailer`); None for an encrypting keyring."""
        if self.encrypt:
            return None
        signer = self._macs[self.current]
        return signer, signer.context(run_id, version)

    def open(self, data: Any) -> bytes:
        """`data` checked (`verify`), and decrypted when it is encrypted: the snapshot to decode."""
        header = self._verified(data)
        data = bytes(data)
        if not header.encrypted:
            return data
        end = header.sections_end
        key_id = data[end + 1 : end + 1 + data[end]]
        head = data[: fmt.HEADER_SIZE - 4]
        for purpose in self._bound:
            try:
                plain = _unseal(
                    self._keys[key_id.decode("ascii")], _context(purpose, key_id) + head, data[fmt.HEADER_SIZE : end]
                )
            except Exception:  # noqa: BLE001 - InvalidTag: sealed for another purpose of this keyring
                continue
            opened = bytearray(head)
            opened[7] &= ~(fmt.SIGNED | fmt.ENCRYPTED)
            return fmt.with_checksum(bytes(opened), plain)
        raise TamperedSnapshot(f"the encrypted snapshot of run {self._bound[0][0]!r} does not decrypt")

    def verify(self, data: Any) -> None:
        """Check that `data` is a snapshot signed by a key of this keyring for what it is bound to;
        `TamperedSnapshot` (naming the run and the key id) for anything else."""
        self._verified(data)

    def _verified(self, data: Any) -> Any:
        """`verify`; the snapshot's header (`format.Header`)."""
        run = self._bound[0][0] or "(no run)"
        try:
            header = fmt.read_header(data)
        except SnapshotFormatError as exc:
            raise TamperedSnapshot(f"the snapshot of run {run!r} is not one this keyring signed: {exc}") from None
        if not header.signed:
            raise TamperedSnapshot(f"the snapshot of run {run!r} is not signed (a keyring was given to check it)")
        data = bytes(data)
        end = header.sections_end
        key_id = data[end + 1 : end + 1 + data[end]]
        signer = self._macs.get(key_id.decode("ascii", "replace"))
        if signer is None:
            raise TamperedSnapshot(
                f"the snapshot of run {run!r} is signed with key {key_id!r:.80}, not one of this keyring"
            )
        mac = data[-fmt.MAC_SIZE :]
        head, sections = data[: fmt.HEADER_SIZE - 4], memoryview(data)[fmt.HEADER_SIZE : end]
        for purpose in self._bound:
            if hmac.compare_digest(mac, signer.digest(_context(purpose, key_id), head, sections)):
                return header
        raise TamperedSnapshot(
            f"the snapshot of run {run!r} does not verify with key {key_id.decode('ascii', 'replace')!r}: it was "
            f"changed, or signed for another run or version"
        )


def _rebuild(keys: dict[str, bytes], current: str, bound: tuple, encrypt: bool = False) -> Keyring:
    keyring = Keyring(keys, current, encrypt=encrypt)
    keyring._bound = bound
    return keyring


def _context(purpose: tuple[str, int], key_id: bytes) -> bytes:
    run_id, version = purpose
    return b"%s%s\0%d\0%s\0" % (_DOMAIN, run_id.encode("utf-8", "surrogatepass"), version, key_id)


class _HmacSha256:
    """HMAC-SHA256 under one key, its padded-key states computed once (RFC 2104): a MAC of a small
    snapshot costs half of `hmac.digest`'s, which sets them up at every call (and `_hashlib`'s HMAC
    object, whose copy costs as much). Also the key's id (ASCII), the trailer's start (its length
    byte and the id) and the context's end after the version."""

    __slots__ = ("after_version", "inner", "key_id", "last_run", "outer", "trailer")

    def __init__(self, secret: bytes, key_id: str) -> None:
        key = hashlib.sha256(secret).digest() if len(secret) > 64 else secret
        key = key.ljust(64, b"\0")
        self.inner = hashlib.sha256(bytes(b ^ 0x36 for b in key))
        self.outer = hashlib.sha256(bytes(b ^ 0x5C for b in key))
        self.key_id = key_id.encode("ascii")
        self.trailer = bytes([len(self.key_id)]) + self.key_id
        self.after_version = b"\0" + self.key_id + b"\0"
        self.last_run: tuple[str | None, bytes] = (None, b"")
        """The run id `sign_for` signed for last, and its context's start (`_context`)."""

    def context(self, run_id: str, version: int) -> bytes:
        """`_context((run_id, version), key_id)`, its part before the version kept for the run asked last."""
        last = self.last_run
        if last[0] != run_id:
            last = self.last_run = (run_id, b"%s%s\0" % (_DOMAIN, run_id.encode("utf-8", "surrogatepass")))
        return b"%s%d%s" % (last[1], version, self.after_version)

    def signed_trailer(self, context: bytes, head: bytes, sections: Any) -> bytes:
        """The signature trailer (the key id and the HMAC) of a snapshot whose header, without its
        checksum, is `head`, followed by `sections`, signed for what `context` (`context()`) names."""
        inner = self.inner.copy()  # `digest(context, head, sections)`, inline: every signed save comes here
        inner.update(context)
        inner.update(head)
        inner.update(sections)
        outer = self.outer.copy()
        outer.update(inner.digest())
        return self.trailer + outer.digest()

    def digest(self, *parts: bytes | memoryview) -> bytes:
        inner = self.inner.copy()
        for part in parts:
            inner.update(part)
        outer = self.outer.copy()
        outer.update(inner.digest())
        return outer.digest()


def _aead() -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as exc:
        raise ImportError(
            f"Keyring(encrypt=True) needs the cryptography package: pip install 'amrita-sense-turbo[crypto]' ({exc})"
        ) from exc
    return AESGCM


def _cipher(secret: bytes) -> Any:
    """AES-256-GCM under a key derived from `secret` (never the MAC key itself)."""
    return _aead()(hmac.digest(secret, b"amrita-sense snapshot encryption 1", hashlib.sha256))


def _seal(secret: bytes, associated: bytes, sections: bytes) -> bytes:
    nonce = secrets.token_bytes(fmt.NONCE_SIZE)
    return nonce + _cipher(secret).encrypt(nonce, sections, associated)


def _unseal(secret: bytes, associated: bytes, sealed: bytes) -> bytes:
    nonce, body = sealed[: fmt.NONCE_SIZE], sealed[fmt.NONCE_SIZE :]
    return _cipher(secret).decrypt(nonce, body, associated)


def _checked_id(key_id: Any) -> str:
    if (
        not isinstance(key_id, str)
        or not 0 < len(key_id) <= 64
        or not key_id.isascii()
        or not key_id.isprintable()
        or any(c in key_id for c in ":,")
    ):
        raise ValueError(f"a key id is 1 to 64 printable ASCII characters without ':' or ',', not {key_id!r:.80}")
    return key_id


def _checked_secret(key_id: str, secret: Any) -> bytes:
    if not isinstance(secret, (bytes, bytearray)) or len(secret) < MIN_KEY_BYTES:
        raise ValueError(f"the secret of key {key_id!r} is bytes, at least {MIN_KEY_BYTES} of them")
    return bytes(secret)


def runs_code_on_load(codec: Any) -> bool:
    """Whether `codec` may run code while it decodes (pickle does): every codec but None and those
    that declare `runs_code_on_load = False`."""
    return codec is not None and getattr(codec, "runs_code_on_load", True) is not False


def trusted(data: Any, keyring: Keyring | None, codec: Any, allow_unsigned: bool) -> Any:
    """`data` checked before a restore decodes it: against `keyring` when given (decrypted when it is
    encrypted); else refused for a codec that can run code unless `allow_unsigned`
    (`UntrustedSnapshot`). The snapshot to decode."""
    if keyring is not None:
        if allow_unsigned and not fmt.read_header(data).signed:
            return data
        return keyring.open(data)
    if runs_code_on_load(codec) and not allow_unsigned:
        raise UntrustedSnapshot(
            "refusing to decode an unverified snapshot with a codec that can run code while it loads "
            f"({getattr(codec, '__name__', type(codec).__name__)}): pass the keyring it was signed with "
            "(keyring=), or allow_unsigned=True for data only you can write"
        )
    return data
