"""CALL / RET / PUSH_RET: far calls through the return-address stack.

`CALL` pushes a return address and jumps; `RET` pops it and rebases the
pointer there without a jump mark, so the loop then advances: execution
continues at the popped address + 1.
"""

from __future__ import annotations

import sys
from typing import Any

from amrita_sense.core.opcodes import OP_CALLSUB, OP_RET, native_operands
from amrita_sense.instructions._support import already_compiled, check_target
from amrita_sense.instructions.enum import BuiltinTags
from amrita_sense.node.compile_rules import Locate, NativeOp, callee, node_row, target
from amrita_sense.node.core import Node as NodeType
from amrita_sense.runtime.workflow import WorkflowInterpreter
from amrita_sense.types import PointerVector


def _resolve(compose: Any, alias_or_idata: str | list[int] | None) -> list[int] | None:
    if isinstance(alias_or_idata, str):
        return compose.calc.resolve_alias(alias_or_idata)
    return alias_or_idata


class _RetNode(NodeType):
    """Pop the return-address stack and rebase the pointer onto the popped address."""

    __sdb_dis__ = "RET"
    __sdb_cmt__ = "return from subroutine"

    def __init__(self) -> None:
        super().__init__(self.call, BuiltinTags.RET, False, True, sys._getframe(2))

    def call(self, pc: WorkflowInterpreter) -> None:
        ptr = pc._ret_addr_stack.pop()
        pc.rebase_ptr(ptr.base_addr)

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp:
        """OP_RET, no operands."""
        return OP_RET, None


class _PushRetNode(NodeType):
    """Push `_addr` (resolved from `_alias_or_idata` at compile time) onto the return stack."""

    __sdb_cmt__ = "push return address"

    def __init__(self, alias_or_idata: str | list[int]) -> None:
        check_target(alias_or_idata, "PUSH_RET address")
        self._alias_or_idata = alias_or_idata
        self._addr: list[int] | None = None
        super().__init__(self.call, BuiltinTags.PUSH_RET, False, True, sys._getframe(2))

    @property
    def __sdb_dis__(self) -> str | None:
        return None if self._addr is None else f"PUSH {self._addr}"

    def call(self, pc: WorkflowInterpreter) -> None:
        if self._addr is None:
            raise RuntimeError(f"{self.tag} node was not compiled into a graph")
        pc._ret_addr_stack.push(PointerVector(list(self._addr)))

    def _post_compile(self, compose: Any) -> None:
        if self._addr is not None:
            raise already_compiled(str(self.tag))
        self._addr = _resolve(compose, self._alias_or_idata)


class _CallNode(NodeType):
    """Push the return address `_from_addr` (default: this node's own address) and jump to `_to_addr`."""

    __sdb_cmt__ = "push return address and jump"

    def __init__(self, to_adr: str | list[int], from_adr: str | list[int] | None) -> None:
        check_target(to_adr, "CALL target")
        check_target(from_adr, "CALL return address", optional=True)
        self._to_adr = to_adr
        self._from_adr = from_adr
        self._to_addr: list[int] | None = None
        self._frm_addr: list[int] | None = None
        self._compiled = False
        super().__init__(self.call, BuiltinTags.CALL, False, True, sys._getframe(2))

    @property
    def __sdb_dis__(self) -> str | None:
        if not self._compiled:
            return None
        return f"CALL {self._to_addr}, ret={self._frm_addr if self._frm_addr is not None else '?'}"

    def call(self, pc: WorkflowInterpreter) -> None:
        if self._to_addr is None:
            raise RuntimeError(f"{self.tag} node was not compiled into a graph")
        if self._frm_addr is None:
            self._frm_addr = list(pc._pointer.base_addr)
        pc._ret_addr_stack.push(PointerVector(list(self._frm_addr)))
        pc.jump_to(self._to_addr)

    def _post_compile(self, compose: Any) -> None:
        if self._frm_addr is not None or self._to_addr is not None:
            raise already_compiled(str(self.tag))
        self._frm_addr = _resolve(compose, self._from_adr)
        self._to_addr = _resolve(compose, self._to_adr)
        self._compiled = True

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp | None:
        """OP_CALLSUB: THEN the callee `_to_addr`, SECOND the return row (the CALL's own row when no
        `from` address was given, which its function records on first use; -1: not a row)."""
        if self._to_addr is None:
            return None
        to = target(locate, self._to_addr)
        if to[0] < 0:
            return None
        if self._frm_addr is None:
            return_row = callee(locate, list(addr))
        else:
            return_row = node_row(locate, self._frm_addr)
        return OP_CALLSUB, native_operands(second=return_row, then=to)


def RET() -> NodeType[None]:
    """Return: pop the return stack; execution continues after the popped address."""
    return _RetNode()


def PUSH_RET(alias_or_idata: str | list[int]) -> NodeType[None]:
    """Push an address (alias or absolute) onto the return stack without jumping.

    `RET` resumes *after* the popped address, so push the predecessor of the resume point.
    """
    return _PushRetNode(alias_or_idata)


def CALL(to_adr: str | list[int], *, from_adr: str | list[int] | None = None) -> NodeType[None]:
    """Push a return address (`from_adr`, default this node's own address) and jump to `to_adr`."""
    return _CallNode(to_adr, from_adr)


RET_FAR = RET
PUSH_STACK = PUSH_RET


def PUSH_AND_GOTO(from_adr: str | list[int] | None, to_adr: str | list[int]) -> NodeType[None]:
    """Deprecated: `CALL(to_adr, from_adr=from_adr)` (the argument order changed in 1.0)."""
    return _CallNode(to_adr, from_adr)
