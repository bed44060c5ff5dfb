"""Where a run observer (the telemetry of `amrita_sense.telemetry`) plugs into the runtime.

The runtime and the services below telemetry (checkpoints, policies, snapshots) call the one
installed `RunObserver` at a few points: a run begins and ends, a gate parks and resumes, an
outside call interrupts a run, a checkpoint is saved, a policy acts, a snapshot is taken or
restored. With no observer installed (`current` is None) each point costs one test; the step loop
and the compiled loop are the ones they are without it. Everything here imports nothing above
the runtime, so telemetry depends on the runtime and never the other way round.
"""

from __future__ import annotations

import threading
from typing import Any


class RunObserver:
    """What an observer of runs is told; the defaults ignore everything. Calls come from the run's
    own task, and a method must never raise (a failure to observe must not change the run)."""

    __slots__ = ()

    def node_steps(self, interp: Any) -> Any:
        """The step hooks a run of `interp` goes through its general step loop with (an object with
        `run_step(interp)`, see `runtime.steps`), or None: the run keeps the compiled loop."""
        return None

    def run_begun(self, interp: Any, recovered: bool) -> None:
        """`interp`'s run holds its claim (`recovered`: it started from a recorded panic)."""

    def run_over(self, interp: Any, outcome: BaseException | None) -> None:
        """`interp`'s run ended with `outcome` (None: it finished). May come twice for one run, or
        for a run that began before the observer was installed."""

    def event(self, interp: Any, name: str, attributes: dict[str, Any]) -> None:
        """Something happened to `interp`'s run: `name` is one of the `EVENT_*` names."""

    def checkpoint_saved(self, interp: Any, record: Any, seconds: float) -> None:
        """A checkpoint of `interp`'s run was stored as `record`, in `seconds`."""

    def trace_carrier(self, interp: Any) -> dict[str, str] | None:
        """What a snapshot of `interp` carries of its trace (plain strings), or None."""
        return None

    def carry_trace(self, interp: Any, carrier: dict[str, str], replace: bool = True) -> None:
        """`interp`'s next run continues `carrier` (a snapshot's, or a caller's from `caller_carrier`);
        with `replace=False` only when it carries nothing yet."""

    def caller_carrier(self) -> dict[str, str] | None:
        """The calling code's current trace as a carrier (`{"parent": traceparent}`), for a run
        handed to another process (`SensePool`), or None."""
        return None


EVENT_SUSPEND = "amrita_sense.suspend"
EVENT_RESUME = "amrita_sense.resume"
EVENT_INTERRUPT = "amrita_sense.interrupt"
EVENT_POLICY = "amrita_sense.policy"

current: RunObserver | None = None
"""The installed observer, or None (read it once per use: another thread may swap it)."""
# threads: read without a lock (one load; a run may see the old observer or the new one); written only
# by `install` / `install_if`, under `_install_lock`, so two swaps never both return the same previous one
_install_lock = threading.Lock()


def _check(observer: RunObserver | None) -> None:
    if observer is not None and not isinstance(observer, RunObserver):
        raise TypeError(f"install(observer) takes a RunObserver or None, not {type(observer).__name__}")


def install(observer: RunObserver | None) -> RunObserver | None:
    """Install `observer` (None: none); returns the one it replaced."""
    global current
    _check(observer)
    with _install_lock:
        previous, current = current, observer
    return previous


def install_if(expected: RunObserver | None, observer: RunObserver | None) -> bool:
    """Install `observer` only while `expected` is the installed one (a compare-and-swap); whether it did."""
    global current
    _check(observer)
    with _install_lock:
        if current is not expected:
            return False
        current = observer
    return True
