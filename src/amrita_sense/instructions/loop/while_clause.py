"""WHILE(cond).ACTION(body): a `call_sub`-based loop.

Layout: `[W(cond=+1, do=+2, checkup=#3, else=#4), cond, body, CHECK(back=#0), NOP]`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amrita_sense import _unsafe
from amrita_sense.core.opcodes import OP_JUMP, OP_WHILE, native_operands
from amrita_sense.exceptions import BreakLoop, InterruptKeepContext
from amrita_sense.instructions._support import NODE_SLOTS, broke_out, require_part, resume_near
from amrita_sense.instructions.jump import JumpNode
from amrita_sense.instructions.loop._guard import reject_composition_body
from amrita_sense.instructions.workfl_ctrl import NOP
from amrita_sense.node.compile_rules import Locate, NativeOp, callee, near, target
from amrita_sense.node.core import BaseNode, Node, NodeCompose
from amrita_sense.node.self_compile import SelfCompileInstruction
from amrita_sense.runtime.workflow import WorkflowInterpreter


class WhileNode(BaseNode):
    """Loop head: call the condition; truthy -> call the body, go to `#checkup`; falsy -> `#else`."""

    __slots__ = (*NODE_SLOTS, "_checkup_addr", "_condi_offset", "_do_offset", "_else_addr")

    def __init__(self, condi_offset: int, do_offset: int, checkup_addr: int, else_addr: int):
        self._condi_offset = condi_offset
        self._do_offset = do_offset
        self._checkup_addr = checkup_addr
        self._else_addr = else_addr
        self._init(self._while_worker, None, False, True)

    @property
    def __sdb_dis__(self) -> str:
        return f"WHILE checkup=#{self._checkup_addr} else=#{self._else_addr}"

    @property
    def __sdb_cmt__(self) -> str:
        return "WhileNode"

    async def _while_worker(self, pc: WorkflowInterpreter) -> None:
        if _unsafe.__flags__.SQUASHED_LOOP:
            try:
                await self._squashed(pc)
            except BreakLoop:
                pc.jump_near(self._else_addr)
        else:
            await self._after_condition(pc, await self._test(pc))

    async def _after_condition(self, pc: WorkflowInterpreter, truthy: Any) -> None:
        """The rest of one (not squashed) iteration once the condition returned `truthy`, from
        wherever the pointer is now (also how the native opcode finishes when the condition
        moved the pointer)."""
        if not truthy:
            pc.jump_near(self._else_addr)
            return
        self._after_body(pc, await broke_out(self._body(pc)))

    def _after_body(self, pc: WorkflowInterpreter, broke: bool) -> None:
        """The rest of the iteration once the body returned (or raised `BreakLoop`: `broke`)."""
        pc.jump_near(self._else_addr if broke else self._checkup_addr)

    async def _test(self, pc: WorkflowInterpreter) -> Any:
        try:
            return await pc.call_offset(self._condi_offset)
        except InterruptKeepContext:
            resume_near(pc, self._else_addr)
            raise

    async def _body(self, pc: WorkflowInterpreter) -> None:
        try:
            await pc.call_offset(self._do_offset)
        except InterruptKeepContext:
            resume_near(pc, self._checkup_addr)
            raise

    async def _squashed(self, pc: WorkflowInterpreter) -> None:
        while await self._test(pc):
            await self._body(pc)
            if pc.jump_marked:
                break
        pc.jump_near(self._else_addr)

    def __call__(self, pc: WorkflowInterpreter):
        return self._while_worker(pc)

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp | None:
        """OP_WHILE: FIRST the condition, SECOND the body, EXIT `#else`, THEN `#checkup`; a suspended
        condition resumes at `#else` (FIRST_RESUME), a suspended body at `#checkup` (SECOND_RESUME)."""
        here = addr[-1]
        cond = callee(locate, near(addr, here + self._condi_offset))
        body = callee(locate, near(addr, here + self._do_offset))
        if cond < 0 or body < 0:
            return None
        return OP_WHILE, native_operands(
            first=cond,
            second=body,
            exit=target(locate, near(addr, self._else_addr)),
            then=target(locate, near(addr, self._checkup_addr)),
            first_resume=self._else_addr,
            second_resume=self._checkup_addr,
        )


class CheckUpNode(BaseNode):
    """Loop back edge: jump to the loop head `#back`."""

    __slots__ = (*NODE_SLOTS, "_jump_addr")

    def __init__(self, jump_near: int):
        self._jump_addr = jump_near
        self._init(self._while_checkup, None, False, False)

    @property
    def __sdb_dis__(self) -> str:
        return f"WHILE.CHECK back=#{self._jump_addr}"

    @property
    def __sdb_cmt__(self) -> str:
        return "CheckUpNode"

    def _while_checkup(self, pc: WorkflowInterpreter) -> None:
        pc.jump_near(self._jump_addr)

    def __call__(self, pc: WorkflowInterpreter) -> None:
        return self._while_checkup(pc)

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp:
        """OP_JUMP: THEN is the loop head `#back`."""
        return OP_JUMP, native_operands(then=target(locate, near(addr, self._jump_addr)))


class WhileClause(SelfCompileInstruction):
    """`WHILE(cond)`; set the single-node body once with `.ACTION(body)`."""

    def __init__(self, condition: Node[bool]) -> None:
        self.condition = require_part(condition, "WHILE(condition)")

    def _action_set(self, action: BaseNode) -> None:
        self._action = require_part(action, "ACTION(node)")

    @property
    def ACTION(self) -> Callable[[BaseNode], WhileClause]:
        if hasattr(self, "_action"):
            raise RuntimeError("Please DO NOT follow a ACTION after a ACTION")

        def action(node: BaseNode) -> WhileClause:
            self._action_set(node)
            return self

        return action

    def extract(self) -> NodeCompose:

        if not hasattr(self, "_action"):
            raise AttributeError("WHILE has no body: set it with .ACTION(body) before compiling")
        reject_composition_body(self._action, "WHILE")
        if isinstance(self._action, JumpNode):
            raise RuntimeError("Please DO NOT use a JMP node in a WHILE clause. Which will cause probably problems.")
        return NodeCompose(
            WhileNode(condi_offset=1, do_offset=2, checkup_addr=3, else_addr=4),
            self.condition,
            self._action,
            CheckUpNode(0),
            NOP,
        )


def WHILE(condition: Node[bool]) -> WhileClause:
    """Loop while `condition` is truthy; the body (`.ACTION(node)`) is one node, `BreakLoop` leaves."""
    return WhileClause(condition)
