"""What a run needs on its worker (`RunSetup`) and how it ended (`RunOutcome`); no Ray needed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from amrita_sense.distributed.errors import RunCancelled, RunFailed, RunPanicked, WorkerDied

FINISHED, HALTED, PANICKED, CANCELLED, ERROR, LOST = "finished", "halted", "panicked", "cancelled", "error", "lost"
STATUSES = (FINISHED, HALTED, PANICKED, CANCELLED, ERROR, LOST)


@dataclass
class RunSetup:
    """What one run gets on its worker; the workflow's setup factory builds it from the run's input.

    Args:
        args: the interpreter's `extra_args` (injected by type, as locally).
        kwargs: its `extra_kwargs` (injected by name).
        object_io: the run's `SuspendObjectStream` (a fresh default one when None).
        result: computes the run's result when it ends (finished or halted), called on the worker as
            `result(*args, **kwargs)` with the interpreter's pools (a resumed run's, see the README).
            None: the result is None.
        close: called (and awaited if it returns an awaitable) after the run, however it ended:
            release what the factory opened (a client, a connection).

    Nothing here travels: the factory runs on the worker, so clients and connections stay there. The
    factory may be a coroutine function (a sync one runs on the worker's event loop: keep it short).
    """

    args: tuple = ()
    kwargs: dict[str, Any] | None = None
    object_io: Any = None
    result: Callable[..., Any] | None = None
    close: Callable[[], Any] | None = None


def _the_input(value: Any) -> Any:
    return value


def default_setup(value: Any) -> RunSetup:
    """The setup of a workflow registered without a factory: the input is the one extra argument,
    and the result is that object after the run (nodes may have changed it)."""
    return RunSetup(args=(value,), result=_the_input)


def as_setup(value: Any) -> RunSetup:
    """A factory's return value as a `RunSetup`: a RunSetup, a tuple (extra_args), a dict (extra_kwargs) or None."""
    if isinstance(value, RunSetup):
        return value
    if value is None:
        return RunSetup()
    if isinstance(value, tuple):
        return RunSetup(args=value)
    if isinstance(value, dict):
        return RunSetup(kwargs=value)
    raise TypeError(
        f"a setup factory returns a RunSetup, a tuple (extra_args), a dict (extra_kwargs) or None, "
        f"not {type(value).__name__}"
    )


class Unshippable:
    """Stands in a streamed batch for an item that could not be pickled; the stream raises `error` there."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


@dataclass
class RunOutcome:
    """How a run ended.

    `status` is one of: ``finished`` (the workflow ran to its end, or a RESET ended it),
    ``halted`` (SUSPEND / `InterruptKeepContext` stopped it; `snapshot` continues it),
    ``panicked`` (the workflow raised: `exception`, `traceback`, `sense_traceback`; `snapshot`
    holds the panicked state), ``cancelled``, ``error`` (the setup factory, the `result`
    callable or shipping a value failed: `exception`) or ``lost`` (its worker died and it could not
    continue: `exception` is Ray's actor error, `extra["reason"]` says why it was not resumed).
    """

    run_id: str
    status: str
    result: Any = None
    exception: BaseException | None = None
    traceback: str = ""
    sense_traceback: str = ""
    output: list[Any] | None = None
    """What the run sent to its stream (`yield_response` / `push_object`), when it was not streamed."""
    snapshot: bytes | None = None
    """The run's state when it halted or panicked: `submit(..., resume_from=outcome.snapshot)` continues it."""
    attempts: int = 1
    """How many times the run was started or resumed on a worker."""
    worker: str = ""
    """The worker it ended on (index, generation, process id, node address)."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the run finished or halted (what `result()` returns for)."""
        return self.status in (FINISHED, HALTED)

    def error(self) -> RunFailed | None:
        """The typed error `RunHandle.result()` raises for this outcome (None when `ok`)."""
        if self.ok:
            return None
        if self.status == PANICKED:
            exc = self.exception
            return RunPanicked(f"run {self.run_id!r} panicked: {type(exc).__name__}: {exc}", self)
        if self.status == CANCELLED:
            return RunCancelled(f"run {self.run_id!r} was cancelled", self)
        if self.status == LOST:
            return WorkerDied(self.extra.get("reason") or f"run {self.run_id!r} was lost with its worker", self)
        return RunFailed(f"run {self.run_id!r} failed: {self.exception!r}", self)

    def unwrap(self) -> Any:
        """The result, or the typed error raised (chained to the run's exception)."""
        error = self.error()
        if error is None:
            return self.result
        raise error from self.exception
