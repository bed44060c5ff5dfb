"""Ready-made providers for `Depends(...)` in workflow nodes."""

from __future__ import annotations

from collections.abc import Callable

from amrita_sense.runtime.workflow import WorkflowInterpreter
from amrita_sense.types import PointerVector


def POINTER_DEPENDS(pt: WorkflowInterpreter) -> WorkflowInterpreter:
    """Provide the running interpreter: `pc: WorkflowInterpreter = Depends(POINTER_DEPENDS)`."""
    return pt


def _target(pc: WorkflowInterpreter, where: str) -> PointerVector:
    return PointerVector(pc.get_graph().calc.resolve_alias(where))


def ADDR(where: str) -> Callable[[WorkflowInterpreter], PointerVector]:
    """A provider of the absolute address of the node aliased `where`."""

    def address(pc: WorkflowInterpreter) -> PointerVector:
        return _target(pc, where)

    return address


def FAR_OFFSET(where: str) -> Callable[[WorkflowInterpreter], PointerVector]:
    """A provider of `current pointer - address of where` (see `PointerVector.__sub__`)."""

    def far_offset(pc: WorkflowInterpreter) -> PointerVector:
        return pc._pointer - _target(pc, where)

    return far_offset


def NEAR_OFFSET(where: str) -> Callable[[WorkflowInterpreter], int]:
    """A provider of the same difference as an int; `RuntimeError` when a higher coordinate differs."""

    def near_offset(pc: WorkflowInterpreter) -> int:
        delta = pc._pointer - _target(pc, where)
        if any(delta[i] != 0 for i in range(len(delta) - 1)):
            raise RuntimeError(f"Far offset {delta} is not assign able to near offset")
        return delta[-1]

    return near_offset


__all__ = ("ADDR", "FAR_OFFSET", "NEAR_OFFSET", "POINTER_DEPENDS")
