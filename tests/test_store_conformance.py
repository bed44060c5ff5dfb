"""One judge for every checkpoint store (tests/support/stores.py lists them): the same tests, sync
or async backend alike (each call's result is awaited when it is awaitable).

The protocol: versions that grow by one per save, `expected_version` as a fence between writers,
checked data, history kept on request with retention, loading any kept version, forks that leave
their source untouched, and `Checkpointing` over it all (time travel included).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import pickle
from collections.abc import AsyncIterator
from typing import Any

import pytest

from amrita_sense import SUSPEND, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import (
    CheckpointConflict,
    Checkpointing,
    CheckpointNotFound,
    CheckpointStore,
    CorruptSnapshot,
    HistoryStore,
    inspect_snapshot,
)
from amrita_sense.durable.stores.base import CheckpointRecord, _record
from support.durable_support import rec
from support.stores import STORES, sample_snapshots

SNAPSHOTS = {"small": sample_snapshots(), "large": sample_snapshots(payload=40_000)}
"""Small snapshots are written whole; large ones as frames (`amrita_sense.durable.stores.deltas`)."""


async def settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class Stores:
    """Fresh stores of the backend under test: `async with stores.open(**retention) as store`."""

    def __init__(self, kind: str, size: str, request: Any, tmp_path: Any):
        self.kind, self.request, self.tmp_path, self.count = kind, request, tmp_path, 0
        self.halted, self.finished = SNAPSHOTS[size]

    @contextlib.asynccontextmanager
    async def open(self, **options: Any) -> AsyncIterator[Any]:
        folder = self.tmp_path / f"store-{self.count}"
        folder.mkdir()
        self.count += 1
        store = STORES[self.kind](self.request, folder, options)
        try:
            yield store
        finally:
            closing = getattr(store, "close", None)
            if closing is not None:
                await settle(closing())


@pytest.fixture(params=[(kind, size) for kind in sorted(STORES) for size in SNAPSHOTS], ids="-".join)
def stores(request, tmp_path):
    return Stores(*request.param, request, tmp_path)


async def save(store: Any, run_id: str, data: bytes, **options: Any) -> Any:
    return await settle(store.save(run_id, data, **options))


async def versions(store: Any, run_id: str) -> list[int]:
    return [record.version for record in await settle(store.history(run_id))]


# ----- the four operations ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_store_is_a_checkpoint_store_that_keeps_history(stores):
    async with stores.open() as store:
        assert isinstance(store, CheckpointStore) and isinstance(store, HistoryStore)


@pytest.mark.asyncio
async def test_save_load_list_delete(stores):
    async with stores.open() as store:
        first = await save(store, "run-1", stores.halted)
        assert (first.version, first.status, first.forked_from) == (1, "halted", None)
        assert first.fingerprint == inspect_snapshot(stores.halted).fingerprint and first.size == len(stores.halted)
        second = await save(store, "run-1", stores.finished)
        assert (second.version, second.status, second.created_at) == (2, "finished", first.created_at)
        assert second.updated_at >= first.updated_at
        await save(store, "run-0", stores.halted)
        loaded = await settle(store.load("run-1"))
        assert loaded.data == stores.finished and loaded.record == second
        assert [r.run_id for r in await settle(store.list())] == ["run-0", "run-1"]
        assert [r.run_id for r in await settle(store.list(status="halted"))] == ["run-0"]
        assert await settle(store.delete("run-1")) is True
        assert await settle(store.delete("run-1")) is False
        with pytest.raises(CheckpointNotFound, match="run-1"):
            await settle(store.load("run-1"))
        with pytest.raises(LookupError):
            await settle(store.load("nothing"))
        assert (await save(store, "run-1", stores.halted)).version == 1  # a deleted run id starts again


@pytest.mark.asyncio
async def test_expected_versions_fence_writers(stores):
    async with stores.open() as store:
        await save(store, "r", stores.halted, expected_version=0)
        with pytest.raises(CheckpointConflict, match="expected version 0, the store has version 1"):
            await save(store, "r", stores.halted, expected_version=0)
        await save(store, "r", stores.finished, expected_version=1)
        with pytest.raises(CheckpointConflict):
            await save(store, "r", stores.halted, expected_version=1)
        with pytest.raises(CheckpointConflict, match="no checkpoint"):
            await save(store, "new", stores.halted, expected_version=3)
        with pytest.raises(CheckpointConflict):
            await settle(store.delete("r", expected_version=1))
        assert (await settle(store.load("r"))).data == stores.finished
        assert await settle(store.delete("r", expected_version=2))


@pytest.mark.asyncio
async def test_of_writers_racing_over_one_version_exactly_one_goes_on(stores):
    async with stores.open() as store:
        await save(store, "r", stores.halted)

        async def writer() -> str:
            try:
                await save(store, "r", stores.finished, expected_version=1)
            except CheckpointConflict:
                return "refused"
            return "saved"

        if inspect.iscoroutinefunction(store.save):
            outcomes = await asyncio.gather(*(writer() for _ in range(8)))
        else:  # a sync store: the writers race in threads
            outcomes = await asyncio.gather(*(asyncio.to_thread(asyncio.run, writer()) for _ in range(8)))
        assert sorted(outcomes) == ["refused"] * 7 + ["saved"]
        assert (await settle(store.load("r"))).record.version == 2


@pytest.mark.asyncio
async def test_damaged_data_and_bad_arguments_never_reach_the_store(stores):
    async with stores.open() as store:
        await save(store, "r", stores.halted)
        with pytest.raises(CorruptSnapshot):
            await save(store, "r", stores.halted[:-1] + bytes([stores.halted[-1] ^ 1]))
        for run_id in ("", None, "x" * 513):
            with pytest.raises(ValueError):
                await save(store, run_id, stores.halted)
        with pytest.raises(ValueError):
            await save(store, "r", stores.halted, expected_version=-1)
        for version in (0, -1, "1", 1.0, True):
            with pytest.raises(ValueError):
                await settle(store.load("r", version=version))
        loaded = await settle(store.load("r"))
        assert loaded.data == stores.halted and loaded.record.version == 1
        assert await versions(store, "r") == []


# ----- history --------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_history_keeps_the_saves_made_with_history_oldest_first(stores):
    async with stores.open() as store:
        await save(store, "r", stores.halted)  # version 1: latest only
        two = await save(store, "r", stores.finished, history=True)
        three = await save(store, "r", stores.halted, history=True)
        await save(store, "r", stores.finished)  # version 4: latest only
        entries = await settle(store.history("r"))
        assert [(e.version, e.status) for e in entries] == [(2, "finished"), (3, "halted")]
        assert entries == [two, three]
        old = await settle(store.load("r", version=2))
        assert old.data == stores.finished and old.record == two
        latest = await settle(store.load("r", version=4))
        assert latest.record.version == 4 and latest.data == stores.finished
        with pytest.raises(CheckpointNotFound, match="version 1"):
            await settle(store.load("r", version=1))
        with pytest.raises(CheckpointNotFound):
            await settle(store.load("r", version=9))
        with pytest.raises(CheckpointNotFound):
            await settle(store.history("unknown"))
        assert await settle(store.delete("r"))
        with pytest.raises(CheckpointNotFound):
            await settle(store.history("r"))
        await save(store, "r", stores.halted, history=True)
        assert await versions(store, "r") == [1]  # the deleted run's history went with it


@pytest.mark.asyncio
async def test_retention_by_count_keeps_the_newest_entries_and_the_latest(stores):
    async with stores.open(history_limit=3) as store:
        for _ in range(6):
            await save(store, "r", stores.halted, history=True)
        await save(store, "other", stores.halted, history=True)
        assert await versions(store, "r") == [4, 5, 6]
        assert await versions(store, "other") == [1]
        await save(store, "r", stores.finished)
        assert await versions(store, "r") == [4, 5, 6]
        assert (await settle(store.load("r"))).record.version == 7
        assert await settle(store.prune()) == 0


class _Clock:
    """`time.time` for the stores' modules: it moves only when the test says."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    from amrita_sense.durable.stores import memory, postgres, sqlite

    fake = _Clock()
    for module in (memory, postgres, sqlite):
        monkeypatch.setattr(module, "time", fake)
    return fake


@pytest.mark.asyncio
async def test_retention_by_age_drops_old_entries_never_the_latest(stores, clock):
    async with stores.open(history_max_age=0.2) as store:
        await save(store, "r", stores.halted, history=True)
        clock.now += 0.1  # younger than the limit: the next save keeps it
        await save(store, "r", stores.finished, history=True)
        await save(store, "s", stores.halted, history=True)
        assert await versions(store, "r") == [1, 2]
        clock.now += 0.3
        assert await settle(store.prune("r")) == 2
        assert await versions(store, "r") == []
        assert (await settle(store.load("r"))).record.version == 2
        assert await settle(store.prune()) == 1
        await save(store, "s", stores.finished, history=True)  # a save applies the retention too
        assert await versions(store, "s") == [2]


@pytest.mark.asyncio
async def test_expired_runs_are_deleted_in_batches_and_fresh_ones_kept(stores, clock):
    async with stores.open(run_ttl=10) as store:
        for k in range(5):
            await save(store, f"old-{k}", stores.halted, history=True)
            await save(store, f"old-{k}", stores.finished, history=True)
        clock.now += 11
        await save(store, "fresh", stores.halted)
        assert await settle(store.sweep(batch_size=2)) == 5
        assert [r.run_id for r in await settle(store.list())] == ["fresh"]
        with pytest.raises(CheckpointNotFound):
            await settle(store.history("old-0"))
        assert await settle(store.sweep()) == 0
        assert (await save(store, "old-0", stores.halted)).version == 1  # an expired run id starts again


@pytest.mark.asyncio
async def test_keep_latest_expiry_drops_the_history_and_keeps_the_latest(stores, clock):
    async with stores.open(run_ttl=10, on_expiry="keep_latest") as store:
        await save(store, "old", stores.halted, history=True)
        await save(store, "old", stores.finished, history=True)
        await save(store, "quiet", stores.halted)
        clock.now += 11
        assert await settle(store.sweep()) == 1  # a run with nothing but its latest has nothing to drop
        assert (await settle(store.load("old"))).data == stores.finished
        assert await versions(store, "old") == []
        assert await settle(store.sweep()) == 0
        assert (await save(store, "old", stores.halted, expected_version=2)).version == 3


@pytest.mark.asyncio
async def test_bad_expiry_is_refused(stores):
    for options in ({"run_ttl": 0}, {"run_ttl": "1"}, {"on_expiry": "archive"}):
        with pytest.raises(ValueError):
            async with stores.open(**options):
                pass
    async with stores.open(run_ttl=1) as store:
        with pytest.raises(ValueError, match="batch_size"):
            await settle(store.sweep(batch_size=0))


@pytest.mark.asyncio
async def test_bad_retention_is_refused(stores):
    for options in ({"history_limit": 0}, {"history_limit": 2.5}, {"history_max_age": 0}, {"history_max_age": "1"}):
        with pytest.raises(ValueError, match="history_"):
            async with stores.open(**options):
                pass


# ----- fork -----------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_fork_starts_a_new_run_from_an_entry_and_leaves_the_source(stores):
    async with stores.open() as store:
        for data in (stores.halted, stores.finished, stores.halted):
            await save(store, "src", data, history=True)
        before = await settle(store.history("src"))
        fork = await settle(store.fork("src", 2, "copy"))
        assert (fork.run_id, fork.version, fork.status, fork.forked_from) == ("copy", 1, "finished", "src@2")
        assert (await settle(store.load("copy"))).data == stores.finished
        assert await settle(store.history("copy")) == [fork]
        assert await settle(store.history("src")) == before
        assert (await settle(store.load("src"))).record.version == 3
        nxt = await save(store, "copy", stores.halted, expected_version=1, history=True)
        assert (nxt.version, nxt.forked_from, nxt.created_at) == (2, "src@2", fork.created_at)
        assert await versions(store, "copy") == [1, 2] and await versions(store, "src") == [1, 2, 3]
        from_latest = await settle(store.fork("src", 3, "copy-2"))
        assert from_latest.forked_from == "src@3"


@pytest.mark.asyncio
async def test_fork_refuses_an_existing_target_and_an_entry_not_kept(stores):
    async with stores.open() as store:
        await save(store, "src", stores.halted)
        await save(store, "src", stores.finished)
        await save(store, "taken", stores.halted)
        with pytest.raises(CheckpointConflict, match="taken"):
            await settle(store.fork("src", 2, "taken"))
        with pytest.raises(CheckpointNotFound):
            await settle(store.fork("src", 1, "new"))  # saved without history: not kept
        with pytest.raises(CheckpointNotFound):
            await settle(store.fork("nothing", 1, "new"))
        with pytest.raises(ValueError):
            await settle(store.fork("src", 0, "new"))
        assert [r.run_id for r in await settle(store.list())] == ["src", "taken"]
        assert (await settle(store.load("taken"))).data == stores.halted


# ----- Checkpointing over the store -----------------------------------------------------------------


async def halted_with_history(store: Any, trace: list) -> tuple[Any, WorkflowInterpreter]:
    """A graph a, b, SUSPEND, c, d and its run "run", checkpointed with history, halted at the SUSPEND."""
    graph = NodeCompose(rec(trace, "a"), rec(trace, "b"), SUSPEND, rec(trace, "c"), rec(trace, "d")).render()
    interp = WorkflowInterpreter(graph)
    interp.checkpointing = Checkpointing(store, "run", history=True)
    await interp.run()
    return graph, interp


@pytest.mark.asyncio
async def test_a_checkpointed_run_keeps_its_history_and_travels_back_in_time(stores):
    async with stores.open() as store:
        trace: list = []
        graph, interp = await halted_with_history(store, trace)
        await interp.run()
        assert trace == ["a", "b", "c", "d"]
        entries = await settle(store.history("run"))
        assert [e.version for e in entries] == list(range(1, len(entries) + 1))
        assert entries[-1].status == "finished" and entries[-1] == (await settle(store.load("run"))).record
        halted = next(e.version for e in entries if e.status == "halted")
        trace.clear()
        policy = Checkpointing(store, "run", history=True)
        again = await policy.resume(graph, version=halted)  # back to the SUSPEND
        assert policy.version == entries[-1].version  # the next save goes over the latest
        await again.run()
        assert trace == ["c", "d"]
        assert len(await settle(store.history("run"))) > len(entries)


@pytest.mark.asyncio
async def test_a_forked_run_resumes_on_its_own(stores):
    async with stores.open() as store:
        trace: list = []
        graph, _ = await halted_with_history(store, trace)
        halted = (await settle(store.load("run"))).record.version
        await settle(store.fork("run", halted, "what-if"))
        trace.clear()
        forked = await Checkpointing(store, "what-if", history=True).resume(graph)
        await forked.run()
        assert trace == ["c", "d"]
        assert (await settle(store.load("run"))).record.version == halted  # the source did not move
        assert (await settle(store.load("what-if"))).record.status == "finished"


def test_history_needs_a_store_that_keeps_one():
    class LatestOnly:
        def save(self, run_id, data, *, expected_version=None): ...
        def load(self, run_id): ...
        def list(self, *, status=None): ...
        def delete(self, run_id, *, expected_version=None): ...

    Checkpointing(LatestOnly(), "r")
    with pytest.raises(TypeError, match="history"):
        Checkpointing(LatestOnly(), "r", history=True)


def test_a_record_made_in_one_step_is_the_dataclass_its_constructor_makes():
    """`_record` (what a store's save returns) sets every field the dataclass has, as its constructor
    does: equal, same hash, repr, fields and pickle; `replace` makes a new one from it."""
    for values in (
        ("run", 3, "running", "ab" * 16, 600, 1.5, 2.5, None),
        ("r", 1, "finished", "0" * 32, 0, 1.0, 1.0, "s@2"),
    ):
        made, built = _record(*values), CheckpointRecord(*values)
        assert type(made) is CheckpointRecord
        assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
        assert vars(made) == vars(built) and list(vars(made)) == [field.name for field in dataclasses.fields(built)]
        assert pickle.loads(pickle.dumps(made)) == built and pickle.dumps(made) == pickle.dumps(built)
        assert dataclasses.replace(made, version=9) == dataclasses.replace(built, version=9)
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.version = 4  # type: ignore[misc]
