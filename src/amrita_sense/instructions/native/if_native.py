"""NATIVE_IF(cond, body)[.ELIF(cond, body)...][.ELSE(body)]: jump-based branching.

Layout: `[NIF, cond, body]` per branch, then the ELSE slot (a node, or
`[ENTER(push=False), body]` for a compose), then the merge NOP. A compose
body is a nested segment entered by a jump; when another branch follows it,
it ends with a `NativeBranchExitNode` that jumps to the merge NOP.
"""

from __future__ import annotations

from typing import Any

from amrita_sense.instructions._support import require_part
from amrita_sense.instructions.native._core import (
    NativeBranchExitNode,
    NativeBubbleEnterNode,
    NativeIfJumpNode,
    _classify_body,
)
from amrita_sense.instructions.workfl_ctrl import NOP
from amrita_sense.node.core import BaseNode, Node, NodeCompose
from amrita_sense.node.self_compile import SelfCompileInstruction


class _ELIFClause:
    """One (condition, body) pair of an ELIF."""

    __slots__ = ("body", "condition")

    def __init__(self, condition: Node[bool], body: Any) -> None:
        self.condition = require_part(condition, "NATIVE_IF ELIF(condition)", payload=True)
        self.body = require_part(body, "NATIVE_IF ELIF(body)", payload=True)


class NativeIfClause(SelfCompileInstruction):
    """`NATIVE_IF(cond, body)` with fluent `.ELIF(cond, body)` and a single `.ELSE(body)`."""

    def __init__(self, condition: Node[bool], body: Any) -> None:
        self._condition = require_part(condition, "NATIVE_IF(condition)", payload=True)
        self._body = require_part(body, "NATIVE_IF(body)", payload=True)
        self._elifs: list[_ELIFClause] = []
        self._else_body: Any = None

    def ELIF(self, condition: Node[bool], body: Any) -> NativeIfClause:
        """Append an ELIF branch."""
        self._elifs.append(_ELIFClause(condition, body))
        return self

    def ELSE(self, body: Any) -> NativeIfClause:
        """Set the ELSE branch (once)."""
        if self._else_body is not None:
            raise TypeError("ELSE branch already defined")
        self._else_body = body if body is None else require_part(body, "NATIVE_IF ELSE(body)", payload=True)
        return self

    def extract(self) -> NodeCompose:
        branches = [(self._condition, self._body), *((e.condition, e.body) for e in self._elifs)]
        has_else = self._else_body is not None
        else_body: Any
        else_body, else_single = _classify_body(self._else_body) if has_else else (NOP, True)
        merge = 3 * len(branches) + (1 if else_single else 2)
        nodes: list[Any] = []
        for index, (condition, body) in enumerate(branches):
            followed = index + 1 < len(branches) or has_else
            nodes.extend(_branch(3 * index, condition, body, merge, followed))
        if else_single:
            nodes.append(else_body)
        else:
            nodes.append(NativeBubbleEnterNode(len(nodes) + 1, push=False))
            nodes.append(NodeCompose(*else_body))
        nodes.append(NOP)
        return NodeCompose(*nodes)


def _branch(base: int, condition: Any, body: Any, merge: int, followed: bool) -> list[Any]:
    """The three slots of one IF/ELIF branch starting at slot `base`."""
    test, _ = _classify_body(condition)
    payload, single = _classify_body(body)
    if not single:
        payload = NodeCompose(*payload, NativeBranchExitNode(merge)) if followed else NodeCompose(*payload)
    false_pos = base + 3 if followed else merge
    head = NativeIfJumpNode(
        condi_offset=1, do_offset=2, do_pos=base + 2, ret_pos=merge, false_pos=false_pos, is_single=single
    )
    return [head, test, payload]


def NATIVE_IF(condition: Node[bool], body: BaseNode | Any) -> NativeIfClause:
    """Branch on `condition`; a body is a node (called) or a composition (entered by a jump)."""
    return NativeIfClause(condition, body)
