"""A workflow process for the durability-mode kill test: a chain that kills itself at one save.

    python tests/support/durable_mode_worker.py DATABASE TRACE_FILE MODE KILL_AT WHEN LOOP

Runs (or resumes, when DATABASE holds run "run") a chain of `NODES` nodes with a checkpoint after
every node in durability MODE (sync, async or exit), history on. Each node appends its name to
TRACE_FILE before it returns. At its KILL_AT-th call of the store's `save` (0: never) the process
sends itself SIGKILL, `before` the write or `after` it landed (WHEN). At the end it prints
`saves <n>` and `result <value>`. The core is chosen by the environment as usual; LOOP is asyncio
or uvloop.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import sys
from pathlib import Path
from typing import Any

from amrita_sense import Node, NodeCompose
from amrita_sense.durable import Checkpointing, CheckpointNotFound, SQLiteCheckpointStore
from support.durable_support import KEYS  # noqa: E402

NODES = 4
RUN_ID = "run"


class Chain:
    """The request every node folds its index into."""

    def __init__(self, value: int) -> None:
        self.value = value


def chain_result(value: int) -> int:
    for k in range(NODES):
        value = (value * 31 + k) % 1_000_003
    return value


def chain(sink: str) -> Any:
    def make(k: int) -> Any:
        async def step(request: Chain) -> None:
            request.value = (request.value * 31 + k) % 1_000_003
            with open(sink, "a") as trace:
                trace.write(f"step_{k}\n")

        step.__name__ = step.__qualname__ = f"step_{k}"
        return Node()(step)

    return NodeCompose(*(make(k) for k in range(NODES))).render()


class KillingStore:
    """An SQLite store that kills its process at its `kill_at`-th save, before or after the write."""

    def __init__(self, inner: SQLiteCheckpointStore, kill_at: int, when: str) -> None:
        self.inner, self.kill_at, self.when, self.saves = inner, kill_at, when, 0

    def save(self, run_id: str, data: bytes, **options: Any) -> Any:
        self.saves += 1
        if self.saves == self.kill_at and self.when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        record = self.inner.save(run_id, data, **options)
        if self.saves == self.kill_at and self.when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return record

    def __getattr__(self, name: str) -> Any:  # load, list, delete, history, fork, prune
        return getattr(self.inner, name)


async def main(database: str, sink: str, mode: str, kill_at: int, when: str) -> None:
    graph = chain(sink)
    store = KillingStore(SQLiteCheckpointStore(database), kill_at, when)
    policy = Checkpointing(store, RUN_ID, codec=pickle, keyring=KEYS, durability=mode, history=True)
    try:
        interp = await policy.resume(graph)
    except CheckpointNotFound:
        from amrita_sense import WorkflowInterpreter

        interp = WorkflowInterpreter(graph, extra_args=(Chain(7),))
        interp.checkpointing = policy
    if policy.last is None or policy.last.status != "finished":
        await interp.run()
    print("saves", store.saves, flush=True)
    print("result", interp._ava_args_v[1].value, flush=True)


if __name__ == "__main__":
    database, sink, mode, kill_at, when, loop_name = sys.argv[1:7]
    if loop_name == "uvloop":
        import uvloop

        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    loop.run_until_complete(main(database, sink, mode, int(kill_at), when))
    loop.close()
    Path(sink).touch()
