"""JMP: an absolute jump to an alias or address, resolved when the graph compiles."""

from __future__ import annotations

from amrita_sense.core.opcodes import OP_JUMP, native_operands
from amrita_sense.instructions._support import NODE_SLOTS, already_compiled, check_target, resolve_alias_strict
from amrita_sense.node.compile_rules import Locate, NativeOp, target
from amrita_sense.node.core import BaseNode
from amrita_sense.runtime.workflow import WorkflowInterpreter


class JumpNode(BaseNode):
    """Jumps to `_node_addr`, resolved from `_alias_or_idata` in `_post_compile`."""

    __slots__ = (*NODE_SLOTS, "_alias_or_idata", "_node_addr")

    def __init__(self, aliasOrIdata: str | list[int]):
        check_target(aliasOrIdata, "JMP target")
        self._alias_or_idata = aliasOrIdata
        self._node_addr: list[int] = []
        self._init(self._jump, None, False, True)

    @property
    def __sdb_dis__(self) -> str:
        return f"JMP {self._node_addr or '?'}"

    @property
    def __sdb_cmt__(self) -> str:
        return f"JMP {self._alias_or_idata!r}"

    def _jump(self, pc: WorkflowInterpreter) -> None:
        return pc.jump_to(self._node_addr)

    def __call__(self, pc: WorkflowInterpreter) -> None:
        return self._jump(pc)

    def _post_compile(self, compose) -> None:
        if self._node_addr:
            raise already_compiled("JMP")
        target = self._alias_or_idata
        if isinstance(target, str):
            self._node_addr = resolve_alias_strict(compose, target)
        else:
            compose.calc.find_addr(target)
            self._node_addr = target

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp | None:
        """OP_JUMP: THEN is `_node_addr` (nothing before `_post_compile` resolved it)."""
        if not self._node_addr:
            return None
        return OP_JUMP, native_operands(then=target(locate, self._node_addr))


def JMP(aliasOrIdata: str | list[int]) -> JumpNode:
    """Jump to an alias or an absolute address; a bad target fails when the graph compiles."""
    return JumpNode(aliasOrIdata)


GOTO = JMP
