"""Interpreter-level providers: POINTER_DEPENDS, ADDR, FAR_OFFSET, NEAR_OFFSET (rule 81)."""

from __future__ import annotations

import sys

import pytest

from amrita_sense import Node, NodeCompose, PointerVector, WorkflowInterpreter
from amrita_sense.hook.matcher import Depends
from amrita_sense.instructions.alias import ALIAS
from amrita_sense.instructions.workfl_ctrl import NOP
from amrita_sense.runtime.deps import ADDR, FAR_OFFSET, NEAR_OFFSET, POINTER_DEPENDS

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup


def inline(func):
    return Node(wrap_to_async=False)(func)


@pytest.mark.asyncio
async def test_pointer_depends_provides_the_interpreter():
    seen = []

    @inline
    def node(pc: WorkflowInterpreter = Depends(POINTER_DEPENDS)):
        seen.append(pc)

    interp = WorkflowInterpreter(node.as_compose().render())
    await interp.run()
    assert seen == [interp]


@pytest.mark.asyncio
async def test_addr_and_offsets_relative_to_an_alias():
    seen = {}

    @inline
    def probe(
        addr: PointerVector = Depends(ADDR("target")),
        far: PointerVector = Depends(FAR_OFFSET("target")),
        near: int = Depends(NEAR_OFFSET("target")),
    ):
        seen.update(addr=list(addr), far=list(far), near=near)

    graph = NodeCompose(NOP, NodeCompose(ALIAS(NOP, "target"), NOP, NOP, probe)).render()
    await WorkflowInterpreter(graph).run()
    assert seen == {"addr": [1, 0], "far": [0, 3], "near": 3}


@pytest.mark.asyncio
async def test_near_offset_refuses_a_target_in_another_segment():
    @inline
    def probe(near: int = Depends(NEAR_OFFSET("target"))):
        pass

    graph = NodeCompose(NodeCompose(ALIAS(NOP, "target")), NOP, NodeCompose(NOP, probe)).render()
    with pytest.raises(ExceptionGroup) as info:  # provider exceptions come grouped (rule 75)
        await WorkflowInterpreter(graph).run()
    (error,) = info.value.exceptions
    assert isinstance(error, RuntimeError) and "not assign able to near offset" in str(error)


@pytest.mark.asyncio
async def test_far_offset_across_segments():
    seen = []

    @inline
    def probe(far: PointerVector = Depends(FAR_OFFSET("target"))):
        seen.append(list(far))

    graph = NodeCompose(NodeCompose(ALIAS(NOP, "target")), NOP, NodeCompose(NOP, probe)).render()
    await WorkflowInterpreter(graph).run()
    assert seen == [[2, 1]]


@pytest.mark.asyncio
async def test_unknown_alias_fails_the_node():
    from amrita_sense import NullPointerException

    @inline
    def probe(addr: PointerVector = Depends(ADDR("missing"))):
        pass

    with pytest.raises(ExceptionGroup) as info:
        await WorkflowInterpreter(probe.as_compose().render()).run()
    assert isinstance(info.value.exceptions[0], NullPointerException)
