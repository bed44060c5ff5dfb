"""Argument checks (issue 14): a bad argument gets a `TypeError` (or `ValueError`) naming it, where it is
given (construction, compose or render time), instead of an `AttributeError` deep inside later."""

from __future__ import annotations

import pytest

from amrita_sense import NodeCompose, PointerVector, Stack, WorkflowInterpreter, debugger
from amrita_sense.debugger.code_disp import resolve_cmt, resolve_dis
from amrita_sense.hook.matcher import MatcherFactory
from amrita_sense.hook.on import on_event
from amrita_sense.instructions import (
    ALIAS,
    ARCHIVED_NODES,
    BATCH_RUN,
    CALL,
    DO,
    FN,
    FUN_BLOCK,
    IF,
    INTER_FN,
    INVOKE,
    JMP,
    PUSH_RET,
    TRIGGER_EVENT,
    WHILE,
    Try,
)
from amrita_sense.instructions.native import NATIVE_DO, NATIVE_IF, NATIVE_WHILE
from amrita_sense.node.wrapper import Node
from amrita_sense.runtime.types import Flags, InterpreterContext
from amrita_sense.streaming import SuspendObjectStream
from support.dual import Recorder

JUNK = [None, 5, "x", 1.5, object()]


def graph():
    rec = Recorder()
    return NodeCompose(rec.act("a"), rec.act("b")).render()


# ----- WorkflowInterpreter(...) -----------------------------------------------------------------


@pytest.mark.parametrize("stream", [5, "x", object(), [1]])
def test_object_io_must_be_a_stream(stream):
    with pytest.raises(TypeError, match="object_io"):
        WorkflowInterpreter(graph(), stream)
    interp = WorkflowInterpreter(graph())
    with pytest.raises(TypeError, match="object_io"):
        interp.object_io = stream
    assert isinstance(interp.object_io, SuspendObjectStream)


@pytest.mark.parametrize("parent", [5, "x", object(), graph()])
def test_parent_interpreter_must_be_an_interpreter(parent):
    with pytest.raises(TypeError, match="parent_interpreter"):
        WorkflowInterpreter(graph(), parent_interpreter=parent)


@pytest.mark.parametrize("ignored", [5, None, "x", (5,), (ValueError, "x"), [object]])
def test_exception_ignored_holds_exception_classes(ignored):
    with pytest.raises(TypeError, match="exception_ignored"):
        WorkflowInterpreter(graph(), exception_ignored=ignored)


def test_exception_ignored_may_be_a_list():
    interp = WorkflowInterpreter(graph(), exception_ignored=[KeyError])
    assert KeyError in interp._exc_ignored


@pytest.mark.parametrize("args", [5, None, "ab", {"a": 1}, object()])
def test_extra_args_is_a_tuple(args):
    with pytest.raises(TypeError, match="extra_args"):
        WorkflowInterpreter(graph(), extra_args=args)


@pytest.mark.parametrize("kwargs", [5, "ab", [("a", 1)], object()])
def test_extra_kwargs_is_a_mapping(kwargs):
    with pytest.raises(TypeError, match="extra_kwargs"):
        WorkflowInterpreter(graph(), extra_kwargs=kwargs)


@pytest.mark.asyncio
async def test_pools_from_a_list_and_a_mapping_proxy():
    from types import MappingProxyType

    seen = []
    rec = Recorder()

    @rec._node(wrap_to_async=False)
    def needs(number: int, name: str):
        seen.append((number, name))

    interp = WorkflowInterpreter(
        NodeCompose(needs).render(), extra_args=[7], extra_kwargs=MappingProxyType({"name": "n"})
    )
    await interp.run()
    assert seen == [(7, "n")]


@pytest.mark.parametrize(
    ("attr", "value"),
    [("_ava_args", None), ("_ava_args", 5), ("_ava_kwargs", None), ("_ava_kwargs", [1]), ("_ava_kwargs", 5)],
)
def test_argument_pools_refuse_a_wrong_type(attr, value):
    interp = WorkflowInterpreter(graph())
    before = getattr(interp, attr)
    with pytest.raises(TypeError, match=attr):
        setattr(interp, attr, value)
    assert getattr(interp, attr) is before and interp.args_hash_trustable


# ----- kept attributes of the run state ----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "error"),
    [("x", TypeError), (None, TypeError), (1.0, TypeError), (8, ValueError), (-1, ValueError), (2**40, ValueError)],
)
def test_flags_take_flag_bits_only(value, error):
    interp = WorkflowInterpreter(graph())
    with pytest.raises(error, match="_flags"):
        interp._flags = value
    assert interp._flags == Flags.NONE
    interp._flags = Flags.IF | Flags.HLT
    assert interp.if_flag and interp.flags == Flags.IF | Flags.HLT


@pytest.mark.parametrize("value", [5, "boom", ValueError])
def test_panic_exc_is_an_exception_or_none(value):
    interp = WorkflowInterpreter(graph())
    with pytest.raises(TypeError, match="_panic_exc"):
        interp._panic_exc = value
    interp._panic_exc = KeyError("k")
    assert isinstance(interp.get_exception(), KeyError)


@pytest.mark.asyncio
@pytest.mark.parametrize("value", [5, "x", object()])
async def test_waiter_fut_is_a_future_or_none(value):
    interp = WorkflowInterpreter(graph())
    with pytest.raises(TypeError, match="_waiter_fut"):
        interp._waiter_fut = value
    assert interp.is_running is False
    await interp.run()


@pytest.mark.parametrize("value", ["x", None, [1], True])
def test_yield_interval_is_a_number(value):
    interp = WorkflowInterpreter(graph())
    with pytest.raises(TypeError, match="_yield_interval"):
        interp._yield_interval = value
    interp._yield_interval = 2
    assert interp._yield_interval == 2.0


@pytest.mark.parametrize("ctx", JUNK + [{"ptr": [0]}])
def test_rebase_context_wants_a_context(ctx):
    interp = WorkflowInterpreter(graph())
    with pytest.raises(TypeError, match="rebase_context"):
        interp.rebase_context(ctx)


def test_rebase_context_checks_what_the_context_holds_before_restoring_anything():
    interp = WorkflowInterpreter(graph())
    good = interp.dump_interpreter()
    interp.rebase_ptr([1])
    bad = [
        InterpreterContext(ptr=5, exception_ignored=()),
        InterpreterContext(ptr=PointerVector([0]), exception_ignored=(5,)),
        InterpreterContext(ptr=PointerVector([0]), exception_ignored=(), stack=[1]),
        InterpreterContext(ptr=PointerVector([0]), exception_ignored=(), exception="x"),
    ]
    for ctx in bad:
        with pytest.raises(TypeError):
            interp.rebase_context(ctx)
    with pytest.raises(ValueError):
        interp.rebase_context(InterpreterContext(ptr=PointerVector([0]), exception_ignored=(), flags=64))
    assert list(interp._pointer) == [1] and interp.get_exception() is None
    interp.rebase_context(good)
    assert list(interp._pointer) == [0] and isinstance(interp._ret_addr_stack, Stack)


# ----- sub-calls ---------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("addr", [None, 5, "ab", {0: 0}, [0, None]])
async def test_call_sub_wants_an_address_and_leaves_the_state_alone(addr):
    interp = WorkflowInterpreter(graph())
    with pytest.raises(TypeError, match="call_sub"):
        await interp.call_sub(addr, interrupt=True)
    assert len(interp._ret_addr_stack) == 0 and list(interp._pointer) == [0]
    assert not interp._interpret_lock.locked()


@pytest.mark.asyncio
async def test_call_sub_takes_a_tuple():
    rec = Recorder()
    interp = WorkflowInterpreter(NodeCompose(rec.act("a", 1), rec.act("b", 2)).render())
    assert await interp.call_sub((1,), interrupt=True) == 2
    assert rec.trace == ["b"]


@pytest.mark.asyncio
@pytest.mark.parametrize(("method", "arg"), [("call_offset", "1"), ("call_near", None), ("call_offset_far", 3)])
async def test_relative_calls_check_their_argument(method, arg):
    interp = WorkflowInterpreter(graph())
    with pytest.raises(TypeError):
        await getattr(interp, method)(arg, interrupt=True)
    assert len(interp._ret_addr_stack) == 0


@pytest.mark.parametrize(
    ("keyword", "value"),
    [("ava_args", 5), ("ava_args", "ab"), ("ava_kwargs", 5), ("ava_kwargs", [1]), ("object_io", 5), ("compose", 5)],
)
def test_fork_interpreter_checks_its_arguments(keyword, value):
    interp = WorkflowInterpreter(graph())
    with pytest.raises(TypeError):
        interp.fork_interpreter(**{keyword: value})
    assert interp.sub_interpreters == {}


# ----- instructions: a bad operand is refused when the instruction is declared --------------------------

_n = Recorder().act("n")

DECLARATIONS = {
    "ALIAS(node)": lambda bad: ALIAS(bad, "name"),
    "ALIAS(alias)": lambda bad: ALIAS(_n, bad),
    "JMP target": lambda bad: JMP(bad),
    "CALL target": lambda bad: CALL(bad),
    "CALL return address": lambda bad: CALL("x", from_adr=bad if bad is not None else 5),
    "PUSH_RET address": lambda bad: PUSH_RET(bad),
    "INVOKE(alias)": lambda bad: INVOKE(bad),
    "IF / ELIF condition": lambda bad: IF(bad, _n),
    "IF / ELIF / ELSE branch": lambda bad: IF(_n, bad),
    "ELIF branch": lambda bad: IF(_n, _n).ELIF(_n, bad),
    "ELSE branch": lambda bad: IF(_n, _n).ELSE(bad),
    "WHILE(condition)": lambda bad: WHILE(bad),
    "ACTION(node)": lambda bad: WHILE(_n).ACTION(bad),
    "DO(node)": lambda bad: DO(bad),
    "DO WHILE(condition)": lambda bad: DO(_n).WHILE(bad),
    "Try(node)": lambda bad: Try(bad),
    "CATCH(exc_type, node)": lambda bad: Try(_n).CATCH(ValueError, bad),
    "THEN(node)": lambda bad: Try(_n).CATCH(ValueError, _n).THEN(bad),
    "FINALLY(node)": lambda bad: Try(_n).FINALLY(bad),
    "FN(entrypoint)": lambda bad: FN(bad, _n),
    "FN(block)": lambda bad: FN("f", bad),
    "INTER_FN(entrypoint)": lambda bad: INTER_FN(bad, _n),
    "ARCHIVED_NODES(*nodes)": lambda bad: ARCHIVED_NODES(_n, bad),
    "BATCH_RUN(*nodes)": lambda bad: BATCH_RUN(bad),
    "BATCH_RUN middleware": lambda bad: BATCH_RUN(_n, middleware=bad if bad is not None else 5),
    "BATCH_RUN sos_io": lambda bad: BATCH_RUN(_n, sos_io=bad if bad is not None else 5),
    "FUN_BLOCK(sub_comp)": lambda bad: FUN_BLOCK(bad),
    "FUN_BLOCK middleware": lambda bad: FUN_BLOCK(graph(), middleware=bad if bad is not None else 5),
    "FUN_BLOCK object_io": lambda bad: FUN_BLOCK(graph(), object_io=bad if bad is not None else 5),
    "TRIGGER_EVENT(event)": lambda bad: TRIGGER_EVENT(bad),
    "NATIVE_IF(condition)": lambda bad: NATIVE_IF(bad, _n),
    "NATIVE_IF(body)": lambda bad: NATIVE_IF(_n, bad),
    "NATIVE_WHILE(condition)": lambda bad: NATIVE_WHILE(bad),
    "NATIVE_WHILE ACTION(body)": lambda bad: NATIVE_WHILE(_n).ACTION(bad),
    "NATIVE_DO(body)": lambda bad: NATIVE_DO(bad),
    "NATIVE_DO WHILE(condition)": lambda bad: NATIVE_DO(_n).WHILE(bad),
    "a node's tag": lambda bad: Node(tag=bad if bad is not None else 5)(lambda: None),
    "on_event(event_type)": lambda bad: on_event(bad if bad is not None else 5),
}


@pytest.mark.parametrize("bad", [None, 5, 1.5, object()])
@pytest.mark.parametrize("what", sorted(DECLARATIONS))
def test_an_instruction_refuses_a_bad_operand_when_declared(what, bad):
    with pytest.raises(TypeError):
        DECLARATIONS[what](bad)


def test_a_source_compose_is_not_a_function_block():
    with pytest.raises(TypeError, match="FUN_BLOCK"):
        FUN_BLOCK(NodeCompose(_n))


@pytest.mark.asyncio
@pytest.mark.parametrize("event", [5, "not an event", object()])
async def test_trigger_event_wants_an_event(event):
    with pytest.raises(TypeError, match="BaseEvent"):
        await MatcherFactory.trigger_event(event)


INSPECTORS = [
    "where",
    "inspect",
    "backtrace",
    "list_nodes",
    "list_sub_intp",
    "list_breaks",
    "cleanup",
    "disassemble",
    "dis",
    "step",
    "step_over",
    "step_out",
    "cont",
]
ASYNC_INSPECTORS = ["step_async", "step_over_async", "step_out_async", "cont_async"]


@pytest.mark.parametrize("name", INSPECTORS)
@pytest.mark.parametrize("inter", [None, 5, graph()])
def test_debugger_commands_want_an_interpreter(name, inter):
    with pytest.raises(TypeError, match=name):
        getattr(debugger, name)(inter)


@pytest.mark.asyncio
@pytest.mark.parametrize("name", ASYNC_INSPECTORS)
async def test_debugger_async_commands_want_an_interpreter(name):
    with pytest.raises(TypeError, match=name):
        await getattr(debugger, name)(None)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: debugger.break_at_tag(None, "t"), "break_at_tag"),
        (lambda: debugger.break_at_addr(5, [0]), "break_at_addr"),
        (lambda: debugger.clear_break_tag(None, "t"), "clear_break_tag"),
        (lambda: debugger.clear_break_addr(None, [0]), "clear_break_addr"),
        (lambda: resolve_dis(None), "resolve_dis"),
        (lambda: resolve_cmt(5), "resolve_cmt"),
    ],
)
def test_debugger_helpers_name_their_bad_argument(call, name):
    with pytest.raises(TypeError, match=name):
        call()
