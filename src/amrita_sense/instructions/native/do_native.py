"""NATIVE_DO(body).WHILE(cond): a jump-based loop that runs its body first.

Layout: `[ENTER(push), NodeCompose(*body, CONTINUE()), NDW, cond, NOP]`.
"""

from __future__ import annotations

from typing import Any

from amrita_sense.instructions._support import require_part
from amrita_sense.instructions.native._core import (
    NativeBubbleEnterNode,
    NativeDoWhileNode,
    _classify_body,
    _configure_loop_control_nodes,
)
from amrita_sense.instructions.native.continue_loop import CONTINUE as CONTINUE  # re-exported here, as in 1.1.3
from amrita_sense.instructions.native.while_native import _loop_body
from amrita_sense.instructions.workfl_ctrl import NOP
from amrita_sense.node.core import Node, NodeCompose
from amrita_sense.node.self_compile import SelfCompileInstruction


class NativeDoClause(SelfCompileInstruction):
    """`NATIVE_DO(body)`; set the condition once with `.WHILE(cond)`."""

    __slots__ = ("_body", "_condition")

    def __init__(self, body: Any) -> None:
        self._body = require_part(body, "NATIVE_DO(body)", payload=True)
        self._condition: Any = None

    def WHILE(self, condition: Node[bool]) -> NativeDoClause:
        """Set the loop condition."""
        if self._condition is not None:
            raise TypeError("NATIVE_DO can only have a single .WHILE(condition)")
        self._condition = require_part(condition, "NATIVE_DO WHILE(condition)", payload=True)
        return self

    def extract(self) -> NodeCompose:
        if self._condition is None:
            raise RuntimeError("NATIVE_DO requires .WHILE(condition) before use")
        test, _ = _classify_body(self._condition)
        body = _loop_body(self._body)
        _configure_loop_control_nodes(body, continue_pos=2, break_pos=4)
        return NodeCompose(
            NativeBubbleEnterNode(body_pos=1),
            body,
            NativeDoWhileNode(condi_offset=1, loop_pos=0, exit_pos=4),
            test,
            NOP,
        )


def NATIVE_DO(body: Any) -> NativeDoClause:
    """Run `body` (a node or a composition), then repeat while `.WHILE(cond)` is truthy."""
    return NativeDoClause(body)
