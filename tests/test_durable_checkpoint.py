"""Automatic checkpoints: when a run saves, what it saves, resuming, fencing, async stores."""

from __future__ import annotations

import asyncio
import pickle
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from amrita_sense import RESET, SUSPEND, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import (
    CheckpointConflict,
    CheckpointError,
    Checkpointing,
    MemoryCheckpointStore,
    SQLiteCheckpointStore,
    inspect_snapshot,
)
from amrita_sense.instructions import FUN_BLOCK
from amrita_sense.streaming import SuspendObjectStream
from support.durable_support import KEYS, abandon, park, rec, tag
from support.runtime_path import RUNTIME_DIR

ROOT = Path(__file__).resolve().parents[1]


class Recording(MemoryCheckpointStore):
    """A memory store that also remembers every snapshot saved, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[bytes] = []

    def save(self, run_id, data, **kw):
        self.saved.append(data)
        return super().save(run_id, data, **kw)

    def statuses(self) -> list[str]:
        return [inspect_snapshot(d).status for d in self.saved]

    def pointers(self) -> list[list[int]]:
        return [inspect_snapshot(d).pointer for d in self.saved]


def checkpointed(graph, store, **policy) -> WorkflowInterpreter:
    interp = WorkflowInterpreter(graph, object_io=policy.pop("object_io", None))
    interp.checkpointing = Checkpointing(store, "run", **policy)
    return interp


def chain(trace: list, names: str):
    return NodeCompose(*(rec(trace, n) for n in names.split())).render()


@pytest.mark.asyncio
async def test_every_node_then_the_end():
    store = Recording()
    await checkpointed(chain([], "a b c"), store).run()
    assert store.pointers() == [[1], [2], []]
    assert store.statuses() == ["running", "running", "finished"]
    assert store.load("run").record.version == 3


@pytest.mark.asyncio
async def test_every_third_node_or_only_by_time():
    store = Recording()
    await checkpointed(chain([], "a b c d e f g"), store, every_nodes=3).run()
    assert store.pointers() == [[3], [6], []]
    by_time = Recording()
    await checkpointed(chain([], "a b c"), by_time, every_nodes=None, every_seconds=3600).run()
    assert by_time.statuses() == ["finished"]


@pytest.mark.asyncio
async def test_halt_reset_and_panic_end_with_a_checkpoint_unless_panics_are_left_out():
    store = Recording()
    interp = checkpointed(NodeCompose(rec([], "a"), SUSPEND, RESET).render(), store, every_nodes=None)
    await interp.run()
    await interp.run()
    assert store.statuses() == ["halted", "finished"]
    failing = NodeCompose(rec([], "a", exc=ValueError("no"))).render()
    for on_panic, expected in ((True, ["panicked"]), (False, [])):
        store = Recording()
        with pytest.raises(ValueError):
            await checkpointed(failing, store, every_nodes=None, on_panic=on_panic).run()
        assert store.statuses() == expected


@pytest.mark.asyncio
async def test_a_run_about_to_park_saves_first():
    trace: list = []
    stream = SuspendObjectStream()
    store = Recording()
    interp = checkpointed(chain(trace, "a b c"), store, every_nodes=None, object_io=stream)
    task = await park(stream, interp.run, tag("b"))
    info = inspect_snapshot(store.load("run").data)
    assert (info.status, info.parked, info.pointer) == ("suspended", tag("b"), [1])
    await abandon(task)
    fresh: list = []
    again = await Checkpointing(store, "run").resume(chain(fresh, "a b c"))
    await again.run()
    assert trace == ["a"] and fresh == ["b", "c"]


@pytest.mark.asyncio
async def test_a_sub_interpreter_about_to_park_saves_the_whole_run():
    def graph(trace):
        inner = NodeCompose(rec(trace, "x"), rec(trace, "y")).render()
        return NodeCompose(rec(trace, "a"), FUN_BLOCK(inner), rec(trace, "b")).render()

    trace: list = []
    stream = SuspendObjectStream()
    store = Recording()
    interp = checkpointed(graph(trace), store, every_nodes=None, object_io=stream)
    task = await park(stream, interp.run, tag("y"))
    info = inspect_snapshot(store.load("run").data)
    assert (info.status, info.position, info.parked) == ("suspended", "nested", tag("y"))
    await abandon(task)
    fresh: list = []
    again = await Checkpointing(store, "run").resume(graph(fresh))
    await again.run()
    assert fresh == ["y", "b"]


@pytest.mark.asyncio
async def test_gates_inside_sub_calls_are_skipped_not_failed():
    from amrita_sense import IF

    trace: list = []
    stream = SuspendObjectStream()
    store = Recording()
    graph = NodeCompose(IF(rec(trace, "cond"), rec(trace, "then"))).render()
    interp = checkpointed(graph, store, every_nodes=None, object_io=stream)
    task = await park(stream, interp.run, tag("cond"))
    assert store.saved == []
    stream.resume()
    await task
    assert trace == ["cond", "then"] and store.statuses() == ["finished"]


@pytest.mark.asyncio
async def test_two_processes_resuming_one_run_cannot_both_go_on(tmp_path):
    store = SQLiteCheckpointStore(tmp_path / "runs.db")
    await checkpointed(NodeCompose(rec([], "a"), SUSPEND, rec([], "b"), rec([], "c")).render(), store).run()
    graph = NodeCompose(rec([], "a"), SUSPEND, rec([], "b"), rec([], "c")).render()
    first = await Checkpointing(store, "run").resume(graph)
    second = await Checkpointing(store, "run").resume(graph)
    await first.run()
    with pytest.raises(CheckpointConflict):
        await second.run()
    assert second.get_exception() is None, "a store conflict is not a panic of the workflow"
    assert inspect_snapshot(store.load("run").data).status == "finished"


@pytest.mark.asyncio
async def test_a_new_policy_does_not_overwrite_an_existing_run():
    store = MemoryCheckpointStore()
    await checkpointed(chain([], "a"), store).run()
    with pytest.raises(CheckpointConflict):
        await checkpointed(chain([], "a"), store).run()
    await checkpointed(chain([], "a"), store, expected_version=None).run()
    assert store.load("run").record.version == 2


class AsyncStore:
    """A store whose methods are coroutines (what a Redis or Postgres backend would have)."""

    def __init__(self) -> None:
        self.inner = MemoryCheckpointStore()

    async def save(self, run_id, data, *, expected_version=None):
        await asyncio.sleep(0)
        return self.inner.save(run_id, data, expected_version=expected_version)

    async def load(self, run_id):
        return self.inner.load(run_id)

    async def list(self, *, status=None):
        return self.inner.list(status=status)

    async def delete(self, run_id, *, expected_version=None):
        return self.inner.delete(run_id, expected_version=expected_version)


@pytest.mark.asyncio
async def test_an_async_backend_plugs_in_without_engine_changes():
    store = AsyncStore()
    trace: list = []
    saved: list = []
    interp = WorkflowInterpreter(NodeCompose(rec(trace, "a"), SUSPEND, rec(trace, "b")).render())
    interp.checkpointing = Checkpointing(store, "run", on_saved=saved.append)
    await interp.run()
    assert [r.version for r in saved] == [1, 2]
    fresh: list = []
    again = await Checkpointing(store, "run").resume(NodeCompose(rec(fresh, "a"), SUSPEND, rec(fresh, "b")).render())
    await again.run()
    assert fresh == ["b"]


@pytest.mark.asyncio
async def test_a_failing_backend_is_a_checkpoint_error_not_a_panic():
    class Broken(MemoryCheckpointStore):
        def save(self, run_id, data, **kw):
            raise OSError("disk full")

    interp = checkpointed(chain([], "a b"), Broken())
    with pytest.raises(CheckpointError, match="disk full"):
        await interp.run()
    assert interp.get_exception() is None


def test_policy_arguments_are_checked():
    store = MemoryCheckpointStore()
    for bad in ({"every_nodes": 0}, {"every_seconds": 0}, {"codec": object()}):
        with pytest.raises((ValueError, TypeError)):
            Checkpointing(store, "r", **bad)
    with pytest.raises(TypeError):
        Checkpointing(object(), "r")
    with pytest.raises(ValueError):
        Checkpointing(store, "")
    with pytest.raises(TypeError):
        WorkflowInterpreter(chain([], "a")).checkpointing = "yes"


@pytest.mark.asyncio
async def test_the_codec_saves_user_state_with_every_checkpoint():
    store = MemoryCheckpointStore()
    interp = WorkflowInterpreter(NodeCompose(SUSPEND).render(), extra_args=([1, 2],), extra_kwargs={"k": "v"})
    interp.checkpointing = Checkpointing(store, "run", codec=pickle, keyring=KEYS)
    await interp.run()
    again = await Checkpointing(store, "run", codec=pickle, keyring=KEYS).resume(NodeCompose(SUSPEND).render())
    assert again._ava_args_v[1:] == ([1, 2],) and again._ava_kwargs_v == {"k": "v"}


@pytest.mark.asyncio
async def test_pools_the_codec_cannot_encode_are_a_checkpoint_error_not_a_panic():
    trace: list = []
    store = MemoryCheckpointStore()
    interp = WorkflowInterpreter(chain(trace, "a b"), extra_kwargs={"guard": threading.Lock()})
    interp.checkpointing = Checkpointing(store, "run", codec=pickle, keyring=KEYS)
    with pytest.raises(CheckpointError, match="run 'run' cannot be taken.*cannot pickle") as caught:
        await interp.run()
    assert caught.value.__cause__ is not None and interp.get_exception() is None
    assert trace == ["a"] and store.list() == []  # it stopped at the first checkpoint, nothing stored


ZERO_COST = """
import asyncio, sys
from amrita_sense import Node, NodeCompose, WorkflowInterpreter

@Node(wrap_to_async=False)
def a() -> None:
    pass

asyncio.run(WorkflowInterpreter(NodeCompose(a, a).render()).run())
print(sorted(m for m in sys.modules if m.startswith("amrita_sense.durable")))
"""


def test_a_run_without_checkpointing_never_loads_the_durable_code():
    env = {"PYTHONPATH": RUNTIME_DIR, "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", ZERO_COST], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
