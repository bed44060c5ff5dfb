"""Trust the store: signed checkpoints fail closed before anything is decoded.

Every byte of a signed snapshot flipped is `TamperedSnapshot` before a codec sees it; a row copied
to another run or version is refused; keys rotate; a forged pickle in an unsigned row never runs;
restore names exception classes only from the builtins, the engine and the graph's code.
"""

from __future__ import annotations

import base64
import inspect
import os
import pickle
from typing import Any

import pytest

from amrita_sense import SUSPEND, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import (
    CheckpointError,
    Checkpointing,
    CodecError,
    CorruptSnapshot,
    EncryptedSnapshot,
    Keyring,
    MemoryCheckpointStore,
    PartialPickle,
    RestoreError,
    TamperedSnapshot,
    UntrustedSnapshot,
    inspect_snapshot,
)
from amrita_sense.durable.snapshots import format as fmt
from amrita_sense.durable.snapshots.capture import take_snapshot
from amrita_sense.types import PointerVector
from support.durable_support import KEYS, reframed
from support.stores import STORES


class Ticket:
    """The run's user state (pickled into every checkpoint)."""

    def __init__(self, number: int) -> None:
        self.number = number


@Node()
async def bump(ticket: Ticket) -> None:
    ticket.number += 1


def parked_graph() -> Any:
    return NodeCompose(bump, SUSPEND, bump).render()


class SpyCodec:
    """pickle, noting every `loads` (a codec that must never see unverified bytes)."""

    def __init__(self) -> None:
        self.loaded = 0

    def dumps(self, value: Any) -> bytes:
        return pickle.dumps(value)

    def loads(self, data: bytes) -> Any:
        self.loaded += 1
        return pickle.loads(data)


class Marker:
    """What a forged pickle runs when it is loaded: it creates the file at `path`."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (open, (self.path, "w"))


async def parked_snapshot(keyring: Keyring | None = KEYS) -> bytes:
    interp = WorkflowInterpreter(parked_graph(), extra_args=(Ticket(1),))
    await interp.run()
    return interp.snapshot(pickle, keyring=keyring)


@pytest.mark.asyncio
async def test_every_flipped_byte_of_a_signed_snapshot_is_tampered_before_any_codec_call():
    data = await parked_snapshot()
    spy = SpyCodec()
    for at in range(len(data)):
        damaged = bytearray(data)
        damaged[at] ^= 0x20
        with pytest.raises(TamperedSnapshot):
            WorkflowInterpreter.restore(parked_graph(), bytes(damaged), codec=spy, keyring=KEYS)
    assert spy.loaded == 0
    restored = WorkflowInterpreter.restore(parked_graph(), data, codec=spy, keyring=KEYS)
    assert restored._ava_args_v[1].number == 2 and spy.loaded == 1


@pytest.mark.asyncio
async def test_a_stripped_signature_or_an_unknown_key_is_tampered():
    data = await parked_snapshot()
    header = fmt.read_header(data)
    stripped = bytearray(data[: header.sections_end])
    stripped[7] &= ~fmt.SIGNED
    stripped = fmt.with_checksum(bytes(stripped[:36]), bytes(stripped[40:]))
    with pytest.raises(TamperedSnapshot, match="not signed"):
        WorkflowInterpreter.restore(parked_graph(), stripped, codec=pickle, keyring=KEYS)
    with pytest.raises(TamperedSnapshot, match="not one of this keyring"):
        WorkflowInterpreter.restore(parked_graph(), data, codec=pickle, keyring=Keyring.generate("other"))


@pytest.mark.asyncio
async def test_a_forged_pickle_in_an_unsigned_row_is_refused_without_running(tmp_path):
    data = await parked_snapshot(keyring=None)
    marker = tmp_path / "pwned"
    decoded = fmt.decode(data)
    forged = fmt.encode(
        decoded.header.status,
        decoded.header.fingerprint,
        fmt.json_text(decoded.document).encode(),
        decoded.outline,
        [pickle.dumps(Marker(str(marker)))],
    )
    for codec in (pickle, PartialPickle()):
        with pytest.raises(UntrustedSnapshot, match="allow_unsigned"):
            WorkflowInterpreter.restore(parked_graph(), forged, codec=codec)
        with pytest.raises(TamperedSnapshot):
            WorkflowInterpreter.restore(parked_graph(), forged, codec=codec, keyring=KEYS)
    assert not marker.exists()
    restored = WorkflowInterpreter.restore(parked_graph(), data, codec=pickle, allow_unsigned=True)
    assert restored._ava_args_v[1].number == 2  # data you trust: said explicitly
    WorkflowInterpreter.restore(parked_graph(), data)  # no codec: nothing can run, nothing refused


def test_partial_pickle_rebuilds_only_the_modules_it_allows(tmp_path):
    marker = tmp_path / "pwned"
    codec = PartialPickle(allowed_modules=[__name__])
    assert codec.loads(codec.dumps(((Ticket(3),), {})))[0][0].number == 3
    with pytest.raises(CodecError, match="allowed_modules"):
        codec.loads(pickle.dumps(Marker(str(marker))))
    with pytest.raises(CodecError, match="allowed_modules"):
        codec.loads(pickle.dumps(os.system))
    assert not marker.exists()
    assert pickle.loads(pickle.dumps(codec)).allowed_modules == (__name__,)


@pytest.fixture(params=["sqlite", "postgres", "postgres-async"])
def store(request, tmp_path):
    return STORES[request.param](request, tmp_path, {})


async def settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


@pytest.mark.asyncio
async def test_a_row_copied_to_another_run_or_version_is_refused(store):
    interp = WorkflowInterpreter(parked_graph(), extra_args=(Ticket(1),))
    interp.checkpointing = Checkpointing(store, "a", codec=pickle, keyring=KEYS, history=True)
    await interp.run()  # version 1: parked
    other = WorkflowInterpreter(parked_graph(), extra_args=(Ticket(10),))
    other.checkpointing = Checkpointing(store, "b", codec=pickle, keyring=KEYS, history=True)
    await other.run()
    await other.run()  # b: parked, then finished
    latest = (await settle(store.load("b"))).record.version
    stolen = (await settle(store.load("a"))).data
    await settle(store.save("b", stolen, expected_version=latest, history=True))  # a's row as b's next
    with pytest.raises(TamperedSnapshot, match="'b'"):
        await Checkpointing(store, "b", codec=pickle, keyring=KEYS).resume(parked_graph())
    again = (await settle(store.load("b", version=1))).data
    await settle(store.save("b", again, expected_version=latest + 1, history=True))  # b's first, as its next
    with pytest.raises(TamperedSnapshot):
        await Checkpointing(store, "b", codec=pickle, keyring=KEYS).resume(parked_graph())
    back = await Checkpointing(store, "b", codec=pickle, keyring=KEYS).resume(parked_graph(), version=latest)
    assert back._ava_args_v[1].number == 12  # its own versions still load
    parked_at = (await settle(store.load("a"))).record.version
    forked = await settle(store.fork("a", parked_at, "a-fork"))
    assert forked.forked_from == f"a@{parked_at}"
    resumed = await Checkpointing(store, "a-fork", codec=pickle, keyring=KEYS).resume(parked_graph())
    await resumed.run()
    assert resumed._ava_args_v[1].number == 3


@pytest.mark.asyncio
async def test_rows_of_a_retired_key_still_load_while_the_keyring_holds_it(store):
    old = Keyring({"2026-06": os.urandom(32)})
    interp = WorkflowInterpreter(parked_graph(), extra_args=(Ticket(1),))
    interp.checkpointing = Checkpointing(store, "r", codec=pickle, keyring=old)
    await interp.run()
    rotated = Keyring({"2026-12": os.urandom(32), **{k: old._keys[k] for k in old.key_ids}})
    assert rotated.current == "2026-12"
    resumed = await Checkpointing(store, "r", codec=pickle, keyring=rotated).resume(parked_graph())
    await resumed.run()  # the end is saved under the new key
    assert fmt.read_header((await settle(store.load("r"))).data).signed
    with pytest.raises(TamperedSnapshot, match="2026-12"):
        await Checkpointing(store, "r", codec=pickle, keyring=old).resume(parked_graph())
    final = await Checkpointing(store, "r", codec=pickle, keyring=rotated).resume(parked_graph())
    assert final._ava_args_v[1].number == 3


@pytest.mark.asyncio
async def test_sign_for_signs_as_a_bound_keyring_does_and_its_header_is_the_checked_one():
    """`Keyring.sign_for` (what a checkpoint policy signs with) writes the bytes `bound_to(...).sign_own`
    writes, from bytes or a view; the header a save's store reads of them is the one a full check finds."""
    data = await parked_snapshot(keyring=None)
    rotated = Keyring({"new": os.urandom(32), "tests": KEYS._keys["tests"]})
    for keyring in (KEYS, rotated):
        for run_id, version in (("r\u00e9-\udcff", 3), ("", 0)):
            signed = keyring.sign_for(run_id, version, data)
            assert signed == keyring.bound_to(run_id, version).sign_own(data)
            assert signed == keyring.sign_for(run_id, version, memoryview(data))
            assert fmt.read_header(signed) == fmt.read_header(bytes(bytearray(signed)))
            keyring.bound_to(run_id, version).verify(signed)


async def _varied_runs() -> list[Any]:
    """Interpreters at different points: never run, parked (pools pickled), with a return stack long
    enough for a compressed engine document, finished."""
    fresh = WorkflowInterpreter(parked_graph(), extra_args=(Ticket(1),))
    parked = WorkflowInterpreter(parked_graph(), extra_args=(Ticket(2),))
    await parked.run()
    deep = WorkflowInterpreter(parked_graph(), extra_args=(Ticket(3),))
    await deep.run()
    deep._ret_addr_stack.resize(2048)
    for index in range(1500):
        deep._ret_addr_stack.push(PointerVector([index % 3]))
    finished = WorkflowInterpreter(parked_graph(), extra_args=(Ticket(4),))
    await finished.run()
    await finished.run()
    return [fresh, parked, deep, finished]


@pytest.mark.asyncio
async def test_a_snapshot_packed_signed_is_the_signature_of_the_unsigned_one():
    """`format.encode(seal=keyring.mac_for(run, version))` (how a save signs as it packs) writes the
    bytes `sign_for` makes of the unsigned snapshot, for every kind of run, codec and key; its
    remembered header is the one a full check finds; `format.unsigned` gives the unsigned one back."""
    rotated = Keyring({"new": os.urandom(32), "tests": KEYS._keys["tests"]})
    runs = await _varied_runs()
    compressed = [fmt.read_header(take_snapshot(interp, pickle)).flags & 1 for interp in runs]
    assert compressed == [0, 0, 1, 0]
    for interp in runs:
        for codec in (pickle, None):
            for keyring, (run_id, version) in ((KEYS, ("r\u00e9-\udcff", 3)), (rotated, ("run", 0))):
                plain = take_snapshot(interp, codec)
                signed = take_snapshot(interp, codec, keyring.mac_for(run_id, version))
                assert signed == keyring.sign_for(run_id, version, plain)
                assert fmt.read_header(signed) == fmt.read_header(bytes(bytearray(signed)))
                assert fmt.unsigned(signed) == plain
                keyring.bound_to(run_id, version).verify(signed)
    assert Keyring.generate(encrypt=True).mac_for("run", 1) is None  # encrypted sections: signed after


@pytest.mark.asyncio
async def test_a_signed_save_cut_short_after_its_write_is_followed_and_signed_again():
    """A save whose write landed but was not acknowledged: the next save finds it, follows its
    version and writes its own snapshot signed for the version after it."""

    class CutAfterWrite(MemoryCheckpointStore):
        cut = False

        def save(self, run_id: str, data: bytes, **options: Any) -> Any:
            record = super().save(run_id, data, **options)
            if self.cut:
                self.cut = False
                raise RuntimeError("the connection dropped after the commit")
            return record

    store = CutAfterWrite()
    interp = WorkflowInterpreter(parked_graph(), extra_args=(Ticket(1),))
    await interp.run()
    policy = Checkpointing(store, "r", codec=pickle, keyring=KEYS)
    await policy.save(interp)
    store.cut = True
    with pytest.raises(CheckpointError):
        await policy.save(interp)
    assert policy.version == 1
    record = await policy.save(interp)
    assert (record.version, policy.version) == (3, 3)
    latest = store.load("r")
    KEYS.bound_to("r", 3).verify(latest.data)
    restored = WorkflowInterpreter.restore(parked_graph(), latest.data, codec=pickle, keyring=KEYS.bound_to("r", 3))
    assert restored._ava_args_v[1].number == 2


def test_a_keyring_from_the_environment_and_its_refusals():
    secret = base64.b64encode(b"k" * 32).decode()
    keyring = Keyring.from_env(environ={"AMRITA_SENSE_KEYS": f"new:{secret}, old:{secret}"})
    assert (keyring.current, keyring.key_ids) == ("new", ("new", "old"))
    assert "kkkk" not in repr(keyring) and secret not in repr(keyring)
    for bad in ({}, {"AMRITA_SENSE_KEYS": "nocolon"}, {"AMRITA_SENSE_KEYS": "id:not base64!"}):
        with pytest.raises(ValueError):
            Keyring.from_env(environ=bad)
    for keys in ({}, {"id": b"short"}, {"a:b": b"k" * 32}, {"": b"k" * 32}):
        with pytest.raises(ValueError):
            Keyring(keys)
    with pytest.raises(ValueError, match="current"):
        Keyring({"a": b"k" * 32}, current="b")


@pytest.mark.parametrize("mode", ["sync", "async", "exit"])
@pytest.mark.asyncio
async def test_every_durability_mode_signs_what_it_saves(tmp_path, mode):
    store = STORES["sqlite"](None, tmp_path, {})
    interp = WorkflowInterpreter(parked_graph(), extra_args=(Ticket(1),))
    interp.checkpointing = Checkpointing(store, "r", codec=pickle, keyring=KEYS, durability=mode, history=True)
    await interp.run()
    await interp.run()
    for record in store.history("r"):
        data = store.load("r", version=record.version).data
        KEYS.bound_to("r", record.version).verify(data)
    with pytest.raises(UntrustedSnapshot):
        await Checkpointing(store, "r", codec=pickle).resume(parked_graph())


class GraphError(Exception):
    """An error of the graph's own code (its module is the graph's)."""


@pytest.mark.asyncio
async def test_restore_names_exception_classes_of_the_builtins_the_engine_and_the_graph_only():
    data = await parked_snapshot(keyring=None)
    document = fmt.decode(data).document
    for name in (
        "builtins:BaseException",
        "builtins:KeyboardInterrupt",
        "builtins:SystemExit",
        "asyncio.exceptions:CancelledError",
        "json.decoder:JSONDecodeError",
    ):
        document["interp"]["exc_ignored"] = [name]
        with pytest.raises(RestoreError, match="exception_ignored"):
            WorkflowInterpreter.restore(parked_graph(), reframed(data, document=document))
    document["interp"]["exc_ignored"] = ["builtins:ValueError", f"{__name__}:GraphError"]
    restored = WorkflowInterpreter.restore(parked_graph(), reframed(data, document=document))
    assert set(restored._exc_ignored) == {ValueError, GraphError}
    given = WorkflowInterpreter.restore(
        parked_graph(), reframed(data, document=document), exception_ignored=(KeyboardInterrupt,)
    )
    assert KeyboardInterrupt in given._exc_ignored  # the caller may pass any


@pytest.mark.asyncio
async def test_stack_limits_and_document_size_stay_within_the_engines_bounds():
    data = await parked_snapshot(keyring=None)
    document = fmt.decode(data).document
    document["interp"]["ret"]["limit"] = 2**40
    with pytest.raises(CorruptSnapshot, match="limit"):
        WorkflowInterpreter.restore(parked_graph(), reframed(data, document=document))
    document = fmt.decode(data).document
    document["padding"] = [0] * (fmt.MAX_ELEMENTS + 1)
    with pytest.raises(CorruptSnapshot, match="values"):
        WorkflowInterpreter.restore(parked_graph(), reframed(data, document=document))


@pytest.mark.asyncio
async def test_an_encrypted_checkpoint_holds_only_ciphertext_and_reads_back_with_its_keyring(tmp_path):
    secret_word = "a-personal-detail-0451"
    keyring = Keyring({"pii": os.urandom(32)}, encrypt=True)
    store = STORES["sqlite"](None, tmp_path, {})
    interp = WorkflowInterpreter(parked_graph(), extra_args=(Ticket(1),), extra_kwargs={"note": secret_word})
    interp.checkpointing = Checkpointing(store, "r", codec=pickle, keyring=keyring)
    await interp.run()
    data = store.load("r").data
    assert secret_word.encode() not in data and fmt.read_header(data).encrypted
    with pytest.raises(EncryptedSnapshot):
        inspect_snapshot(data)
    with pytest.raises(TamperedSnapshot):  # the same secret, without encryption, does not open it
        WorkflowInterpreter.restore(parked_graph(), data, codec=pickle, keyring=KEYS)
    for at in range(0, len(data), 7):
        damaged = bytearray(data)
        damaged[at] ^= 1
        with pytest.raises(TamperedSnapshot):
            WorkflowInterpreter.restore(parked_graph(), bytes(damaged), codec=pickle, keyring=keyring.bound_to("r", 2))
    resumed = await Checkpointing(store, "r", codec=pickle, keyring=keyring).resume(parked_graph())
    assert resumed._ava_kwargs_v["note"] == secret_word
    await resumed.run()
    assert resumed._ava_args_v[1].number == 3
