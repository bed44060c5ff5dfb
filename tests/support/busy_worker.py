"""The old run of the interrupt test (tests/test_durable_busy.py), in a process of its own.

    python tests/support/busy_worker.py DATABASE RELEASE DURABILITY LOOP

Starts run "chat" of graph "old": `one`, then `gate`, then `two`, `three`. After its first save it
prints `saved <version>`; `gate` prints `gate` and waits until the file RELEASE exists (the test
takes the run id over meanwhile). The run must stop by itself at its next save: the process prints
`interrupted <run id> <version>` for a `RunInterrupted` and exits with 0, `finished` if the run
ended, and `error <type> <message>` (exit 1) for anything else. Every save prints `saved <version>`.
DATABASE is an SQLite file path, or `DSN|SCHEMA` for a Postgres store.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import Checkpointing, RunInterrupted, SQLiteCheckpointStore


def open_store(database: str) -> Any:
    if "|" in database:
        from amrita_sense.durable import PostgresCheckpointStore

        dsn, schema = database.split("|")
        return PostgresCheckpointStore(dsn, schema=schema)
    return SQLiteCheckpointStore(database)


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


@Node()
async def one() -> None:
    say("node one")


@Node()
async def gate() -> None:
    say("gate")
    while not os.path.exists(os.environ["BUSY_RELEASE"]):
        await asyncio.sleep(0.02)


@Node()
async def two() -> None:
    say("node two")


@Node()
async def three() -> None:
    say("node three")


def build() -> Any:
    return NodeCompose(one, gate, two, three).render()


async def old(database: str, durability: str) -> int:
    interp = WorkflowInterpreter(build())
    interp.checkpointing = Checkpointing(
        open_store(database),
        "chat",
        graph="old",
        durability=durability,
        history=True,
        on_saved=lambda record: say(f"saved {record.version}"),
    )
    try:
        await interp.run()
    except RunInterrupted as exc:
        say(f"interrupted {exc.run_id} {exc.version}")
        return 0
    except Exception as exc:
        say(f"error {type(exc).__name__} {exc}")
        return 1
    say("finished")
    return 0


def main(argv: list[str]) -> int:
    database, release, durability, loop = argv
    os.environ["BUSY_RELEASE"] = release
    if loop == "uvloop":
        import uvloop

        runner = uvloop.new_event_loop()
    else:
        runner = asyncio.new_event_loop()
    try:
        return runner.run_until_complete(old(database, durability))
    finally:
        runner.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
