"""Names kept from before 1.0; at run time each is the very object it was renamed to.

Type checkers see them as deprecated (the markers exist only for static
analysis): no warning and no wrapper at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import interrupt as _interrupt
from . import jump as _jump
from . import ret2 as _ret2
from . import workfl_ctrl as _workfl_ctrl

if TYPE_CHECKING:
    from typing_extensions import deprecated

    from amrita_sense.node.core import Node as NodeType

    from .jump import JumpNode

    @deprecated("Renamed to JMP")
    def GOTO(aliasOrIdata: str | list[int]) -> JumpNode: ...

    @deprecated("Renamed to PUSH_RET")
    def PUSH_STACK(alias_or_idata: str | list[int]) -> NodeType[None]: ...

    @deprecated("Renamed to RET")
    def RET_FAR() -> NodeType[None]: ...

    @deprecated("Renamed to CALL(to_adr, *, from_adr=None); the argument order changed")
    def PUSH_AND_GOTO(from_adr: str | list[int] | None, to_adr: str | list[int]) -> NodeType[None]: ...

    @deprecated("Renamed to INT")
    def INTERRUPT_INTO(
        jump_to: str | list[int], ret_to: str | list[int] | None = None, if_state: bool = False
    ) -> NodeType[None]: ...

    @deprecated("Renamed to IRET")
    def INTERRUPT_RET() -> NodeType[None]: ...

else:
    GOTO = _jump.GOTO
    PUSH_STACK = _ret2.PUSH_STACK
    RET_FAR = _ret2.RET_FAR
    PUSH_AND_GOTO = _ret2.PUSH_AND_GOTO
    INTERRUPT_INTO = _interrupt.INTERRUPT_INTO
    INTERRUPT_RET = _interrupt.INTERRUPT_RET

INTERRUPT = _workfl_ctrl.RESET
INTERRUPT_KEEP_CTX = _workfl_ctrl.SUSPEND

__all__ = [
    "GOTO",
    "INTERRUPT",
    "INTERRUPT_INTO",
    "INTERRUPT_KEEP_CTX",
    "INTERRUPT_RET",
    "PUSH_AND_GOTO",
    "PUSH_STACK",
    "RET_FAR",
]
