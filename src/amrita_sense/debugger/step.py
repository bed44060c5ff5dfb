"""Stepping and continuing under the debugger.

The async commands (`step_async`, `step_over_async`, `step_out_async`,
`cont_async`) are for scripts and running event loops. The sync commands
(`step`, `step_over`, `step_out`, `cont`) are for the REPL: each runs its
async counterpart to completion and prints breakpoint hits, interrupts (Ctrl-C) and
node crashes instead of raising them.

A step runs exactly one main-loop node itself, the way one iteration of the
run loop would (checkpoint gate, pointer set-up, halt handling, the node
under the interpreter lock, then jump-or-advance), but with breakpoints
switched off. `cont` runs the interpreter until a breakpoint or the end.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from amrita_sense.debugger import code_disp
from amrita_sense.debugger._checks import require_interpreter
from amrita_sense.debugger.breakpoint import BreakpointHit, _get_state
from amrita_sense.exceptions import InterruptKeepContext, InterruptNotice
from amrita_sense.runtime.types import FLAG_HLT, Flags
from amrita_sense.runtime.workflow import PC_CHECKPOINT

if TYPE_CHECKING:
    from amrita_sense.runtime.workflow import WorkflowInterpreter


def _addr(inter: WorkflowInterpreter) -> list[int]:
    return list(inter._pointer.base_addr)


def _show(inter: WorkflowInterpreter) -> None:
    """Print the listing around the program counter when `code_disp.AUTO_DIS` is on; never raise."""
    if not code_disp.AUTO_DIS:
        return
    try:
        code_disp.dis(inter)
    except Exception as exc:
        print(f"⚠️  Disassembly unavailable: {exc!r}")


# ----- one node -------------------------------------------------------------------------


async def _prepare(inter: WorkflowInterpreter) -> bool:
    """The part of a loop iteration before the node; False when there is nothing to run."""
    inter._panic_exc = None
    await inter.object_io._wait_for_continue(PC_CHECKPOINT)
    if not inter._pointer:
        if not inter.get_graph():
            return False
        inter._pointer.append(0)
    if inter.flags & FLAG_HLT and not inter.resume_from_halt():
        return False
    return True


async def _run_node(inter: WorkflowInterpreter) -> InterruptNotice | None:
    """Run the node at the pointer under the lock, then jump or advance; an interrupt is returned."""
    async with inter._interpret_lock:
        try:
            if inter._middleware is not None:
                await inter._middleware(inter)
            else:
                await inter._call()
        except InterruptNotice as notice:
            return notice
        except Exception as exc:
            inter._panic_exc = exc
            raise
        if inter.jump_marked:
            inter.unmarkup()
        else:
            inter.advance_pointer()
    return None


def _settle_interrupt(inter: WorkflowInterpreter, notice: InterruptNotice) -> None:
    """What a run does with an interrupt: keep the context and halt, or reset."""
    if isinstance(notice, InterruptKeepContext):
        inter._flags = inter.flags | Flags.HLT
        print(f"⏸️  Suspended at: {_addr(inter)} (context kept)")
    else:
        inter.reset()
        print(f"⏹️  {notice}: interpreter reset")


async def _step_one(inter: WorkflowInterpreter) -> None:
    """Execute exactly one main-loop node."""
    if not await _prepare(inter):
        return
    notice = await _run_node(inter)
    if notice is not None:
        _settle_interrupt(inter, notice)


# ----- async API ------------------------------------------------------------------------


async def step_async(inter: WorkflowInterpreter, *, show: bool = True) -> None:
    """Run exactly one node, with breakpoints switched off.

    Args:
        inter: The interpreter to step.
        show: Print the listing around the new program counter afterwards
            (when `code_disp.AUTO_DIS` is on).

    A node that raises records the panic (see `inspect`) and the exception
    propagates.
    """
    require_interpreter(inter, "step_async")
    state = _get_state(inter)
    state.stepping = True
    state.resume_at = None
    try:
        await _step_one(inter)
    except BreakpointHit as hit:
        print(f"⏸️  Breakpoint (unexpected during step): {hit.bp}")
    except KeyboardInterrupt:
        print(f"⏸️  Stop at: {_addr(inter)}")
    finally:
        state.stepping = False
        if show:
            _show(inter)


async def step_over_async(inter: WorkflowInterpreter) -> None:
    """Step, then keep stepping while the return stack is deeper than it was (a CALL runs to its RET)."""
    require_interpreter(inter, "step_over_async")
    base_depth = len(inter._ret_addr_stack)
    try:
        await step_async(inter, show=False)
        while len(inter._ret_addr_stack) > base_depth and inter._pointer:
            await step_async(inter, show=False)
    except KeyboardInterrupt:
        print(f"⏸️  Stop at: {_addr(inter)}")
    finally:
        _show(inter)


async def step_out_async(inter: WorkflowInterpreter) -> None:
    """Step until the return stack is shallower than it was (the current routine returned) or the end."""
    require_interpreter(inter, "step_out_async")
    base_depth = len(inter._ret_addr_stack)
    try:
        while len(inter._ret_addr_stack) >= base_depth and inter._pointer:
            await step_async(inter, show=False)
    except KeyboardInterrupt:
        print(f"⏸️  Stop at: {_addr(inter)}")
    finally:
        _show(inter)


async def cont_async(inter: WorkflowInterpreter) -> None:
    """Run until a breakpoint stops the run or the workflow ends.

    A breakpoint stops before its node runs. The next `cont` runs that node
    once without stopping, so continuing always makes progress.
    """
    require_interpreter(inter, "cont_async")
    state = _get_state(inter)
    state.stepping = False
    try:
        await inter.run()
    except BreakpointHit as hit:
        _stopped_at(inter, state, hit)
    except KeyboardInterrupt:
        print(f"⏸️  Stop at: {_addr(inter)}")
    finally:
        _show(inter)


def _stopped_at(inter: WorkflowInterpreter, state: Any, hit: BreakpointHit) -> None:
    state.resume_at = tuple(hit.addr) if hit.addr is not None else tuple(_addr(inter))
    if inter.jump_marked:
        # Stopped inside a sub-call after the caller had jumped: the pointer already moved.
        inter.unmarkup()
    print(f"⏸️  Hit breakpoint: {hit.bp}")


# ----- sync API (REPL) ------------------------------------------------------------------


def _report(exc: BaseException, inter: WorkflowInterpreter) -> None:
    """Print what stopped a sync command; anything that is not a stop or a crash is re-raised."""
    if isinstance(exc, BreakpointHit):
        print(f"⏸️  Hit breakpoint: {exc.bp}")
    elif isinstance(exc, KeyboardInterrupt):
        print(f"⏸️  Stop at: {_addr(inter)}")
    elif isinstance(exc, Exception):
        print(f"⚠️  Node crashed: {exc!r}. Panic saved, use inspect().")
    else:
        raise exc


def _run_in_thread(coro: Coroutine[Any, Any, None]) -> BaseException | None:
    """Run `coro` on a fresh event loop in a worker thread (this thread's loop is busy)."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(coro)
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=target, name="amrita-sense-debugger", daemon=True)
    worker.start()
    worker.join()
    return failure[0] if failure else None


def _run_sync(coro: Coroutine[Any, Any, None], inter: WorkflowInterpreter) -> None:
    """Run `coro` to completion from sync code and report how it stopped."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        try:
            asyncio.run(coro)
        except BaseException as exc:
            _report(exc, inter)
        return
    failure = _run_in_thread(coro)
    if failure is not None:
        _report(failure, inter)


def step(inter: WorkflowInterpreter) -> None:
    """Run exactly one node (REPL)."""
    require_interpreter(inter, "step")
    _run_sync(step_async(inter), inter)


def step_over(inter: WorkflowInterpreter) -> None:
    """Run one node, stepping over subroutine calls (REPL)."""
    require_interpreter(inter, "step_over")
    _run_sync(step_over_async(inter), inter)


def step_out(inter: WorkflowInterpreter) -> None:
    """Run until the current subroutine returns (REPL)."""
    require_interpreter(inter, "step_out")
    _run_sync(step_out_async(inter), inter)


def cont(inter: WorkflowInterpreter) -> None:
    """Run until a breakpoint or the end of the workflow (REPL)."""
    require_interpreter(inter, "cont")
    _run_sync(cont_async(inter), inter)


__all__ = [
    "cont",
    "cont_async",
    "step",
    "step_async",
    "step_out",
    "step_out_async",
    "step_over",
    "step_over_async",
]
