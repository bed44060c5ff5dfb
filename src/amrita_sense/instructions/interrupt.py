"""The context stack instructions: PUSH_CONTEXT, POP_CONTEXT, INT and IRET.

A context is an `InterpreterContext` snapshot (`pc.dump_interpreter()`) whose
pointer is replaced by a *return address*. IRET restores it with
`rebase_context`, which is not a marked jump, so execution continues at the
return address + 1.

Addresses given as an alias or a list are resolved when the graph is compiled
(`_post_compile`); a node that was never compiled resolves them against the
interpreter it is called with. A return address left as None is computed at
the node's first execution and then kept.
"""

from __future__ import annotations

from typing import Any

from amrita_sense.exceptions import IllegalState, InvalidOperand
from amrita_sense.instructions._support import check_target
from amrita_sense.instructions.enum import BuiltinTags
from amrita_sense.node.core import Node
from amrita_sense.node.run_state import AddressKeeper
from amrita_sense.runtime.types import InterpreterContext
from amrita_sense.runtime.workflow import WorkflowInterpreter
from amrita_sense.types import PointerVector

Target = str | list[int]


def _resolve(calc: Any, target: Target) -> list[int]:
    """The absolute address of an alias or a literal address (a fresh list)."""
    if isinstance(target, str):
        return list(calc.resolve_alias(target))
    return list(target)


def _return_stack_top(pc: WorkflowInterpreter, who: str) -> list[int]:
    stack = pc._ret_addr_stack.stack
    if not stack:
        raise IndexError(f"{who} has no return address: the return stack is empty")
    return list(stack[-1].base_addr)


class _InstructionNode(Node):
    """A built-in node whose function is a bound method (sync, run inline)."""

    _compiled: bool

    def __init__(self, tag: str) -> None:
        self._init(self._execute, tag, wrap_to_async=False, address_able=True)

    def _execute(self, pc: WorkflowInterpreter) -> Any:
        raise NotImplementedError

    def _mark_compiled(self) -> None:
        if self._compiled:
            raise RuntimeError(
                f"{self.tag} node has already been compiled; a compose-bound node can only be compiled once"
            )
        self._compiled = True


class PushContextNode(_InstructionNode, AddressKeeper):
    """PUSH_CONTEXT: push a snapshot whose pointer is the return address; no jump."""

    def __init__(self, target: Target | None, exclude_deps: bool, exclude_stack: bool) -> None:
        check_target(target, "PUSH_CONTEXT address", optional=True)
        super().__init__(BuiltinTags.PUSH_CONTEXT)
        self._target = target
        self._addr: list[int] | None = None
        self._exclude_deps = exclude_deps
        self._exclude_stack = exclude_stack
        self._compiled = False

    def _post_compile(self, compose: Any) -> None:
        self._mark_compiled()
        if self._target is not None:
            self._addr = _resolve(compose.calc, self._target)
        self.__sdb_dis__ = f"PUSHCTX {self._addr}"

    def keeps_address(self) -> bool:
        return self._target is None

    def kept_address(self) -> list[int] | None:
        return self._addr

    def keep_address(self, address: list[int]) -> None:
        self._addr = list(address)

    def _return_address(self, pc: WorkflowInterpreter) -> list[int]:
        if self._addr is not None:
            return self._addr
        if self._target is not None:
            return _resolve(pc.get_graph().calc, self._target)
        self._addr = _return_stack_top(pc, "PUSH_CONTEXT(None)")
        return self._addr

    def _execute(self, pc: WorkflowInterpreter) -> None:
        ctx = pc.dump_interpreter(exclude_deps=self._exclude_deps, exclude_stack=self._exclude_stack)
        ctx.ptr = PointerVector(list(self._return_address(pc)))
        pc._context_stack.push(ctx)


class PopContextNode(_InstructionNode):
    """POP_CONTEXT: pop the top snapshot and return it as the step's result."""

    def __init__(self) -> None:
        super().__init__(BuiltinTags.POP_CONTEXT)

    def _execute(self, pc: WorkflowInterpreter) -> InterpreterContext:
        return pc._context_stack.pop()


class InterruptIntoNode(_InstructionNode, AddressKeeper):
    """INT: snapshot the state with the return address, set IF to `if_state`, jump."""

    def __init__(self, jump_to: Target, ret_to: Target | None, if_state: bool) -> None:
        check_target(jump_to, "INT jump target")
        check_target(ret_to, "INT return address", optional=True)
        if not isinstance(if_state, bool):
            raise InvalidOperand(f"INT if_state must be a bool, not {if_state!r}")
        super().__init__(BuiltinTags.INT)
        self._jump_target = jump_to
        self._ret_target = ret_to
        self._jump_addr: list[int] | None = None
        self._ret_addr: list[int] | None = None
        self._if_state = if_state
        self._compiled = False

    def _post_compile(self, compose: Any) -> None:
        self._mark_compiled()
        calc = compose.calc
        self._jump_addr = _resolve(calc, self._jump_target)
        if self._ret_target is not None:
            self._ret_addr = _resolve(calc, self._ret_target)
        ret = self._ret_addr if self._ret_addr is not None else "?"
        self.__sdb_dis__ = f"INT {self._jump_addr}, ret={ret}"
        self.__sdb_cmt__ = "save context and jump"

    def keeps_address(self) -> bool:
        return self._ret_target is None

    def kept_address(self) -> list[int] | None:
        return self._ret_addr

    def keep_address(self, address: list[int]) -> None:
        self._ret_addr = list(address)

    def _return_address(self, pc: WorkflowInterpreter) -> list[int]:
        if self._ret_addr is not None:
            return self._ret_addr
        if self._ret_target is not None:
            return _resolve(pc.get_graph().calc, self._ret_target)
        # Inside a sub-call the interrupted position is the caller's, on top of the return stack.
        if pc.outer_interpreting:
            self._ret_addr = _return_stack_top(pc, "INT")
        else:
            self._ret_addr = list(pc._pointer.base_addr)
        return self._ret_addr

    def _execute(self, pc: WorkflowInterpreter) -> None:
        if pc.if_flag:
            raise IllegalState("Interrupt into is not allowed in IF statement")
        jump_addr = self._jump_addr
        if jump_addr is None:
            jump_addr = _resolve(pc.get_graph().calc, self._jump_target)
        ctx = pc.dump_interpreter()
        ctx.ptr = PointerVector(list(self._return_address(pc)))
        pc._context_stack.push(ctx)
        pc.if_flag = self._if_state
        pc.jump_to(jump_addr)


class InterruptReturnNode(_InstructionNode):
    """IRET: pop the top snapshot and restore it (`rebase_context`)."""

    __sdb_dis__ = "IRET"
    __sdb_cmt__ = "return from interrupt"

    def __init__(self) -> None:
        super().__init__(BuiltinTags.IRET)

    def _execute(self, pc: WorkflowInterpreter) -> None:
        pc.rebase_context(pc._context_stack.pop())


def PUSH_CONTEXT(
    alias_or_idata: Target | None,
    *,
    exclude_deps: bool = True,
    exclude_stack: bool = True,
) -> PushContextNode:
    """A node that pushes a context snapshot whose pointer is `alias_or_idata`.

    The address is a **return address**: when the snapshot is restored (IRET or
    `rebase_context`), execution continues at that address + 1. None means the
    top of the return stack at the node's first execution. The node does not
    jump and does not touch the IF bit. `exclude_deps` / `exclude_stack` leave
    the argument pools / the return stack out of the snapshot.
    """
    return PushContextNode(alias_or_idata, exclude_deps, exclude_stack)


def POP_CONTEXT() -> PopContextNode:
    """A node that pops the top context snapshot and returns it as its result."""
    return PopContextNode()


def INT(jump_to: Target, ret_to: Target | None = None, if_state: bool = False) -> InterruptIntoNode:
    """A software interrupt: save the context, set the IF bit to `if_state`, jump to `jump_to`.

    The snapshot is taken before IF changes and carries `ret_to` as its pointer
    (default: the INT node's own address, or the caller's when the node runs as a
    sub-call), so IRET comes back to `ret_to` + 1 with the previous IF bit.
    Raises `IllegalState` when the IF bit is already set.
    """
    return InterruptIntoNode(jump_to, ret_to, if_state)


def IRET() -> InterruptReturnNode:
    """A node that returns from an interrupt: pop the top context and restore it."""
    return InterruptReturnNode()


INTERRUPT_INTO = INT
INTERRUPT_RET = IRET

__all__ = [
    "INT",
    "INTERRUPT_INTO",
    "INTERRUPT_RET",
    "IRET",
    "POP_CONTEXT",
    "PUSH_CONTEXT",
    "InterruptIntoNode",
    "InterruptReturnNode",
    "PopContextNode",
    "PushContextNode",
]
