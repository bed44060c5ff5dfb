"""Argument checks shared by the debugger's entry points."""

from __future__ import annotations

from typing import Any

from amrita_sense.exceptions import InvalidOperand
from amrita_sense.runtime.workflow import WorkflowInterpreter


def require_interpreter(inter: Any, what: str, *uses: str) -> None:
    """`TypeError` naming `what` unless `inter` is a WorkflowInterpreter, or at least has the
    attributes `uses` that `what` reads (the disassembler lists any graph holder)."""

    if isinstance(inter, WorkflowInterpreter) or (uses and all(hasattr(inter, name) for name in uses)):
        return
    raise InvalidOperand(f"{what}(inter) needs a WorkflowInterpreter, not {type(inter).__name__}")
