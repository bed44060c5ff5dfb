"""Incremental checkpoints: a run whose context grows stores what changed, and every kept version
still loads exactly as the full snapshot it was (history, time travel, fork, retention)."""

from __future__ import annotations

import inspect
import pickle
import sqlite3
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amrita_sense import WHILE, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import Checkpointing, CorruptSnapshot, SQLiteCheckpointStore
from amrita_sense.durable.stores import deltas
from support.durable_support import KEYS
from support.sampling import sized
from support.stores import STORES, sample_snapshots

APPENDS = sized(500, least=100)
"""The issue's run: 500 appends of a KB (CI's passes on other binaries and interpreters: fewer)."""
SHORT = 120
"""The appends of the tests that do not measure the storage of the issue's 500-append run."""
PIECE = 1024


class Context:
    """An agent's context: a list of messages that only grows."""

    def __init__(self) -> None:
        self.messages: list[str] = []


def growing_graph(appends: int = APPENDS) -> Any:
    """WHILE fewer than `appends` messages: append one of `PIECE` bytes."""

    async def more(context: Context) -> bool:
        return len(context.messages) < appends

    async def append(context: Context) -> None:
        seed = len(context.messages)
        context.messages.append((f"{seed:08d}" * (PIECE // 8))[:PIECE])

    return NodeCompose(WHILE(Node()(more)).ACTION(Node()(append))).render()


class Recording:
    """A store wrapper that keeps the bytes of every `every`-th save (what a full snapshot was)."""

    def __init__(self, inner: Any, every: int) -> None:
        self.inner, self.every, self.saved = inner, every, {}

    async def save(self, run_id: str, data: bytes, **options: Any) -> Any:
        record = await settle(self.inner.save(run_id, data, **options))
        if record.version % self.every == 0:
            self.saved[record.version] = data
        return record

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


_ROW_BYTES = "coalesce(sum(length(data) + length(run_id) + length(status) + length(fingerprint) + 40), 0)"


def stored_bytes(store: Any, request: Any) -> int:
    """What the store's tables hold: every row's data and its other columns."""
    if isinstance(store, SQLiteCheckpointStore):
        with sqlite3.connect(store.path) as raw:
            tables = ("sense_checkpoints", "sense_history")
            return sum(raw.execute(f"SELECT {_ROW_BYTES} FROM {table}").fetchone()[0] for table in tables)  # noqa: S608
    import psycopg

    with psycopg.connect(request.getfixturevalue("postgres_dsn")) as raw:
        tables = (f'"{store.schema}".checkpoints', f'"{store.schema}".history')
        return sum(raw.execute(f"SELECT {_ROW_BYTES} FROM {table}").fetchone()[0] for table in tables)  # noqa: S608


@pytest.fixture(params=["sqlite", "postgres", "postgres-async"])
def kind(request):
    return request.param


class Opened:
    """Stores of one backend on one database (a second one sees nothing the first kept in memory)."""

    def __init__(self, kind: str, request: Any, tmp_path: Any) -> None:
        self.kind, self.request, self.tmp_path, self.schema = kind, request, tmp_path, None

    def open(self, **options: Any) -> Any:
        if self.kind == "sqlite":
            return SQLiteCheckpointStore(self.tmp_path / "runs.db", **options)
        if self.schema is None:  # the first: a schema of its own, dropped after the test
            first = STORES[self.kind](self.request, self.tmp_path, options)
            self.schema = first.schema
            return first
        from amrita_sense.durable import AsyncPostgresCheckpointStore, PostgresCheckpointStore

        kind = AsyncPostgresCheckpointStore if self.kind == "postgres-async" else PostgresCheckpointStore
        return kind(self.request.getfixturevalue("postgres_dsn"), schema=self.schema, **options)


@pytest.fixture
def stores(kind, request, tmp_path):
    return Opened(kind, request, tmp_path)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])  # the async store: in the shorter runs below
@pytest.mark.asyncio
async def test_a_growing_context_stores_what_changed_and_every_version_loads_whole(stores, request):
    store = Recording(stores.open(), every=50)
    interp = WorkflowInterpreter(growing_graph(), extra_args=(Context(),))
    interp.checkpointing = Checkpointing(store, "chat", codec=pickle, keyring=KEYS, history=True)
    await interp.run()
    final = await settle(store.load("chat"))
    saves = final.record.version
    assert saves > APPENDS and len(interp._ava_args_v[1].messages) == APPENDS
    assert stored_bytes(store.inner, request) <= 2 * len(final.data) + 200 * saves
    fresh = stores.open()  # nothing in memory: every version from its frames
    for version, data in store.saved.items():
        assert (await settle(fresh.load("chat", version=version))).data == data
    middle = max(version for version in store.saved if version <= saves // 2)
    forked = await settle(fresh.fork("chat", middle, "chat-middle"))
    assert (await settle(fresh.load("chat-middle"))).data == store.saved[middle]
    assert forked.size == len(store.saved[middle])
    back = await Checkpointing(fresh, "chat", codec=pickle, keyring=KEYS).resume(growing_graph(), version=middle)
    await back.run()
    assert back._ava_args_v[1].messages == interp._ava_args_v[1].messages


@pytest.mark.asyncio
async def test_retention_and_fork_never_drop_a_frame_a_kept_version_needs(stores):
    store = Recording(stores.open(history_limit=7), every=1)
    interp = WorkflowInterpreter(growing_graph(SHORT), extra_args=(Context(),))
    interp.checkpointing = Checkpointing(store, "chat", codec=pickle, keyring=KEYS, history=True)
    await interp.run()
    fresh = stores.open(history_limit=7)
    kept = [record.version for record in await settle(fresh.history("chat"))]
    assert len(kept) == 7
    await settle(fresh.fork("chat", kept[0], "side"))
    await settle(fresh.prune())
    for version in kept:
        assert (await settle(fresh.load("chat", version=version))).data == store.saved[version]
    assert (await settle(fresh.load("side"))).data == store.saved[kept[0]]
    assert len(await settle(fresh.history("chat"))) == 7


@pytest.mark.asyncio
async def test_without_history_the_store_keeps_the_chain_of_the_latest_only(stores, request):
    interp = WorkflowInterpreter(growing_graph(SHORT), extra_args=(Context(),))
    interp.checkpointing = Checkpointing(stores.open(), "chat", codec=pickle, keyring=KEYS)
    await interp.run()
    fresh = stores.open()
    final = await settle(fresh.load("chat"))
    assert await settle(fresh.history("chat")) == []
    assert stored_bytes(fresh, request) <= 2 * len(final.data) + 200 * final.record.version
    restored = WorkflowInterpreter.restore(growing_graph(SHORT), final.data, codec=pickle, allow_unsigned=True)
    assert restored._ava_args_v[1].messages == interp._ava_args_v[1].messages


def test_a_damaged_frame_is_a_typed_error(tmp_path):
    path = tmp_path / "runs.db"
    store = SQLiteCheckpointStore(path)
    first, second = sample_snapshots(payload=40_000)
    store.save("r", first, history=True)
    store.save("r", second, history=True)
    with sqlite3.connect(path) as raw:
        (frame,) = raw.execute("SELECT data FROM sense_history WHERE run_id = 'r' AND version = 2").fetchone()
        assert frame[:4] == deltas.MAGIC and len(frame) < len(second) // 2
        for at in range(0, len(frame), max(1, len(frame) // 64)):
            damaged = bytearray(frame)
            damaged[at] ^= 0x55
            raw.execute("UPDATE sense_history SET data = ? WHERE run_id = 'r' AND version = 2", (bytes(damaged),))
            raw.commit()
            with pytest.raises(CorruptSnapshot):
                SQLiteCheckpointStore(path).load("r")
        raw.execute("DELETE FROM sense_history WHERE run_id = 'r' AND version = 1")
        raw.commit()
    with pytest.raises(CorruptSnapshot, match="incomplete"):
        SQLiteCheckpointStore(path).load("r")


EDITS = st.lists(
    st.tuples(st.sampled_from(["insert", "delete", "replace"]), st.integers(0, 5000), st.binary(max_size=300)),
    max_size=6,
)


@settings(max_examples=sized(200), deadline=None)
@given(old=st.binary(max_size=5000), chain=st.lists(EDITS, min_size=1, max_size=4))
def test_deltas_rebuild_every_edited_version(old, chain):
    versions, current = [old], bytearray(old)
    for edits in chain:
        for kind, at, data in edits:
            at = min(at, len(current))
            if kind == "insert":
                current[at:at] = data
            elif kind == "delete":
                del current[at : at + len(data)]
            else:
                current[at : at + len(data)] = data
        versions.append(bytes(current))
    keyframe, frames = old, []
    for before, after in zip(versions, versions[1:]):
        frame = deltas.diff(before, after, worth=1e9)
        if frame is None:  # only when writing `after` whole is as small (an empty one)
            assert len(after) <= len(deltas.MAGIC)
            keyframe, frames = after, []
        else:
            frames.append(frame)
    assert deltas.rebuild(keyframe, frames) == versions[-1]


@settings(max_examples=sized(200), deadline=None)
@given(base=st.binary(max_size=200), frame=st.binary(max_size=200))
def test_a_crafted_delta_rebuilds_or_is_corrupt_never_anything_else(base, frame):
    try:
        deltas.rebuild(base, [deltas.MAGIC + frame])
    except CorruptSnapshot:
        pass
