"""The nodes of the native (jump-based) control flow.

Bodies are entered by jumps instead of `call_sub`; loops keep their head on
the return-address stack, and the body's trailing `CONTINUE()` (or a
`BREAK_LOOP()`) pops it and jumps to the configured slot of that loop.
"""

from __future__ import annotations

from typing import Any

from amrita_sense.core.opcodes import OP_CALLSUB, OP_JUMP, OP_LOOP_CONTROL, OP_LOOP_HEAD, OP_NATIVE_IF, native_operands
from amrita_sense.exceptions import InterruptKeepContext
from amrita_sense.instructions._support import NODE_SLOTS, resume_near
from amrita_sense.instructions.enum import BuiltinTags
from amrita_sense.instructions.loop.do_while import do_check_op
from amrita_sense.node.abc_base import AbstractComposeOriginal
from amrita_sense.node.compile_rules import Locate, NativeOp, near, node_row, target
from amrita_sense.node.core import BaseNode, NodeCompose
from amrita_sense.node.dll import DLLCompose
from amrita_sense.node.self_compile import SelfCompileInstruction
from amrita_sense.runtime.workflow import WorkflowInterpreter
from amrita_sense.types import PointerVector


class _LoopControlNode(BaseNode):
    """CONTINUE / BREAK_LOOP: pop the loop's stack entry and jump to slot `_target_pos` of that loop.

    The enclosing native loop sets `_target_pos` when it compiles
    (`_configure_loop_control_nodes`); unconfigured, the node raises.
    """

    __slots__ = (*NODE_SLOTS, "_configured", "_target_pos")

    def __init__(self) -> None:
        self._configured = False
        self._target_pos = -1

    def __call__(self, pc: WorkflowInterpreter) -> None:
        if not self._configured:
            raise RuntimeError(f"{self.tag}: not configured — must be inside a native loop body")
        entry = pc._ret_addr_stack.pop()
        pc.jump_far_ptr([*entry.base_addr[:-1], self._target_pos])

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp | None:
        """OP_LOOP_CONTROL: EXTRA `(slot, targets)`, the slot beside the loop's entry to go to and the
        core's cache of its jump targets per entry row."""
        if not self._configured:
            return None
        return OP_LOOP_CONTROL, native_operands(extra=(self._target_pos, {}))


def _configure_loop_control_nodes(compose: AbstractComposeOriginal, continue_pos: int, break_pos: int) -> None:
    """Give every unconfigured CONTINUE / BREAK_LOOP of `compose` its target, depth first.

    The scan enters nested source compositions, but not inner native loops
    (a composition starting with a native loop head) nor `DLLCompose` slots.
    """

    for child in compose:
        if isinstance(child, _LoopControlNode):
            if not child._configured:
                child._target_pos = continue_pos if child.tag == BuiltinTags.CONTINUE else break_pos
                child._configured = True
        elif isinstance(child, AbstractComposeOriginal) and not isinstance(child, DLLCompose):
            first = next(iter(child), None)
            if not isinstance(first, (NativeWhileNode, NativeBubbleEnterNode)):
                _configure_loop_control_nodes(child, continue_pos, break_pos)


def _classify_body(payload: Any) -> tuple[Any, bool]:
    """`(body, is_single)`: a node as is, or any source composition as a `NodeCompose`."""
    if isinstance(payload, BaseNode):
        return payload, True
    if isinstance(payload, SelfCompileInstruction):
        payload = payload.extract()
    if isinstance(payload, NodeCompose):
        return payload, False
    if isinstance(payload, AbstractComposeOriginal):
        if not isinstance(payload, DLLCompose):
            return NodeCompose(*payload), False
    raise TypeError(f"Unsupported payload type: {type(payload).__name__}")


class NativeIfJumpNode(BaseNode):
    """One native IF/ELIF test.

    Truthy condition: a single-node body is called, then `#ret`; a compose
    body (a nested segment at `#do`) is entered by a far jump to its first
    child. Falsy: jump to `#false`.
    """

    __slots__ = (*NODE_SLOTS, "_condi_offset", "_do_offset", "_do_pos", "_false_pos", "_is_single", "_ret_pos")

    def __init__(self, condi_offset: int, do_offset: int, do_pos: int, ret_pos: int, false_pos: int, is_single: bool):
        self._init(self.__call__, None, True, True)
        self._condi_offset = condi_offset
        self._do_offset = do_offset
        self._do_pos = do_pos
        self._ret_pos = ret_pos
        self._false_pos = false_pos
        self._is_single = is_single

    @property
    def __sdb_dis__(self) -> str:
        return f"NJMPIF do=#{self._do_pos} ret=#{self._ret_pos} false=#{self._false_pos}"

    @property
    def __sdb_cmt__(self) -> str:
        return "NativeIfJumpNode"

    async def __call__(self, pc: WorkflowInterpreter) -> None:
        await self._after_condition(pc, await _test(pc, self._condi_offset, self._false_pos))

    async def _after_condition(self, pc: WorkflowInterpreter, taken: Any) -> None:
        """The rest of the node once the condition returned `taken`, from wherever the pointer is
        now (also how the native opcode finishes when the condition moved the pointer)."""
        if not taken:
            pc.jump_near(self._false_pos)
        elif not self._is_single:
            pc.jump_far_ptr([*pc._pointer.base_addr[:-1], self._do_pos, 0])
        else:
            try:
                await pc.call_offset(self._do_offset)
            except InterruptKeepContext:
                resume_near(pc, self._ret_pos)
                raise
            self._after_body(pc)

    def _after_body(self, pc: WorkflowInterpreter) -> None:
        """The rest of the node once a single-node body returned: leave for `#ret`."""
        pc.jump_near(self._ret_pos)

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp | None:
        """OP_NATIVE_IF: FIRST the condition, SECOND the single body node (-1: a composition body,
        entered by jumping to THEN), EXIT `#false`, THEN `#ret` (or the body); a suspended condition
        resumes at `#false` (FIRST_RESUME), a suspended body at `#ret` (SECOND_RESUME)."""
        cond = node_row(locate, near(addr, addr[-1] + self._condi_offset))
        if cond < 0:
            return None
        if self._is_single:
            body = node_row(locate, near(addr, addr[-1] + self._do_offset))
            if body < 0:
                return None
            then = target(locate, near(addr, self._ret_pos))
        else:
            body = -1
            then = target(locate, [*addr[:-1], self._do_pos, 0])
        return OP_NATIVE_IF, native_operands(
            first=cond,
            second=body,
            exit=target(locate, near(addr, self._false_pos)),
            then=then,
            first_resume=self._false_pos,
            second_resume=self._ret_pos,
        )


async def _test(pc: WorkflowInterpreter, offset: int, resume_slot: int) -> Any:
    """Call a native instruction's condition; a suspended condition resumes as a falsy one."""
    try:
        return await pc.call_offset(offset)
    except InterruptKeepContext:
        resume_near(pc, resume_slot)
        raise


class NativeBranchExitNode(BaseNode):
    """Last slot of a native IF/ELIF compose body: jump out of the body to the merge slot `#merge`.

    1.1.3 has no such node, so a true branch with a compose body falls through
    into the next branch's test or the ELSE body (see the compatibility notes).
    """

    __slots__ = (*NODE_SLOTS, "_merge_pos")

    def __init__(self, merge_pos: int) -> None:
        self._init(self.__call__, None, False, True)
        self._merge_pos = merge_pos

    @property
    def __sdb_dis__(self) -> str:
        return f"NJMP.OUT merge=#{self._merge_pos}"

    @property
    def __sdb_cmt__(self) -> str:
        return "NativeBranchExitNode"

    def __call__(self, pc: WorkflowInterpreter) -> None:
        pc.jump_far_ptr([*pc._pointer.base_addr[:-2], self._merge_pos])

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp | None:
        """OP_JUMP: THEN the merge slot `#merge` of the enclosing segment."""
        if len(addr) < 2:
            return None
        return OP_JUMP, native_operands(then=target(locate, [*addr[:-2], self._merge_pos]))


class NativeWhileNode(BaseNode):
    """Native loop head: truthy condition -> push `#self`, enter the body at `#body`; falsy -> `#exit`."""

    __slots__ = (*NODE_SLOTS, "_body_pos", "_condi_offset", "_exit_pos", "_self_pos")

    def __init__(self, condi_offset: int, body_pos: int, self_pos: int, exit_pos: int) -> None:
        self._init(self.__call__, None, True, True)
        self._condi_offset = condi_offset
        self._body_pos = body_pos
        self._self_pos = self_pos
        self._exit_pos = exit_pos

    @property
    def __sdb_dis__(self) -> str:
        return f"NWHILE body=#{self._body_pos} self=#{self._self_pos} exit=#{self._exit_pos}"

    @property
    def __sdb_cmt__(self) -> str:
        return "NativeWhileNode"

    async def __call__(self, pc: WorkflowInterpreter) -> None:
        self._after_condition(pc, await _test(pc, self._condi_offset, self._exit_pos))

    def _after_condition(self, pc: WorkflowInterpreter, truthy: Any) -> None:
        """The rest of the node once the condition returned `truthy`, from wherever the pointer is
        now (also how the native opcode finishes when the condition moved the pointer)."""
        if truthy:
            parent = list(pc._pointer.base_addr[:-1])
            pc._ret_addr_stack.push(PointerVector([*parent, self._self_pos]))
            pc.jump_far_ptr([*parent, self._body_pos, 0])
        else:
            pc.jump_near(self._exit_pos)

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp | None:
        """OP_LOOP_HEAD: FIRST the condition, SECOND this head's row (pushed as the loop's entry),
        THEN the body, EXIT `#exit`; a suspended condition resumes at `#exit` (FIRST_RESUME)."""
        cond = node_row(locate, near(addr, addr[-1] + self._condi_offset))
        head = node_row(locate, near(addr, self._self_pos))
        if cond < 0 or head < 0:
            return None
        return OP_LOOP_HEAD, native_operands(
            first=cond,
            second=head,
            exit=target(locate, near(addr, self._exit_pos)),
            then=target(locate, [*addr[:-1], self._body_pos, 0]),
            first_resume=self._exit_pos,
        )


class NativeDoWhileNode(BaseNode):
    """Native DO check: truthy condition -> `#loop` (re-enter the body), falsy -> `#exit`."""

    __slots__ = (*NODE_SLOTS, "_condi_offset", "_exit_pos", "_loop_pos")

    def __init__(self, condi_offset: int, loop_pos: int, exit_pos: int) -> None:
        self._init(self.__call__, None, True, True)
        self._condi_offset = condi_offset
        self._loop_pos = loop_pos
        self._exit_pos = exit_pos

    @property
    def __sdb_dis__(self) -> str:
        return f"NDO.CHECK loop=#{self._loop_pos} exit=#{self._exit_pos}"

    @property
    def __sdb_cmt__(self) -> str:
        return "NativeDoWhileNode"

    async def __call__(self, pc: WorkflowInterpreter) -> None:
        self._after_condition(pc, await _test(pc, self._condi_offset, self._exit_pos))

    def _after_condition(self, pc: WorkflowInterpreter, again: Any) -> None:
        """The rest of the node once the condition returned `again`, from wherever the pointer is
        now (also how the native opcode finishes when the condition moved it)."""
        pc.jump_near(self._loop_pos if again else self._exit_pos)

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp | None:
        """OP_DO_CHECK (see `do_check_op`): again at `#loop`, out at `#exit`."""
        cond = node_row(locate, near(addr, addr[-1] + self._condi_offset))
        return do_check_op(locate, addr, cond, self._loop_pos, self._exit_pos)


class NativeBubbleEnterNode(BaseNode):
    """Enter the body segment at `#body`; with `push`, first push `#0` for the body's CONTINUE / BREAK."""

    __slots__ = (*NODE_SLOTS, "_body_pos", "_push")

    def __init__(self, body_pos: int, push: bool = True) -> None:
        self._init(self.__call__, None, False, True)
        self._body_pos = body_pos
        self._push = push

    @property
    def __sdb_dis__(self) -> str:
        return f"NENTER body=#{self._body_pos}"

    @property
    def __sdb_cmt__(self) -> str:
        return f"NativeBubbleEnterNode push={self._push}"

    def __call__(self, pc: WorkflowInterpreter) -> None:
        parent = list(pc._pointer.base_addr[:-1])
        if self._push:
            pc._ret_addr_stack.push(PointerVector([*parent, 0]))
        pc.jump_far_ptr([*parent, self._body_pos, 0])

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp | None:
        """OP_JUMP to the body (THEN), or with a pushed entry OP_CALLSUB: THEN the body, SECOND the
        segment's head row (the return row)."""
        body = target(locate, [*addr[:-1], self._body_pos, 0])
        if not self._push:
            return OP_JUMP, native_operands(then=body)
        head = node_row(locate, near(addr, 0))
        if head < 0 or body[0] < 0:
            return None
        return OP_CALLSUB, native_operands(second=head, then=body)
