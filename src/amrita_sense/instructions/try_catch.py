"""Try / CATCH / THEN / FINALLY: exception handling inside a workflow.

`Try(body).CATCH(E, handler)...THEN(t).FINALLY(f)` renders as one segment

    [TryNode, body, handler_1 .. handler_n, t?, f?, NOP]

The TryNode runs `body` as a sub-call. An exception of one of the
interpreter's pass-through types (`pc._exc_ignored`: `InterruptNotice`,
`BreakLoop` and the user's `exception_ignored`) is re-raised untouched;
otherwise the first CATCH whose type matches runs with the extra keyword
arguments `exc_type`, `exc_val` and `exc_tb`, and an unmatched exception keeps
propagating. THEN runs when the body succeeded, FINALLY always runs, and the
node then jumps to the closing NOP.

Every part runs at its own slot of the block, wherever an earlier part moved
the pointer (a RET, a jump, a rebase in the body): FINALLY runs on every way
out. When a part moved the pointer, the run goes on from there once the block
is done, instead of at the closing NOP.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from amrita_sense import _unsafe
from amrita_sense.core.opcodes import OP_TRY, native_operands
from amrita_sense.exceptions import IllegalState, InterruptKeepContext, InvalidOperand
from amrita_sense.instructions._support import require_part, resume_near
from amrita_sense.instructions.enum import BuiltinTags
from amrita_sense.instructions.workfl_ctrl import NOP
from amrita_sense.node.compile_rules import Locate, NativeOp, callee, near, target
from amrita_sense.node.core import BaseNode, NodeCompose
from amrita_sense.node.self_compile import SelfCompileInstruction
from amrita_sense.runtime.workflow import WorkflowInterpreter

_ExcSpec = type[BaseException] | tuple[type[BaseException], ...]


class TryNode(BaseNode):
    """The worker of a Try block; every operand is a slot index in its own segment.

    `_do_node_addr` is the body, `_catch_addr_chain` the `(exception type,
    handler slot)` pairs in declaration order, `_else_addr` the THEN slot,
    `_finally_addr` the FINALLY slot and `_escape_addr` the closing NOP.
    """

    def __init__(
        self,
        do_addr: int,
        catch_lst: list[tuple[_ExcSpec, int]],
        fin_addr: int | None,
        els_addr: int | None,
        escape_addr: int,
    ) -> None:
        self._do_node_addr = do_addr
        self._catch_addr_chain = catch_lst
        self._finally_addr = fin_addr
        self._else_addr = els_addr
        self._escape_addr = escape_addr
        self._init(self._worker, BuiltinTags.TRY_WORKER, wrap_to_async=False, address_able=False)

    @property
    def __sdb_dis__(self) -> str:
        """Mnemonic with the handler slots, e.g. ``TRY catch=ValueError#2``."""
        chain = ",".join(f"{_exc_name(exc)}#{addr}" for exc, addr in self._catch_addr_chain)
        return f"TRY catch={chain}" if chain else "TRY"

    @property
    def __sdb_cmt__(self) -> str:
        """The THEN, FINALLY and escape slots of the block."""
        parts = []
        if self._else_addr is not None:
            parts.append(f"else=#{self._else_addr}")
        if self._finally_addr is not None:
            parts.append(f"finally=#{self._finally_addr}")
        parts.append(f"escape=#{self._escape_addr}")
        return " ".join(parts)

    def __call__(self, pc: WorkflowInterpreter) -> Any:
        """Run the block on `pc` (a coroutine), as the interpreter would."""
        return self._worker(pc)

    def _handler_for(self, pc: WorkflowInterpreter, exc: BaseException) -> int | None:
        """The slot of the CATCH that handles `exc`, or None to let it propagate."""
        if not _unsafe.__flags__.DISABLE_EXC_IGNORED and isinstance(exc, pc._exc_ignored):
            return None
        for exc_type, addr in self._catch_addr_chain:
            if isinstance(exc, exc_type):
                return addr
        return None

    async def _worker(self, pc: WorkflowInterpreter) -> None:
        # Run as a sub-call (the body of an outer Try, an injected call...), the
        # caller's call_sub restores the pointer; jumping to the escape slot would
        # strand the caller inside this segment.
        as_subcall = pc.outer_interpreting
        home = list(pc._pointer.base_addr)
        try:
            await self._run_block(pc, home)
        except InterruptKeepContext:
            # FINALLY has run: a resumed run continues after the block (or where a part moved it).
            if not _moved(pc, home):
                resume_near(pc, self._escape_addr)
            raise
        if not as_subcall and not _moved(pc, home):
            pc.jump_near(self._escape_addr)

    async def _run_block(self, pc: WorkflowInterpreter, home: list[int]) -> None:
        try:
            await call_part(pc, home, self._do_node_addr)
        except BaseException as exc_val:
            handler = self._handler_for(pc, exc_val)
            if handler is None:
                raise
            exc_type, _, exc_tb = sys.exc_info()
            await call_part(pc, home, handler, exc_type=exc_type, exc_val=exc_val, exc_tb=exc_tb)
        else:
            if self._else_addr is not None:
                await call_part(pc, home, self._else_addr)
        finally:
            if self._finally_addr is not None:
                await call_part(pc, home, self._finally_addr)

    def _native_op(self, addr: tuple, locate: Locate) -> NativeOp | None:
        """OP_TRY: FIRST the body's row, THEN the escape slot (also FIRST_RESUME, where a suspended
        part resumes), EXTRA `(body, else, finally, catches)`: each part a `(slot, row)` pair or None,
        `catches` a tuple of `(exception spec, part)`."""

        def part(slot: int | None) -> tuple | None:
            return None if slot is None else (slot, callee(locate, near(addr, slot)))

        body, on_success, on_exit = part(self._do_node_addr), part(self._else_addr), part(self._finally_addr)
        catches = tuple((exc, part(slot)) for exc, slot in self._catch_addr_chain)
        if body is None or any(
            p is not None and p[1] < 0 for p in [body, on_success, on_exit, *(c for _, c in catches)]
        ):
            return None
        return OP_TRY, native_operands(
            first=body[1],
            then=target(locate, near(addr, self._escape_addr)),
            first_resume=self._escape_addr,
            extra=(body, on_success, on_exit, catches),
        )


def _moved(pc: WorkflowInterpreter, home: list[int]) -> bool:
    """True when a part of the block at `home` moved the pointer (a jump, a return, a rebase)."""
    return pc.jump_marked or pc._pointer.base_addr != home


async def call_part(pc: WorkflowInterpreter, home: list[int], slot: int, **exc_kwargs: Any) -> Any:
    """`call_sub` of the part at `slot` of the block whose TryNode is at `home`, wherever an
    earlier part moved the pointer: every part runs at its own slot, so FINALLY runs on every way
    out of the body. A jump an earlier part marked stays the block's way out (its target is what
    this call restores) unless this part moves the pointer itself."""
    marked = pc.jump_marked
    if marked:
        pc.unmarkup()
    before = list(pc._pointer.base_addr) if marked else None
    try:
        return await pc.call_sub([*home[:-1], slot], **exc_kwargs)
    finally:
        if marked and not pc.jump_marked and pc._pointer.base_addr == before:
            pc._mark_jump()


def _exc_name(exc: _ExcSpec) -> str:
    if isinstance(exc, tuple):
        return "(" + ",".join(e.__name__ for e in exc) + ")"
    return exc.__name__


def _check_exc_spec(exc: Any) -> None:
    members = exc if isinstance(exc, tuple) else (exc,)
    if not members or not all(isinstance(e, type) and issubclass(e, BaseException) for e in members):
        raise InvalidOperand(f"CATCH needs an exception class or a tuple of them, not {exc!r}")


class TryClause(SelfCompileInstruction):
    """The source form of a Try block; build it with `Try(body)`."""

    def __init__(self, do: BaseNode) -> None:
        self._do = require_part(do, "Try(node)")
        self._catch_then: list[tuple[_ExcSpec, BaseNode]] = []
        self._then: BaseNode | None = None
        self._finally: BaseNode | None = None

    @property
    def CATCH(self) -> Callable[[_ExcSpec, BaseNode], TryClause]:
        """`.CATCH(exc_type, handler)`: handle `exc_type` (first match wins). Not after FINALLY."""
        if self._finally is not None:
            raise IllegalState("Cannot add catch after finally")

        def add_catch(exc: _ExcSpec, then: BaseNode) -> TryClause:
            _check_exc_spec(exc)
            self._catch_then.append((exc, require_part(then, "CATCH(exc_type, node)")))
            return self

        return add_catch

    @property
    def THEN(self) -> Callable[[BaseNode], TryClause]:
        """`.THEN(node)`: run `node` when the body succeeded (once)."""

        def add_then(node: BaseNode) -> TryClause:
            if self._then is not None:
                raise IllegalState("Cannot add THEN after THEN")
            self._then = require_part(node, "THEN(node)")
            return self

        return add_then

    @property
    def FINALLY(self) -> Callable[[BaseNode], TryClause]:
        """`.FINALLY(node)`: run `node` whatever happened (once)."""

        def add_finally(node: BaseNode) -> TryClause:
            if self._finally is not None:
                raise IllegalState("Cannot add finally after finally")
            self._finally = require_part(node, "FINALLY(node)")
            return self

        return add_finally

    def extract(self) -> NodeCompose:
        """The block's segment: `[TryNode, body, handlers..., then?, finally?, NOP]`."""
        if not self._catch_then and self._finally is None:
            raise IllegalState("Try Clause must have at least one catch or finally")
        slots: list[Any] = [None, self._do]
        chain: list[tuple[_ExcSpec, int]] = []
        for exc, handler in self._catch_then:
            chain.append((exc, len(slots)))
            slots.append(handler)
        then_addr = fin_addr = None
        if self._then is not None:
            then_addr = len(slots)
            slots.append(self._then)
        if self._finally is not None:
            fin_addr = len(slots)
            slots.append(self._finally)
        escape_addr = len(slots)
        slots.append(NOP)
        slots[0] = TryNode(1, chain, fin_addr, then_addr, escape_addr)
        return NodeCompose(*slots)


def Try(node: BaseNode) -> TryClause:
    """Start a Try block around `node`: `Try(node).CATCH(E, h).THEN(t).FINALLY(f)`.

    A handler receives the exception by parameter name: `exc_type`, `exc_val`,
    `exc_tb`. At least one CATCH or a FINALLY is required when the block is
    rendered (`IllegalState` otherwise).
    """
    return TryClause(node)


__all__ = ["Try", "TryClause", "TryNode"]
