"""ALIAS and JMP / GOTO: naming, compile-time resolution, run-time jumps."""

from __future__ import annotations

import pytest

from amrita_sense import AliasNotFoundError, GraphBuildError, NodeCompose, NullPointerException, WorkflowInterpreter
from amrita_sense.instructions import ALIAS, GOTO, IF, JMP, NOP
from amrita_sense.instructions.alias import AliasNode
from amrita_sense.instructions.jump import JumpNode
from support.dual import Recorder, run_program


def test_alias_node_shares_the_wrapped_function():
    rec = Recorder()
    target = rec.act("t", 5)
    node = ALIAS(target, "here")
    assert isinstance(node, AliasNode)
    assert (node.node, node.alias, node.tag, node.func) == (target, "here", "Alias::here", target.func)
    assert node.address_able is True and node.wrap_to_async is target.wrap_to_async
    assert (node.__sdb_dis__, node.__sdb_cmt__) == ("ALIAS here", f"alias for {target.tag}")
    assert node() == 5


def test_alias_refuses_a_self_compiling_instruction():
    rec = Recorder()
    with pytest.raises(ValueError, match="SelfCompileInstruction"):
        ALIAS(IF(rec.act("c"), rec.act("d")), "x")


def test_alias_registers_its_full_path():
    rec = Recorder()
    graph = NodeCompose(rec.act("a"), NodeCompose(rec.act("b"), ALIAS(rec.act("c"), "deep"))).render()
    assert graph.alias2vector_map == {"deep": [1, 1]}


def test_duplicate_alias_is_a_build_error():
    rec = Recorder()
    with pytest.raises(GraphBuildError, match="already exists"):
        NodeCompose(ALIAS(rec.act("a"), "x"), ALIAS(rec.act("b"), "x")).render()


def test_jump_node_resolves_at_compile_time():
    rec = Recorder()
    by_alias, by_addr = JMP("t"), GOTO([0])
    assert GOTO is JMP and isinstance(by_alias, JumpNode)
    assert by_alias.__sdb_dis__ == "JMP ?" and by_alias.tag == "NodeSuspend::_jump"
    NodeCompose(ALIAS(rec.act("t"), "t"), by_alias, by_addr).render()
    assert by_alias._node_addr == [0] and by_addr._node_addr == [0]
    assert (by_alias.__sdb_dis__, by_alias.__sdb_cmt__) == ("JMP [0]", "JMP 't'")
    assert by_addr.__sdb_cmt__ == "JMP [0]"


def test_unknown_alias_suggests_a_close_match():
    rec = Recorder()
    with pytest.raises(AliasNotFoundError, match="did you mean target"):
        NodeCompose(JMP("targte"), ALIAS(rec.act("t"), "target")).render()
    with pytest.raises(AliasNotFoundError, match="please check your alias"):
        NodeCompose(JMP("zzz"), ALIAS(rec.act("t"), "target")).render()


def test_bad_literal_address_fails_at_compile_time():
    rec = Recorder()
    with pytest.raises(NullPointerException):
        NodeCompose(JMP([7]), rec.act("t")).render()


def test_a_jump_node_compiles_once():
    rec = Recorder()
    shared = JMP("a")
    with pytest.raises(RuntimeError, match="already been compiled"):
        NodeCompose(ALIAS(rec.act("a"), "a"), shared, NodeCompose(shared)).render()


@pytest.mark.asyncio
async def test_jump_forward_skips_nodes_and_counts_as_one_step():
    rec = Recorder()
    program = NodeCompose(rec.act("a", 1), JMP("t"), rec.act("skipped"), ALIAS(rec.act("t", 2), "t"), rec.act("z", 3))
    out = await run_program(WorkflowInterpreter(program.render()), rec)
    assert out.trace == ["a", "t", "z"] and out.yields == [1, None, 2, 3] and out.pointer == []


@pytest.mark.asyncio
async def test_jump_to_a_segment_lands_on_its_first_node():
    rec = Recorder()
    program = NodeCompose(JMP([2]), rec.act("skipped"), NodeCompose(rec.act("s1"), rec.act("s2")), rec.act("z"))
    out = await run_program(WorkflowInterpreter(program.render()), rec)
    assert out.trace == ["s1", "s2", "z"]


@pytest.mark.asyncio
async def test_alias_and_jump_loop():
    rec = Recorder()
    more = rec.counter("c", 3)
    program = NodeCompose(ALIAS(rec.act("head"), "head"), IF(more, JMP("head")), rec.act("end"))
    out = await run_program(WorkflowInterpreter(program.render()), rec)
    assert out.trace == ["head", "c1", "head", "c2", "head", "c3", "head", "c4", "end"]


@pytest.mark.asyncio
async def test_aliased_node_uses_its_alias_tag_as_suspend_point():
    rec = Recorder()
    seen = []

    class Gate:
        async def _wait_for_continue(self, tag=None):
            seen.append(tag)
            return False

    interp = WorkflowInterpreter(NodeCompose(ALIAS(rec.act("t"), "t"), NOP).render(), Gate())
    await run_program(interp, rec)
    assert seen == [
        "WorkflowInterpreter::each_node",
        "Alias::t",
        "WorkflowInterpreter::each_node",
        "NodeSuspend::_no_operation",
    ]
