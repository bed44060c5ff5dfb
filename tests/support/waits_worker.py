"""Processes for the waits kill tests (tests/test_durable_waits_kill.py) and the CLI worker test.

    python tests/support/waits_worker.py stepkeys DATABASE TRACE DURABILITY LOOP
    python tests/support/waits_worker.py start DATABASE TRACE LOOP RUN_ID [RUN_ID ...]
    python tests/support/waits_worker.py waker DATABASE TRACE LOOP LEASE_SECONDS OWNER

DATABASE is an SQLite file path, or `DSN|SCHEMA` for a Postgres store (start, waker).

`stepkeys`: runs (or resumes) run "keys": nodes and a WHILE loop writing `<name> <pc.step_key>` to
TRACE; node `k2` kills its process with SIGKILL the first time it runs (a marker file beside TRACE
says it did). `start`: starts runs of graph "w" (`build`), each parks at its WAIT("go").
`waker`: serves graph "w" with a Waker until SIGTERM; with the environment variable
WAITS_KILL_MARKER set, the first `after` node of the process whose marker file does not exist yet
creates it and kills the process (SIGKILL) right after writing its line.

Every node appends a line to the TRACE file (the environment variable WAITS_TRACE, set from the
argument): `after <run> <message id> <pid>`, `finish <run> <pid>`.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import sys
from pathlib import Path
from typing import Any

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import WAIT, Checkpointing, CheckpointNotFound, Message, SQLiteCheckpointStore, Waker
from amrita_sense.instructions import WHILE


def open_store(database: str) -> Any:
    """An SQLite file path, or `DSN|SCHEMA` for a Postgres store."""
    if "|" in database:
        from amrita_sense.durable import PostgresCheckpointStore

        dsn, schema = database.split("|")
        return PostgresCheckpointStore(dsn, schema=schema)
    return SQLiteCheckpointStore(database)


def _trace(line: str) -> None:
    with open(os.environ["WAITS_TRACE"], "a") as sink:
        sink.write(line + "\n")


# ----- graph "w": a run that waits for one message ----------------------------------------------------


@Node()
async def first(pc: WorkflowInterpreter) -> None:
    _trace(f"first {pc.checkpointing.run_id} {os.getpid()}")


@Node()
async def after(message: Message, pc: WorkflowInterpreter) -> None:
    _trace(f"after {pc.checkpointing.run_id} {message.message_id} {os.getpid()}")
    marker = os.environ.get("WAITS_KILL_MARKER")
    if marker and not os.path.exists(marker):
        Path(marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)


@Node()
async def finish(pc: WorkflowInterpreter) -> None:
    _trace(f"finish {pc.checkpointing.run_id} {os.getpid()}")


def build() -> Any:
    """Graph "w" (the same source renders the same graph in every process)."""
    return NodeCompose(first, WAIT("go"), after, finish).render()


# ----- step keys -----------------------------------------------------------------------------------------


class Counter:
    """The loop's state, kept with the checkpoints (pickle codec)."""

    def __init__(self) -> None:
        self.n = 0


def _keyed(name: str) -> Any:
    async def node(pc: WorkflowInterpreter) -> None:
        _trace(f"{name} {pc.step_key}")
        if name == "k2":
            marker = os.environ["WAITS_TRACE"] + ".killed"
            if not os.path.exists(marker):
                Path(marker).touch()
                os.kill(os.getpid(), signal.SIGKILL)

    node.__name__ = node.__qualname__ = name
    return Node()(node)


@Node()
async def more(counter: Counter) -> bool:
    counter.n += 1
    return counter.n <= 3


def keys_graph() -> Any:
    return NodeCompose(
        _keyed("k0"), WHILE(more).ACTION(_keyed("body")), _keyed("k1"), _keyed("k2"), _keyed("k3")
    ).render()


async def stepkeys(database: str, durability: str) -> None:
    graph = keys_graph()
    policy = Checkpointing(
        SQLiteCheckpointStore(database), "keys", codec=pickle, allow_unsigned=True, durability=durability
    )
    try:
        interp = await policy.resume(graph)
    except CheckpointNotFound:
        interp = WorkflowInterpreter(graph, extra_args=(Counter(),))
        interp.checkpointing = policy
    await interp.run()


async def start(database: str, run_ids: list[str]) -> None:
    store = open_store(database)
    for run_id in run_ids:
        interp = WorkflowInterpreter(build())
        interp.checkpointing = Checkpointing(store, run_id, graph="w", codec=pickle, allow_unsigned=True)
        await interp.run()


async def waker(database: str, lease: float, owner: str) -> None:
    worker = Waker(
        open_store(database),
        {"w": build},
        codec=pickle,
        allow_unsigned=True,
        lease_seconds=lease,
        poll_interval=0.05,
        owner=owner,
    )
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, worker.stop)
    print("serving", flush=True)
    await worker.serve()


def main(argv: list[str]) -> None:
    mode, database, trace = argv[:3]
    os.environ["WAITS_TRACE"] = trace
    if mode == "stepkeys":
        durability, loop_name = argv[3:5]
        job = stepkeys(database, durability)
    elif mode == "start":
        loop_name = argv[3]
        job = start(database, argv[4:])
    else:
        loop_name, lease, owner = argv[3:6]
        job = waker(database, float(lease), owner)
    if loop_name == "uvloop":
        import uvloop

        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    loop.run_until_complete(job)
    loop.close()


if __name__ == "__main__":
    # the nodes by their importable name (`waits_worker.first`, not `__main__.first`): the graph's
    # fingerprint names its functions, and `python -m amrita_sense worker --graph w=waits_worker:build`
    # imports them so
    import importlib

    importlib.import_module("waits_worker").main(sys.argv[1:])
