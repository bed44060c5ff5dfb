"""Durability modes: `Checkpointing(..., durability="sync" | "async" | "exit")`.

What each mode writes, what `run()` waits for, what a failing store does, and what a crash at any
save loses: a process killed at each save of a run (before its write, and after it landed) resumes
from the last durable save, never from a torn or out-of-order one; in `sync` no node before the
saved state runs twice, and at most the node after it does.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from amrita_sense import SUSPEND, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import (
    CheckpointError,
    Checkpointing,
    MemoryCheckpointStore,
    SQLiteCheckpointStore,
    inspect_snapshot,
)
from support.durable_mode_worker import NODES, RUN_ID, Chain, chain_result
from support.durable_support import KEYS
from support.runtime_path import RUNTIME_DIR

WORKER = Path(__file__).resolve().parent / "support" / "durable_mode_worker.py"
LOOPS = ["asyncio", "uvloop"] if importlib.util.find_spec("uvloop") else ["asyncio"]


def counting_chain(count: int, ran: list[int]) -> Any:
    return NodeCompose(*counting_nodes(count, ran)).render()


def counting_nodes(count: int, ran: list[int], first: int = 0, pause: float = 0.0) -> list[Any]:
    """Nodes `first` .. `first + count - 1` of the chain, each noting its index in `ran` (after
    `pause` seconds of waiting, when given: the writes of `async` durability land meanwhile)."""

    def make(k: int) -> Any:
        async def step(request: Chain) -> None:
            if pause:
                await asyncio.sleep(pause)
            request.value = (request.value * 31 + k) % 1_000_003
            ran.append(k)

        step.__name__ = step.__qualname__ = f"step_{k}"
        return Node()(step)

    return [make(k) for k in range(first, first + count)]


def pointers(store: Any, run_id: str = RUN_ID) -> list[list[int]]:
    """The pointer of every history entry of the run, oldest first."""
    return [inspect_snapshot(store.load(run_id, version=r.version).data).pointer for r in store.history(run_id)]


def in_order(addresses: list[list[int]]) -> bool:
    """Each saved state is at or after the one before (the finished run's empty pointer last)."""
    steps = [a[0] if a else NODES for a in addresses]
    return steps == sorted(steps)


class GatedStore(MemoryCheckpointStore):
    """A memory store whose async `save` waits for `gate` (so saves pile up behind the first)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.written: list[str] = []

    async def save(self, run_id: str, data: bytes, **options: Any) -> Any:  # type: ignore[override]
        await self.gate.wait()
        record = super().save(run_id, data, **options)
        self.written.append(inspect_snapshot(data).status)
        return record


class FailingStore(MemoryCheckpointStore):
    """A memory store whose saves raise from save number `fail_at` on (the disk went away)."""

    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.fail_at, self.saves = fail_at, 0

    def save(self, run_id: str, data: bytes, **options: Any) -> Any:
        self.saves += 1
        if self.saves >= self.fail_at:
            raise OSError("the disk went away")
        return super().save(run_id, data, **options)


def test_an_unknown_mode_is_refused_by_name():
    with pytest.raises(ValueError, match="durability"):
        Checkpointing(MemoryCheckpointStore(), "r", durability="eventually")


@pytest.mark.parametrize("mode", ["sync", "async", "exit"])
@pytest.mark.asyncio
async def test_every_mode_ends_with_the_finished_state_durable(mode):
    store, ran = MemoryCheckpointStore(), []
    interp = WorkflowInterpreter(counting_chain(NODES, ran), extra_args=(Chain(7),))
    interp.checkpointing = Checkpointing(store, RUN_ID, codec=pickle, keyring=KEYS, durability=mode, history=True)
    await interp.run()
    latest = store.load(RUN_ID)
    assert latest.record.status == "finished" and ran == list(range(NODES))
    restored = WorkflowInterpreter.restore(counting_chain(NODES, []), latest.data, codec=pickle, allow_unsigned=True)
    assert restored._ava_args_v[1].value == chain_result(7)
    versions = [r.version for r in store.history(RUN_ID)]
    assert versions == list(range(1, len(versions) + 1))
    assert in_order(pointers(store))
    if mode == "exit":
        assert versions == [1]  # no saves between nodes: only the end
    if mode == "sync":
        assert len(versions) >= NODES


@pytest.mark.asyncio
async def test_async_writes_while_the_next_nodes_run_and_a_newer_state_replaces_a_waiting_one():
    store, ran = GatedStore(), []
    interp = WorkflowInterpreter(counting_chain(NODES, ran), extra_args=(Chain(7),))
    interp.checkpointing = Checkpointing(store, RUN_ID, codec=pickle, keyring=KEYS, durability="async", history=True)
    running = asyncio.ensure_future(interp.run())
    while len(ran) < NODES:  # every node runs although no save could be written
        await asyncio.sleep(0)
    assert store.written == [] and not running.done()  # run() waits for its saves
    store.gate.set()
    await running
    # the first save was in flight; of those that waited behind it only the newest was written,
    # then the end's save
    assert len(store.written) <= 3 and store.written[-1] == "finished"
    assert in_order(pointers(store))


@pytest.mark.asyncio
async def test_async_waits_for_the_save_before_the_run_parks():
    store, ran = MemoryCheckpointStore(), []
    graph = NodeCompose(*counting_nodes(2, ran), SUSPEND, *counting_nodes(2, ran, first=2)).render()
    interp = WorkflowInterpreter(graph, extra_args=(Chain(7),))
    interp.checkpointing = Checkpointing(store, RUN_ID, codec=pickle, keyring=KEYS, durability="async")
    await interp.run()
    assert store.load(RUN_ID).record.status == "halted"


@pytest.mark.parametrize("fail_at", [1, 2])
@pytest.mark.asyncio
async def test_async_a_failing_save_ends_the_run_with_checkpoint_error_and_keeps_the_last_complete_one(fail_at):
    store, ran = FailingStore(fail_at), []
    graph = NodeCompose(*counting_nodes(NODES, ran, pause=0.01)).render()  # writes land between nodes
    interp = WorkflowInterpreter(graph, extra_args=(Chain(7),))
    interp.checkpointing = Checkpointing(store, RUN_ID, codec=pickle, keyring=KEYS, durability="async", history=True)
    with pytest.raises(CheckpointError, match="disk went away"):
        await interp.run()
    assert not interp.is_running  # the lock is free, the interpreter reusable
    if fail_at > 1:
        kept = store.load(RUN_ID)
        assert kept.record.version == len(store.history(RUN_ID))  # nothing half-written
        again = WorkflowInterpreter.restore(counting_chain(NODES, []), kept.data, codec=pickle, allow_unsigned=True)
        await again.run()
        assert again._ava_args_v[1].value == chain_result(7)


@pytest.mark.asyncio
async def test_async_the_final_save_supersedes_a_snapshot_still_waiting():
    store, ran = MemoryCheckpointStore(), []
    interp = WorkflowInterpreter(counting_chain(NODES, ran), extra_args=(Chain(7),))
    interp.checkpointing = Checkpointing(store, RUN_ID, codec=pickle, durability="async", history=True)
    await interp.run()  # the nodes never wait: every snapshot they hand over waits behind the run's end
    assert [r.status for r in store.history(RUN_ID)] == ["finished"] and ran == list(range(NODES))


@pytest.mark.asyncio
async def test_exit_saves_at_a_suspend_gate_and_at_a_panic():
    store, ran = MemoryCheckpointStore(), []

    async def boom() -> None:
        raise RuntimeError("boom")

    graph = NodeCompose(*counting_nodes(2, ran), SUSPEND, Node()(boom)).render()
    interp = WorkflowInterpreter(graph, extra_args=(Chain(7),))
    interp.checkpointing = Checkpointing(store, RUN_ID, codec=pickle, keyring=KEYS, durability="exit", history=True)
    await interp.run()
    assert [r.status for r in store.history(RUN_ID)] == ["halted"]
    with pytest.raises(RuntimeError, match="boom"):
        await interp.run()
    assert [r.status for r in store.history(RUN_ID)] == ["halted", "panicked"]


@pytest.mark.asyncio
async def test_async_mode_on_a_blocking_store_overlaps_its_writes(tmp_path):
    store, ran = SQLiteCheckpointStore(tmp_path / "runs.db"), []
    interp = WorkflowInterpreter(counting_chain(NODES, ran), extra_args=(Chain(7),))
    interp.checkpointing = Checkpointing(store, RUN_ID, codec=pickle, keyring=KEYS, durability="async", history=True)
    await interp.run()
    assert store.load(RUN_ID).record.status == "finished"
    assert in_order(pointers(store))


# ----- a crash at every save ------------------------------------------------------------------


def run_worker(folder: Path, mode: str, kill_at: int, when: str, loop: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([RUNTIME_DIR, str(WORKER.parents[1])]))
    env.pop("AMRITA_SENSE_REQUIRE_EXTENSIONS", None)
    args = [sys.executable, str(WORKER), str(folder / "runs.db"), str(folder / "trace.txt")]
    args += [mode, str(kill_at), when, loop]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)


def saved_step(store: SQLiteCheckpointStore) -> int:
    """How many nodes the run's durable checkpoint has behind it (0: there is none)."""
    if not store.list():
        return 0
    data = store.load(RUN_ID).data
    info = inspect_snapshot(data)  # a torn or damaged row raises here
    return NODES if info.status == "finished" else info.pointer[0]


def trace(folder: Path) -> list[int]:
    path = folder / "trace.txt"
    lines = path.read_text().split() if path.exists() else []
    return [int(line.removeprefix("step_")) for line in lines]


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("mode", ["sync", "async", "exit"])
def test_a_crash_at_every_save_resumes_from_the_last_durable_one(tmp_path, mode, when):
    (tmp_path / "clean").mkdir()
    clean = run_worker(tmp_path / "clean", mode, 0, when, "asyncio")
    assert clean.returncode == 0, clean.stderr
    saves = int(clean.stdout.split()[1])
    for kill_at in range(1, saves + 1):
        folder = tmp_path / f"kill-{kill_at}"
        folder.mkdir()
        loop = LOOPS[kill_at % len(LOOPS)]
        killed = run_worker(folder, mode, kill_at, when, loop)
        assert killed.returncode == -9, (kill_at, killed.stdout, killed.stderr)
        before = trace(folder)
        store = SQLiteCheckpointStore(folder / "runs.db")
        saved = saved_step(store)
        if store.list():
            assert in_order(pointers(store)), kill_at
        (folder / "trace.txt").write_text("")
        resumed = run_worker(folder, mode, 0, when, loop)
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.split()[-1] == str(chain_result(7))
        after = trace(folder)
        assert before == list(range(len(before))) and len(before) >= saved  # it ran up to its save
        assert after == list(range(saved, NODES)), (kill_at, saved, before, after)  # and on from it
        if mode == "sync":
            assert len(before) - saved <= 1, (kill_at, before, saved)  # at most the node after the save again
        store.close()
