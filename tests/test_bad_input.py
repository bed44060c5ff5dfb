"""Exception classes, and bad input: each mistake gets a typed error naming what is wrong,
raised at compose/render time where possible, and the interpreter stays usable."""

from __future__ import annotations

import asyncio

import pytest

import amrita_sense
from amrita_sense import (
    AliasNotFoundError,
    DependsDeclarationError,
    DependsException,
    DependsInjectFailed,
    DependsResolveFailed,
    GraphBuildError,
    IllegalState,
    InterruptNotice,
    Node,
    NodeCompose,
    NodeComposeRendered,
    NullPointerException,
    PointerVector,
    StreamStateError,
    WorkflowInterpreter,
)
from amrita_sense import exceptions as exc_module
from amrita_sense.exceptions import BreakLoop, InterruptKeepContext
from amrita_sense.instructions.alias import ALIAS
from amrita_sense.instructions.jump import JMP
from amrita_sense.node.self_compile import SelfCompileInstruction


def make(log: list, name: str):
    @Node(tag=name, wrap_to_async=False)
    def body():
        log.append(name)
        return name

    return body


def jumper(target):
    @Node(tag="jumper", wrap_to_async=False)
    def body(pc: WorkflowInterpreter):
        pc.jump_to(target)

    return body


# ----- exception classes --------------------------------------------------------------------------


def test_root_reexports_the_exception_classes():
    for name in (
        "AliasNotFoundError",
        "DependsDeclarationError",
        "DependsException",
        "DependsInjectFailed",
        "DependsResolveFailed",
        "GraphBuildError",
        "IllegalState",
        "InterruptNotice",
        "NullPointerException",
        "StreamStateError",
    ):
        assert getattr(amrita_sense, name) is getattr(exc_module, name)


def test_interrupt_notice_is_a_base_exception_only():
    assert issubclass(InterruptNotice, BaseException)
    assert not issubclass(InterruptNotice, Exception)
    assert issubclass(InterruptKeepContext, InterruptNotice)


def test_interrupt_notice_message_and_str():
    notice = InterruptNotice("stop now")
    assert notice.message == "stop now"
    assert str(notice) == "InterruptNotice stop now"
    assert notice.args == ("stop now",)


def test_interrupt_notice_without_message():
    notice = InterruptNotice()
    assert notice.message is None
    assert str(notice) == "InterruptNotice "
    assert notice.args == ()
    assert repr(notice) == "InterruptNotice()"


def test_keep_context_str_uses_the_notice_prefix():
    keep = InterruptKeepContext("hold")
    assert keep.message == "hold"
    assert str(keep) == "InterruptNotice hold"


def test_interrupt_notice_is_not_caught_by_except_exception():
    with pytest.raises(InterruptNotice):
        try:
            raise InterruptNotice("x")
        except Exception:  # pragma: no cover - the point is that this does not run
            pytest.fail("InterruptNotice must not be an Exception")


@pytest.mark.parametrize(
    ("cls", "base"),
    [
        (NullPointerException, Exception),
        (BreakLoop, Exception),
        (DependsException, Exception),
        (DependsResolveFailed, DependsException),
        (DependsInjectFailed, DependsException),
        (DependsDeclarationError, DependsException),
        (IllegalState, Exception),
        (GraphBuildError, Exception),
        (StreamStateError, Exception),
        (AliasNotFoundError, Exception),
    ],
)
def test_exception_hierarchy(cls, base):
    assert issubclass(cls, base)
    assert str(cls("why")) == "why"


def test_engine_errors_are_not_builtin_lookup_errors():
    for cls in (NullPointerException, GraphBuildError, IllegalState, AliasNotFoundError):
        assert not issubclass(cls, (LookupError, ValueError, TypeError))


# ----- compose and render time ----------------------------------------------------------------------


def test_rendered_graph_in_a_source_compose():
    rendered = NodeCompose(make([], "a")).render()
    with pytest.raises(TypeError, match="rendered composition"):
        NodeCompose(rendered)
    with pytest.raises(TypeError, match="rendered composition"):
        make([], "b") >> rendered
    with pytest.raises(TypeError, match="rendered composition"):
        NodeCompose(make([], "c")) >> rendered


def test_non_node_child_fails_at_render_with_a_type_error():
    with pytest.raises(TypeError):
        NodeCompose(make([], "a"), 42).render()


def test_node_of_a_non_callable():
    with pytest.raises(TypeError):
        Node()(42)


def test_interpreter_needs_a_rendered_graph():
    with pytest.raises(TypeError, match="render"):
        WorkflowInterpreter(make([], "a") >> make([], "b"))


def test_duplicate_alias_names_the_alias_and_its_address():
    a, b = make([], "a"), make([], "b")
    with pytest.raises(GraphBuildError, match=r"Alias twice already exists in address `\[0\]`"):
        (ALIAS(a, "twice") >> (b >> ALIAS(b, "twice"))).render()


def test_nodes_remain_usable_after_a_failed_render():
    log: list = []
    a, b = make(log, "a"), make(log, "b")
    with pytest.raises(GraphBuildError):
        (ALIAS(a, "x") >> ALIAS(b, "x")).render()
    graph = (ALIAS(a, "x") >> b).render()
    assert graph.alias2vector_map == {"x": [0]}


def test_alias_of_a_self_compile_instruction():
    class Macro(SelfCompileInstruction):
        def extract(self):
            return NodeCompose(make([], "m"))

    with pytest.raises(ValueError):
        ALIAS(Macro(), "m")


def test_jump_to_an_unknown_alias_fails_at_render_with_a_hint():
    with pytest.raises(AliasNotFoundError, match="strat not found in namespace, did you mean start"):
        (ALIAS(make([], "a"), "start") >> JMP("strat")).render()


def test_jump_to_an_unknown_alias_without_a_close_match():
    with pytest.raises(AliasNotFoundError, match="zzzzz not found in namespace"):
        (ALIAS(make([], "a"), "start") >> JMP("zzzzz")).render()


def test_jump_to_a_missing_literal_address_fails_at_render():
    with pytest.raises(NullPointerException, match=r"\[5\]"):
        (make([], "a") >> JMP([5])).render()


def test_second_build_and_empty_source():
    graph = NodeCompose(make([], "a")).render()
    with pytest.raises(GraphBuildError):
        graph._build()
    with pytest.raises(GraphBuildError):
        NodeComposeRendered([])._build()


def test_rendered_index_out_of_range():
    graph = NodeCompose(make([], "a")).render()
    with pytest.raises(NullPointerException, match="out of range"):
        graph[3]


def test_unknown_alias_lookup():
    interp = WorkflowInterpreter((ALIAS(make([], "a"), "known") >> make([], "b")).render())
    with pytest.raises(NullPointerException, match="unknown"):
        interp.find_node_alias("unknown")
    with pytest.raises(NullPointerException, match="unknown"):
        interp.get_graph().calc.resolve_alias("unknown")
    assert interp.find_node_alias("known").alias == "known"


def test_pointer_and_flag_misuse():
    with pytest.raises(ValueError):
        del PointerVector([1])[0]
    interp = WorkflowInterpreter(NodeCompose(make([], "a")).render())
    with pytest.raises(TypeError, match="bool"):
        interp.if_flag = 1


# ----- run time ------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_jump_to_a_missing_address_names_it_and_keeps_the_interpreter_usable():
    log: list = []
    interp = WorkflowInterpreter((make(log, "a") >> jumper([3, 1]) >> make(log, "b")).render())
    with pytest.raises(NullPointerException, match=r"\[3, 1\]"):
        await interp.run()
    assert isinstance(interp.get_exception(), NullPointerException)
    assert interp._pointer == PointerVector([1])
    interp.rebase_ptr([2])
    await interp.run()
    assert log == ["a", "b"]
    assert interp.get_exception() is None


@pytest.mark.asyncio
async def test_unvalidated_jump_fails_at_the_target_naming_it():
    @Node(wrap_to_async=False)
    def wander(pc: WorkflowInterpreter):
        pc.jump_far_ptr([4, 2])

    interp = WorkflowInterpreter((wander >> make([], "b")).render())
    with pytest.raises(NullPointerException, match=r"\[4, 2\]"):
        await interp.run()
    assert interp._pointer == PointerVector([4, 2])
    interp.reset()
    with pytest.raises(NullPointerException):
        await interp.run()


@pytest.mark.asyncio
async def test_call_to_a_missing_address():
    log: list = []

    @Node()
    async def caller(pc: WorkflowInterpreter):
        await pc.call_sub([7, 7])

    interp = WorkflowInterpreter((caller >> make(log, "b")).render())
    with pytest.raises(NullPointerException, match=r"\[7, 7\]"):
        await interp.run()
    assert interp._pointer == PointerVector([0])
    assert len(interp._ret_addr_stack) == 0
    interp.rebase_ptr([1])
    await interp.run()
    assert log == ["b"]


class Missing:
    """A type nothing in the pools provides."""


@pytest.mark.asyncio
async def test_unresolvable_parameter_names_the_function_and_tag():
    @Node(tag="needs::missing", wrap_to_async=False)
    def needy(dep: Missing):
        return dep

    interp = WorkflowInterpreter(needy.as_compose().render())
    with pytest.raises(DependsResolveFailed, match="needy") as info:
        await interp.run()
    assert "needs::missing" in str(info.value)
    assert interp.is_running is False
    interp._ava_args = (interp, Missing())
    interp.rehash_args()
    await interp.run()
    assert interp.get_exception() is None


@pytest.mark.asyncio
async def test_return_stack_overflow_is_an_overflow_error():
    @Node()
    async def recurse(pc: WorkflowInterpreter):
        await pc.call_offset(0)

    interp = WorkflowInterpreter(recurse.as_compose().render())
    interp._ret_addr_stack.resize(5)
    with pytest.raises(OverflowError, match="Stack overflow"):
        await interp.run()
    assert interp._pointer == PointerVector([0])
    assert interp.is_running is False


@pytest.mark.asyncio
async def test_concurrent_run_is_illegal_and_the_first_run_completes():
    log: list = []
    entered, gate = asyncio.Event(), asyncio.Event()

    @Node()
    async def hold():
        entered.set()
        await gate.wait()
        log.append("hold")

    interp = WorkflowInterpreter((hold >> make(log, "b")).render())
    first = asyncio.create_task(interp.run())
    await asyncio.wait_for(entered.wait(), 10)
    with pytest.raises(IllegalState, match="already running"):
        await interp.run()
    gate.set()
    await asyncio.wait_for(first, 10)
    assert log == ["hold", "b"]
    assert interp.get_exception() is None


@pytest.mark.asyncio
async def test_sub_call_outside_a_node_without_interrupt():
    interp = WorkflowInterpreter((make([], "a") >> make([], "b")).render())
    with pytest.raises(RuntimeError, match="interrupt"):
        await interp.call_offset(1)
    assert interp._pointer == PointerVector([0])
    assert len(interp._ret_addr_stack) == 0


@pytest.mark.asyncio
async def test_kwarg_clash_in_a_sub_call():
    @Node(wrap_to_async=False)
    def callee(key: str):
        return key

    @Node()
    async def caller(pc: WorkflowInterpreter):
        await pc.call_offset(1, key="again")

    interp = WorkflowInterpreter((caller >> callee).render(), extra_kwargs={"key": "first"})
    with pytest.raises(DependsInjectFailed, match="key"):
        await interp.run()
    assert interp._pointer == PointerVector([0])


@pytest.mark.asyncio
async def test_node_exception_is_a_panic_with_the_original_type():
    class Custom(Exception):
        pass

    @Node()
    def fails():
        raise Custom("from a worker thread")

    interp = WorkflowInterpreter(fails.as_compose().render())
    with pytest.raises(Custom, match="worker thread"):
        await interp.run()
    assert isinstance(interp.get_exception(), Custom)
