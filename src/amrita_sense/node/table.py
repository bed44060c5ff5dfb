"""Compile a rendered graph into the core's flat node table (`Program`)."""

from __future__ import annotations

import inspect
from typing import Any

from amrita_sense import core as _core
from amrita_sense._classmemo import ClassMemo
from amrita_sense.core.opcodes import OP_CALL, dense_row
from amrita_sense.node.abc_base import is_rendered_compose
from amrita_sense.node.compile_rules import compile_native
from amrita_sense.utils import isabstractmethod


def _compute_precheck_bit(cls: type[Any]) -> int:
    return 0 if isabstractmethod(cls._pre_check) else _core.ROW_PRECHECK


_precheck_bit = ClassMemo(_compute_precheck_bit)
# threads: a race only recomputes the same bit (see ClassMemo)
"""ROW_PRECHECK when a node class overrides `_pre_check`, per class."""


def _row_bits(node: Any) -> int:
    is_coro = getattr(node, "is_coro", None)
    if is_coro is None:
        is_coro = inspect.iscoroutinefunction(node.func)
    bits = _core.ROW_CORO if is_coro else (_core.ROW_THREAD if node.wrap_to_async else 0)
    return bits | _precheck_bit(type(node))


def _static_plan(node: Any) -> Any:
    """The injection plan of a node whose function takes no parameters: the same for every pool."""
    meta = getattr(node, "fun_sign", None)
    if meta is None or meta["params"] or meta["factory_map"]:
        return None
    return _core.NO_ARGUMENTS


def _common_prefix(a: tuple, b: tuple) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class _TableBuilder:
    def __init__(self) -> None:
        self.nodes: list = []
        self.funcs: list = []
        self.bits: list[int] = []
        self.static_plans: list = []
        self.addrs: list[tuple] = []
        self.row_of: dict[tuple, int] | None = None
        self.seg_row: dict[tuple, int] = {}

    def add_row(self, node: Any, addr: tuple, bits: int) -> None:
        self.nodes.append(node)
        self.funcs.append(getattr(node, "func", None))
        self.bits.append(bits)
        self.static_plans.append(_static_plan(node) if not bits & _core.ROW_EMPTY else None)
        self.addrs.append(addr)

    def locate(self, addr: list) -> tuple[int, bool]:
        key = tuple(addr)
        if self.row_of is None:
            self.row_of = {a: i for i, a in enumerate(self.addrs)}
        row = self.row_of.get(key)
        if row is not None:
            return row, True
        return self.seg_row.get(key, -1), False

    def landings(self) -> list:
        """Per row, the address plain advancement from the previous row lands on, when that is a
        segment above the row (advancement enters one level at a time); None for the row itself."""
        result: list = [None] * len(self.addrs)
        for row in range(1, len(self.addrs)):
            before, here = self.addrs[row - 1], self.addrs[row]
            depth = _common_prefix(before, here) + 2
            if depth < len(here):
                result[row] = list(here[:depth])
        return result

    def compile_ops(self) -> tuple[list[int], list]:
        ops: list[int] = []
        operands: list = []
        for node, addr, bits in zip(self.nodes, self.addrs, self.bits):
            op, args = (OP_CALL, None) if bits & _core.ROW_EMPTY else compile_native(node, addr, self.locate)
            ops.append(op)
            operands.append(args)
        return ops, operands

    def walk(self, segment: Any, prefix: tuple) -> None:
        children = getattr(segment, "_graph", None)
        if type(children) is not list:
            children = [segment[idx] for idx in range(len(segment))]
        for idx, child in enumerate(children):
            addr = (*prefix, idx)
            if not is_rendered_compose(child):
                self.add_row(child, addr, _row_bits(child))
            elif child:
                self.seg_row[addr] = len(self.nodes)
                self.walk(child, addr)
            else:
                self.add_row(child, addr, _core.ROW_EMPTY)


def _walked(graph: Any) -> _TableBuilder:
    builder = _TableBuilder()
    if graph:
        builder.walk(graph, ())
    return builder


def compile_instructions(graph: Any) -> tuple[list[int], list]:
    """The opcode and operand record of each of `graph`'s rows, as `build_program` compiles them
    (a compiled `Program` does not show its records to Python)."""
    return _walked(graph).compile_ops()


def build_program(graph: Any) -> Any:
    """One row per executable slot in depth-first order; see `_core.Program`."""
    builder = _walked(graph)
    ops, operands = builder.compile_ops()
    rows = [dense_row(args) for args in operands]
    return _core.Program(
        graph,
        builder.nodes,
        builder.funcs,
        builder.bits,
        builder.static_plans,
        ops,
        operands,
        rows,
        builder.landings(),
        builder.addrs,
        builder.row_of,
        builder.seg_row,
    )
