"""IF / ELIF / ELSE (call_sub based) and NATIVE_IF (jump based)."""

from __future__ import annotations

import pytest

from amrita_sense import NodeCompose, WorkflowInterpreter
from amrita_sense.instructions import IF, NATIVE_IF, NOP
from amrita_sense.instructions.if_clause import ConditionJumpNode, ELSENode
from amrita_sense.instructions.native._core import NativeBranchExitNode, NativeBubbleEnterNode, NativeIfJumpNode
from support.dual import Recorder, run_program


async def run(program, rec):
    if not isinstance(program, NodeCompose):
        program = NodeCompose(program)
    return await run_program(WorkflowInterpreter(program.render()), rec)


def shape(graph) -> list:
    """Class names of a rendered graph, nested lists for segments."""
    return [
        shape(child) if getattr(child, "__rendered_compose__", False) else type(child).__name__
        for child in (graph[i] for i in range(len(graph)))
    ]


# ----- IF ------------------------------------------------------------------------------


def test_if_layout_and_mnemonics():
    rec = Recorder()
    c, x, y = rec.act("c"), rec.act("x"), rec.act("y")
    graph = (IF(c, x) >> y).render()
    assert len(graph) == 3 and graph[0] is NOP and graph[2] is y
    seg = graph[1]
    assert [seg[1], seg[2], seg[3]] == [c, x, NOP]
    head = seg[0]
    assert isinstance(head, ConditionJumpNode)
    assert (head.tag, head.wrap_to_async, head.address_able) == ("NodeSuspend::_do", True, True)
    assert (head.__sdb_dis__, head.__sdb_cmt__) == ("JMPIF then=#3 else=+3", "ConditionJumpNode")


def test_elif_else_layout():
    rec = Recorder()
    clause = IF(rec.act("c1"), rec.act("d1")).ELIF(rec.act("c2"), rec.act("d2")).ELIF(rec.act("c3"), rec.act("d3"))
    graph = clause.ELSE(rec.act("e")).extract().render()
    assert shape(graph) == ["ConditionJumpNode", "Node", "Node"] * 3 + ["ELSENode", "Node", "Node"]
    assert [graph[i].__sdb_dis__ for i in (0, 3, 6)] == ["JMPIF then=#11 else=+3"] * 3
    assert (graph[9].__sdb_dis__, graph[9].__sdb_cmt__) == ("ELSE do=+1 then=+2", "ELSENode")
    assert graph[9].tag == "NodeSuspend::_else_worker"


def test_if_else_layout_and_elif_default_else():
    rec = Recorder()
    graph = IF(rec.act("c"), rec.act("d")).ELSE(rec.act("e")).extract().render()
    assert shape(graph) == ["ConditionJumpNode", "Node", "Node", "ELSENode", "Node", "Node"]
    assert graph[0].__sdb_dis__ == "JMPIF then=#5 else=+3"
    chain = IF(rec.act("c"), rec.act("d")).ELIF(rec.act("c2"), rec.act("d2")).ELSE().extract().render()
    assert len(chain) == 9 and chain[7] is NOP and chain[8] is NOP
    plain_elif = IF(rec.act("c"), rec.act("d")).ELIF(rec.act("c2"), rec.act("d2")).extract().render()
    assert len(plain_elif) == 7 and plain_elif[0].__sdb_dis__ == "JMPIF then=#6 else=+3"


@pytest.mark.parametrize(
    "body",
    [
        lambda rec: rec.act("a") >> rec.act("b"),
        lambda rec: IF(rec.act("c"), rec.act("d")),
        lambda rec: NodeCompose(rec.act("a")).render(),
    ],
)
def test_if_body_must_be_a_single_node(body):
    rec = Recorder()
    with pytest.raises(TypeError, match="FUN_BLOCK"):
        IF(rec.act("c"), body(rec))
    with pytest.raises(TypeError, match="FUN_BLOCK"):
        IF(rec.act("c"), rec.act("d")).ELIF(rec.act("c2"), body(rec))
    with pytest.raises(TypeError, match="FUN_BLOCK"):
        IF(rec.act("c"), rec.act("d")).ELSE(body(rec))


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["inline", "thread", "async"])
async def test_if_true_and_false(mode):
    rec = Recorder()
    taken = await run(IF(rec.act("c", True, mode=mode), rec.act("x", mode=mode)) >> rec.act("y", 9), rec)
    assert taken.trace == ["c", "x", "y"] and taken.yields == [None, None, None, 9]
    rec.trace.clear()
    skipped = await run(IF(rec.act("c", 0, mode=mode), rec.act("x")) >> rec.act("y"), rec)
    assert skipped.trace == ["c", "y"] and len(skipped.yields) == 4


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ((1, 0, 0), ["c1", "d1", "end"]),
        ((0, 1, 0), ["c1", "c2", "d2", "end"]),
        ((0, 0, 1), ["c1", "c2", "c3", "d3", "end"]),
        ((0, 0, 0), ["c1", "c2", "c3", "else", "end"]),
        (("", [1], None), ["c1", "c2", "d2", "end"]),
    ],
)
async def test_elif_chain_takes_the_first_truthy_branch(values, expected):
    rec = Recorder()
    clause = (
        IF(rec.act("c1", values[0]), rec.act("d1"))
        .ELIF(rec.act("c2", values[1]), rec.act("d2"))
        .ELIF(rec.act("c3", values[2]), rec.act("d3"))
        .ELSE(rec.act("else"))
    )
    out = await run(clause >> rec.act("end"), rec)
    assert out.trace == expected and out.error is None


@pytest.mark.asyncio
async def test_branch_results_are_not_yielded():
    rec = Recorder()
    out = await run(NodeCompose(IF(rec.act("c", True), rec.act("x", 42)), rec.act("end", 7)), rec)
    assert out.yields == [None, None, 7]


@pytest.mark.asyncio
async def test_failing_condition_panics_with_the_pointer_on_the_if_node():
    rec = Recorder()
    interp = WorkflowInterpreter(NodeCompose(rec.act("a"), IF(rec.act("c", exc=KeyError("k")), rec.act("x"))).render())
    out = await run_program(interp, rec)
    assert isinstance(out.error, KeyError) and out.pointer == [1, 0]
    assert interp.get_exception() is out.error


@pytest.mark.asyncio
async def test_body_jump_wins_over_the_branch_exit():
    from amrita_sense.instructions import ALIAS, JMP

    rec = Recorder()
    program = NodeCompose(IF(rec.act("c", True), JMP("out")), rec.act("skipped"), ALIAS(rec.act("out"), "out"))
    out = await run(program, rec)
    assert out.trace == ["c", "out"]


# ----- NATIVE_IF -----------------------------------------------------------------------


def test_native_if_layout():
    rec = Recorder()
    clause = NATIVE_IF(rec.act("c"), rec.act("x")).ELIF(rec.act("c2"), rec.act("y") >> rec.act("z"))
    graph = clause.ELSE(rec.act("e1") >> rec.act("e2")).extract().render()
    assert shape(graph) == [
        "NativeIfJumpNode",
        "Node",
        "Node",
        "NativeIfJumpNode",
        "Node",
        ["Node", "Node", "NativeBranchExitNode"],
        "NativeBubbleEnterNode",
        ["Node", "Node"],
        "Node",
    ]
    assert graph[0].__sdb_dis__ == "NJMPIF do=#2 ret=#8 false=#3"
    assert graph[3].__sdb_dis__ == "NJMPIF do=#5 ret=#8 false=#6"
    assert (graph[6].__sdb_dis__, graph[6].__sdb_cmt__) == ("NENTER body=#7", "NativeBubbleEnterNode push=False")
    assert graph[0].tag == "NodeSuspend::__call__" and graph[8] is NOP


def test_native_if_without_else_keeps_a_nop_else_slot():
    rec = Recorder()
    graph = NATIVE_IF(rec.act("c"), rec.act("x")).extract().render()
    assert len(graph) == 5 and graph[3] is NOP and graph[4] is NOP
    assert graph[0].__sdb_dis__ == "NJMPIF do=#2 ret=#4 false=#4"
    single_else = NATIVE_IF(rec.act("c"), rec.act("x")).ELSE(rec.act("e")).extract().render()
    assert len(single_else) == 5 and single_else[0].__sdb_dis__ == "NJMPIF do=#2 ret=#4 false=#3"


def test_native_if_compose_body_followed_by_a_branch_ends_with_an_exit_node():
    rec = Recorder()
    graph = NATIVE_IF(rec.act("c"), rec.act("a") >> rec.act("b")).ELSE(rec.act("e")).extract().render()
    body = graph[2]
    assert len(body) == 3 and isinstance(body[2], NativeBranchExitNode)
    assert body[2].__sdb_dis__ == "NJMP.OUT merge=#4"
    last = NATIVE_IF(rec.act("c"), rec.act("a") >> rec.act("b")).extract().render()
    assert len(last[2]) == 2


def test_native_if_else_twice_is_a_type_error():
    rec = Recorder()
    clause = NATIVE_IF(rec.act("c"), rec.act("x")).ELSE(rec.act("e"))
    with pytest.raises(TypeError, match="ELSE branch already defined"):
        clause.ELSE(rec.act("e2"))


def test_native_if_rejects_unsupported_bodies():
    rec = Recorder()
    with pytest.raises(TypeError, match=r"NATIVE_IF\(body\) needs a node.*not int"):
        NATIVE_IF(rec.act("c"), 3)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ((1, 0), ["c1", "x", "end"]),
        ((0, 1), ["c1", "c2", "y", "z", "end"]),
        ((0, 0), ["c1", "c2", "e1", "e2", "end"]),
    ],
)
async def test_native_if_branches(values, expected):
    rec = Recorder()
    clause = (
        NATIVE_IF(rec.act("c1", values[0]), rec.act("x"))
        .ELIF(rec.act("c2", values[1]), rec.act("y") >> rec.act("z"))
        .ELSE(rec.act("e1") >> rec.act("e2"))
    )
    out = await run(clause >> rec.act("end"), rec)
    assert out.trace == expected and out.error is None and out.stack_depth == 0


@pytest.mark.asyncio
async def test_native_if_compose_body_does_not_fall_into_the_next_branch():
    rec = Recorder()
    into_else = NATIVE_IF(rec.act("c1", True), rec.act("a") >> rec.act("b")).ELSE(rec.act("else"))
    out = await run(into_else >> rec.act("after"), rec)
    assert out.trace == ["c1", "a", "b", "after"]
    rec.trace.clear()
    into_elif = NATIVE_IF(rec.act("c1", True), rec.act("a") >> rec.act("b")).ELIF(rec.act("c2", True), rec.act("e"))
    out = await run(into_elif.ELSE(rec.act("else")) >> rec.act("after"), rec)
    assert out.trace == ["c1", "a", "b", "after"]


@pytest.mark.asyncio
async def test_native_if_compose_body_steps_are_yielded():
    rec = Recorder()
    out = await run(NATIVE_IF(rec.act("c", True), rec.act("a", 1) >> rec.act("b", 2)) >> rec.act("end", 3), rec)
    assert out.yields == [None, None, 1, 2, None, None, 3]


def test_native_bubble_enter_without_push():
    node = NativeBubbleEnterNode(4, push=False)
    assert (node.__sdb_dis__, node.__sdb_cmt__) == ("NENTER body=#4", "NativeBubbleEnterNode push=False")
    assert NativeIfJumpNode(1, 2, 2, 5, 3, True).__sdb_cmt__ == "NativeIfJumpNode"
    assert ELSENode(1, 2).__sdb_dis__ == "ELSE do=+1 then=+2"


@pytest.mark.parametrize("make", [lambda rec: IF(rec.act("c"), 3), lambda rec: IF("cond", rec.act("x"))])
def test_if_with_a_non_node_fails_when_declared(make):
    rec = Recorder()
    with pytest.raises(TypeError, match="IF"):
        make(rec)
