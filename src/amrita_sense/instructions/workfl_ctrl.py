"""NOP, RESET and SUSPEND (stub: the instruction-set issue owns this module)."""

from __future__ import annotations

from amrita_sense.exceptions import InterruptKeepContext, InterruptNotice
from amrita_sense.node.wrapper import Node as _node


@_node(wrap_to_async=False, address_able=True)
def _no_operation() -> None:
    return None


@_node(wrap_to_async=False, address_able=False)
def _reset_operation():
    raise InterruptNotice("Reset Node")


@_node(wrap_to_async=False, address_able=True)
def _suspend_operation():
    raise InterruptKeepContext("Suspend Node with context retention")


NOP = _no_operation
RESET = _reset_operation
SUSPEND = _suspend_operation
INTERRUPT = RESET
INTERRUPT_KEEP_CTX = SUSPEND
