"""CONTINUE(): go to the next iteration of the enclosing native loop."""

from __future__ import annotations

from amrita_sense.instructions.enum import BuiltinTags
from amrita_sense.instructions.native._core import _LoopControlNode


class _ContinueNode(_LoopControlNode):
    """Pops the loop's stack entry and jumps to the loop's condition check."""

    __slots__ = ()
    _native_op = _LoopControlNode._native_op  # its base's opcode (rules are looked up per exact class)

    def __init__(self) -> None:
        super().__init__()
        self._init(self.__call__, BuiltinTags.CONTINUE, False, True)


def CONTINUE() -> _ContinueNode:
    """A node that starts the next iteration of the enclosing native loop (configured when it compiles)."""
    return _ContinueNode()
