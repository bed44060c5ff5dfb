"""ARCHIVED_NODES / INVOKE / ARCHIVED_SEGMENT: code that ordinary flow skips, reached by calls."""

from __future__ import annotations

import sys
from typing import Any

from amrita_sense.core.opcodes import OP_INVOKE, OP_JUMP, native_operands
from amrita_sense.exceptions import GraphBuildError
from amrita_sense.instructions._support import (
    NODE_SLOTS,
    already_compiled,
    require_name,
    require_part,
    resolve_alias_strict,
)
from amrita_sense.instructions.enum import BuiltinTags
from amrita_sense.instructions.workfl_ctrl import NOP
from amrita_sense.node.abc_base import AbstractComposeOriginal, is_rendered_compose
from amrita_sense.node.compile_rules import Locate, NativeOp, near, node_row, target
from amrita_sense.node.core import BaseNode, NodeCompose
from amrita_sense.node.core import Node as NodeType
from amrita_sense.node.self_compile import SelfCompileInstruction
from amrita_sense.runtime.workflow import WorkflowInterpreter


class SubprogramJumpNode(BaseNode):
    """Jump to slot `#target_near` of the current segment (over the archived nodes)."""

    __slots__ = (*NODE_SLOTS, "_target_near")

    def __init__(self, target_near: int):
        self._target_near = target_near
        self._init(self.__call__, None, False, True)

    @property
    def __sdb_dis__(self) -> str:
        return f"JMP.NEAR #{self._target_near}"

    @property
    def __sdb_cmt__(self) -> str:
        return "SubprogramJumpNode"

    def __call__(self, pc: WorkflowInterpreter) -> None:
        pc.jump_near(self._target_near)

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp:
        """OP_JUMP: THEN the slot `#near`."""
        return OP_JUMP, native_operands(then=target(locate, near(addr, self._target_near)))


class SubprogramStorage(SelfCompileInstruction):
    """`[SubprogramJumpNode(#n+1), *nodes, NOP]`: the nodes are only reachable by calls."""

    __slots__ = ("_nodes",)

    def __init__(self, *nodes: BaseNode):
        for node in nodes:
            require_part(node, "ARCHIVED_NODES(*nodes)")
        self._nodes = nodes

    def extract(self) -> AbstractComposeOriginal:
        return NodeCompose(SubprogramJumpNode(len(self._nodes) + 1), *self._nodes, NOP)


class InvokeNode(BaseNode):
    """Call the single node registered under `_alias` (resolved to `_addr`) as a subroutine."""

    __slots__ = (*NODE_SLOTS, "_addr", "_alias")

    def __init__(self, alias: str, tag: str | None = None):
        require_name(alias, "INVOKE(alias)")
        self._alias = alias
        self._addr: list[int] = []
        self._init(self.__call__, tag, False, True)

    @property
    def __sdb_dis__(self) -> str:
        return f"INVOKE {self._alias} -> {self._addr or '?'}"

    @property
    def __sdb_cmt__(self) -> str:
        return "InvokeNode"

    def _post_compile(self, compose: Any) -> None:
        if self._addr:
            raise already_compiled("INVOKE")
        addr = resolve_alias_strict(compose, self._alias)
        target = compose.calc.find_addr(addr)
        if is_rendered_compose(target):
            raise GraphBuildError("Cannot invoke a NodeComposeRendered directly! Please use CALL with RET instead")
        if target.address_able is False:
            raise GraphBuildError("Cannot invoke a non-addressable node!")
        self._addr = addr

    async def __call__(self, pc: WorkflowInterpreter) -> Any:
        return await pc.call_sub(self._addr)

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp | None:
        """OP_INVOKE: FIRST the invoked node's row (none when the address names a segment)."""
        row = node_row(locate, self._addr) if self._addr else -1
        return (OP_INVOKE, native_operands(first=row)) if row >= 0 else None


CallNode = InvokeNode


class _SegmentSkipNode(NodeType):
    """`jump_offset(2)`: skip the archived segment that follows, landing on its closing NOP."""

    def __init__(self) -> None:
        self._offset = 2
        super().__init__(self.call, BuiltinTags.ARCHIVED_SEGMENT, False, True, sys._getframe(2))

    def call(self, pc: WorkflowInterpreter) -> None:
        pc.jump_offset(self._offset)

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp:
        """OP_JUMP: THEN the slot `+offset`."""
        return OP_JUMP, native_operands(then=target(locate, near(addr, addr[-1] + self._offset)))


def INVOKE(alias: str) -> InvokeNode:
    """Call the node named `alias` as a one-node subroutine; its result is this step's result."""
    return InvokeNode(alias)


def ARCHIVED_NODES(*nodes: BaseNode) -> SubprogramStorage:
    """Keep nodes in the graph (for INVOKE) while ordinary flow jumps over them."""
    return SubprogramStorage(*nodes)


def ARCHIVED_SEGMENT(seg: AbstractComposeOriginal | SelfCompileInstruction) -> AbstractComposeOriginal:
    """`[skip, seg, NOP]`: a segment that ordinary flow skips (a CALL or INT target)."""
    if isinstance(seg, SelfCompileInstruction):
        seg = seg.extract()
    return _SegmentSkipNode() >> seg >> NOP
