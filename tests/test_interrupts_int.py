"""Software interrupts: INT / IRET and PUSH_CONTEXT / POP_CONTEXT."""

from __future__ import annotations

import pytest

from amrita_sense import IllegalState, Node, NullPointerException, PointerVector, WorkflowInterpreter
from amrita_sense.instructions.alias import ALIAS
from amrita_sense.instructions.interrupt import (
    INT,
    INTERRUPT_INTO,
    INTERRUPT_RET,
    IRET,
    POP_CONTEXT,
    PUSH_CONTEXT,
)
from amrita_sense.instructions.workfl_ctrl import NOP, RESET
from amrita_sense.node.core import Node as NodeType
from amrita_sense.runtime.types import Flags, InterpreterContext


def step(log: list, name: str):
    """Records `(name, pointer, flags, context depth, return depth)`."""

    @Node(wrap_to_async=False)
    def node(pc: WorkflowInterpreter):
        log.append((name, list(pc._pointer), int(pc.flags), len(pc.context_stack), len(pc._ret_addr_stack)))

    return node


def caller_of(addr: list[int]):
    """A user node that runs the node at `addr` as a sub-call."""

    @Node()
    async def call(pc: WorkflowInterpreter):
        await pc.call_sub(PointerVector(list(addr)))

    return call


async def run(graph, **kwargs) -> tuple[WorkflowInterpreter, list]:
    interp = WorkflowInterpreter(graph.render(), **kwargs)
    yields = [value async for value in interp.run_step_by()]
    return interp, yields


# ----- construction and compilation -------------------------------------------------------------


def test_deprecated_names_are_the_same_factories():
    assert INTERRUPT_INTO is INT
    assert INTERRUPT_RET is IRET


def test_nodes_are_inline_addressable_nodes_with_builtin_tags():
    nodes = {
        "__INT__": INT([0]),
        "__IRET__": IRET(),
        "__PUSH_CONTEXT__": PUSH_CONTEXT([0]),
        "__POP_CONTEXT__": POP_CONTEXT(),
    }
    for tag, node in nodes.items():
        assert isinstance(node, NodeType)
        assert node.tag == tag
        assert node.address_able is True
        assert node.wrap_to_async is False


def test_disassembly_after_compilation():
    a = step([], "a")
    nodes = [
        INT("h"),
        INT([0], ret_to="h", if_state=True),
        INT([0], [1]),
        IRET(),
        PUSH_CONTEXT("h"),
        PUSH_CONTEXT(None),
    ]
    graph = ALIAS(a, "h").as_compose()
    for node in nodes:
        graph = graph >> node
    graph.render()
    assert [n.__sdb_dis__ for n in nodes] == [
        "INT [0], ret=?",
        "INT [0], ret=[0]",
        "INT [0], ret=[1]",
        "IRET",
        "PUSHCTX [0]",
        "PUSHCTX None",
    ]
    assert {nodes[i].__sdb_cmt__ for i in range(3)} == {"save context and jump"}
    assert nodes[3].__sdb_cmt__ == "return from interrupt"


@pytest.mark.parametrize("factory", [lambda: INT([0]), lambda: PUSH_CONTEXT([0]), lambda: PUSH_CONTEXT(None)])
def test_compiled_nodes_cannot_join_a_second_graph(factory):
    node = factory()
    (step([], "a") >> node).render()
    with pytest.raises(RuntimeError, match="already been compiled"):
        (step([], "b") >> node).render()


@pytest.mark.parametrize(
    "factory", [lambda: INT("missing"), lambda: INT([0], ret_to="missing"), lambda: PUSH_CONTEXT("missing")]
)
def test_unknown_alias_fails_at_render(factory):
    with pytest.raises(NullPointerException):
        (step([], "a") >> factory()).render()


@pytest.mark.parametrize(
    "build",
    [
        lambda: INT(3),
        lambda: INT([0], ret_to=1.5),
        lambda: INT(["a"]),
        lambda: INT([0], if_state=1),
        lambda: PUSH_CONTEXT(7),
    ],
)
def test_bad_operands_are_type_errors(build):
    with pytest.raises(TypeError):
        build()


def test_pop_and_iret_can_be_shared():
    pop, iret = POP_CONTEXT(), IRET()
    (pop >> iret).render()
    (pop >> iret).render()


# ----- INT / IRET -------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_int_saves_context_jumps_and_iret_returns_after_the_int():
    log: list = []
    graph = step(log, "s") >> INT([4]) >> step(log, "after") >> RESET >> step(log, "isr") >> IRET()
    interp, yields = await run(graph)
    assert log == [("s", [0], 0, 0, 0), ("isr", [4], 0, 1, 0), ("after", [2], 0, 0, 0)]
    assert len(yields) == 5  # s, INT, isr, IRET, after (RESET ends the run)
    assert not interp.context_stack


@pytest.mark.asyncio
async def test_if_state_is_set_in_the_handler_and_restored_by_iret():
    log: list = []
    graph = step(log, "s") >> INT([4], if_state=True) >> step(log, "after") >> RESET >> step(log, "isr") >> IRET()
    await run(graph)
    assert log == [("s", [0], 0, 0, 0), ("isr", [4], int(Flags.IF), 1, 0), ("after", [2], 0, 0, 0)]


@pytest.mark.asyncio
async def test_snapshot_holds_the_pre_interrupt_register_and_the_return_address():
    seen: list = []

    @Node(wrap_to_async=False)
    def inspect_top(pc: WorkflowInterpreter):
        ctx = pc.context_stack.stack[-1]
        seen.append((list(ctx.ptr), ctx.flags, pc.flags, ctx.s_args, ctx.stack))

    graph = step([], "s") >> INT([4], if_state=True) >> RESET >> NOP >> inspect_top >> IRET() >> RESET
    await run(graph)
    assert seen == [([1], Flags.NONE, Flags.IF, None, None)]


@pytest.mark.asyncio
async def test_int_with_explicit_return_address_and_aliases():
    log: list = []
    graph = (
        step(log, "s")
        >> INT("isr", ret_to="back")
        >> step(log, "skipped")
        >> ALIAS(step(log, "back"), "back")
        >> step(log, "after")
        >> RESET
        >> ALIAS(step(log, "isr"), "isr")
        >> IRET()
    )
    await run(graph)
    assert [entry[:2] for entry in log] == [("s", [0]), ("isr", [6]), ("after", [4])]


@pytest.mark.asyncio
async def test_nested_int_is_refused_while_if_is_set():
    log: list = []
    graph = (
        step(log, "s")
        >> INT([4], if_state=True)
        >> step(log, "after")
        >> RESET
        >> step(log, "isr")
        >> INT([0])
        >> IRET()
    )
    interp = WorkflowInterpreter(graph.render())
    with pytest.raises(IllegalState):
        await interp.run()
    assert [entry[0] for entry in log] == ["s", "isr"]
    assert list(interp._pointer) == [5]
    assert len(interp.context_stack) == 1  # the refused INT pushed nothing
    assert interp.if_flag


@pytest.mark.asyncio
async def test_int_with_if_state_false_can_nest():
    log: list = []
    graph = (
        step(log, "s")
        >> INT([4])
        >> step(log, "after")
        >> RESET
        >> step(log, "isr1")
        >> INT([8])
        >> step(log, "isr1 tail")
        >> IRET()
        >> step(log, "isr2")
        >> IRET()
    )
    await run(graph)
    assert [entry[:4] for entry in log] == [
        ("s", [0], 0, 0),
        ("isr1", [4], 0, 1),
        ("isr2", [8], 0, 2),
        ("isr1 tail", [6], 0, 1),
        ("after", [2], 0, 0),
    ]


@pytest.mark.asyncio
async def test_int_run_as_a_sub_call_returns_to_the_caller():
    log: list = []
    graph = step(log, "s") >> caller_of([6]) >> step(log, "after") >> RESET >> step(log, "isr") >> IRET() >> INT([4])
    await run(graph)
    assert [entry[:2] for entry in log] == [("s", [0]), ("isr", [4]), ("after", [2])]


@pytest.mark.asyncio
async def test_iret_with_an_empty_context_stack_panics():
    interp = WorkflowInterpreter((step([], "s") >> IRET()).render())
    with pytest.raises(IndexError):
        await interp.run()
    assert list(interp._pointer) == [1]


@pytest.mark.asyncio
async def test_int_to_an_invalid_literal_address_panics_at_run_time():
    interp = WorkflowInterpreter((step([], "s") >> INT([9])).render())
    with pytest.raises(NullPointerException):
        await interp.run()


# ----- PUSH_CONTEXT / POP_CONTEXT ----------------------------------------------------------------


@pytest.mark.asyncio
async def test_push_does_not_jump_and_pop_yields_the_snapshot():
    log: list = []
    graph = step(log, "s") >> PUSH_CONTEXT([2]) >> step(log, "x") >> POP_CONTEXT() >> step(log, "y")
    interp, yields = await run(graph)
    assert log == [("s", [0], 0, 0, 0), ("x", [2], 0, 1, 0), ("y", [4], 0, 0, 0)]
    ctx = yields[3]
    assert isinstance(ctx, InterpreterContext)
    assert list(ctx.ptr) == [2]
    assert ctx.s_args is None and ctx.stack is None
    assert yields[:3] == [None, None, None] and yields[4] is None


@pytest.mark.asyncio
async def test_push_then_iret_continues_after_the_saved_address():
    log: list = []
    graph = step(log, "s") >> PUSH_CONTEXT([4]) >> step(log, "x") >> IRET() >> step(log, "skipped") >> step(log, "z")
    await run(graph)
    assert [entry[0] for entry in log] == ["s", "x", "z"]


@pytest.mark.asyncio
async def test_push_with_pools_and_stack():
    graph = step([], "s") >> PUSH_CONTEXT([0], exclude_deps=False, exclude_stack=False) >> POP_CONTEXT()
    interp, yields = await run(graph, extra_args=(1,), extra_kwargs={"k": 2})
    ctx = yields[-1]
    assert ctx.s_args == (interp, 1)
    assert ctx.s_kwargs == {"k": 2}
    assert ctx.stack is not None


@pytest.mark.asyncio
async def test_push_none_uses_the_return_stack_top_inside_a_sub_call():
    log: list = []

    @Node()
    async def call_then_jump(pc: WorkflowInterpreter):
        await pc.call_sub(PointerVector([6]))
        pc.jump_to([5])

    graph = step(log, "s") >> call_then_jump >> step(log, "after") >> RESET >> NOP >> IRET() >> PUSH_CONTEXT(None)
    interp, _ = await run(graph)
    # the snapshot's return address is the caller [1]: IRET resumes at [1] + 1
    assert [entry[:2] for entry in log] == [("s", [0]), ("after", [2])]
    assert not interp.context_stack


@pytest.mark.asyncio
async def test_push_none_with_an_empty_return_stack_panics():
    interp = WorkflowInterpreter((step([], "s") >> PUSH_CONTEXT(None)).render())
    with pytest.raises(IndexError, match="PUSH_CONTEXT"):
        await interp.run()


@pytest.mark.asyncio
async def test_pop_with_an_empty_context_stack_panics():
    interp = WorkflowInterpreter(POP_CONTEXT().as_compose().render())
    with pytest.raises(IndexError):
        await interp.run()


# ----- direct calls on an interpreter -------------------------------------------------------------


@pytest.mark.asyncio
async def test_nodes_called_directly_from_user_code():
    seen: list = []
    push, pop, iret = PUSH_CONTEXT([3]), POP_CONTEXT(), IRET()

    @Node(wrap_to_async=False)
    def driver(pc: WorkflowInterpreter):
        push(pc)
        ctx = pop(pc)
        seen.append(list(ctx.ptr))
        push(pc)
        iret(pc)  # back to [3]; the loop then advances to [4]
        seen.append(list(pc._pointer))

    log: list = []
    graph = driver >> step(log, "skipped") >> step(log, "skipped") >> push >> step(log, "after")
    interp = WorkflowInterpreter(graph.render())
    await interp.run()
    assert seen == [[3], [3]]
    assert [entry[:2] for entry in log] == [("after", [4])]
    assert not interp.context_stack  # both direct pushes were popped; the PUSH at [3] never ran as a step


@pytest.mark.asyncio
async def test_uncompiled_nodes_resolve_against_the_interpreter():
    log: list = []
    loose_int = INT("isr", ret_to=[1])
    loose_push = PUSH_CONTEXT("isr")

    @Node(wrap_to_async=False)
    def driver(pc: WorkflowInterpreter):
        loose_push(pc)
        log.append(("pushed", list(pc.context_stack.pop().ptr)))
        loose_int(pc)

    graph = driver >> step(log, "skipped") >> step(log, "after") >> RESET >> ALIAS(step(log, "isr"), "isr") >> IRET()
    await WorkflowInterpreter(graph.render()).run()
    assert [entry[:2] for entry in log] == [("pushed", [4]), ("isr", [4]), ("after", [2])]
