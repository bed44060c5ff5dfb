"""Move a parked run onto a new deploy: the graph gained a node while the run waited.

    python examples/migrate_parked_run.py

Version 1 of an order workflow is `receive`, then `SUSPEND` (waiting for payment), then `ship`.
A run parks there and is saved to an SQLite file. Version 2 inserts `audit` before the parking
point and `fraud_check` after it. A plain restore refuses the old snapshot (`GraphMismatch`: it
is another graph); `plan_migration` is the deploy pipeline's dry run (where each address of the
parked run would land), and `Checkpointing.resume(..., migrate=True)` moves the run onto v2: the
node inserted after the pointer runs, the one inserted before it does not.
"""

from __future__ import annotations

import asyncio
import pickle
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amrita_sense import SUSPEND, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import Checkpointing, GraphMismatch, Keyring, SQLiteCheckpointStore, plan_migration

KEYS = Keyring.generate()  # a deployment loads its keys (Keyring.from_env) so that every process has them


@dataclass
class Order:
    number: int
    steps: list[str] = field(default_factory=list)


@Node(wrap_to_async=False)
def receive(order: Order) -> None:
    order.steps.append("receive")


@Node(wrap_to_async=False)
def audit(order: Order) -> None:  # new in v2, before the parking point
    order.steps.append("audit")


@Node(wrap_to_async=False)
def fraud_check(order: Order) -> None:  # new in v2, after the parking point
    order.steps.append("fraud_check")


@Node(wrap_to_async=False)
def ship(order: Order) -> None:
    order.steps.append("ship")
    print(f"order {order.number} finished on v2: {' > '.join(order.steps)}")


def graph_v1():
    return NodeCompose(receive, SUSPEND, ship).render()


def graph_v2():
    return NodeCompose(receive, audit, SUSPEND, fraud_check, ship).render()


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder, SQLiteCheckpointStore(str(Path(folder) / "runs.db")) as store:
        # Deploy v1: the run parks at SUSPEND, and its checkpoint is in the store.
        interp: WorkflowInterpreter[Any] = WorkflowInterpreter(graph_v1(), extra_args=(Order(1001),))
        interp.checkpointing = Checkpointing(store, "order-1001", codec=pickle, keyring=KEYS)
        await interp.run()
        print("halted runs on v1:", [record.run_id for record in store.list(status="halted")])

        # Deploy v2. A plain restore refuses the snapshot of another graph.
        new_graph = graph_v2()
        data = store.load("order-1001").data
        try:
            checked_by = KEYS.bound_to("order-1001", store.load("order-1001").record.version)
            WorkflowInterpreter.restore(new_graph, data, codec=pickle, keyring=checked_by)
        except GraphMismatch as exc:
            print(f"plain restore refused: {type(exc).__name__}: {exc}")

        # The dry run: every parked run either has a plan or raises GraphMismatch, nothing restored.
        for record in store.list(status="halted"):
            plan = plan_migration(new_graph, store.load(record.run_id).data)
            for slot, old, new in plan.moves:
                print(f"{record.run_id}: {slot} moves {list(old)} -> {list(new)}")

        # Move the run onto v2 and finish it there.
        interp = await Checkpointing(store, "order-1001", codec=pickle, keyring=KEYS).resume(new_graph, migrate=True)
        await interp.run()
        print("order-1001 is now", store.load("order-1001").record.status)


if __name__ == "__main__":
    asyncio.run(main())
