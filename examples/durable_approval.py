"""Human in the loop across a restart: a workflow waits for a person, the process exits, a waker in
another process resumes it when the answer arrives.

    PYTHONPATH=src python examples/durable_approval.py                       # the whole story, four processes
    PYTHONPATH=src python examples/durable_approval.py start runs.db exp-7 420
    PYTHONPATH=src python examples/durable_approval.py list runs.db
    PYTHONPATH=src python examples/durable_approval.py answer runs.db exp-7 approve
    PYTHONPATH=src python examples/durable_approval.py wake runs.db

An expense report is a workflow: `draft` it, `WAIT` for a decision, `settle` it. `start` runs it
with checkpoints into an SQLite file under the graph name "approval"; at the WAIT the run is saved
as "waiting" and `run()` returns: the process exits, nobody stays up waiting. `answer` (maybe days
later, from another machine sharing the file) sends the decision to the run: `store.send`, one
line. A waker (`wake` here; in a deployment `python -m amrita_sense worker --store runs.db --graph
approval=durable_approval:build_graph --codec pickle --keys-env APPROVAL_KEYS`) finds the run due,
resumes it from its checkpoint with the decision injected as a `Message`, and runs it to its end,
exactly once however many wakers share the file.

The report itself (an injected `Expense` object) travels with the checkpoints through the `pickle`
codec, signed with the deployment's keys, so its log shows the processes at work.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import WAIT, Checkpointing, Keyring, Message, SQLiteCheckpointStore, Waker

GRAPH = "approval"


def keyring() -> Keyring:
    """The keys every process of the deployment signs and checks its checkpoints and messages with:
    from APPROVAL_KEYS (`id:base64-secret`, the current key first), else a demo key for this example only."""
    if os.environ.get("APPROVAL_KEYS"):
        return Keyring.from_env("APPROVAL_KEYS")
    return Keyring({"demo": b"a demo key: set APPROVAL_KEYS in a deployment"})


@dataclass
class Expense:
    """The report the workflow works on (user state: stored with each checkpoint by the codec)."""

    amount: int
    log: list[str] = field(default_factory=list)
    status: str = "new"

    def note(self, event: str) -> None:
        self.log.append(f"[pid {os.getpid()}] {event}")


@Node(wrap_to_async=False)
def draft(expense: Expense) -> None:
    expense.status = "waiting for a decision"
    expense.note(f"drafted a report of {expense.amount}")


@Node(wrap_to_async=False)
def decide(expense: Expense, decision: Message) -> None:
    expense.status = "approved" if decision.payload == "approve" else "rejected"
    expense.note(f"decision: {decision.payload}")


@Node(wrap_to_async=False)
def settle(expense: Expense, pc: WorkflowInterpreter) -> None:
    expense.note("paid out" if expense.status == "approved" else "closed without payment")
    print(f"{pc.checkpointing.run_id}: {expense.status}")
    for line in expense.log:
        print("  " + line)


def build_graph():
    """The same source renders the same graph (same fingerprint) in every process."""
    return NodeCompose(draft, WAIT("decision"), decide, settle).render()


async def start(database: str, run_id: str, amount: int) -> None:
    """Run a new report until it waits for the person; `run()` returns once it is saved there."""
    interp = WorkflowInterpreter(build_graph(), extra_args=(Expense(amount),))
    store = SQLiteCheckpointStore(database)
    interp.checkpointing = Checkpointing(store, run_id, codec=pickle, keyring=keyring(), graph=GRAPH)
    await interp.run()
    print(f"{run_id}: waiting for a decision (saved)")


def answer(database: str, run_id: str, decision: str) -> None:
    """Send the person's decision to the run (kept in the store until a waker delivers it)."""
    SQLiteCheckpointStore(database).send(run_id, "decision", decision, keyring=keyring())
    print(f"{run_id}: decision sent")


async def wake(database: str) -> None:
    """A waker: resume every run that is due (the report, once its decision arrived)."""
    waker = Waker(SQLiteCheckpointStore(database), {GRAPH: build_graph}, codec=pickle, keyring=keyring())
    resumed = await waker.run_once()
    print(f"woke {resumed} run(s)")


def list_runs(database: str) -> None:
    for record in SQLiteCheckpointStore(database).list():
        print(f"{record.run_id}: {record.status} (checkpoint {record.version}, {record.size} bytes)")


def demo() -> None:
    """Start a report in one process, answer it from a second, let a waker in a third finish it."""
    with tempfile.TemporaryDirectory() as folder:
        database = str(Path(folder) / "runs.db")
        me = [sys.executable, __file__]
        steps = (
            ["start", database, "exp-7", "420"],
            ["list", database],
            ["answer", database, "exp-7", "approve"],
            ["wake", database],
            ["list", database],
        )
        for step in steps:
            print(f"$ durable_approval.py {step[0]} ...")
            subprocess.run([*me, *step], check=True)


def main(argv: list[str]) -> None:
    if not argv:
        demo()
    elif argv[0] == "start":
        asyncio.run(start(argv[1], argv[2], int(argv[3])))
    elif argv[0] == "answer":
        answer(argv[1], argv[2], argv[3])
    elif argv[0] == "wake":
        asyncio.run(wake(argv[1]))
    elif argv[0] == "list":
        list_runs(argv[1])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    # Run as the module `durable_approval`, not `__main__`: a graph's fingerprint names its nodes'
    # module, so every process (and `python -m amrita_sense worker --graph
    # approval=durable_approval:build_graph`) must import the nodes under the same name.
    import importlib

    importlib.import_module("durable_approval").main(sys.argv[1:])
