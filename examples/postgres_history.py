"""Checkpoint history in PostgreSQL: park a run, list its checkpoints, time travel, fork.

    pip install 'amrita-sense-turbo[postgres]'
    python examples/postgres_history.py postgresql://user@localhost/mydb
    AMRITA_SENSE_EXAMPLE_DSN=postgresql://user@localhost/mydb python examples/postgres_history.py

An article goes through `draft`, waits for an editor at `SUSPEND`, then `decide`s on the editor's
answer (sent through the stream's reverse channel) and `settle`s. With `history=True` the store
keeps every checkpoint of the run, not only the latest, so the run can go back to the moment it
was parked and be decided again (time travel), or be copied from there into a new run (a fork)
while the original and its history stay as they were. The tables live in their own schema; the
script deletes its runs at the end.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import sys
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from amrita_sense import SUSPEND, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import Checkpointing, Keyring, inspect_snapshot
from amrita_sense.streaming import SuspendObjectStream

KEYS = Keyring.generate()  # a deployment loads its keys (Keyring.from_env) so that every process has them

if TYPE_CHECKING:
    from amrita_sense.durable import PostgresCheckpointStore


@dataclass
class Article:
    """The run's state: stored with every checkpoint by the pickle codec."""

    title: str
    status: str = "new"
    log: list[str] = field(default_factory=list)


@Node(wrap_to_async=False)
def draft(article: Article) -> None:
    article.status = "waiting for the editor"
    article.log.append("drafted")


@Node(wrap_to_async=False)
def decide(article: Article, pc: WorkflowInterpreter) -> None:
    answers = pc.object_io.drain_producer_input()  # what the editor sent before the run went on
    article.status = "published" if answers and answers[-1] == "approve" else "rejected"
    article.log.append(f"editor: {answers[-1] if answers else 'no answer'}")


@Node(wrap_to_async=False)
def settle(article: Article) -> None:
    article.log.append(article.status)
    print(f"  {article.title}: {article.status} ({', '.join(article.log)})")


def build_graph():
    return NodeCompose(draft, SUSPEND, decide, settle).render()


async def answer(store: PostgresCheckpointStore, run_id: str, decision: str, version: int | None = None) -> None:
    """Resume the run (its latest checkpoint, or history entry `version`) with the editor's decision."""
    stream = SuspendObjectStream[str]()
    await stream.send_to_producer(decision)
    policy = Checkpointing(store, run_id, codec=pickle, history=True, keyring=KEYS)
    interp = await policy.resume(build_graph(), version=version, object_io=stream)
    await interp.run()


def show_history(store: PostgresCheckpointStore, run_id: str) -> None:
    entries = store.history(run_id)  # CheckpointRecord, oldest first
    print(f"{run_id}: {len(entries)} history entries")
    for record in entries:
        info = inspect_snapshot(store.load(run_id, version=record.version).data)
        print(f"  version {record.version}: {record.status:<9} pointer={info.pointer}")


async def main(dsn: str) -> None:
    from amrita_sense.durable import PostgresCheckpointStore  # imported on use: it needs psycopg

    run_id = f"article-{uuid.uuid4().hex[:8]}"
    fork_id = f"{run_id}-what-if"
    with PostgresCheckpointStore(dsn, schema="amrita_sense_example") as store:
        try:
            # 1. Start the run; it checkpoints after every node and parks at SUSPEND.
            interp: WorkflowInterpreter[Any] = WorkflowInterpreter(
                build_graph(), extra_args=(Article("Threads and loops"),)
            )
            interp.checkpointing = Checkpointing(store, run_id, codec=pickle, history=True, keyring=KEYS)
            await interp.run()
            parked = store.load(run_id).record
            print(f"{run_id}: parked at version {parked.version} ({parked.status})")

            # 2. The editor approves: the run goes on from its latest checkpoint and finishes.
            print("editor approves:")
            await answer(store, run_id, "approve")
            show_history(store, run_id)

            # 3. Time travel: back to the parked entry, decided again; the history stays one line.
            print(f"time travel to version {parked.version}, editor rejects:")
            await answer(store, run_id, "reject", version=parked.version)
            latest, entries = store.load(run_id).record, store.history(run_id)
            print(f"{run_id}: latest is version {latest.version} ({latest.status}), {len(entries)} entries")

            # 4. Fork: a new run from the parked entry; the source and its history are untouched.
            forked = store.fork(run_id, parked.version, fork_id)
            print(f"{fork_id}: forked from {forked.forked_from} (version {forked.version})")
            await answer(store, fork_id, "approve")
            print(f"{run_id}: still {len(store.history(run_id))} entries; {fork_id}: {len(store.history(fork_id))}")
        finally:
            for name in (run_id, fork_id):
                store.delete(name)


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("AMRITA_SENSE_EXAMPLE_DSN")
    if not target:
        print("usage: postgres_history.py DSN (or set AMRITA_SENSE_EXAMPLE_DSN)", file=sys.stderr)
        sys.exit(2)
    asyncio.run(main(target))
