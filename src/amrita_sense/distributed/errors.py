"""The exceptions of scale-out runs (importable without Ray).

DistributedError
|-- NotPicklable            a graph, setup factory, input or value cannot be shipped (also a TypeError)
|-- PoolClosed              the pool was closed
|-- RunEnded                a request reached a run that has already ended
`-- RunFailed               a run did not finish; `outcome` says how it ended
    |-- RunPanicked             the workflow raised (the panic record and the exception)
    |-- RunCancelled            the run was cancelled
    `-- WorkerDied              its worker died and the run could not be resumed
"""

from __future__ import annotations

from typing import Any


class DistributedError(Exception):
    """Base class of every error of `amrita_sense.distributed`."""


class NotPicklable(DistributedError, TypeError):
    """Something that must travel to a worker cannot be pickled.

    `what` names it (for a graph node: its address, class and function, and
    the attribute or closure variable that failed); `reason` is the pickling error.
    """

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"{what} cannot be pickled to ship it to a worker: {reason}")
        self.what = what
        self.reason = reason

    def __reduce__(self) -> tuple:
        return type(self), (self.what, self.reason)


class PoolClosed(DistributedError):
    """The pool was closed: it accepts no more runs or requests."""


class RunEnded(DistributedError):
    """A request (send, suspend, snapshot...) reached a run that has already ended."""


class RunFailed(DistributedError):
    """A run ended without finishing; `outcome` is its `RunOutcome`."""

    def __init__(self, message: str, outcome: Any = None) -> None:
        super().__init__(message)
        self.outcome = outcome

    @property
    def run_id(self) -> str | None:
        return getattr(self.outcome, "run_id", None)


class RunPanicked(RunFailed):
    """The workflow raised. `exception` is the exception (a `RestoredPanic` when it could not
    travel back), `traceback` its formatted traceback on the worker, `sense_traceback` the
    interpreter's own traceback (return and context stacks, failing node)."""

    @property
    def exception(self) -> BaseException | None:
        return getattr(self.outcome, "exception", None)

    @property
    def traceback(self) -> str:
        return getattr(self.outcome, "traceback", "")

    @property
    def sense_traceback(self) -> str:
        return getattr(self.outcome, "sense_traceback", "")


class RunCancelled(RunFailed):
    """The run was cancelled (`RunHandle.cancel()`, a closed pool or a closed fan-out)."""


class WorkerDied(RunFailed):
    """The run's worker died and the run could not continue elsewhere: the pool has no checkpoint
    store (and does not restart lost runs), its checkpoint could not be restored, or it was lost
    `attempts` times (see `SensePool(max_attempts=...)`)."""


__all__ = [
    "DistributedError",
    "NotPicklable",
    "PoolClosed",
    "RunCancelled",
    "RunEnded",
    "RunFailed",
    "RunPanicked",
    "WorkerDied",
]
