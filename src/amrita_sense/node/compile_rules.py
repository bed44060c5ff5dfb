"""Compile nodes to native opcodes of the node table, at render time.

Each built-in instruction that has a native opcode owns its compile rule: a
method `_native_op(addr, locate)` beside its Python behaviour, returning
`(opcode, operand record)` (see `amrita_sense._opcodes` for the opcodes and the
record's named fields) or None when this instance cannot run natively (then the
generic call runs its function). A rule applies to the class that defines it, not
to subclasses (a subclass may change what the node does; it says
`_native_op = Base._native_op` to keep its base's opcode); a single node gets one
of its own through `give_rule` (the NOP singleton). The helpers here resolve operands: sub-call
targets become rows, jump targets become `(row, exact, address)` descriptors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amrita_sense.core.opcodes import OP_CALL

Locate = Callable[[list], tuple]
"""The table's `locate(address)`: `(row, exact)` (see `node.table._TableBuilder.locate`)."""

NativeOp = tuple[int, Any]
"""What a compile rule returns: `(opcode, operand record or None)`."""


def target(locate: Locate, addr: list[int]) -> tuple:
    """The jump-target descriptor `(row, exact, address)` of an address."""
    row, exact = locate(addr)
    return row, exact, list(addr)


def near(addr: tuple, slot: int) -> list[int]:
    """The address of `slot` in the segment of `addr`."""
    return [*addr[:-1], slot]


def callee(locate: Locate, addr: list[int]) -> int:
    """The row a sub-call of `addr` runs (the first row of a segment), or -1."""
    row, _ = locate(addr)
    return row


def node_row(locate: Locate, addr: list[int]) -> int:
    """The row of the node at `addr`, or -1 when a segment (or nothing) is there."""
    row, exact = locate(addr)
    return row if exact else -1


_INSTANCE_RULES: dict[int, tuple[Any, Callable[..., Any]]] = {}
"""By `id`: (the node, its own compile rule). Kept here, not as an attribute of the node,
because reading a node's `__dict__` would build one for every node rendered (64 bytes each)."""
# threads: immutable once published: filled at import (`give_rule` for the package's singletons), then
# only read; an entry is one tuple, checked by identity


def give_rule(node: Any, rule: Callable[..., Any]) -> None:
    """Give one node (a singleton, kept alive by this registry) a compile rule of its own."""
    _INSTANCE_RULES[id(node)] = (node, rule)


def compile_native(node: Any, addr: tuple, locate: Locate) -> NativeOp:
    """`(opcode, operands)` for a node: its own native opcode when it has one, else the generic call."""
    rule = type(node).__dict__.get("_native_op")
    if rule is None:
        own = _INSTANCE_RULES.get(id(node))
        if own is None or own[0] is not node:
            return OP_CALL, None
        rule = own[1]
    return rule(node, addr, locate) or (OP_CALL, None)


__all__ = ["Locate", "NativeOp", "callee", "compile_native", "give_rule", "near", "node_row", "target"]
