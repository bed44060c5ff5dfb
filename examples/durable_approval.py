"""Human in the loop across a restart: a workflow waits for a person, the process exits, another resumes it.

    PYTHONPATH=src python examples/durable_approval.py                       # the whole story, two processes
    PYTHONPATH=src python examples/durable_approval.py start runs.db exp-7 420
    PYTHONPATH=src python examples/durable_approval.py list runs.db
    PYTHONPATH=src python examples/durable_approval.py answer runs.db exp-7 approve

An expense report is a workflow: `draft` it, `await_decision` from a person,
`settle` it. `start` runs it with automatic checkpoints into an SQLite file and
asks the stream to park the run at `await_decision`; the checkpointer saves the
run as it parks there, and the process exits: nobody has to stay up waiting.
When the person answers (maybe days later, from another machine sharing the
file), `answer` restores the run from the store in a fresh process, hands it the
answer through the stream's reverse channel, and runs it to its end.

The report itself (an injected `Expense` object) travels with the checkpoint
through the `pickle` codec, so its log shows both processes at work.
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
from amrita_sense.durable import Checkpointing, Keyring, SQLiteCheckpointStore
from amrita_sense.streaming import SuspendObjectStream

DECISION_POINT = "NodeSuspend::await_decision"


def keyring() -> Keyring:
    """The keys every process of the deployment signs and checks its checkpoints with: from
    APPROVAL_KEYS (`id:base64-secret`, the current key first), else a demo key for this example only."""
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


@Node()
async def await_decision(expense: Expense, pc: WorkflowInterpreter) -> None:
    answers = pc.object_io.drain_producer_input()
    decision = answers[-1] if answers else "reject"
    expense.status = "approved" if decision == "approve" else "rejected"
    expense.note(f"decision: {decision}")


@Node(wrap_to_async=False)
def settle(expense: Expense) -> None:
    expense.note("paid out" if expense.status == "approved" else "closed without payment")


def build_graph():
    """The same source renders the same graph (same fingerprint) in every process."""
    return NodeCompose(draft, await_decision, settle).render()


async def start(database: str, run_id: str, amount: int) -> None:
    """Run a new report until it waits for the person, then leave (the checkpoint keeps it)."""
    stream = SuspendObjectStream[str]()
    interp = WorkflowInterpreter(build_graph(), object_io=stream, extra_args=(Expense(amount),))
    interp.checkpointing = Checkpointing(SQLiteCheckpointStore(database), run_id, codec=pickle, keyring=keyring())
    parked = asyncio.ensure_future(stream.wait_to_suspend(DECISION_POINT))
    await asyncio.sleep(0)
    run = asyncio.ensure_future(interp.run())
    await asyncio.wait({parked, run}, return_when=asyncio.FIRST_COMPLETED)
    run.cancel()  # the process is about to exit; the saved checkpoint is the run now
    await asyncio.gather(run, return_exceptions=True)
    print(f"{run_id}: waiting for a decision (saved)")


async def answer(database: str, run_id: str, decision: str) -> Expense:
    """Resume the report in this process with the person's decision and run it to its end."""
    stream = SuspendObjectStream[str]()
    await stream.send_to_producer(decision)  # read by await_decision when it runs
    policy = Checkpointing(SQLiteCheckpointStore(database), run_id, codec=pickle, keyring=keyring())
    interp = await policy.resume(build_graph(), object_io=stream)
    await interp.run()
    expense = interp._ava_args[1]
    print(f"{run_id}: {expense.status}")
    for line in expense.log:
        print("  " + line)
    return expense


def list_runs(database: str) -> None:
    for record in SQLiteCheckpointStore(database).list():
        print(f"{record.run_id}: {record.status} (checkpoint {record.version}, {record.size} bytes)")


def demo() -> None:
    """Start a report in one process, answer it in another."""
    with tempfile.TemporaryDirectory() as folder:
        database = str(Path(folder) / "runs.db")
        me = [sys.executable, __file__]
        for step in (["start", database, "exp-7", "420"], ["list", database], ["answer", database, "exp-7", "approve"]):
            print(f"$ durable_approval.py {step[0]} ...")
            subprocess.run([*me, *step], check=True)


def main(argv: list[str]) -> None:
    if not argv:
        demo()
    elif argv[0] == "start":
        asyncio.run(start(argv[1], argv[2], int(argv[3])))
    elif argv[0] == "answer":
        asyncio.run(answer(argv[1], argv[2], argv[3]))
    elif argv[0] == "list":
        list_runs(argv[1])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
