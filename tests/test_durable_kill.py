"""Kill test: a workflow process killed with SIGKILL at random moments resumes from its checkpoints.

Each random program (the differential instruction generator, see
`durable_programs`) runs in a worker process (`support/durable_worker.py`) that
checkpoints after every node into SQLite. The test kills it with SIGKILL at a
random moment, starts a new worker that resumes from the store (alternating the
compiled core and the pure build, on asyncio or uvloop), kills that one too, and so on, then lets a
last worker finish. The trace the workers wrote, joined, must equal the trace
of an uninterrupted run, except for the at-least-once rule: what a killed
worker did after its last saved checkpoint (part of the node that was running)
is done again by the next worker, so it must be a prefix of what comes next.

The CI version is a few programs; set AMRITA_SENSE_KILL_EXAMPLES (and
AMRITA_SENSE_KILL_ROUNDS) for a long run, e.g. 200 and 6.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from amrita_sense import WorkflowInterpreter
from amrita_sense.durable import CheckpointNotFound, SQLiteCheckpointStore, inspect_snapshot
from support.durable_programs import PROGRAMS, RunState, StateBuilder, drive, passthrough
from support.runtime_path import RUNTIME_DIR
from support.worker_support import ThisPackage

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "support" / "durable_worker.py"
EXAMPLES = int(os.environ.get("AMRITA_SENSE_KILL_EXAMPLES", "3"))
ROUNDS = int(os.environ.get("AMRITA_SENSE_KILL_ROUNDS", "3"))
LOOPS = ["asyncio", "uvloop"] if importlib.util.find_spec("uvloop") else ["asyncio"]
DELAY = 0.002  # seconds each node sleeps, so that kills land in the middle of runs
PER_NODE = DELAY + 0.002  # about what a node and its checkpoint take


def reference(spec: dict) -> list[str]:
    """The trace of an uninterrupted run (the plain step loop, no checkpoints)."""
    state = RunState()
    middleware = passthrough if spec["middleware"] else None
    graph = StateBuilder(ThisPackage(), spec).program().render()
    asyncio.run(drive(WorkflowInterpreter(graph, extra_args=(state,), middleware=middleware), state))
    return state.trace


def start_worker(spec_file: Path, db: Path, sink: Path, core: str, loop: str = "asyncio") -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=RUNTIME_DIR)
    env.pop("AMRITA_SENSE_REQUIRE_EXTENSIONS", None)
    if core == "python":
        env["AMRITA_SENSE_NO_EXTENSIONS"] = "1"
    else:
        env.pop("AMRITA_SENSE_NO_EXTENSIONS", None)
    args = [sys.executable, str(WORKER), str(spec_file), str(db), "run", str(sink), str(DELAY), loop]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stored_version(db: Path) -> int:
    """The run's checkpoint version (0: none); also checks the database and the snapshot are sound."""
    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    try:
        checkpoint = SQLiteCheckpointStore(db).load("run")
    except CheckpointNotFound:
        return 0
    inspect_snapshot(checkpoint.data)
    return checkpoint.record.version


def remaining(expected: list[str], sink: Path) -> int:
    """About how many entries are still to come (what the workers wrote so far counts as done)."""
    done = sum(1 for line in sink.read_text().splitlines() if line[:1] not in "#!") if sink.exists() else 0
    return max(1, len(expected) - done + 1)


def rounds_of(sink: Path) -> list[list[str]]:
    """The lines each worker wrote, worker by worker."""
    rounds: list[list[str]] = []
    for line in sink.read_text().splitlines():
        if line == "!start":
            rounds.append([])
        else:
            rounds[-1].append(line)
    return rounds


def committed_and_redone(lines: list[str], before: int, after: int) -> tuple[list[str], list[str]]:
    """A killed worker's entries up to its last saved checkpoint, and those after it."""
    entries = [line for line in lines if not line.startswith("#")]
    if after == before:
        return [], entries
    mark = f"#{after}"
    if mark not in lines:  # killed between the save and its mark: nothing ran after the save
        return entries, []
    cut = lines.index(mark)
    return [e for e in lines[:cut] if not e.startswith("#")], [e for e in lines[cut:] if not e.startswith("#")]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(spec=PROGRAMS, seed=st.integers(0, 2**32))
def test_killed_workers_resume_to_the_uninterrupted_trace(tmp_path_factory, spec, seed):
    try:
        expected = reference(spec)
    except Exception:  # noqa: BLE001 - specs the builder refuses
        assume(False)
    assume(len(expected) >= 3)
    rng = random.Random(seed)
    folder = tmp_path_factory.mktemp("kill")
    spec_file, db, sink = folder / "spec.txt", folder / "runs.db", folder / "trace.txt"
    spec_file.write_text(repr(spec))
    versions, finished = [0], False
    for index in range(ROUNDS):
        worker = start_worker(spec_file, db, sink, ("cython", "python")[index % 2], rng.choice(LOOPS))
        assert worker.stdout.readline().strip() == "started", worker.communicate()[1]
        try:
            worker.wait(rng.uniform(0, remaining(expected, sink) * PER_NODE))
            finished = True
        except subprocess.TimeoutExpired:
            worker.send_signal(signal.SIGKILL)
            worker.wait()
        versions.append(stored_version(db))
        if finished:
            assert worker.returncode == 0, worker.stderr.read()
            break
    if not finished:
        last = start_worker(spec_file, db, sink, "cython")
        out, err = last.communicate(timeout=120)
        assert last.returncode == 0 and out.split() == ["started", "done"], err
    rounds = rounds_of(sink)
    joined: list[str] = []
    for index, lines in enumerate(rounds[:-1]):
        committed, redone = committed_and_redone(lines, versions[index], versions[index + 1])
        joined += committed
        assert expected[len(joined) : len(joined) + len(redone)] == redone, f"worker {index} did what is not redone"
    joined += [line for line in rounds[-1] if not line.startswith("#")]
    assert joined == expected
