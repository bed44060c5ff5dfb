"""WHILE / DO (call_sub based), NATIVE_WHILE / NATIVE_DO with BREAK_LOOP / CONTINUE, SQUASHED_LOOP."""

from __future__ import annotations

import pytest

from amrita_sense import NodeCompose, WorkflowInterpreter
from amrita_sense.exceptions import BreakLoop
from amrita_sense.instructions import BREAK_LOOP, DO, IF, JMP, NATIVE_DO, NATIVE_IF, NATIVE_WHILE, NOP, WHILE
from amrita_sense.instructions.loop._guard import reject_composition_body
from amrita_sense.instructions.loop.do_while import DONode, DowhileNode
from amrita_sense.instructions.loop.while_clause import CheckUpNode, WhileNode
from amrita_sense.instructions.native import CONTINUE
from amrita_sense.instructions.native._core import NativeDoWhileNode, NativeWhileNode
from support.dual import Recorder, run_program


async def run(program, rec, **kw):
    if not isinstance(program, NodeCompose):
        program = NodeCompose(program)
    return await run_program(WorkflowInterpreter(program.render()), rec, **kw)


# ----- WHILE ---------------------------------------------------------------------------


def test_while_layout():
    rec = Recorder()
    cond, body = rec.act("c"), rec.act("x")
    graph = WHILE(cond).ACTION(body).extract().render()
    assert [type(graph[i]).__name__ for i in range(len(graph))] == ["WhileNode", "Node", "Node", "CheckUpNode", "Node"]
    assert graph[1] is cond and graph[2] is body and graph[4] is NOP
    assert (graph[0].__sdb_dis__, graph[0].__sdb_cmt__) == ("WHILE checkup=#3 else=#4", "WhileNode")
    assert (graph[3].__sdb_dis__, graph[3].__sdb_cmt__) == ("WHILE.CHECK back=#0", "CheckUpNode")
    assert (graph[0].tag, graph[3].tag) == ("NodeSuspend::_while_worker", "NodeSuspend::_while_checkup")
    assert graph[3].address_able is False and graph[0].wrap_to_async is False


def test_while_declaration_errors():
    rec = Recorder()
    clause = WHILE(rec.act("c")).ACTION(rec.act("x"))
    with pytest.raises(RuntimeError, match="ACTION after a ACTION"):
        clause.ACTION(rec.act("y"))
    with pytest.raises(TypeError, match="WHILE body must be a single node, got NodeCompose"):
        WHILE(rec.act("c")).ACTION(rec.act("a") >> rec.act("b")).extract()
    with pytest.raises(RuntimeError, match="JMP node in a WHILE"):
        WHILE(rec.act("c")).ACTION(JMP([0])).extract()
    with pytest.raises(AttributeError, match="ACTION"):
        WHILE(rec.act("c")).extract()


def test_guard_names_the_loop():
    with pytest.raises(TypeError, match="^MYLOOP body must be a single node"):
        reject_composition_body(NodeCompose(), "MYLOOP")
    reject_composition_body(NOP, "MYLOOP")


@pytest.mark.asyncio
async def test_while_runs_body_until_condition_fails(squashed):
    rec = Recorder()
    out = await run(WHILE(rec.counter("c", 3)).ACTION(rec.act("x", 5)) >> rec.act("y"), rec)
    assert out.trace == ["c1", "x", "c2", "x", "c3", "x", "c4", "y"]
    assert len(out.yields) == (4 if squashed else 10)
    assert all(v is None for v in out.yields)


@pytest.mark.asyncio
async def test_while_zero_iterations(squashed):
    rec = Recorder()
    out = await run(WHILE(rec.act("c", False)).ACTION(rec.act("x")) >> rec.act("y"), rec)
    assert out.trace == ["c", "y"]


@pytest.mark.asyncio
async def test_break_loop_in_while_body_leaves_the_loop(squashed):
    rec = Recorder()
    out = await run(WHILE(rec.counter("c", 3)).ACTION(rec.act("x", exc=BreakLoop())) >> rec.act("y"), rec)
    assert out.trace == ["c1", "x", "y"] and out.error is None


@pytest.mark.asyncio
async def test_break_loop_raised_by_the_condition(squashed):
    rec = Recorder()
    out = await run(WHILE(rec.act("c", exc=BreakLoop())).ACTION(rec.act("x")) >> rec.act("y"), rec)
    if squashed:
        assert out.trace == ["c", "y"] and out.error is None
    else:
        assert isinstance(out.error, BreakLoop) and out.pointer == [1, 0]


@pytest.mark.asyncio
async def test_while_body_may_be_a_self_compiling_instruction():
    rec = Recorder()
    body = IF(rec.act("t", True), rec.act("x"))
    out = await run(WHILE(rec.counter("c", 2)).ACTION(body) >> rec.act("y"), rec)
    assert out.trace == ["c1", "t", "x", "c2", "t", "x", "c3", "y"]


@pytest.mark.asyncio
async def test_while_body_jump_stops_a_squashed_loop(squashed):
    from amrita_sense.instructions import ALIAS, ARCHIVED_NODES, INVOKE

    rec = Recorder()
    program = NodeCompose(
        WHILE(rec.counter("c", 3)).ACTION(INVOKE("jump")),
        ARCHIVED_NODES(ALIAS(JMP("end"), "jump")),
        ALIAS(rec.act("end"), "end"),
    )
    out = await run(program, rec)
    assert out.trace == ["c1", "end"]


# ----- DO ------------------------------------------------------------------------------


def test_do_layout():
    rec = Recorder()
    body, cond = rec.act("x"), rec.act("c")
    graph = DO(body).WHILE(cond).extract().render()
    assert [type(graph[i]).__name__ for i in range(len(graph))] == ["DONode", "Node", "DowhileNode", "Node", "Node"]
    assert (graph[0].__sdb_dis__, graph[2].__sdb_dis__) == ("DO loop=#2 break=#4", "DO.CHECK back=#0 exit=#4")
    assert (graph[0].__sdb_cmt__, graph[2].__sdb_cmt__) == ("DONode", "DowhileNode")
    assert (graph[0].address_able, graph[0].wrap_to_async, graph[2].address_able) == (False, True, False)
    assert (graph[0].tag, graph[2].tag) == ("NodeSuspend::_do_worker", "NodeSuspend::_do_while_worker")


def test_do_declaration_errors():
    rec = Recorder()
    with pytest.raises(TypeError, match="DO-WHILE body must be a single node"):
        DO(rec.act("a") >> rec.act("b")).WHILE(rec.act("c")).extract()
    with pytest.raises(AttributeError, match="WHILE"):
        DO(rec.act("a")).extract()
    clause = DO(rec.act("a")).WHILE(rec.act("c1")).WHILE(rec.act("c2"))
    assert clause.condition.tag == "NodeSuspend::n_c2"


@pytest.mark.asyncio
async def test_do_runs_the_body_first(squashed):
    rec = Recorder()
    out = await run(DO(rec.act("x")).WHILE(rec.counter("c", 2)) >> rec.act("y"), rec)
    assert out.trace == ["x", "c1", "x", "c2", "x", "c3", "y"]
    assert len(out.yields) == (4 if squashed else 9)


@pytest.mark.asyncio
async def test_do_break_loop(squashed):
    rec = Recorder()
    out = await run(DO(rec.act("x", exc=BreakLoop())).WHILE(rec.counter("c", 2)) >> rec.act("y"), rec)
    assert out.trace == ["x", "y"]


@pytest.mark.asyncio
async def test_do_condition_raising_break_loop(squashed):
    rec = Recorder()
    out = await run(DO(rec.act("x")).WHILE(rec.act("c", exc=BreakLoop())) >> rec.act("y"), rec)
    if squashed:
        assert out.trace == ["x", "c", "y"]
    else:
        assert out.trace == ["x", "c"] and isinstance(out.error, BreakLoop) and out.pointer == [1, 2]


# ----- NATIVE_WHILE / NATIVE_DO --------------------------------------------------------


def test_native_while_layout():
    rec = Recorder()
    brk = BREAK_LOOP()
    graph = NATIVE_WHILE(rec.act("c")).ACTION(rec.act("x") >> brk).extract().render()
    assert [type(graph[i]).__name__ for i in range(len(graph))] == [
        "NativeWhileNode",
        "Node",
        "NodeComposeRendered",
        "Node",
    ]
    assert [type(graph[2][i]).__name__ for i in range(len(graph[2]))] == ["Node", "_BreakLoopNode", "_ContinueNode"]
    assert graph[0].__sdb_dis__ == "NWHILE body=#2 self=#0 exit=#3"
    assert graph[0].__sdb_cmt__ == "NativeWhileNode"
    assert (brk._configured, brk._target_pos, graph[2][2]._target_pos) == (True, 3, 0)
    assert brk.__sdb_dis__ is None and brk.tag == "__BREAK_LOOP__"


def test_native_do_layout():
    rec = Recorder()
    graph = NATIVE_DO(rec.act("x")).WHILE(rec.act("c")).extract().render()
    assert [type(graph[i]).__name__ for i in range(len(graph))] == [
        "NativeBubbleEnterNode",
        "NodeComposeRendered",
        "NativeDoWhileNode",
        "Node",
        "Node",
    ]
    assert graph[0].__sdb_cmt__ == "NativeBubbleEnterNode push=True"
    assert graph[2].__sdb_dis__ == "NDO.CHECK loop=#0 exit=#4"
    assert graph[1][1]._target_pos == 2
    assert isinstance(graph[2], NativeDoWhileNode)


def test_native_loop_declaration_errors():
    rec = Recorder()
    with pytest.raises(TypeError, match="ACTION already set"):
        NATIVE_WHILE(rec.act("c")).ACTION(rec.act("x")).ACTION(rec.act("y"))
    with pytest.raises(RuntimeError, match="requires .ACTION"):
        NATIVE_WHILE(rec.act("c")).extract()
    with pytest.raises(TypeError, match="single .WHILE"):
        NATIVE_DO(rec.act("x")).WHILE(rec.act("c")).WHILE(rec.act("c"))
    with pytest.raises(RuntimeError, match="requires .WHILE"):
        NATIVE_DO(rec.act("x")).extract()


@pytest.mark.asyncio
@pytest.mark.parametrize("single", [True, False])
async def test_native_while(single):
    rec = Recorder()
    body = rec.act("x") if single else rec.act("x") >> rec.act("x2")
    out = await run(NATIVE_WHILE(rec.counter("c", 2)).ACTION(body) >> rec.act("y"), rec)
    per_iteration = ["x"] if single else ["x", "x2"]
    assert out.trace == ["c1", *per_iteration, "c2", *per_iteration, "c3", "y"]
    assert out.stack_depth == 0 and out.error is None


@pytest.mark.asyncio
async def test_native_while_break_and_continue():
    rec = Recorder()
    out = await run(NATIVE_WHILE(rec.counter("c", 3)).ACTION(rec.act("x") >> BREAK_LOOP() >> rec.act("no")), rec)
    assert out.trace == ["c1", "x"] and out.stack_depth == 0
    rec.trace.clear()
    out = await run(NATIVE_WHILE(rec.counter("c", 2)).ACTION(rec.act("x") >> CONTINUE() >> rec.act("no")), rec)
    assert out.trace == ["c1", "x", "c2", "x", "c3"] and out.stack_depth == 0


@pytest.mark.asyncio
async def test_native_do():
    rec = Recorder()
    out = await run(NATIVE_DO(rec.act("x") >> rec.act("x2")).WHILE(rec.counter("c", 1)) >> rec.act("y"), rec)
    assert out.trace == ["x", "x2", "c1", "x", "x2", "c2", "y"] and out.stack_depth == 0


@pytest.mark.asyncio
async def test_break_inside_a_nested_compose_of_the_body():
    rec = Recorder()
    body = NodeCompose(rec.act("x"), NodeCompose(rec.act("q"), BREAK_LOOP()), rec.act("no"))
    out = await run(NATIVE_DO(body).WHILE(rec.counter("c", 2)) >> rec.act("y"), rec)
    assert out.trace == ["x", "q", "y"] and out.stack_depth == 0


@pytest.mark.asyncio
async def test_nested_native_loops_keep_their_own_targets():
    rec = Recorder()
    inner = NATIVE_DO(NodeCompose(rec.act("b"), BREAK_LOOP())).WHILE(rec.counter("i", 3))
    outer = NATIVE_WHILE(rec.counter("o", 2)).ACTION(NodeCompose(rec.act("a"), inner, rec.act("c")))
    out = await run(outer >> rec.act("y"), rec)
    assert out.trace == ["o1", "a", "b", "c", "o2", "a", "b", "c", "o3", "y"] and out.stack_depth == 0
    rec.trace.clear()
    inner = NATIVE_WHILE(rec.counter("i", 2)).ACTION(rec.act("b"))
    outer = NATIVE_WHILE(rec.counter("o", 2)).ACTION(rec.act("a") >> inner)
    out = await run(outer, rec)
    assert out.trace == ["o1", "a", "i1", "b", "i2", "b", "i3", "o2", "a", "i4", "o3"]


def test_an_extracted_inner_loop_is_not_configured_by_the_outer_one():
    rec = Recorder()
    inner_brk = BREAK_LOOP()
    inner = NATIVE_WHILE(rec.act("i")).ACTION(rec.act("b")).extract()
    inner_body = list(inner)[2]
    NATIVE_WHILE(rec.act("o")).ACTION(NodeCompose(inner, inner_brk)).extract()
    assert inner_brk._target_pos == 3
    assert list(inner_body)[-1]._target_pos == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("factory", [BREAK_LOOP, CONTINUE])
async def test_loop_control_outside_a_native_loop_raises(factory):
    rec = Recorder()
    out = await run(NodeCompose(rec.act("a"), factory(), rec.act("b")), rec)
    assert isinstance(out.error, RuntimeError) and "not configured" in str(out.error)
    assert out.trace == ["a"] and out.pointer == [1]


@pytest.mark.asyncio
async def test_break_under_native_if_inside_a_loop_is_not_configured():
    rec = Recorder()
    body = NodeCompose(rec.act("a"), NATIVE_IF(rec.act("t", True), BREAK_LOOP()), rec.act("b"))
    out = await run(NATIVE_WHILE(rec.counter("c", 3)).ACTION(body), rec)
    assert isinstance(out.error, RuntimeError) and "not configured" in str(out.error)


def test_native_nodes_are_exposed():
    assert NativeWhileNode(1, 2, 0, 3).__sdb_dis__ == "NWHILE body=#2 self=#0 exit=#3"
    assert WhileNode(1, 2, 3, 4).__sdb_dis__ == "WHILE checkup=#3 else=#4"
    assert CheckUpNode(0).__sdb_dis__ == "WHILE.CHECK back=#0"
    assert DONode(1, 2, 4).__sdb_dis__ == "DO loop=#2 break=#4"
    assert DowhileNode(1, 4, 0).__sdb_dis__ == "DO.CHECK back=#0 exit=#4"
