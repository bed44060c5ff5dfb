"""Incremental checkpoints: a run whose context grows stores what changed, and every kept version
still loads exactly as the full snapshot it was (history, time travel, fork, retention)."""

from __future__ import annotations

import pickle
import sqlite3
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amrita_sense import WHILE, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import Checkpointing, CorruptSnapshot, SQLiteCheckpointStore
from amrita_sense.durable.stores import deltas
from support.stores import sample_snapshots

APPENDS = 500
PIECE = 1024


class Context:
    """An agent's context: a list of messages that only grows."""

    def __init__(self) -> None:
        self.messages: list[str] = []


def growing_graph() -> Any:
    """WHILE fewer than `APPENDS` messages: append one of `PIECE` bytes."""

    async def more(context: Context) -> bool:
        return len(context.messages) < APPENDS

    async def append(context: Context) -> None:
        seed = len(context.messages)
        context.messages.append((f"{seed:08d}" * (PIECE // 8))[:PIECE])

    return NodeCompose(WHILE(Node()(more)).ACTION(Node()(append))).render()


class Recording:
    """A store wrapper that keeps the bytes of every `every`-th save (what a full snapshot was)."""

    def __init__(self, inner: Any, every: int) -> None:
        self.inner, self.every, self.saved = inner, every, {}

    def save(self, run_id: str, data: bytes, **options: Any) -> Any:
        record = self.inner.save(run_id, data, **options)
        if record.version % self.every == 0:
            self.saved[record.version] = data
        return record

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def stored_bytes(path: Any) -> int:
    """What the store's tables hold: every row's data and its other columns."""
    with sqlite3.connect(path) as raw:
        total = 0
        for table in ("sense_checkpoints", "sense_history"):
            sql = f"SELECT coalesce(sum(length(data) + length(run_id) + length(status) + length(fingerprint) + 40), 0) FROM {table}"  # noqa: S608
            total += raw.execute(sql).fetchone()[0]
    return total


@pytest.mark.asyncio
async def test_a_growing_context_stores_what_changed_and_every_version_loads_whole(tmp_path):
    path = tmp_path / "runs.db"
    store = Recording(SQLiteCheckpointStore(path), every=50)
    interp = WorkflowInterpreter(growing_graph(), extra_args=(Context(),))
    interp.checkpointing = Checkpointing(store, "chat", codec=pickle, history=True)
    await interp.run()
    final = store.load("chat")
    saves = final.record.version
    assert saves > APPENDS and len(interp._ava_args_v[1].messages) == APPENDS
    assert stored_bytes(path) <= 2 * len(final.data) + 200 * saves
    fresh = SQLiteCheckpointStore(path)  # nothing in memory: every version from its frames
    for version, data in store.saved.items():
        assert fresh.load("chat", version=version).data == data
    forked = fresh.fork("chat", 250, "chat-250")
    assert fresh.load("chat-250").data == store.saved[250] and forked.size == len(store.saved[250])
    back = await Checkpointing(fresh, "chat", codec=pickle).resume(growing_graph(), version=250)
    await back.run()
    assert back._ava_args_v[1].messages == interp._ava_args_v[1].messages


@pytest.mark.asyncio
async def test_retention_and_fork_never_drop_a_frame_a_kept_version_needs(tmp_path):
    path = tmp_path / "runs.db"
    store = Recording(SQLiteCheckpointStore(path, history_limit=7), every=1)
    interp = WorkflowInterpreter(growing_graph(), extra_args=(Context(),))
    interp.checkpointing = Checkpointing(store, "chat", codec=pickle, history=True)
    await interp.run()
    fresh = SQLiteCheckpointStore(path, history_limit=7)
    kept = [record.version for record in fresh.history("chat")]
    assert len(kept) == 7
    fresh.fork("chat", kept[0], "side")
    fresh.prune()
    for version in kept:
        assert fresh.load("chat", version=version).data == store.saved[version]
    assert fresh.load("side").data == store.saved[kept[0]]
    with sqlite3.connect(path) as raw:
        frames = raw.execute("SELECT count(*) FROM sense_history WHERE run_id = 'chat'").fetchone()[0]
    assert frames <= 7 + deltas.MAX_CHAIN + 1  # what nothing needs is gone


@pytest.mark.asyncio
async def test_without_history_the_store_keeps_the_chain_of_the_latest_only(tmp_path):
    path = tmp_path / "runs.db"
    interp = WorkflowInterpreter(growing_graph(), extra_args=(Context(),))
    interp.checkpointing = Checkpointing(SQLiteCheckpointStore(path), "chat", codec=pickle)
    await interp.run()
    final = SQLiteCheckpointStore(path).load("chat")
    assert SQLiteCheckpointStore(path).history("chat") == []
    assert stored_bytes(path) <= 2 * len(final.data) + 200 * final.record.version
    restored = WorkflowInterpreter.restore(growing_graph(), final.data, codec=pickle)
    assert restored._ava_args_v[1].messages == interp._ava_args_v[1].messages


def test_a_damaged_frame_is_a_typed_error(tmp_path):
    path = tmp_path / "runs.db"
    store = SQLiteCheckpointStore(path)
    first, second = sample_snapshots(payload=40_000)
    store.save("r", first)
    store.save("r", second)
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


@settings(max_examples=200, deadline=None)
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


@settings(max_examples=200, deadline=None)
@given(base=st.binary(max_size=200), frame=st.binary(max_size=200))
def test_a_crafted_delta_rebuilds_or_is_corrupt_never_anything_else(base, frame):
    try:
        deltas.rebuild(base, [deltas.MAGIC + frame])
    except CorruptSnapshot:
        pass
