"""Stepping and continuing: the async commands and the sync REPL wrappers."""

from __future__ import annotations

import pytest

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.debugger import (
    break_at_addr,
    break_at_tag,
    code_disp,
    cont,
    cont_async,
    step,
    step_async,
    step_out,
    step_out_async,
    step_over,
    step_over_async,
)
from amrita_sense.instructions import ALIAS, CALL, FN, JMP, RESET, SUSPEND
from amrita_sense.runtime.types import Flags
from support.debug_support import chain, recorder


@pytest.fixture(autouse=True)
def quiet_listing(monkeypatch):
    monkeypatch.setattr(code_disp, "AUTO_DIS", False)
    monkeypatch.setattr(code_disp, "COLOR", False)


def ptr(interp) -> list[int]:
    return list(interp._pointer.base_addr)


def crashing(log: list):
    @Node(tag="boom", wrap_to_async=False)
    def boom():
        log.append("boom")
        raise ValueError("bad node")

    return boom


def routine_graph(log: list):
    """[0] a, [1] FN sub (x, y), [2] CALL sub, [3] z."""
    return (recorder(log, "a") >> FN("sub", chain(log, "xy")) >> CALL("sub") >> recorder(log, "z")).render()


@pytest.mark.asyncio
async def test_step_runs_exactly_one_node():
    log = []
    interp = WorkflowInterpreter(chain(log, "abc").render())
    await step_async(interp)
    assert (log, ptr(interp)) == (["a"], [1])
    await step_async(interp)
    assert (log, ptr(interp)) == (["a", "b"], [2])


@pytest.mark.asyncio
async def test_step_ignores_breakpoints():
    log = []
    interp = WorkflowInterpreter(chain(log, "ab").render())
    bp = break_at_tag(interp, "b")
    await step_async(interp)
    await step_async(interp)
    assert log == ["a", "b"]
    assert bp.hit_count == 0


@pytest.mark.asyncio
async def test_step_enters_segments_and_restarts_after_the_end():
    log = []
    interp = WorkflowInterpreter((recorder(log, "a") >> chain(log, "bc")).render())
    for _ in range(3):
        await step_async(interp)
    assert (log, interp._pointer.base_addr) == (["a", "b", "c"], [])
    await step_async(interp)
    assert (log[-1], ptr(interp)) == ("a", [1, 0])


@pytest.mark.asyncio
async def test_step_follows_a_jump_without_advancing():
    log = []
    a, b = recorder(log, "a"), recorder(log, "b")
    interp = WorkflowInterpreter((ALIAS(a, "top") >> b >> JMP("top")).render())
    for _ in range(3):
        await step_async(interp)
    assert ptr(interp) == [0]
    assert not interp.jump_marked
    await step_async(interp)
    assert log == ["a", "b", "a"]


@pytest.mark.asyncio
async def test_step_records_a_panic_and_the_next_step_retries():
    log = []
    interp = WorkflowInterpreter((recorder(log, "a") >> crashing(log)).render())
    await step_async(interp)
    with pytest.raises(ValueError, match="bad node"):
        await step_async(interp)
    assert isinstance(interp.get_exception(), ValueError)
    assert ptr(interp) == [1]
    with pytest.raises(ValueError):
        await step_async(interp)
    assert log == ["a", "boom", "boom"]


@pytest.mark.asyncio
async def test_step_over_suspend_halts_and_resumes_past_it(capsys):
    log = []
    interp = WorkflowInterpreter((recorder(log, "a") >> SUSPEND >> recorder(log, "b")).render())
    await step_async(interp)
    await step_async(interp)
    assert interp.flags & Flags.HLT
    assert ptr(interp) == [1]
    assert "⏸️  Suspended at: [1] (context kept)" in capsys.readouterr().out
    await step_async(interp)
    assert log == ["a", "b"]
    assert not interp.flags & Flags.HLT


@pytest.mark.asyncio
async def test_step_over_reset_resets_the_interpreter(capsys):
    log = []
    interp = WorkflowInterpreter((recorder(log, "a") >> RESET >> recorder(log, "b")).render())
    await step_async(interp)
    await step_async(interp)
    assert not interp._pointer
    assert "interpreter reset" in capsys.readouterr().out
    await step_async(interp)
    assert log == ["a", "a"]


@pytest.mark.asyncio
async def test_step_shows_the_listing_when_auto_dis_is_on(monkeypatch, capsys):
    monkeypatch.setattr(code_disp, "AUTO_DIS", True)
    interp = WorkflowInterpreter(chain([], "ab").render())
    await step_async(interp)
    assert capsys.readouterr().out.splitlines() == ["segment [root]:", "  [0] a; a", "=>[1] b; b"]
    await step_async(interp, show=False)
    assert capsys.readouterr().out == ""


@pytest.mark.asyncio
async def test_step_over_runs_a_called_routine_to_its_return():
    log = []
    interp = WorkflowInterpreter(routine_graph(log))
    await step_async(interp)
    await step_async(interp)
    assert ptr(interp) == [2]
    await step_over_async(interp)
    assert log == ["a", "x", "y"]
    assert ptr(interp) == [3]
    assert len(interp._ret_addr_stack) == 0


@pytest.mark.asyncio
async def test_step_over_a_plain_node_is_one_step():
    log = []
    interp = WorkflowInterpreter(chain(log, "ab").render())
    await step_over_async(interp)
    assert (log, ptr(interp)) == (["a"], [1])


@pytest.mark.asyncio
async def test_step_out_leaves_the_current_routine():
    log = []
    interp = WorkflowInterpreter(routine_graph(log))
    for _ in range(4):
        await step_async(interp)
    assert ptr(interp) == [1, 2, 0]
    assert len(interp._ret_addr_stack) == 1
    await step_out_async(interp)
    assert log == ["a", "x", "y"]
    assert len(interp._ret_addr_stack) == 0
    assert ptr(interp) == [3]


@pytest.mark.asyncio
async def test_step_out_at_top_level_runs_to_the_end():
    log = []
    interp = WorkflowInterpreter(chain(log, "abc").render())
    await step_out_async(interp)
    assert log == ["a", "b", "c"]
    assert not interp._pointer


@pytest.mark.asyncio
async def test_cont_stops_at_each_breakpoint_then_finishes(capsys):
    log = []
    interp = WorkflowInterpreter(chain(log, "abcd").render())
    break_at_addr(interp, [1])
    break_at_tag(interp, "d")
    await cont_async(interp)
    assert (log, ptr(interp)) == (["a"], [1])
    await cont_async(interp)
    assert (log, ptr(interp)) == (["a", "b", "c"], [3])
    await cont_async(interp)
    assert log == ["a", "b", "c", "d"]
    lines = capsys.readouterr().out.splitlines()
    assert lines.count("⏸️  Hit breakpoint: addr=[1] hits=1") == 1
    assert lines.count("⏸️  Hit breakpoint: tag='d' hits=1") == 1


@pytest.mark.asyncio
async def test_cont_skips_the_stop_address_only_once():
    log = []
    a = recorder(log, "a")
    interp = WorkflowInterpreter((ALIAS(a, "top") >> recorder(log, "b") >> JMP("top")).render())
    bp = break_at_tag(interp, "b")
    await cont_async(interp)
    await cont_async(interp)
    assert log == ["a", "b", "a"]
    assert bp.hit_count == 2
    assert ptr(interp) == [1]


@pytest.mark.asyncio
async def test_step_after_a_breakpoint_runs_the_stopped_node():
    log = []
    interp = WorkflowInterpreter(chain(log, "abc").render())
    break_at_tag(interp, "b")
    await cont_async(interp)
    await step_async(interp)
    assert (log, ptr(interp)) == (["a", "b"], [2])


@pytest.mark.asyncio
async def test_cont_propagates_a_crash_and_records_the_panic():
    log = []
    interp = WorkflowInterpreter((recorder(log, "a") >> crashing(log)).render())
    with pytest.raises(ValueError):
        await cont_async(interp)
    assert isinstance(interp.get_exception(), ValueError)


@pytest.mark.asyncio
async def test_keyboard_interrupt_in_a_node_is_reported_as_a_stop(capsys):
    @Node(tag="ctrl_c", wrap_to_async=False)
    def ctrl_c():
        raise KeyboardInterrupt

    interp = WorkflowInterpreter(NodeCompose(ctrl_c).render())
    await step_async(interp)
    await cont_async(interp)
    out = capsys.readouterr().out.splitlines()
    assert out == ["⏸️  Stop at: [0]", "⏸️  Stop at: [0]"]


def test_sync_step_and_cont_print_hits_and_crashes(capsys):
    log = []
    interp = WorkflowInterpreter((chain(log, "ab") >> crashing(log)).render())
    break_at_tag(interp, "b")
    capsys.readouterr()
    cont(interp)
    assert capsys.readouterr().out.splitlines() == ["⏸️  Hit breakpoint: tag='b' hits=1"]
    step(interp)
    assert ptr(interp) == [2]
    step(interp)
    assert capsys.readouterr().out.splitlines() == [
        "⚠️  Node crashed: ValueError('bad node'). Panic saved, use inspect()."
    ]
    assert isinstance(interp.get_exception(), ValueError)
    cont(interp)
    assert "Node crashed: ValueError('bad node')" in capsys.readouterr().out
    assert log == ["a", "b", "boom", "boom"]


def test_sync_step_over_and_step_out(capsys):
    log = []
    interp = WorkflowInterpreter(routine_graph(log))
    step(interp)
    step(interp)
    step_over(interp)
    assert (log, ptr(interp)) == (["a", "x", "y"], [3])
    interp.reset()
    for _ in range(4):
        step(interp)
    step_out(interp)
    assert ptr(interp) == [3]
    assert capsys.readouterr().out == ""


def test_sync_step_out_reports_a_crash(capsys):
    log = []
    interp = WorkflowInterpreter((recorder(log, "a") >> crashing(log)).render())
    step_out(interp)
    assert capsys.readouterr().out.startswith("⚠️  Node crashed: ValueError('bad node')")


@pytest.mark.asyncio
async def test_sync_commands_work_while_an_event_loop_is_running(capsys):
    log = []
    interp = WorkflowInterpreter(chain(log, "abc").render())
    break_at_tag(interp, "c")
    capsys.readouterr()
    step(interp)
    cont(interp)
    assert (log, ptr(interp)) == (["a", "b"], [2])
    assert capsys.readouterr().out.splitlines() == ["⏸️  Hit breakpoint: tag='c' hits=1"]


def test_cont_reaches_a_breakpoint_near_the_end_of_a_large_workflow(capsys):
    count = {"n": 0}

    @Node(tag="work", wrap_to_async=False)
    def work():
        count["n"] += 1

    size = 100_000
    interp = WorkflowInterpreter(NodeCompose(*([work] * size)).render())
    break_at_addr(interp, [size - 3])
    cont(interp)
    assert (count["n"], ptr(interp)) == (size - 3, [size - 3])
    cont(interp)
    assert count["n"] == size
    assert "Hit breakpoint: addr=[99997] hits=1" in capsys.readouterr().out
