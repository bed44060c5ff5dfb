"""A workflow process for the kill test: runs a program with a checkpoint after every node.

    python tests/support/durable_worker.py SPEC_FILE DATABASE RUN_ID TRACE_FILE DELAY LOOP

SPEC_FILE holds a program spec (a Python literal, see `durable_programs`). The
process resumes RUN_ID from the SQLite DATABASE when a checkpoint exists, else
starts the program, and runs it to its end. Every node appends its name to
TRACE_FILE; after every saved checkpoint the line `#<version>` follows; the
process starts with the line `!start`. It prints `started` once it is about to
run, and `done` at the end. The core is chosen by the environment as usual; LOOP is
asyncio or uvloop.
"""

from __future__ import annotations

import ast
import asyncio
import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: `support` and the test modules

from amrita_sense import WorkflowInterpreter  # noqa: E402
from amrita_sense.durable import Checkpointing, CheckpointNotFound, SQLiteCheckpointStore  # noqa: E402
from support.durable_programs import CONTINUING, RunState, StateBuilder, drive, passthrough  # noqa: E402
from support.durable_support import KEYS  # noqa: E402
from support.worker_support import ThisPackage  # noqa: E402


async def main(spec: dict, database: str, run_id: str, sink: str, delay: float) -> None:
    graph = StateBuilder(ThisPackage(), spec).program().render()
    middleware = passthrough if spec["middleware"] else None
    current: list[RunState] = []
    policy = Checkpointing(
        SQLiteCheckpointStore(database),
        run_id,
        codec=pickle,
        keyring=KEYS,
        on_saved=lambda r: current[0].write(f"#{r.version}"),
    )
    try:
        interp = await policy.resume(graph, middleware=middleware)
        state, continuing = interp._ava_args_v[1], policy.last.status in CONTINUING
    except CheckpointNotFound:
        state, continuing = RunState(), False
        interp = WorkflowInterpreter(graph, extra_args=(state,), middleware=middleware)
        interp.checkpointing = policy
    state.sink, state.delay = sink, delay
    current.append(state)
    state.write("!start")
    print("started", flush=True)
    await drive(interp, state, continuing=continuing)
    print("done", flush=True)


if __name__ == "__main__":
    spec_file, database, run_id, sink, delay, loop_name = sys.argv[1:7]
    if loop_name == "uvloop":
        import uvloop

        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    spec = ast.literal_eval(Path(spec_file).read_text())
    loop.run_until_complete(main(spec, database, run_id, sink, float(delay)))
    loop.close()
