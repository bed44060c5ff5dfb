"""NATIVE_WHILE(cond).ACTION(body): a jump-based loop.

Layout: `[NW, cond, NodeCompose(*body, CONTINUE()), NOP]`.
"""

from __future__ import annotations

from typing import Any

from amrita_sense.instructions._support import require_part
from amrita_sense.instructions.native._core import NativeWhileNode, _classify_body, _configure_loop_control_nodes
from amrita_sense.instructions.native.continue_loop import CONTINUE
from amrita_sense.instructions.workfl_ctrl import NOP
from amrita_sense.node.core import Node, NodeCompose
from amrita_sense.node.self_compile import SelfCompileInstruction


def _loop_body(payload: Any) -> NodeCompose:
    """The body segment of a native loop: the body's nodes followed by `CONTINUE()`."""
    body, single = _classify_body(payload)
    return NodeCompose(body, CONTINUE()) if single else NodeCompose(*body, CONTINUE())


class NativeWhileClause(SelfCompileInstruction):
    """`NATIVE_WHILE(cond)`; set the body once with `.ACTION(body)`."""

    __slots__ = ("_body", "_condition")

    def __init__(self, condition: Node[bool]) -> None:
        self._condition = require_part(condition, "NATIVE_WHILE(condition)", payload=True)
        self._body: Any = None

    def ACTION(self, body: Any) -> NativeWhileClause:
        """Set the loop body (a node or a composition)."""
        if self._body is not None:
            raise TypeError("ACTION already set on NativeWhileClause")
        self._body = require_part(body, "NATIVE_WHILE ACTION(body)", payload=True)
        return self

    def extract(self) -> NodeCompose:
        if self._body is None:
            raise RuntimeError("NATIVE_WHILE requires .ACTION(body) before use")
        test, _ = _classify_body(self._condition)
        body = _loop_body(self._body)
        _configure_loop_control_nodes(body, continue_pos=0, break_pos=3)
        return NodeCompose(NativeWhileNode(condi_offset=1, body_pos=2, self_pos=0, exit_pos=3), test, body, NOP)


def NATIVE_WHILE(condition: Node[bool]) -> NativeWhileClause:
    """Loop while `condition` is truthy; `.ACTION(body)` takes a node or a composition."""
    return NativeWhileClause(condition)
