"""Recursion through sub-calls stops at one depth on both builds: `sys.getrecursionlimit() // 12`
nested sub-calls, with `RecursionError`, before Python's own limit (which each build reaches after a
different number of levels, so runs that recurse would otherwise end with different traces)."""

from __future__ import annotations

import sys

import pytest

from amrita_sense import Node, WorkflowInterpreter
from amrita_sense.instructions import ALIAS, ARCHIVED_NODES, INVOKE, NOP, Try
from support.drivers import MODES, drive, interpreter


def recursing_graph(depths: list, through_try: bool):
    """A node that records the return stack's depth and calls itself, or the Try block around it."""

    @Node()
    async def recurse(pc: WorkflowInterpreter):
        depths.append(len(pc._ret_addr_stack))
        await pc.call_sub([2] if through_try else list(pc.get_graph().alias2vector_map["r"]))

    if through_try:
        return NOP >> NOP >> Try(recurse).CATCH(KeyError, NOP)
    return NOP >> INVOKE("r") >> ARCHIVED_NODES(ALIAS(recurse, "r"))


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("through_try", [False, True], ids=["call_sub", "try"])
@pytest.mark.parametrize("limit", [1000, 2400])
async def test_recursion_through_sub_calls_stops_at_one_depth(mode, through_try, limit):
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        await _recurse_twice(mode, through_try, limit)
    finally:
        sys.setrecursionlimit(before)


async def _recurse_twice(mode: str, through_try: bool, limit: int) -> None:
    depths: list = []
    graph = recursing_graph(depths, through_try)
    interp = interpreter(graph, mode)
    with pytest.raises(RecursionError, match="sub-calls nested"):
        await drive(interp, mode)
    # every nested sub-call pushed one entry; the one past the limit was refused before it pushed
    # (through a Try, the node runs in every second frame: the body's, at odd depths)
    deepest = limit // 12 if not through_try else limit // 12 - (limit // 12 + 1) % 2
    assert max(depths) == deepest
    # the frames unwound: nothing left on the stack, and the interpreter runs again
    assert len(interp._ret_addr_stack) == 0 and interp._subcalls == 0
    depths.clear()
    with pytest.raises(RecursionError):
        await drive(interp, mode)
    assert max(depths) == deepest
