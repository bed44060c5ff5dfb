"""IF / ELIF / ELSE built on `call_sub`: each branch body is one node called as a subroutine.

Layout of `IF(c, d)`: `[CJ(cond=+1, do=+2, false=+3, then=#3), c, d, NOP]`.
Each ELIF adds a `[CJ, c, d]` chunk, every taken branch jumps to the final
NOP; ELSE adds `[ELSE(do=+1, then=+2), e, NOP]`.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from amrita_sense.core.opcodes import OP_BRANCH, OP_ELSE, native_operands
from amrita_sense.exceptions import InterruptKeepContext
from amrita_sense.instructions._support import NODE_SLOTS, require_node, require_part, resume_near, resume_offset
from amrita_sense.instructions.workfl_ctrl import NOP
from amrita_sense.node.abc_base import AbstractCompose, AbstractComposeOriginal
from amrita_sense.node.compile_rules import Locate, NativeOp, callee, near, target
from amrita_sense.node.core import BaseNode, Node, NodeCompose
from amrita_sense.node.self_compile import SelfCompileInstruction
from amrita_sense.runtime.workflow import WorkflowInterpreter

T_cod = TypeVar("T_cod", bound=Node, covariant=True)
T_ret = TypeVar("T_ret", bound=BaseNode, covariant=True)


def _check_do(body: Any) -> None:
    if isinstance(body, (AbstractCompose, AbstractComposeOriginal, SelfCompileInstruction)):
        raise TypeError(
            "DO cannot be a composition or SelfCompileInstruction, please use FUN_BLOCK to wrap the sub component."
        )
    require_node(body, "an IF / ELIF / ELSE branch")


def _check_branch(condition: Any, body: Any) -> None:
    require_part(condition, "an IF / ELIF condition")
    _check_do(body)


class ConditionJumpNode(BaseNode):
    """One IF/ELIF test: call the condition; if truthy call the body and jump to `#then`, else move `+false`."""

    __slots__ = (*NODE_SLOTS, "_condition_offset", "_do_offset", "_false_offset", "_then_addr")

    def __init__(self, condition_offset: int, do_offset: int, false_offset: int, then_addr: int):
        self._init(self._do, None, True, True)
        self._condition_offset = condition_offset
        self._do_offset = do_offset
        self._then_addr = then_addr
        self._false_offset = false_offset

    @property
    def __sdb_dis__(self) -> str:
        return f"JMPIF then=#{self._then_addr} else={self._false_offset:+d}"

    @property
    def __sdb_cmt__(self) -> str:
        return "ConditionJumpNode"

    async def _do(self, pc: WorkflowInterpreter) -> None:
        try:
            taken = await pc.call_offset(self._condition_offset)
        except InterruptKeepContext:
            resume_offset(pc, self._false_offset)
            raise
        await self._after_condition(pc, taken)

    async def _after_condition(self, pc: WorkflowInterpreter, taken: Any) -> None:
        """The rest of the node once the condition returned `taken`, from wherever the pointer is
        now (also how the native opcode finishes when the condition moved the pointer)."""
        if not taken:
            pc.jump_offset(self._false_offset)
            return
        try:
            await pc.call_offset(self._do_offset)
        except InterruptKeepContext:
            resume_near(pc, self._then_addr)
            raise
        self._after_body(pc)

    def _after_body(self, pc: WorkflowInterpreter) -> None:
        """The rest of the node once the body returned: leave for `#then`."""
        pc.jump_near(self._then_addr)

    def __call__(self, pc: WorkflowInterpreter):
        return self._do(pc)

    @classmethod
    def make_chunk(cls, condition: Any, do: Any, then: int, false: int) -> tuple:
        """`(CJ, condition, do)`: one IF/ELIF chunk of three slots."""
        _check_do(do)
        return (cls(1, 2, false, then), condition, do)

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp | None:
        """OP_BRANCH: FIRST the condition, SECOND the body, EXIT the `+false` slot, THEN `#then`; a
        suspended condition resumes at the offset `+false` (FIRST_RESUME), a suspended body at `#then`."""
        here = addr[-1]
        cond = callee(locate, near(addr, here + self._condition_offset))
        body = callee(locate, near(addr, here + self._do_offset))
        if cond < 0 or body < 0:
            return None
        return OP_BRANCH, native_operands(
            first=cond,
            second=body,
            exit=target(locate, near(addr, here + self._false_offset)),
            then=target(locate, near(addr, self._then_addr)),
            first_resume=self._false_offset,
            second_resume=self._then_addr,
        )


class ELSENode(BaseNode):
    """The ELSE chunk head: call the body at `+do`, then move `+then` to the closing NOP."""

    __slots__ = (*NODE_SLOTS, "_do_offset", "_then_offset")

    def __init__(self, do_offset: int, then_offset: int):
        self._init(self._else_worker, None, True, True)
        self._do_offset = do_offset
        self._then_offset = then_offset

    @property
    def __sdb_dis__(self) -> str:
        return f"ELSE do={self._do_offset:+d} then={self._then_offset:+d}"

    @property
    def __sdb_cmt__(self) -> str:
        return "ELSENode"

    async def _else_worker(self, pc: WorkflowInterpreter) -> None:
        try:
            await pc.call_offset(self._do_offset)
        except InterruptKeepContext:
            resume_offset(pc, self._then_offset)
            raise
        self._after_body(pc)

    def _after_body(self, pc: WorkflowInterpreter) -> None:
        """The rest of the node once the body returned: move `+then` from wherever the pointer is."""
        pc.jump_offset(self._then_offset)

    def __call__(self, pc: WorkflowInterpreter):
        return self._else_worker(pc)

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp | None:
        """OP_ELSE: FIRST the body, THEN the `+then` slot; a suspended body resumes at the offset
        `+then` (FIRST_RESUME)."""
        here = addr[-1]
        body = callee(locate, near(addr, here + self._do_offset))
        if body < 0:
            return None
        return OP_ELSE, native_operands(
            first=body, then=target(locate, near(addr, here + self._then_offset)), first_resume=self._then_offset
        )


class Condition(ABC):
    """A (condition, body) pair of an IF chain."""

    condition: Node[bool]
    do: BaseNode


class IFClause(SelfCompileInstruction, Condition):
    """`IF(cond, body)`, extendable with `.ELIF(cond, body)` and `.ELSE(body)`."""

    def __init__(self, condition: Node[bool], do: BaseNode):
        _check_branch(condition, do)
        self.condition = condition
        self.do = do

    def extract(self) -> NodeCompose:
        return NodeCompose(*ConditionJumpNode.make_chunk(self.condition, self.do, 3, 3), NOP)

    @property
    def ELIF(self) -> Callable[[Any, Any], ELIFClause]:
        return lambda condition, node: ELIFClause(self, condition, node)

    @property
    def ELSE(self) -> Callable[[Any], ELSEClause]:
        return lambda node: ELSEClause(self, node)


class NestedELIFClause(Condition):
    """A further ELIF of an `ELIFClause` chain."""

    def __init__(self, if_clause: ELIFClause, condition: Node[bool], do: BaseNode):
        _check_branch(condition, do)
        self.condition = condition
        self.do = do
        self.parent = if_clause


class ELIFClause(SelfCompileInstruction, Condition):
    """`IF(...).ELIF(...)[.ELIF(...)...]`; 3 slots per branch and a final NOP."""

    def __init__(self, if_clause: IFClause, condition: Node[bool], do: BaseNode):
        _check_branch(condition, do)
        self.condition = condition
        self.do = do
        self.parent = if_clause
        self._elif_compose: list[NestedELIFClause] = []

    @property
    def ELIF(self) -> Callable[[Any, Any], ELIFClause]:
        def _elif(condition: Any, do: Any) -> ELIFClause:
            self._elif_compose.append(NestedELIFClause(self, condition, do))
            return self

        return _elif

    @property
    def ELSE(self) -> Callable[..., ELSEClause]:
        return lambda node=None: ELSEClause(self, node or NOP)

    def _branches(self) -> list[Condition]:
        return [self.parent, self, *self._elif_compose]

    def extract(self) -> NodeCompose:
        branches = self._branches()
        exit_slot = 3 * len(branches)
        return NodeCompose(*_chunks(branches, exit_slot), NOP)


class ELSEClause(SelfCompileInstruction, Condition):
    """The closing ELSE of an IF or ELIF chain."""

    def __init__(self, parent: ELIFClause | IFClause, do: BaseNode):
        _check_do(do)
        self.do = do
        self.parent = parent
        self.top = parent if isinstance(parent, IFClause) else parent.parent

    def extract(self) -> NodeCompose:
        parent = self.parent
        branches = parent._branches() if isinstance(parent, ELIFClause) else [parent]
        exit_slot = 3 * len(branches) + 2
        return NodeCompose(*_chunks(branches, exit_slot), ELSENode(do_offset=1, then_offset=2), self.do, NOP)


def _chunks(branches: Sequence[Condition], exit_slot: int) -> list:
    nodes: list = []
    for branch in branches:
        nodes.extend(ConditionJumpNode.make_chunk(branch.condition, branch.do, exit_slot, 3))
    return nodes


def IF(condition: Node[bool], do: BaseNode) -> IFClause:
    """Run `do` when `condition` is truthy; chain `.ELIF(c, d)` and `.ELSE(d)`.

    Bodies are single nodes (wrap a composition with FUN_BLOCK).
    """
    return IFClause(condition, do)
