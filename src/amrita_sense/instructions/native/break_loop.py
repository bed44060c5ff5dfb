"""BREAK_LOOP(): leave the enclosing native loop."""

from __future__ import annotations

from amrita_sense.instructions.enum import BuiltinTags
from amrita_sense.instructions.native._core import _LoopControlNode


class _BreakLoopNode(_LoopControlNode):
    """Pops the loop's stack entry and jumps to the loop's exit NOP."""

    __slots__ = ()
    _native_op = _LoopControlNode._native_op  # its base's opcode (rules are looked up per exact class)

    def __init__(self) -> None:
        super().__init__()
        self._init(self.__call__, BuiltinTags.BREAK_LOOP, False, True)


def BREAK_LOOP() -> _BreakLoopNode:
    """A node that exits the enclosing NATIVE_WHILE / NATIVE_DO (configured when the loop compiles)."""
    return _BreakLoopNode()
