"""Hot-swapping the DLL slot a node runs in (issue 14).

After `DLLCompose.apply()` from a node inside the slot, the run advances from that node's address in
the new payload, as 1.1.3 does; where the new payload is too short for that address (1.1.3 ends the
run with `NullPointerException`), it continues after the slot.
"""

from __future__ import annotations

import itertools

import pytest

from amrita_sense import NodeCompose, WorkflowInterpreter
from amrita_sense.exceptions import InterruptKeepContext
from amrita_sense.node import DLLCompose
from support.dual import Recorder, run_program, run_whole

SHAPES = [(old, pos, new) for old, new in itertools.product((1, 2, 3), (1, 2, 3)) for pos in range(old)]


def _graph(rec: Recorder, old: int, pos: int, new: int, mode: str):
    """`a >> DLL(x0 .. swap@pos ..) >> b`, where `swap` replaces the slot's payload with `new` nodes."""
    holder: dict = {}

    def swap():
        holder["dll"].apply(NodeCompose(*(rec.act(f"z{i}") for i in range(new))))

    payload = [rec.act(f"x{i}") for i in range(old)]
    payload[pos] = rec._make("swap", swap, mode)
    holder["dll"] = DLLCompose(NodeCompose(*payload))
    return NodeCompose(rec.act("a"), holder["dll"], rec.act("b")).render()


def _expected(old: int, pos: int, new: int) -> list[str]:
    return ["a", *(f"x{i}" for i in range(pos)), "swap", *(f"z{i}" for i in range(pos + 1, new)), "b"]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["inline", "async", "thread"])
@pytest.mark.parametrize(("old", "pos", "new"), SHAPES)
async def test_a_node_swapping_its_own_slot_continues_after_its_address(old, pos, new, mode):
    rec = Recorder()
    out = await run_whole(WorkflowInterpreter(_graph(rec, old, pos, new, mode)), rec)
    assert out.error is None
    assert out.trace == _expected(old, pos, new)


@pytest.mark.asyncio
@pytest.mark.parametrize(("old", "pos", "new"), [(3, 2, 1), (2, 1, 1), (2, 0, 3)])
async def test_stepping_through_a_swap(old, pos, new):
    rec = Recorder()
    out = await run_program(WorkflowInterpreter(_graph(rec, old, pos, new, "inline")), rec)
    assert out.error is None and out.trace == _expected(old, pos, new)


@pytest.mark.asyncio
async def test_a_run_suspended_in_the_slot_resumes_after_it_when_the_swap_removed_its_node():
    rec = Recorder()

    def pause():
        raise InterruptKeepContext("pause")

    dll = DLLCompose(NodeCompose(rec.act("x0"), rec._make("pause", pause, "inline"), rec.act("x2")))
    interp = WorkflowInterpreter(NodeCompose(rec.act("a"), dll, rec.act("b")).render())
    await interp.run()
    assert rec.trace == ["a", "x0", "pause"] and list(interp._pointer) == [1, 1]
    dll.apply(NodeCompose(rec.act("z0")))
    await interp.run()
    assert rec.trace == ["a", "x0", "pause", "b"]
