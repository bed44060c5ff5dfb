"""An external single-step debugger built on the suspend/resume stream.

    PYTHONPATH=src python examples/single_step_debugger.py

The debugger is ordinary code outside the workflow. It asks the interpreter's
stream to park at the between-node checkpoint (`PC_CHECKPOINT`), prints the
pointer and the node that will run next, and resumes: one node per resume.
At one stop it also redirects the run by writing the pointer directly, which
is the supported way to change course at that checkpoint.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.instructions import IF
from amrita_sense.runtime.workflow import PC_CHECKPOINT

Redirects = dict[tuple[int, ...], list[int]]


def build_workflow(trace: list[str]) -> WorkflowInterpreter:
    """`load`, a nested block `(validate, IF(ok, accept))`, `audit`, then `report`."""

    def recorder(name: str, result: Any = None) -> Any:
        def body() -> Any:
            trace.append(name)
            return result

        body.__name__ = name
        return Node(wrap_to_async=False)(body)

    checks = recorder("validate") >> IF(recorder("ok", True), recorder("accept"))
    graph = NodeCompose(recorder("load"), checks, recorder("audit"), recorder("report"))
    return WorkflowInterpreter(graph.render())


def describe(interp: WorkflowInterpreter) -> str:
    """What sits at the pointer: a node's display text or tag, or a segment."""
    target = interp.get_graph().calc.find_addr_safe(list(interp._pointer))
    if target is None:
        return "<nothing>"
    return getattr(target, "__sdb_dis__", None) or getattr(target, "tag", None) or "<segment>"


async def _stopped_or_done(waiter: asyncio.Future, run: asyncio.Future) -> bool:
    """True when the workflow parked for `waiter`; False once the run is over."""
    await asyncio.wait({waiter, run}, return_when=asyncio.FIRST_COMPLETED)
    if waiter.done():
        waiter.result()
        return True
    waiter.cancel()
    run.result()  # re-raise a panic, if any
    return False


async def _request_stop(interp: WorkflowInterpreter) -> asyncio.Future:
    """Ask the stream to park the run at its next checkpoint."""
    waiter = asyncio.ensure_future(interp.object_io.wait_to_suspend(PC_CHECKPOINT))
    await asyncio.sleep(0)  # the request is registered before the run moves on
    return waiter


async def debug(
    interp: WorkflowInterpreter,
    redirects: Redirects | None = None,
    out: Callable[[str], Any] = print,
) -> list[list[int]]:
    """Run `interp` one node per resume and return the pointer seen at every stop.

    `redirects` maps a pointer to the address to continue at instead (once).
    """
    redirects = dict(redirects or {})
    stream = interp.object_io
    stops: list[list[int]] = []
    waiter = await _request_stop(interp)  # made before the run: honoured at the very first checkpoint
    run = asyncio.ensure_future(interp.run())
    while await _stopped_or_done(waiter, run):
        here = list(interp._pointer)
        stops.append(here)
        out(f"stop {len(stops)}: pointer={here} next={describe(interp)}")
        target = redirects.pop(tuple(here), None)
        if target is not None:
            interp._pointer.far_to(target)
            out(f"  redirected to {target} ({describe(interp)})")
        waiter = await _request_stop(interp)
        stream.resume()
    out("workflow finished")
    return stops


async def main(out: Callable[[str], Any] = print) -> list[str]:
    """Step through the workflow twice: plainly, then skipping the audit."""
    trace: list[str] = []
    out("== single stepping ==")
    await debug(build_workflow(trace), out=out)
    out(f"trace: {trace}")
    skipped: list[str] = []
    out("== skipping the audit ==")
    await debug(build_workflow(skipped), redirects={(2,): [3]}, out=out)  # at `audit`, go to `report`
    out(f"trace: {skipped}")
    return skipped


if __name__ == "__main__":
    asyncio.run(main())
