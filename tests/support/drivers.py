"""The three ways a test drives a run: `run()` ("run": the native opcodes), `run_step_by()`
("steps": each node's own function) and `run()` under a pass-through middleware ("generic")."""

from __future__ import annotations

from amrita_sense import WorkflowInterpreter

MODES = ["run", "steps", "generic"]


async def pass_through(pc: WorkflowInterpreter):
    return await pc._call()


def interpreter(graph, mode: str) -> WorkflowInterpreter:
    """A fresh interpreter over `graph` (a source compose, rendered here) for `mode`."""
    return WorkflowInterpreter(graph.render(), middleware=pass_through if mode == "generic" else None)


async def drive(interp: WorkflowInterpreter, mode: str) -> None:
    if mode == "steps":
        async for _ in interp.run_step_by():
            pass
    else:
        await interp.run()
