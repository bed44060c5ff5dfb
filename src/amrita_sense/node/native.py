"""Compile built-in instruction nodes to native opcodes of the node table.

A native opcode is an exact re-implementation of its node's Python function,
used only on the core's fast path (no middleware, no suspend signal pending);
everywhere else the node's function runs as usual. Operands are resolved
here, at render time: sub-call targets become rows, jump targets become
`(row, exact, address)` descriptors.
"""

from __future__ import annotations

from typing import Any, Callable

from amrita_sense._core import (
    OP_BRANCH, OP_CALL, OP_CALLSUB, OP_DO, OP_DO_CHECK, OP_ELSE, OP_INVOKE, OP_JUMP, OP_LOOP_CONTROL,
    OP_LOOP_HEAD, OP_NATIVE_IF, OP_NOP, OP_RET, OP_TRY, OP_WHILE,
)

Locate = Callable[[list], tuple]


def _target(locate: Locate, addr: list[int]) -> tuple:
    row, exact = locate(addr)
    return row, exact, list(addr)


def _near(addr: tuple, slot: int) -> list[int]:
    return [*addr[:-1], slot]


def _callee(locate: Locate, addr: list[int]) -> int:
    row, _ = locate(addr)
    return row


def _node_row(locate: Locate, addr: list[int]) -> int:
    """The row of the node at `addr`, or -1 when a segment (or nothing) is there."""
    row, exact = locate(addr)
    return row if exact else -1


def _compile_jump(node: Any, addr: tuple, locate: Locate) -> tuple | None:
    if not node._node_addr:
        return None
    return OP_JUMP, _target(locate, node._node_addr)


def _compile_checkup(node: Any, addr: tuple, locate: Locate) -> tuple:
    return OP_JUMP, _target(locate, _near(addr, node._jump_addr))


def _compile_branch(node: Any, addr: tuple, locate: Locate) -> tuple | None:
    here = addr[-1]
    cond = _callee(locate, _near(addr, here + node._condition_offset))
    body = _callee(locate, _near(addr, here + node._do_offset))
    if cond < 0 or body < 0:
        return None
    false_target = _target(locate, _near(addr, here + node._false_offset))
    then_target = _target(locate, _near(addr, node._then_addr))
    return OP_BRANCH, (cond, body, false_target, then_target, node._do_offset, node._false_offset, node._then_addr)


def _compile_else(node: Any, addr: tuple, locate: Locate) -> tuple | None:
    here = addr[-1]
    body = _callee(locate, _near(addr, here + node._do_offset))
    if body < 0:
        return None
    return OP_ELSE, (body, _target(locate, _near(addr, here + node._then_offset)), node._then_offset)


def _compile_while(node: Any, addr: tuple, locate: Locate) -> tuple | None:
    here = addr[-1]
    cond = _callee(locate, _near(addr, here + node._condi_offset))
    body = _callee(locate, _near(addr, here + node._do_offset))
    if cond < 0 or body < 0:
        return None
    checkup = _target(locate, _near(addr, node._checkup_addr))
    exit_ = _target(locate, _near(addr, node._else_addr))
    return OP_WHILE, (cond, body, checkup, exit_, node._do_offset, node._checkup_addr, node._else_addr)


def _compile_do(node: Any, addr: tuple, locate: Locate) -> tuple | None:
    body = _callee(locate, _near(addr, addr[-1] + node._do_offset))
    if body < 0:
        return None
    check = _target(locate, _near(addr, node._jmp_addr))
    exit_ = _target(locate, _near(addr, node._break_addr))
    return OP_DO, (body, check, exit_, node._jmp_addr)


def _do_check(locate: Locate, addr: tuple, cond: int, again_slot: int, exit_slot: int) -> tuple | None:
    """The DO_CHECK opcode: call `cond`, then jump to `again_slot` (truthy) or `exit_slot`."""
    if cond < 0:
        return None
    again = _target(locate, _near(addr, again_slot))
    exit_ = _target(locate, _near(addr, exit_slot))
    return OP_DO_CHECK, (cond, again, exit_, exit_slot)


def _compile_do_check(node: Any, addr: tuple, locate: Locate) -> tuple | None:
    cond = _callee(locate, _near(addr, addr[-1] + node._condi_offset))
    return _do_check(locate, addr, cond, node._back_addr, node._then_addr)


def _compile_call(node: Any, addr: tuple, locate: Locate) -> tuple | None:
    if node._to_addr is None:
        return None
    target = _target(locate, node._to_addr)
    if target[0] < 0:
        return None
    if node._frm_addr is None:  # the CALL's own address, which its function records on first use
        return_row = locate(list(addr))[0]
    else:
        row, exact = locate(node._frm_addr)
        return_row = row if exact else -1
    return OP_CALLSUB, (*target, return_row)


def _compile_ret(node: Any, addr: tuple, locate: Locate) -> tuple:
    return OP_RET, None


def _compile_try(node: Any, addr: tuple, locate: Locate) -> tuple | None:
    """Operands: `(escape target, escape slot, body, else, finally, catches)`; each part is a
    `(slot, row)` pair or None, `catches` a tuple of `(exception spec, (slot, row))`."""

    def part(slot: int | None) -> tuple | None:
        return None if slot is None else (slot, _callee(locate, _near(addr, slot)))

    parts = [part(node._do_node_addr), part(node._else_addr), part(node._finally_addr)]
    catches = tuple((exc, part(slot)) for exc, slot in node._catch_addr_chain)
    if any(p is not None and p[1] < 0 for p in [*parts, *(c for _, c in catches)]):
        return None
    escape = _target(locate, _near(addr, node._escape_addr))
    return OP_TRY, (escape, node._escape_addr, *parts, catches)


def _compile_native_if(node: Any, addr: tuple, locate: Locate) -> tuple | None:
    cond = _node_row(locate, _near(addr, addr[-1] + node._condi_offset))
    if cond < 0:
        return None
    if node._is_single:
        body = _node_row(locate, _near(addr, addr[-1] + node._do_offset))
        if body < 0:
            return None
        then_target = _target(locate, _near(addr, node._ret_pos))
    else:
        body = -1
        then_target = _target(locate, [*addr[:-1], node._do_pos, 0])
    false_target = _target(locate, _near(addr, node._false_pos))
    return OP_NATIVE_IF, (cond, body, false_target, then_target, node._do_offset, node._false_pos, node._ret_pos)


def _compile_native_while(node: Any, addr: tuple, locate: Locate) -> tuple | None:
    cond = _node_row(locate, _near(addr, addr[-1] + node._condi_offset))
    head = _node_row(locate, _near(addr, node._self_pos))
    if cond < 0 or head < 0:
        return None
    body = _target(locate, [*addr[:-1], node._body_pos, 0])
    exit_ = _target(locate, _near(addr, node._exit_pos))
    return OP_LOOP_HEAD, (cond, head, body, exit_, node._self_pos, node._exit_pos)


def _compile_native_do_check(node: Any, addr: tuple, locate: Locate) -> tuple | None:
    cond = _node_row(locate, _near(addr, addr[-1] + node._condi_offset))
    return _do_check(locate, addr, cond, node._loop_pos, node._exit_pos)


def _compile_enter(node: Any, addr: tuple, locate: Locate) -> tuple | None:
    body = _target(locate, [*addr[:-1], node._body_pos, 0])
    if not node._push:
        return OP_JUMP, body
    head = _node_row(locate, _near(addr, 0))
    if head < 0 or body[0] < 0:
        return None
    return OP_CALLSUB, (*body, head)


def _compile_branch_exit(node: Any, addr: tuple, locate: Locate) -> tuple | None:
    if len(addr) < 2:
        return None
    return OP_JUMP, _target(locate, [*addr[:-2], node._merge_pos])


def _compile_near_jump(node: Any, addr: tuple, locate: Locate) -> tuple:
    return OP_JUMP, _target(locate, _near(addr, node._target_near))


def _compile_skip(node: Any, addr: tuple, locate: Locate) -> tuple:
    return OP_JUMP, _target(locate, _near(addr, addr[-1] + node._offset))


def _compile_invoke(node: Any, addr: tuple, locate: Locate) -> tuple | None:
    target = _node_row(locate, node._addr) if node._addr else -1
    return (OP_INVOKE, target) if target >= 0 else None


def _compile_loop_control(node: Any, addr: tuple, locate: Locate) -> tuple | None:
    if not node._configured:
        return None
    return OP_LOOP_CONTROL, (node._target_pos, {})


_COMPILERS: dict[type, Callable] | None = None


def _compilers() -> dict[type, Callable]:
    global _COMPILERS
    if _COMPILERS is None:
        from amrita_sense.instructions import if_clause, jump, ret2, subprogram, try_catch, workfl_ctrl
        from amrita_sense.instructions.loop import do_while, while_clause
        from amrita_sense.instructions.native import _core as native, break_loop, continue_loop

        _COMPILERS = {
            jump.JumpNode: _compile_jump,
            while_clause.CheckUpNode: _compile_checkup,
            while_clause.WhileNode: _compile_while,
            do_while.DONode: _compile_do,
            do_while.DowhileNode: _compile_do_check,
            if_clause.ConditionJumpNode: _compile_branch,
            if_clause.ELSENode: _compile_else,
            ret2._CallNode: _compile_call,
            ret2._RetNode: _compile_ret,
            try_catch.TryNode: _compile_try,
            type(workfl_ctrl.NOP): _compile_maybe_nop,
            native.NativeIfJumpNode: _compile_native_if,
            native.NativeWhileNode: _compile_native_while,
            native.NativeDoWhileNode: _compile_native_do_check,
            native.NativeBubbleEnterNode: _compile_enter,
            native.NativeBranchExitNode: _compile_branch_exit,
            break_loop._BreakLoopNode: _compile_loop_control,
            continue_loop._ContinueNode: _compile_loop_control,
            subprogram.SubprogramJumpNode: _compile_near_jump,
            subprogram._SegmentSkipNode: _compile_skip,
            subprogram.InvokeNode: _compile_invoke,
        }
        _NOP.append(workfl_ctrl.NOP)
    return _COMPILERS


def _row_of(target: tuple) -> int:
    """The row a jump-target descriptor lands on exactly, or -1 (the core then uses the address)."""
    row, exact, _ = target
    return row if exact else -1


_NO_ROWS = (-1, -1, -1, -1)


def operand_rows(op: int, operands: Any) -> tuple[int, int, int, int]:
    """The rows an opcode works with, for the core's dense operand array:
    `(first callee, second callee or other row, exit/false jump row, then/continue jump row)`,
    -1 where there is none or the target is not a single row."""
    if op in (OP_BRANCH, OP_NATIVE_IF):  # (cond, body, false target, then target, ...)
        return operands[0], operands[1], _row_of(operands[2]), _row_of(operands[3])
    if op == OP_WHILE:  # (cond, body, checkup target, exit target, ...)
        return operands[0], operands[1], _row_of(operands[3]), _row_of(operands[2])
    if op == OP_ELSE:  # (body, then target, ...)
        return operands[0], -1, -1, _row_of(operands[1])
    if op in (OP_DO, OP_DO_CHECK):  # (callee, continue target, exit target, ...)
        return operands[0], -1, _row_of(operands[2]), _row_of(operands[1])
    if op == OP_LOOP_HEAD:  # (cond, head row, body target, exit target, ...)
        return operands[0], operands[1], _row_of(operands[3]), _row_of(operands[2])
    if op == OP_JUMP:
        return _row_of(operands), -1, -1, -1
    if op == OP_CALLSUB:
        return _row_of(operands[:3]), operands[3], -1, -1
    if op == OP_INVOKE:
        return operands, -1, -1, -1
    if op == OP_TRY:  # (escape target, escape slot, body part, ...)
        return operands[2][1], -1, -1, _row_of(operands[0])
    return _NO_ROWS


def compile_native(node: Any, addr: tuple, locate: Locate) -> tuple:
    """`(opcode, operands)` for a node: a native opcode for a known built-in, else the generic call."""
    compiler = (_COMPILERS or _compilers()).get(type(node))
    if compiler is None:
        return OP_CALL, None
    return compiler(node, addr, locate) or (OP_CALL, None)


def _compile_maybe_nop(node: Any, addr: tuple, locate: Locate) -> tuple | None:
    return (OP_NOP, None) if node is _NOP[0] else None


_NOP: list = []


__all__ = ["compile_native", "operand_rows"]
