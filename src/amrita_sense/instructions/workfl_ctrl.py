"""NOP, RESET and SUSPEND: the workflow-control singletons."""

from __future__ import annotations

from typing import NoReturn

from amrita_sense.core.opcodes import OP_NOP
from amrita_sense.exceptions import InterruptKeepContext, InterruptNotice
from amrita_sense.node.compile_rules import give_rule
from amrita_sense.node.core import Node as _NodeType
from amrita_sense.node.core import lead_with
from amrita_sense.node.wrapper import Node as _node


@_node(wrap_to_async=False, address_able=True)
def _no_operation() -> None:
    """Do nothing; a placeholder and a jump target."""
    return None


@_node(wrap_to_async=False, address_able=False)
def _reset_operation() -> NoReturn:
    """End the run and reset the interpreter (pointer, stacks, flags, panic)."""
    raise InterruptNotice("Reset Node")


@_node(wrap_to_async=False, address_able=True)
def _suspend_operation() -> NoReturn:
    """End the run but keep the interpreter state; the next run continues after this node."""
    raise InterruptKeepContext("Suspend Node with context retention")


NOP: _NodeType[None] = _no_operation
"""The no-operation node (tag `NodeSuspend::_no_operation`)."""
NOP.__sdb_dis__ = "NOP"
NOP.__sdb_cmt__ = "no operation"


def _nop_op(node: object, addr: tuple, locate: object) -> tuple[int, None] | None:
    """OP_NOP for the NOP singleton itself (not for copies of it), no operands."""
    return (OP_NOP, None) if node is NOP else None


give_rule(NOP, _nop_op)  # its compile rule (see node.compile_rules)
lead_with(NOP)  # `instr >> x` is `NodeCompose(NOP, instr, x)`

RESET: _NodeType[NoReturn] = _reset_operation
"""Ends the run and discards the interpreter state; not addressable."""
RESET.__sdb_dis__ = "RESET"
RESET.__sdb_cmt__ = "reset interpreter state"

SUSPEND: _NodeType[NoReturn] = _suspend_operation
"""Ends the run and keeps the interpreter state so that a later run resumes after it."""
SUSPEND.__sdb_dis__ = "SUSPEND"
SUSPEND.__sdb_cmt__ = "suspend, keep context"

INTERRUPT: _NodeType[NoReturn] = RESET
INTERRUPT_KEEP_CTX: _NodeType[NoReturn] = SUSPEND
