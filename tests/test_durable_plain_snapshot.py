"""The save path's compiled parts write exactly what the general path writes, on both builds.

`durable/snapshots/_plain_snapshot.py` (the plain snapshot, packed: `pack` is `format.encode`) and
`durable/checkpointing/_save_at_once.py` (a policy's save written at once) are compiled in the
compiled build and run as Python in the pure build (`pure_*`). Each test here runs on the build the
session loaded and, through the `cores` fixture, on both side by side: the same state gives the
same bytes through every path, and the same errors.
"""

from __future__ import annotations

import hashlib
import pickle
from typing import Any

import pytest

import amrita_sense
from amrita_sense import SUSPEND, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import CheckpointConflict, CheckpointError, Checkpointing, Keyring, MemoryCheckpointStore
from amrita_sense.durable.checkpointing import policy as policy_module
from amrita_sense.durable.snapshots import capture
from amrita_sense.durable.snapshots import format as fmt
from support.dual import SenseCopy, run_on

KEYRING = Keyring({"k1": b"a test key, never a real one", "k2": b"another test key, never real"}, current="k2")


class Order:
    def __init__(self, number: int) -> None:
        self.number = number


@Node()
async def bump(order: Order) -> None:
    order.number += 1


def test_each_part_is_of_the_build_the_core_loaded_from():
    compiled = amrita_sense.IMPLEMENTATION == "cython"
    assert capture._plain.__name__.rpartition(".")[2] == ("_plain_snapshot" if compiled else "pure_plain_snapshot")
    assert policy_module._at_once.__name__.rpartition(".")[2] == ("_save_at_once" if compiled else "pure_save_at_once")
    assert (capture._plain.__file__ or "").endswith(".py") is not compiled


class _OwnSigner:
    """A signer that is not this package's HMAC (the path that calls its `signed_trailer`)."""

    def signed_trailer(self, context: bytes, head: bytes, sections: Any) -> bytes:
        return b"\x03own" + hashlib.sha256(context + head + bytes(sections)).digest()


SEALS = [None, KEYRING.mac_for("run-1", 7), KEYRING.mac_for("rün\udcff", 0), (_OwnSigner(), b"ctx")]
ENGINES = [b"{}", b'{"interp":' + b"x" * 300 + b"}", b"[" + b"1," * 3000 + b"1]"]  # the last is compressed
BLOBS = [[], [b"one blob"], [b"", b"two", b"three" * 40]]


@pytest.mark.parametrize("seal", range(len(SEALS)))
def test_pack_is_format_encode(seal):
    for status in fmt.STATUSES:
        for engine in ENGINES:
            for blobs in BLOBS:
                fingerprint = "0123456789abcdef" * 2
                packed = capture._pack(status, fingerprint, engine, b"\1\2\3\4" * 3, list(blobs), SEALS[seal])
                header = fmt.read_header(packed)  # the header remembered when it was packed
                assert packed == fmt.encode(status, fingerprint, engine, b"\1\2\3\4" * 3, list(blobs), SEALS[seal])
                assert header == fmt._sound_header(bytes(packed))  # every check passes on a copy too
                assert fmt.read_header(packed) == header


def test_pack_refuses_what_format_encode_refuses():
    for args in (("no such status", "00" * 16, b"{}", b"", []), ("ready", "00" * 16, "text", b"", [])):
        with pytest.raises(Exception) as general:
            fmt.encode(*args)
        with pytest.raises(type(general.value)):
            capture._pack(*args)
    # a fingerprint of odd length or fewer digits packs as `struct` cuts or pads it
    for fingerprint in ("ab" * 8, "ab" * 20):
        assert capture._pack("ready", fingerprint, b"{}", b"", []) == fmt.encode("ready", fingerprint, b"{}", b"", [])


def _general_snapshot(interp: Any, codec: Any, seal: Any) -> bytes:
    """The snapshot as the general path takes it (the plain paths off)."""
    plain_snapshot, plain_document = capture._plain_snapshot, capture._plain_document
    capture._plain_snapshot = lambda *args: None
    capture._plain_document = lambda *args: None
    try:
        return capture.take_snapshot(interp, codec, seal)
    finally:
        capture._plain_snapshot, capture._plain_document = plain_snapshot, plain_document


def _both(interp: Any, codec: Any = pickle, seal: Any = None) -> tuple[bytes | None, bytes]:
    return capture._plain_snapshot(interp, codec, seal), _general_snapshot(interp, codec, seal)


@pytest.mark.asyncio
async def test_idle_finished_halted_and_parked_runs_write_the_general_paths_bytes():
    graph = NodeCompose(bump, SUSPEND, bump).render()
    interp = WorkflowInterpreter(graph, extra_args=(Order(1),), exception_ignored=(KeyError,))
    for seal in (None, KEYRING.mac_for("run", 1)):
        plain, general = _both(interp, seal=seal)  # never run: ready
        assert plain == general and fmt.read_header(plain).status == "ready"
    await interp.run()  # halted at SUSPEND
    plain, general = _both(interp)
    assert plain == general and fmt.read_header(plain).status == "halted"
    await interp.run()
    plain, general = _both(interp, codec=None)
    assert plain == general and fmt.read_header(plain).status == "finished"


@pytest.mark.asyncio
async def test_a_run_between_its_nodes_writes_the_general_paths_bytes():
    found: list[tuple[bytes | None, bytes]] = []
    interp = WorkflowInterpreter(NodeCompose(bump, bump, bump).render(), extra_args=(Order(1),))
    interp.checkpointing = Checkpointing(MemoryCheckpointStore(), "r", codec=pickle, keyring=KEYRING)
    original = capture._plain_snapshot

    def compared(interp: Any, codec: Any, seal: Any) -> Any:
        found.append(_both_of(original, interp, codec, seal))
        return found[-1][0]

    capture._plain_snapshot = compared
    try:
        await interp.run()
    finally:
        capture._plain_snapshot = original
    assert len(found) == 3 and all(plain == general for plain, general in found)
    assert [fmt.read_header(plain).status for plain, _ in found] == ["running", "running", "finished"]


def _both_of(plain_snapshot: Any, interp: Any, codec: Any, seal: Any) -> tuple[bytes | None, bytes]:
    plain = plain_snapshot(interp, codec, seal)
    return plain, _general_snapshot(interp, codec, seal)


@pytest.mark.asyncio
async def test_what_the_plain_snapshot_leaves_to_the_general_path():
    interp = WorkflowInterpreter(NodeCompose(bump, bump).render(), extra_args=(Order(1),))
    interp._durable_wait = ("topic", None)  # a wait to record
    assert capture._plain_snapshot(interp, pickle, None) is None
    interp._durable_wait = None
    interp._durable_steps = 2.0  # not an int: the general path writes it
    assert capture._plain_snapshot(interp, pickle, None) is None
    interp._durable_steps = 0
    assert capture._plain_snapshot(interp, pickle, None) is not None
    assert capture._plain_snapshot(object(), pickle, None) is None  # the general path raises


async def _saved_bytes(
    at_once: bool, keyring: Any, codec: Any, nodes: int = 3, graph: str | None = None
) -> tuple[list[tuple[bytes, dict]], Any, list[bool]]:
    """Every checkpoint a chain's policy saves, with what else its store was given, written at once
    or the general way; and whether `_save_at_once` wrote each save it was asked for."""
    saved: list[tuple[bytes, dict]] = []
    written: list[bool] = []

    class Recording(MemoryCheckpointStore):
        def save(self, run_id: str, data: bytes, **kw: Any) -> Any:
            saved.append((bytes(data), dict(kw)))
            return super().save(run_id, data, **kw)

    interp = WorkflowInterpreter(NodeCompose(*[bump] * nodes).render(), extra_args=(Order(5),))
    interp._interpreter_id = "f" * 32  # the same id in both runs
    policy = Checkpointing(Recording(), "run-x", codec=codec, keyring=keyring, graph=graph)
    interp.checkpointing = policy
    original = policy_module._save_at_once

    def noted(policy: Any, interp: Any) -> Any:
        record = original(policy, interp)
        written.append(record is not policy_module.NOT_AT_ONCE)
        return record

    policy_module._save_at_once = noted if at_once else lambda policy, interp: policy_module.NOT_AT_ONCE
    try:
        await interp.run()
    finally:
        policy_module._save_at_once = original
    return saved, policy, written


@pytest.mark.asyncio
@pytest.mark.parametrize("keyring", [None, KEYRING], ids=["unsigned", "signed"])
@pytest.mark.parametrize("codec", [pickle, None], ids=["pickle", "no-codec"])
@pytest.mark.parametrize("graph", [None, "g"], ids=["no-graph", "graph"])
async def test_a_save_written_at_once_stores_what_the_general_path_stores(keyring, codec, graph):
    fast, fast_policy, written = await _saved_bytes(True, keyring, codec, graph=graph)
    slow, slow_policy, _ = await _saved_bytes(False, keyring, codec, graph=graph)
    assert fast == slow and len(fast) == 3
    assert written[:2] == [True, True]  # the saves between nodes: at once, with a graph name too
    if graph is not None:  # the graph name with every save, the wait of a finished run with the last
        assert [kw["graph"] for _, kw in fast] == ["g"] * 3 and fast[-1][1]["wait"] is not None
    assert (
        (fast_policy.version, fast_policy.last.status)
        == (slow_policy.version, slow_policy.last.status)
        == (3, "finished")
    )
    assert fast_policy._unacknowledged is None
    if keyring is not None:
        for version, (data, _) in enumerate(fast, start=1):
            keyring.bound_to("run-x", version).verify(data)


def test_the_seal_is_the_keyrings_mac():
    at_once = policy_module._at_once
    for run_id in ("run", "rün-\udcff", "x" * 300):
        for version in (0, 1, 12345678901234567890, True, 2.0):
            signer, context = at_once.seal_for(KEYRING, run_id, version)
            expected = KEYRING.mac_for(run_id, version)
            assert signer is expected[0] and context == expected[1]


@pytest.mark.asyncio
async def test_a_conflict_in_a_save_written_at_once_is_the_stores():
    store = MemoryCheckpointStore()
    store.save("taken", fmt.encode("ready", "00" * 16, b"{}", b"", []), expected_version=0)
    interp = WorkflowInterpreter(NodeCompose(bump).render(), extra_args=(Order(1),))
    interp.checkpointing = Checkpointing(store, "taken", codec=pickle, keyring=KEYRING)
    with pytest.raises(CheckpointConflict):
        await interp.run()


class _Unpicklable:
    def __reduce__(self) -> Any:
        raise TypeError("no pickling")


@pytest.mark.asyncio
async def test_a_codec_error_in_a_save_written_at_once_reads_as_the_general_paths():
    messages = []
    for at_once in (True, False):
        interp = WorkflowInterpreter(NodeCompose(bump).render(), extra_args=(Order(1), _Unpicklable()))
        interp.checkpointing = Checkpointing(MemoryCheckpointStore(), "run", codec=pickle)
        original = policy_module._save_at_once
        if not at_once:
            policy_module._save_at_once = lambda policy, interp: policy_module.NOT_AT_ONCE
        try:
            with pytest.raises(CheckpointError) as caught:
                await interp.run()
        finally:
            policy_module._save_at_once = original
        messages.append(str(caught.value))
    assert messages[0] == messages[1] and "cannot be taken" in messages[0]


async def _chain_saves(sense: SenseCopy, keyring_on: bool) -> list[bytes]:
    durable = sense.sub("durable")
    api = sense.sub("runtime.workflow")
    node = sense.sub("node.wrapper").Node
    compose = sense.sub("node.core").NodeCompose

    graph = compose(*(node()(lambda: None) for _ in range(4))).render()
    saved: list[bytes] = []

    class Recording(durable.MemoryCheckpointStore):
        def save(self, run_id: str, data: bytes, **kw: Any) -> Any:
            saved.append(bytes(data))
            return super().save(run_id, data, **kw)

    interp = api.WorkflowInterpreter(graph, extra_args=(7, "seven"), extra_kwargs={"n": 7})
    interp._interpreter_id = "e" * 32
    keyring = durable.Keyring({"k": b"a test key, never a real one"}) if keyring_on else None
    interp.checkpointing = durable.Checkpointing(Recording(), "run", codec=pickle, keyring=keyring)
    await interp.run()
    return saved


@pytest.mark.parametrize("keyring_on", [False, True], ids=["unsigned", "signed"])
def test_both_builds_save_the_same_bytes(cores, keyring_on):
    compiled, pure = (run_on(sense, _chain_saves, keyring_on, "asyncio") for sense in cores)
    assert compiled == pure and len(compiled) == 4


def test_a_policy_knows_a_coroutine_save_as_inspect_does():
    import functools
    import inspect

    class Async(MemoryCheckpointStore):
        async def save(self, run_id: str, data: bytes, **kw: Any) -> Any:
            return MemoryCheckpointStore.save(self, run_id, data, **kw)

    own = MemoryCheckpointStore()
    own.save = lambda *args, **kw: None  # type: ignore[method-assign]
    wrapped = MemoryCheckpointStore()

    async def later(*args: Any, **kw: Any) -> None:
        return None

    wrapped.save = functools.partial(later)  # type: ignore[method-assign]
    for _ in range(2):  # the second time from what the policy kept
        for store in (MemoryCheckpointStore(), Async(), own, wrapped):
            expected = inspect.iscoroutinefunction(store.save)
            assert Checkpointing(store, "run")._store_awaits is expected
            assert policy_module._awaits(store.save) is expected
