"""Bad snapshots: truncated, damaged, foreign, newer, crafted. Typed errors, nothing half-restored."""

from __future__ import annotations

import json
import pickle
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amrita_sense import SUSPEND, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import (
    CorruptSnapshot,
    DurableError,
    ForeignSnapshot,
    SnapshotFormatError,
    TruncatedSnapshot,
    UnsupportedSnapshotVersion,
    inspect_snapshot,
)
from amrita_sense.durable.snapshots import format as fmt
from amrita_sense.durable.snapshots.fingerprint import outline_of
from amrita_sense.instructions import FUN_BLOCK
from amrita_sense.streaming import SuspendObjectStream
from support.durable_support import abandon, park, rec, reframed, tag
from support.sampling import sized


def halted_graph() -> object:
    return NodeCompose(rec([], "a"), SUSPEND, rec([], "b")).render()


@pytest.fixture(scope="module")
def sample() -> tuple:
    """A halted run's graph and snapshot (taken without an event loop: the run is not in flight)."""
    import asyncio

    graph = halted_graph()
    interp = WorkflowInterpreter(graph)
    asyncio.run(interp.run())
    return graph, interp.snapshot()


def test_every_truncation_is_a_typed_error(sample):
    graph, data = sample
    for size in range(len(data)):
        with pytest.raises((TruncatedSnapshot, ForeignSnapshot)) as caught:
            WorkflowInterpreter.restore(graph, data[:size])
        if size >= 1:
            assert isinstance(caught.value, TruncatedSnapshot), size


def test_every_flipped_bit_is_caught(sample):
    graph, data = sample
    for at in range(len(data)):
        for bit in range(8):
            damaged = bytearray(data)
            damaged[at] ^= 1 << bit
            with pytest.raises(SnapshotFormatError):
                WorkflowInterpreter.restore(graph, bytes(damaged))


def test_the_snapshot_just_made_has_the_header_a_full_check_finds():
    """`read_header` of the bytes object just packed skips the checks (`format._made`); what it
    returns is what checking a copy of the same bytes finds, for every status and flag packed."""
    for status in fmt.STATUSES:
        for engine in (b'{"a":1}', b"{" + b" " * fmt.COMPRESS_ABOVE + b"}"):
            data = fmt.encode(status, "0123456789abcdef" * 2, engine, b"\0\1\2\3", [b"x", b""])
            assert fmt.made_header(data) is not None
            assert fmt.read_header(data) == fmt.read_header(bytes(bytearray(data)))
            assert fmt.made_header(bytes(bytearray(data))) is None


def test_trailing_bytes_are_corruption(sample):
    graph, data = sample
    with pytest.raises(CorruptSnapshot, match="after the end"):
        WorkflowInterpreter.restore(graph, data + b"\0")


@pytest.mark.parametrize("data", [b"", b"\x80\x04K\x01.", b'{"interp": {}}', pickle.dumps({"a": 1}), b"ASR"])
def test_foreign_data_is_refused(sample, data):
    with pytest.raises(SnapshotFormatError):
        WorkflowInterpreter.restore(sample[0], data)


def test_not_bytes_is_a_type_error(sample):
    with pytest.raises(TypeError, match="bytes"):
        WorkflowInterpreter.restore(sample[0], "ASRS...")


def test_a_newer_version_is_refused_by_name(sample):
    graph, data = sample
    with pytest.raises(UnsupportedSnapshotVersion) as caught:
        WorkflowInterpreter.restore(graph, reframed(data, version=fmt.FORMAT_VERSION + 1))
    assert caught.value.version == fmt.FORMAT_VERSION + 1
    with pytest.raises(CorruptSnapshot):
        WorkflowInterpreter.restore(graph, reframed(data, version=0))


def test_a_decompression_bomb_is_refused(sample, monkeypatch):
    graph, data = sample
    monkeypatch.setattr(fmt, "MAX_DOCUMENT", 1 << 20)
    bomb = zlib.compress(b"[" * (fmt.MAX_DOCUMENT + 10))
    with pytest.raises(CorruptSnapshot, match="larger than"):
        WorkflowInterpreter.restore(graph, reframed(data, engine=bomb))


def test_a_document_that_is_not_json_or_not_an_object(sample):
    graph, data = sample
    for engine in (
        zlib.compress(b"not json"),
        zlib.compress(b"[1, 2]"),
        b"not zlib at all",
        zlib.compress(b"[" * 100_000 + b"]" * 100_000),
    ):
        with pytest.raises(CorruptSnapshot):
            WorkflowInterpreter.restore(graph, reframed(data, engine=engine))


# ----- crafted documents: any change gives a restore or a typed error, never anything else ------


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**64) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _replace(value, path, new):
    if not path:
        return new
    value = json.loads(json.dumps(value))
    holder = value
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = new
    return value


def nested_sample() -> tuple:
    """A run parked inside a FUN_BLOCK child (so the document has a sub-interpreter), and its graph."""
    import asyncio

    async def take():
        stream = SuspendObjectStream()
        graph = build_nested()
        interp = WorkflowInterpreter(graph, object_io=stream)
        task = await park(stream, interp.run, tag("y"))
        data = interp.snapshot()
        await abandon(task)
        return data

    return asyncio.run(take())


def build_nested():
    inner = NodeCompose(rec([], "x"), rec([], "y")).render()
    return NodeCompose(rec([], "a"), FUN_BLOCK(inner), rec([], "b")).render()


NESTED = nested_sample()
NESTED_PATHS = list(_paths(fmt.decode(NESTED).document))


@settings(max_examples=sized(300), deadline=None)
@given(index=st.integers(0, len(NESTED_PATHS) - 1), new=JSON)
def test_a_crafted_document_restores_or_fails_typed_and_leaves_the_graph_alone(index, new):
    document = _replace(fmt.decode(NESTED).document, NESTED_PATHS[index], new)
    graph = build_nested()
    block = graph[1]
    try:
        WorkflowInterpreter.restore(graph, reframed(NESTED, document=document))
    except DurableError:
        assert block._interpreter is None, "a failed restore forked a sub-interpreter"


def test_inspect_describes_without_a_graph(sample):
    info = inspect_snapshot(sample[1])
    assert info.fingerprint == outline_of(sample[0]).fingerprint
    assert (info.version, info.status, info.pointer, info.codec) == (fmt.FORMAT_VERSION, "halted", [1], None)
    with pytest.raises(ForeignSnapshot):
        inspect_snapshot(b"hello world, not a snapshot")
