"""Inspection commands: where, inspect, backtrace, list_nodes, list_sub_intp."""

from __future__ import annotations

import pytest

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.debugger import (
    backtrace,
    break_at_tag,
    code_disp,
    cont_async,
    inspect,
    list_nodes,
    list_sub_intp,
    step_async,
    where,
)
from amrita_sense.instructions import CALL, FN, PUSH_CONTEXT

RULE = "═" * 58


@pytest.fixture(autouse=True)
def quiet_listing(monkeypatch):
    monkeypatch.setattr(code_disp, "AUTO_DIS", False)


def recorder(name: str):
    @Node(tag=name, wrap_to_async=False)
    def record():
        return name

    return record


@Node(tag="boom", wrap_to_async=False)
def boom():
    raise ValueError("bad node")


def routine_graph():
    """[0] a, [1] FN sub (x, y), [2] CALL sub, [3] PUSH_CONTEXT sub, [4] boom."""
    body = NodeCompose(recorder("x"), recorder("y"))
    return (recorder("a") >> FN("sub", body) >> CALL("sub") >> PUSH_CONTEXT("sub") >> boom).render()


def short(interp) -> str:
    return f"{interp.id[:12]}…"


async def inside_routine():
    """An interpreter stopped at the first node of the routine, called from [2]."""
    interp = WorkflowInterpreter(routine_graph())
    break_at_tag(interp, "x")
    await cont_async(interp)
    return interp


@pytest.mark.asyncio
async def test_where_prints_pointer_tag_and_depth(capsys):
    interp = await inside_routine()
    capsys.readouterr()
    where(interp)
    assert capsys.readouterr().out == "📍 [1, 2, 0]  x  stack_depth=1\n"


def test_where_on_a_finished_interpreter(capsys):
    interp = WorkflowInterpreter(routine_graph())
    interp._pointer.clear()
    where(interp)
    assert capsys.readouterr().out == "📍 []  <INVALID>  stack_depth=0\n"


@pytest.mark.asyncio
async def test_inspect_shows_pointer_stacks_and_panic(capsys):
    interp = await inside_routine()
    for _ in range(4):
        await step_async(interp, show=False)
    with pytest.raises(ValueError):
        await step_async(interp, show=False)
    capsys.readouterr()
    inspect(interp)
    assert capsys.readouterr().out.splitlines() == [
        RULE,
        f"🆔  Interpreter: {short(interp)}",
        "📍 Pointer:      [4]",
        "🔍 Node:         boom",
        "   Function:     boom",
        "🏃 Running:      no",
        "🚩 Pending stop: no",
        "📚 Return stack: depth=0",
        "📦 Context stack: depth=1",
        "   [0] ptr=PointerVector([1, 1])  exc=None",
        "⚠️  Panic:        ValueError: bad node",
        "👶 Sub-interpreters: 0",
        RULE,
    ]


@pytest.mark.asyncio
async def test_inspect_lists_return_stack_top_first_and_relatives(capsys):
    interp = await inside_routine()
    interp._ret_addr_stack.push(interp._pointer.copy())
    child = interp.fork_interpreter()
    capsys.readouterr()
    inspect(interp)
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("📚 Return stack: depth=2")
    assert lines[start + 1 : start + 3] == ["   [1] PointerVector([1, 2, 0])", "   [0] PointerVector([2])"]
    assert lines[-3:-1] == ["👶 Sub-interpreters: 1", f"   ⏸️ {short(child)}  ptr=[0]"]
    inspect(child)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:4] == [
        f"🆔  Interpreter: {short(child)}",
        f"👆 Parent:       {short(interp)}",
        f"🌳 Root:         {short(interp)}",
    ]


@pytest.mark.asyncio
async def test_backtrace_prints_chain_stacks_and_node(capsys):
    interp = await inside_routine()
    child = interp.fork_interpreter()
    capsys.readouterr()
    backtrace(interp)
    assert capsys.readouterr().out.splitlines() == [
        f"Interpreter → {interp.id} [Current] [Root] at 0x{id(interp):x}",
        "",
        "Returning Stack:",
        "    0. PointerVector([2])",
        "    1. PointerVector([1, 2, 0]) (Current)",
        "",
        "Context Stack:",
        "    (EMPTY_STACK)",
        "",
        "Current node: x -> record",
    ]
    backtrace(child)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [
        f"Interpreter → {interp.id} [Root] at 0x{id(interp):x}",
        f"Interpreter → {child.id} [Current] at 0x{id(child):x}",
    ]


def test_list_nodes_prints_every_node_with_address_tag_and_function(capsys):
    a, b = recorder("a"), recorder("b")
    interp = WorkflowInterpreter((a >> (b >> (a >> b)) >> NodeCompose() >> a).render())
    list_nodes(interp)
    assert capsys.readouterr().out.splitlines() == [
        f"  {'[0]':>12s}  {'a':<40s}  record",
        f"  {'[1, 0]':>12s}  {'b':<40s}  record",
        f"  {'[1, 1, 0]':>12s}  {'a':<40s}  record",
        f"  {'[1, 1, 1]':>12s}  {'b':<40s}  record",
        f"  {'[3]':>12s}  {'a':<40s}  record",
    ]


def test_list_nodes_of_an_empty_graph(capsys):
    class Empty:
        __rendered_compose__ = True

        def __len__(self):
            return 0

        def __bool__(self):
            return False

    interp = WorkflowInterpreter(routine_graph())
    interp._graph = Empty()
    list_nodes(interp)
    assert capsys.readouterr().out == "(empty graph)\n"


@pytest.mark.asyncio
async def test_list_sub_intp_prints_the_tree(capsys):
    root = WorkflowInterpreter((recorder("a") >> boom).render())
    first = root.fork_interpreter()
    grandchild = first.fork_interpreter()
    with pytest.raises(ValueError):
        await grandchild.run()
    list_sub_intp(root)
    assert capsys.readouterr().out.splitlines() == [
        f"⏸️ {short(root)}  ptr=[0]",
        f"  ⏸️ {short(first)}  ptr=[0]",
        f"    ⏸️ {short(grandchild)}  ptr=[1]  exc=ValueError",
    ]
    list_sub_intp(first, indent=2)
    assert capsys.readouterr().out.splitlines()[0] == f"    ⏸️ {short(first)}  ptr=[0]"
