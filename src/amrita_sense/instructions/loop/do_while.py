"""DO(body).WHILE(cond): a `call_sub`-based loop that runs its body first.

Layout: `[D(do=+1, loop=#2, break=#4), body, DW(cond=+1, exit=#4, back=#0), cond, NOP]`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amrita_sense import _unsafe
from amrita_sense.core.opcodes import OP_DO, OP_DO_CHECK, native_operands
from amrita_sense.exceptions import BreakLoop, InterruptKeepContext
from amrita_sense.instructions._support import NODE_SLOTS, broke_out, require_part, resume_near
from amrita_sense.instructions.loop._guard import reject_composition_body
from amrita_sense.instructions.workfl_ctrl import NOP
from amrita_sense.node.abc_base import AbstractComposeOriginal
from amrita_sense.node.compile_rules import Locate, NativeOp, callee, near, target
from amrita_sense.node.core import BaseNode, Node, NodeCompose
from amrita_sense.node.self_compile import SelfCompileInstruction
from amrita_sense.runtime.workflow import WorkflowInterpreter


def do_check_op(locate: Locate, addr: tuple, cond: int, again_slot: int, exit_slot: int) -> NativeOp | None:
    """OP_DO_CHECK of a do-while condition at row `cond`: THEN `again_slot` (truthy), EXIT `exit_slot`;
    a suspended condition resumes at `exit_slot` (FIRST_RESUME)."""
    if cond < 0:
        return None
    return OP_DO_CHECK, native_operands(
        first=cond,
        exit=target(locate, near(addr, exit_slot)),
        then=target(locate, near(addr, again_slot)),
        first_resume=exit_slot,
    )


class DONode(BaseNode):
    """Loop entry: call the body, then go to the check at `#loop` (`#break` on `BreakLoop`)."""

    __slots__ = (*NODE_SLOTS, "_break_addr", "_do_offset", "_jmp_addr")

    def __init__(self, do_offset: int, jmp_addr: int, break_addr: int):
        self._do_offset = do_offset
        self._jmp_addr = jmp_addr
        self._break_addr = break_addr
        self._init(self._do_worker, None, True, False)

    @property
    def __sdb_dis__(self) -> str:
        return f"DO loop=#{self._jmp_addr} break=#{self._break_addr}"

    @property
    def __sdb_cmt__(self) -> str:
        return "DONode"

    async def _do_worker(self, ptr: WorkflowInterpreter) -> None:
        if _unsafe.__flags__.SQUASHED_LOOP:
            try:
                await self._squashed(ptr)
            except BreakLoop:
                ptr.jump_near(self._break_addr)
            return
        self._after_body(ptr, await broke_out(self._body(ptr)))

    def _after_body(self, pc: WorkflowInterpreter, broke: bool) -> None:
        """The rest of the node once the body returned (or raised `BreakLoop`: `broke`), from
        wherever the pointer is now (also how the native opcode finishes when the body moved it)."""
        pc.jump_near(self._break_addr if broke else self._jmp_addr)

    async def _body(self, pc: WorkflowInterpreter) -> None:
        try:
            await pc.call_offset(self._do_offset)
        except InterruptKeepContext:
            resume_near(pc, self._jmp_addr)
            raise

    async def _squashed(self, pc: WorkflowInterpreter) -> None:
        check_addr = pc._pointer.copy().offset(self._jmp_addr)
        check = pc.get_graph().calc.find_addr(check_addr.base_addr)
        if not isinstance(check, DowhileNode):
            raise TypeError(f"DO expects its condition check at {check_addr}, found {check!r}")
        condi_addr = check_addr.copy().offset(check._condi_offset)
        while True:
            await self._body(pc)
            if pc.jump_marked:
                return
            if not await self._test(pc, condi_addr.copy()):
                pc.jump_near(self._break_addr)
                return

    async def _test(self, pc: WorkflowInterpreter, condi_addr) -> object:
        try:
            return await pc.call_sub(condi_addr)
        except InterruptKeepContext:
            resume_near(pc, self._break_addr)
            raise

    def __call__(self, ptr: WorkflowInterpreter):
        return self._do_worker(ptr)

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp | None:
        """OP_DO: FIRST the body, THEN the condition `#jmp`, EXIT `#break` (on BreakLoop); a suspended
        body resumes at `#jmp` (FIRST_RESUME)."""
        body = callee(locate, near(addr, addr[-1] + self._do_offset))
        if body < 0:
            return None
        return OP_DO, native_operands(
            first=body,
            exit=target(locate, near(addr, self._break_addr)),
            then=target(locate, near(addr, self._jmp_addr)),
            first_resume=self._jmp_addr,
        )


class DowhileNode(BaseNode):
    """Loop check: call the condition; truthy -> back to `#back`, falsy -> `#exit`."""

    __slots__ = (*NODE_SLOTS, "_back_addr", "_condi_offset", "_then_addr")

    def __init__(self, condi_offset: int, then_addr: int, back_addr: int):
        self._condi_offset = condi_offset
        self._then_addr = then_addr
        self._back_addr = back_addr
        self._init(self._do_while_worker, None, False, False)

    @property
    def __sdb_dis__(self) -> str:
        return f"DO.CHECK back=#{self._back_addr} exit=#{self._then_addr}"

    @property
    def __sdb_cmt__(self) -> str:
        return "DowhileNode"

    async def _do_while_worker(self, ptr: WorkflowInterpreter) -> None:
        try:
            again = await ptr.call_offset(self._condi_offset)
        except InterruptKeepContext:
            resume_near(ptr, self._then_addr)
            raise
        self._after_condition(ptr, again)

    def _after_condition(self, pc: WorkflowInterpreter, again: Any) -> None:
        """The rest of the node once the condition returned `again`, from wherever the pointer is
        now (also how the native opcode finishes when the condition moved it)."""
        pc.jump_near(self._back_addr if again else self._then_addr)

    def __call__(self, pc: WorkflowInterpreter):
        return self._do_while_worker(pc)

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp | None:
        """OP_DO_CHECK (see `do_check_op`): again at `#back`, out at `#then`."""
        cond = callee(locate, near(addr, addr[-1] + self._condi_offset))
        return do_check_op(locate, addr, cond, self._back_addr, self._then_addr)


class DoWhileClause(SelfCompileInstruction):
    """`DO(body)`; set the condition with `.WHILE(cond)`."""

    def __init__(self, do: Node) -> None:
        self.do = require_part(do, "DO(node)")

    @property
    def WHILE(self) -> Callable[[Node[bool]], DoWhileClause]:

        def while_(condition: Node[bool]) -> DoWhileClause:
            self.condition = require_part(condition, "WHILE(condition)")
            return self

        return while_

    def extract(self) -> AbstractComposeOriginal:
        if not hasattr(self, "condition"):
            raise AttributeError("DO has no condition: set it with .WHILE(condition) before compiling")
        reject_composition_body(self.do, "DO-WHILE")
        return NodeCompose(DONode(1, 2, 4), self.do, DowhileNode(1, 4, 0), self.condition, NOP)


def DO(do: Node) -> DoWhileClause:
    """Run the single-node body, then repeat while `.WHILE(cond)` is truthy; `BreakLoop` leaves."""
    return DoWhileClause(do)
