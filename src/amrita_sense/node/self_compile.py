"""Instructions that expand themselves into a source compose when rendered."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class SelfCompileInstruction(ABC):
    """A macro: `extract()` returns the source compose it stands for.

    Rendered in place as one nested segment. `>>` puts a NOP in front:
    `instr >> x` is `NodeCompose(NOP, instr, x)`.
    """

    @abstractmethod
    def extract(self) -> Any: ...

    def __rshift__(self, other: Any) -> Any:
        from amrita_sense.instructions.workfl_ctrl import NOP
        from amrita_sense.node.core import NodeCompose

        return NodeCompose(NOP, self, other)
