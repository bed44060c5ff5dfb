"""Scale-out on Ray: many workflow runs across processes and machines (extra `[ray]`).

For example::

    import ray
    from amrita_sense.distributed import SensePool, RunSetup

    ray.init(num_cpus=4)                        # or ray.init(address="auto") on a cluster
    def setup(question):                        # runs on the worker, for every run
        ctx = Context(question, client=make_client())
        return RunSetup(args=(ctx,), result=lambda ctx: ctx.answer, close=ctx.client.close)

    with SensePool(workers=4, checkpoint_store=SQLiteCheckpointStore("/shared/runs.db")) as pool:
        agent = pool.workflow(graph, setup)     # pickled and checked here, shipped once per worker
        handle = agent.submit("hello")          # a RunHandle
        print(handle.result())                  # or: await handle
        for answer in agent.map(questions, progress=True):
            ...

A pool is a set of Ray async actors (`SenseWorker`); each runs many
interpreters concurrently on its own event loop. A graph is pickled once
(`NotPicklable` names the node that cannot travel) and fetched by each worker
on its first run, identified by its fingerprint (`graph_fingerprint`). The
injection pools are built on the worker by the workflow's setup factory from
the run's input, so clients and connections never travel.

A worker that dies takes no run with it: with a checkpoint store every run
keeps checkpoints (issue 16's `Checkpointing`) and resumes on another worker
from its last one; without one a run is reported lost (`WorkerDied`) unless
`restart_lost=True`. See the README ("Scale-out on Ray") for the rules.

Importing this module imports Ray; `import amrita_sense` never does.
"""

from __future__ import annotations

try:
    import ray  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised by the no-Ray test run
    raise ImportError("amrita_sense.distributed needs Ray: pip install 'amrita-sense-turbo[ray]'") from exc

from amrita_sense.distributed._bridge import Reply
from amrita_sense.distributed.errors import (
    DistributedError,
    NotPicklable,
    PoolClosed,
    RunCancelled,
    RunEnded,
    RunFailed,
    RunPanicked,
    WorkerDied,
)
from amrita_sense.distributed.outcome import STATUSES, RunOutcome, RunSetup
from amrita_sense.distributed.pool import RemoteWorkflow, RunHandle, RunStream, SensePool
from amrita_sense.distributed.worker import SenseWorker

__all__ = [
    "STATUSES",
    "DistributedError",
    "NotPicklable",
    "PoolClosed",
    "RemoteWorkflow",
    "Reply",
    "RunCancelled",
    "RunEnded",
    "RunFailed",
    "RunHandle",
    "RunOutcome",
    "RunPanicked",
    "RunSetup",
    "RunStream",
    "SensePool",
    "SenseWorker",
    "WorkerDied",
]
