"""The general step loop: every run that is not the core's compiled loop (`_execute`) goes through
`step_loop`: `run_step_by()`, checkpointing, and the hooks that telemetry adds. (Node policies need
none: a policy node runs its attempts inside its own step, `amrita_sense.policies`; telemetry's node
spans run each step through the installed observer's `run_step`, `runtime.observe`.)

One step (semantics rule 13): the between-node gate (outside the lock), a pending stop, the lock,
enter (`_enter_step`: the pointer made, a halt resumed), run (`_run_current`: the middleware or
the node), yield the result (still under the lock), leave (`_leave_step`: advance unless a jump
moved the pointer), release the lock, then the hooks' `after_step`. The run around the steps is
claimed with a `RunMark` and ended on every way out, as `WorkflowInterpreter.run()` does.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from amrita_sense import core as _core
from amrita_sense.runtime import observe as _observe
from amrita_sense.runtime.types import RunMark

PC_CHECKPOINT: str = _core.PC_CHECKPOINT
"""The tag of the between-node gate (the core's compiled loop parks at the same one)."""

_STEP_END: Any = _core.STEP_END
_STEP_SKIPPED: Any = _core.STEP_SKIPPED
_ASK: Any = object()


class StepHooks:
    """What a caller adds to the general step loop; the defaults add nothing. One instance serves
    one run (it may keep counters for it)."""

    __slots__ = ()

    async def after_step(self, interp: Any) -> None:
        """After each step, with the lock released (where a checkpoint is a consistent state)."""

    def absorbs(self, interp: Any, exc: BaseException) -> bool:
        """Whether `exc` ends the run quietly (see `WorkflowInterpreter._absorbs`, which records a panic)."""
        return interp._absorbs(exc)

    async def after_run(self, interp: Any, outcome: BaseException | None) -> None:
        """After the run ended (lock freed, scope closed), with what ended it (None: it finished)."""


def node_steps(interp: Any) -> Any:
    """The installed observer's step hooks for a run of `interp` (None: no observer, or it wants none)."""
    observer = _observe.current
    return None if observer is None else observer.node_steps(interp)


async def step_loop(
    interp: Any, hooks: StepHooks | None = None, spans: Any = _ASK, yields: bool = True
) -> AsyncGenerator[Any, None]:
    """Run `interp` step by step, yielding each main-loop node's result (see the module docstring).
    `spans` runs each step (`spans.run_step(interp)`); by default the observer's `node_steps`.
    `yields=False`: for a caller that only drains the loop (`drain`): no step is yielded, the
    whole run is the generator's first `__anext__` (no async-generator round trip per step)."""
    if spans is _ASK:
        spans = node_steps(interp)
    mark = RunMark()
    try:  # both `try` lines come before the claim (a `try` line is outside its handlers)
        outcome: BaseException | None = None
        try:
            if not await interp._begin_run(mark):
                return
            # Right before the loop and inside this `try`: Python 3.11 looks up the handler of a
            # signal landing on the loop's back-edge at the instruction before the loop's head.
            lock = interp._interpret_lock
            while True:
                if interp._signal.pending:
                    await interp._gate(PC_CHECKPOINT)
                if interp._pending_stop:
                    interp._pending_stop = False
                    break
                await interp._take_lock()
                try:
                    state = interp._enter_step()
                    if state == _STEP_END:
                        break
                    if state == _STEP_SKIPPED:
                        continue
                    result = await (interp._run_current() if spans is None else spans.run_step(interp))
                    if yields:
                        interp._stepped = True
                        try:
                            yield result
                        finally:
                            interp._stepped = False
                    if not interp._leave_step():
                        break
                finally:
                    lock.async_release()
                # Not `if hooks is not None: await ...`: CPython 3.14 leaves the loop's back-edge after
                # such an `if` outside the handlers below (the compiler gap of python/cpython#130279's
                # family), so a KeyboardInterrupt from a signal landing there skipped the run's end.
                if hooks is None:
                    continue
                await hooks.after_step(interp)
        except BaseException as exc:
            outcome = exc
            if interp._claim_v is not mark:
                raise  # the run was never claimed (refused start): nothing of it is ours to route
            if not (interp._absorbs(exc) if hooks is None else hooks.absorbs(interp, exc)):
                raise
        finally:
            if interp._claim_v is mark:
                await interp._end_run(outcome)
                if hooks is not None:
                    await hooks.after_run(interp, outcome)
    except BaseException as exc:
        await interp._end_cut_run(mark, exc)
        raise


async def drain(interp: Any, hooks: StepHooks | None = None, spans: Any = _ASK) -> None:
    """Run `interp` to its end through `step_loop` without yielding its steps (`yields=False`); the
    loop is closed on every way out (what cut it short ends the run too)."""
    steps = step_loop(interp, hooks, spans, False)
    try:
        async for _ in steps:
            pass
    finally:
        await steps.aclose()
