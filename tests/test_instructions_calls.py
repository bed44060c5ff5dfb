"""CALL / RET / PUSH_RET (+ deprecated names), FN / INTER_FN, INVOKE, ARCHIVED_NODES / ARCHIVED_SEGMENT."""

from __future__ import annotations

import pytest

from amrita_sense import AliasNotFoundError, GraphBuildError, NodeCompose, NullPointerException, WorkflowInterpreter
from amrita_sense.instructions import (
    ALIAS,
    ARCHIVED_NODES,
    CALL,
    FN,
    INT,
    INTER_FN,
    INVOKE,
    NOP,
    PUSH_AND_GOTO,
    PUSH_RET,
    PUSH_STACK,
    RET,
    RET_FAR,
    SUSPEND,
)
from amrita_sense.instructions.enum import BuiltinTags
from amrita_sense.instructions.native import NATIVE_WHILE
from amrita_sense.instructions.subprogram import ARCHIVED_SEGMENT, CallNode, InvokeNode, SubprogramJumpNode
from amrita_sense.node.core import Node as NodeType
from amrita_sense.types import PointerVector
from support.dual import Recorder, run_program, run_whole


async def run(program, rec, **kw):
    return await run_program(WorkflowInterpreter(program.render()), rec, **kw)


def kinds(graph) -> list:
    return [type(graph[i]).__name__ for i in range(len(graph))]


# ----- CALL / RET / PUSH_RET -------------------------------------------------------------


def test_call_family_nodes_before_and_after_compile():
    rec = Recorder()
    call, push, ret = CALL("f"), PUSH_RET("f"), RET()
    for node, tag in ((call, BuiltinTags.CALL), (push, BuiltinTags.PUSH_RET), (ret, BuiltinTags.RET)):
        assert isinstance(node, NodeType) and node.tag is tag and node.wrap_to_async is False
        assert node.address_able is True and node.func.__name__ == "call"
    assert (call.__sdb_dis__, push.__sdb_dis__) == (None, None)
    assert (ret.__sdb_dis__, ret.__sdb_cmt__) == ("RET", "return from subroutine")
    explicit = CALL([0], from_adr=[1])
    NodeCompose(ALIAS(rec.act("f"), "f"), call, push, explicit, ret).render()
    assert (call.__sdb_dis__, call.__sdb_cmt__) == ("CALL [0], ret=?", "push return address and jump")
    assert (push.__sdb_dis__, push.__sdb_cmt__) == ("PUSH [0]", "push return address")
    assert explicit.__sdb_dis__ == "CALL [0], ret=[1]"


def test_deprecated_call_names():
    assert RET_FAR is RET and PUSH_STACK is PUSH_RET
    legacy = PUSH_AND_GOTO([3], "f")
    assert legacy.tag is BuiltinTags.CALL
    NodeCompose(ALIAS(NOP, "f"), legacy, NOP, NOP).render()
    assert legacy.__sdb_dis__ == "CALL [0], ret=[3]"


def test_call_resolves_aliases_at_compile_time():
    with pytest.raises(NullPointerException):
        NodeCompose(CALL("missing"), NOP).render()
    with pytest.raises(NullPointerException):
        NodeCompose(PUSH_RET("missing"), NOP).render()
    with pytest.raises(NullPointerException):
        NodeCompose(ALIAS(NOP, "f"), CALL("f", from_adr="missing")).render()


@pytest.mark.parametrize("factory", [lambda: CALL([0]), lambda: PUSH_RET([0])])
def test_call_family_compiles_once(factory):
    node = factory()
    with pytest.raises(RuntimeError, match="already been compiled"):
        NodeCompose(NOP, node, NodeCompose(node)).render()


@pytest.mark.asyncio
async def test_call_runs_the_function_and_returns_after_the_call():
    rec = Recorder()
    program = NodeCompose(
        rec.act("a"), CALL("f"), rec.act("b"), FN("f", rec.act("fx") >> rec.act("fy")), rec.act("end")
    )
    out = await run(program, rec)
    assert out.trace == ["a", "fx", "fy", "b", "end"] and out.stack_depth == 0 and out.error is None
    assert len(out.yields) == 9


@pytest.mark.asyncio
async def test_call_pushes_its_own_address_and_ret_rebases_onto_it():
    rec = Recorder()
    depth = []

    @rec._node(wrap_to_async=False)
    def inside(pc: WorkflowInterpreter):
        depth.append([list(entry) for entry in pc._ret_addr_stack.stack])

    program = NodeCompose(NOP, NodeCompose(NOP, CALL("f")), rec.act("after"), FN("f", inside))
    out = await run(program, rec)
    assert depth == [[[1, 1]]] and out.trace == ["after"]


@pytest.mark.asyncio
async def test_call_with_an_explicit_return_address():
    rec = Recorder()
    program = NodeCompose(
        rec.act("a"), CALL("f", from_adr=[3]), rec.act("b"), rec.act("c"), FN("f", rec.act("fx")), rec.act("end")
    )
    out = await run(program, rec)
    assert out.trace == ["a", "fx", "end"]


@pytest.mark.asyncio
async def test_push_and_goto_keeps_the_old_argument_order():
    rec = Recorder()
    program = NodeCompose(rec.act("a"), PUSH_AND_GOTO(None, "f"), rec.act("b"), FN("f", rec.act("fx")), rec.act("end"))
    out = await run(program, rec)
    assert out.trace == ["a", "fx", "b", "end"]


@pytest.mark.asyncio
async def test_push_ret_then_ret_resumes_after_the_pushed_address():
    rec = Recorder()
    out = await run(NodeCompose(PUSH_RET([2]), RET(), rec.act("skip"), rec.act("land")), rec)
    assert out.trace == ["land"] and out.stack_depth == 0


@pytest.mark.asyncio
async def test_push_ret_pushes_a_pointer_vector():
    rec = Recorder()
    seen = []

    @rec._node(wrap_to_async=False)
    def peek(pc: WorkflowInterpreter):
        seen.append(pc._ret_addr_stack.stack[-1])

    await run(NodeCompose(ALIAS(NOP, "here"), PUSH_RET("here"), peek), rec)
    assert seen == [PointerVector([0])]


@pytest.mark.asyncio
async def test_ret_on_an_empty_stack_panics():
    rec = Recorder()
    out = await run(NodeCompose(rec.act("a"), RET()), rec)
    assert isinstance(out.error, IndexError) and str(out.error) == "Stack is empty" and out.pointer == [1]


@pytest.mark.asyncio
async def test_call_into_a_routine_without_ret_ends_with_the_address_on_the_stack():
    rec = Recorder()
    routine = ARCHIVED_SEGMENT(NodeCompose(ALIAS(rec.act("fx"), "f")))
    out = await run(NodeCompose(rec.act("a"), CALL("f"), rec.act("b"), routine, rec.act("tail")), rec)
    assert out.trace == ["a", "fx", "tail"] and out.error is None and out.stack_depth == 1


@pytest.mark.asyncio
async def test_deep_recursion_through_call_overflows_the_stack():
    rec = Recorder()
    out = await run(NodeCompose(FN("f", CALL("f")), CALL("f")), rec)
    assert isinstance(out.error, OverflowError) and str(out.error) == "Stack overflow"
    assert out.stack_depth == 1024


@pytest.mark.asyncio
async def test_call_target_that_is_not_an_address_fails_at_run_time():
    rec = Recorder()
    out = await run(NodeCompose(rec.act("a"), CALL([9, 9])), rec)
    assert isinstance(out.error, NullPointerException) and out.stack_depth == 1


@pytest.mark.asyncio
async def test_aliased_call_still_resolves():
    rec = Recorder()
    program = NodeCompose(ALIAS(CALL("f"), "caller"), rec.act("b"), FN("f", rec.act("fx")))
    out = await run(program, rec)
    assert out.trace == ["fx", "b"]


# ----- FN / INTER_FN ---------------------------------------------------------------------


def test_fn_layout():
    rec = Recorder()
    graph = NodeCompose(FN("f", rec.act("x")), FN("g", rec.act("y") >> rec.act("z"))).render()
    assert kinds(graph[0]) == ["Node", "AliasNode", "Node", "_RetNode"]
    assert graph[0][0].tag == "NodeSuspend::_fn_escape" and graph[0][0].address_able is False
    assert graph[0][1].node is NOP
    assert len(graph[1][2]) == 2
    assert graph.alias2vector_map == {"f": [0, 1], "g": [1, 1]}


def test_fn_extracts_a_self_compiling_block():
    rec = Recorder()
    graph = NodeCompose(FN("f", ARCHIVED_NODES(rec.act("x")))).render()
    assert kinds(graph[0][2]) == ["SubprogramJumpNode", "Node", "Node"]


@pytest.mark.asyncio
async def test_fn_is_skipped_by_ordinary_flow():
    rec = Recorder()
    out = await run(NodeCompose(rec.act("a"), FN("f", rec.act("body")), rec.act("b")), rec)
    assert out.trace == ["a", "b"] and out.yields == [None, None, None]


@pytest.mark.asyncio
async def test_inter_fn_returns_with_iret():
    rec = Recorder()
    program = NodeCompose(
        rec.act("a"), INT("isr"), rec.act("b"), INTER_FN("isr", rec.act("i1") >> rec.act("i2")), rec.act("end")
    )
    out = await run(program, rec)
    assert out.trace == ["a", "i1", "i2", "b", "end"] and out.error is None


# ----- INVOKE / ARCHIVED -----------------------------------------------------------------


def test_invoke_node_and_legacy_name():
    assert CallNode is InvokeNode
    node = INVOKE("s")
    assert (node.tag, node.address_able, node.wrap_to_async) == ("NodeSuspend::__call__", True, False)
    assert (node.__sdb_dis__, node.__sdb_cmt__) == ("INVOKE s -> ?", "InvokeNode")
    NodeCompose(ALIAS(NOP, "s"), node).render()
    assert node._addr == [0] and node.__sdb_dis__ == "INVOKE s -> [0]"
    assert InvokeNode("s", tag="custom").tag == "custom"


def test_invoke_compile_errors():
    rec = Recorder()
    with pytest.raises(AliasNotFoundError, match="did you mean target"):
        NodeCompose(INVOKE("targt"), ALIAS(rec.act("x"), "target")).render()
    node = INVOKE("s")
    with pytest.raises(RuntimeError, match="INVOKE node has already been compiled"):
        NodeCompose(ALIAS(NOP, "s"), node, NodeCompose(node)).render()


@pytest.mark.asyncio
async def test_invoke_returns_the_target_result_as_the_step_result():
    rec = Recorder()
    program = NodeCompose(ARCHIVED_NODES(ALIAS(rec.act("s", 42), "s")), INVOKE("s"), rec.act("e", 1))
    out = await run(program, rec)
    assert out.trace == ["s", "e"] and out.yields == [None, None, 42, 1] and out.pointer == []


@pytest.mark.asyncio
async def test_invoke_passes_through_a_target_failure():
    rec = Recorder()
    program = NodeCompose(ARCHIVED_NODES(ALIAS(rec.act("s", exc=ValueError("v")), "s")), INVOKE("s"))
    out = await run(program, rec)
    assert isinstance(out.error, ValueError) and out.pointer == [1]


@pytest.mark.asyncio
@pytest.mark.parametrize("driver", [run_program, run_whole])
async def test_invoke_keeps_its_target_when_the_target_jumps(driver):
    """An invoked CALL runs on every execution of the INVOKE (1.1.3 rewrites the target on the
    first jump; README, compatibility)."""
    rec = Recorder()
    loop_body = NodeCompose(INVOKE("m"), rec.act("b"), rec.act("a"))
    program = NodeCompose(
        NATIVE_WHILE(rec.counter("w", 2)).ACTION(loop_body),
        FN("g", rec.act("g")),
        ARCHIVED_NODES(ALIAS(CALL("g"), "m")),
    )
    out = await driver(WorkflowInterpreter(program.render()), rec)
    assert out.trace == ["w1", "g", "b", "a", "w2", "g", "b", "a", "w3"] and out.error is None


def test_archived_nodes_layout():
    rec = Recorder()
    graph = NodeCompose(ARCHIVED_NODES(rec.act("x"), rec.act("y"))).render()
    seg = graph[0]
    assert kinds(seg) == ["SubprogramJumpNode", "Node", "Node", "Node"] and seg[3] is NOP
    assert (seg[0].__sdb_dis__, seg[0].__sdb_cmt__) == ("JMP.NEAR #3", "SubprogramJumpNode")
    assert SubprogramJumpNode(5)._target_near == 5


@pytest.mark.asyncio
async def test_archived_nodes_are_jumped_over():
    rec = Recorder()
    out = await run(NodeCompose(ARCHIVED_NODES(rec.act("s1"), rec.act("s2")), rec.act("e")), rec)
    assert out.trace == ["e"] and len(out.yields) == 3


def test_archived_segment_layout():
    rec = Recorder()
    graph = NodeCompose(ARCHIVED_SEGMENT(rec.act("x") >> rec.act("y"))).render()
    seg = graph[0]
    assert len(seg) == 3 and seg[0].tag is BuiltinTags.ARCHIVED_SEGMENT and seg[2] is NOP
    assert len(seg[1]) == 2
    from amrita_sense.instructions import IF

    extracted = NodeCompose(ARCHIVED_SEGMENT(IF(rec.act("c"), rec.act("d")))).render()
    assert len(extracted[0][1]) == 4


@pytest.mark.asyncio
async def test_archived_segment_is_skipped():
    rec = Recorder()
    out = await run(NodeCompose(rec.act("a"), ARCHIVED_SEGMENT(rec.act("x") >> rec.act("y")), rec.act("b")), rec)
    assert out.trace == ["a", "b"]


@pytest.mark.asyncio
async def test_suspend_inside_an_invoked_node_resumes_after_the_invoke():
    rec = Recorder()
    interp = WorkflowInterpreter(NodeCompose(ARCHIVED_NODES(ALIAS(SUSPEND, "s")), INVOKE("s"), rec.act("e")).render())
    first = await run_program(interp, rec)
    assert first.pointer == [1] and first.trace == []
    second = await run_program(interp, rec)
    assert second.trace == ["e"]


class _AliasInjector(NodeType):
    """A node whose compile hook registers an alias by hand (as a custom instruction could)."""

    def __init__(self, alias: str, addr: list[int]):
        super().__init__(lambda: None, "inject", False, True)
        self._alias, self._target = alias, addr

    def _post_compile(self, compose) -> None:
        compose.alias2vector_map[self._alias] = self._target


@pytest.mark.parametrize(
    ("target", "message"),
    [([2], "Cannot invoke a NodeComposeRendered directly"), ([3], "Cannot invoke a non-addressable node")],
)
def test_invoke_target_must_be_a_single_addressable_node(target, message):
    from amrita_sense.instructions import RESET

    rec = Recorder()
    program = NodeCompose(_AliasInjector("t", target), INVOKE("t"), NodeCompose(rec.act("x")), RESET)
    with pytest.raises(GraphBuildError, match=message):
        program.render()
