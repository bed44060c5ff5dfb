"""Scale-out on Ray: runs of one workflow spread over a pool of worker processes.

    pip install 'amrita-sense-turbo[ray]'
    python examples/ray_scale_out.py

`ray.init()` starts a local Ray in this process (on a cluster: `ray.init(address="auto")`). The
pool starts two `SenseWorker` actors; `pool.workflow(graph, setup)` pickles the graph once (the
functions of this script travel by value) and each worker builds a fresh interpreter per run,
its pools made on the worker by `setup` from the run's input. With a checkpoint store, a run
whose worker dies resumes on another one from its last checkpoint.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

try:
    import ray
except ImportError:
    print("ray_scale_out.py needs Ray: pip install 'amrita-sense-turbo[ray]'", file=sys.stderr)
    sys.exit(2)

from amrita_sense import WHILE, Node, NodeCompose
from amrita_sense.distributed import RunSetup, SensePool
from amrita_sense.durable import SQLiteCheckpointStore


@dataclass
class Task:
    """One run's context, built on the worker from the run's input."""

    text: str
    words: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


@Node(wrap_to_async=False)
def split(task: Task) -> None:
    task.words = task.text.lower().split()


@Node()
async def fetch(task: Task) -> None:
    await asyncio.sleep(0.05)  # stands for an I/O call (a model, a database): the worker serves other runs meanwhile


@Node(wrap_to_async=False)
def words_left(task: Task) -> bool:
    return bool(task.words)


@Node(wrap_to_async=False)
def count_one(task: Task) -> None:
    word = task.words.pop()
    task.counts[word] = task.counts.get(word, 0) + 1


GRAPH = NodeCompose(fetch, split, WHILE(words_left).ACTION(count_one)).render()


def setup(text: str) -> RunSetup:
    """Runs on the worker for every run: the run's pools, and how to compute its result."""
    return RunSetup(args=(Task(text),), result=lambda task: max(task.counts, key=task.counts.__getitem__))


TEXTS = [
    "the cat saw the other cat",
    "to be or not to be",
    "a rose is a rose is a rose",
    "go go gadget",
    "one fish two fish red fish",
    "buffalo buffalo buffalo",
]


def main() -> None:
    ray.init(num_cpus=2, include_dashboard=False)  # a local Ray; leave out num_cpus to use every core
    try:
        with tempfile.TemporaryDirectory() as folder:
            store = SQLiteCheckpointStore(str(Path(folder) / "runs.db"))  # the workers share this file
            # The checkpoints carry each run's Task. This script's classes live in `__main__`, which a
            # worker cannot import, so plain pickle cannot write them there: cloudpickle writes them by
            # value. (With the workflow in an importable module, the default codec does.)
            options = {"codec": ray.cloudpickle}
            # runs_per_worker=2: a worker holds two runs at a time, so these few runs spread over both.
            with SensePool(2, runs_per_worker=2, checkpoint_store=store, checkpoint_options=options) as pool:
                words = pool.workflow(GRAPH, setup)
                handle = words.submit("hello hello world")
                print("one run:", handle.result(timeout=60))
                outcome = words.submit("spam spam eggs").outcome(timeout=60)
                print(f"its outcome: {outcome.status}, result {outcome.result!r}, attempts {outcome.attempts}")
                answers = list(words.map(TEXTS))  # in input order
                for text, answer in zip(TEXTS, answers):
                    print(f"  {text!r}: most frequent word {answer!r}")
                outcomes = list(words.map(TEXTS, outcomes=True))  # a RunOutcome per run, never raising
                for outcome in outcomes:
                    print(f"  {outcome.run_id[:8]}: {outcome.status} on {outcome.worker}")
                workers = {outcome.worker for outcome in outcomes}
                print(f"{len(outcomes)} runs finished on {len(workers)} worker(s)")
            store.close()
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
