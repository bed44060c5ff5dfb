"""Breakpoints: by tag, address, alias and condition; listing, clearing, cleanup; the debug middleware."""

from __future__ import annotations

import pytest

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.debugger import (
    Breakpoint,
    BreakpointHit,
    break_at_addr,
    break_at_tag,
    cleanup,
    clear_break_addr,
    clear_break_tag,
    code_disp,
    cont_async,
    list_breaks,
)
from amrita_sense.exceptions import NullPointerException
from amrita_sense.instructions import ALIAS, IF
from support.debug_support import chain, recorder


@pytest.fixture(autouse=True)
def quiet_listing(monkeypatch):
    monkeypatch.setattr(code_disp, "AUTO_DIS", False)


def ptr(interp) -> list[int]:
    return list(interp._pointer.base_addr)


@pytest.mark.asyncio
async def test_tag_breakpoint_stops_before_the_node_without_a_panic():
    log = []
    interp = WorkflowInterpreter(chain(log, "abc").render())
    bp = break_at_tag(interp, "b")
    with pytest.raises(BreakpointHit) as caught:
        await interp.run()
    assert caught.value.bp is bp
    assert not isinstance(caught.value, Exception)
    assert log == ["a"]
    assert ptr(interp) == [1]
    assert bp.hit_count == 1
    assert interp.get_exception() is None


@pytest.mark.asyncio
async def test_breakpoint_hit_can_be_resumed_by_cont():
    log = []
    interp = WorkflowInterpreter(chain(log, "abc").render())
    break_at_tag(interp, "b")
    await cont_async(interp)
    assert log == ["a"]
    await cont_async(interp)
    assert log == ["a", "b", "c"]
    assert not interp._pointer


@pytest.mark.asyncio
async def test_address_breakpoint_by_list_and_by_alias():
    log = []
    a, b, c = (recorder(log, n) for n in "abc")
    interp = WorkflowInterpreter((a >> (b >> ALIAS(c, "third")) >> a).render())
    by_list = break_at_addr(interp, [1, 0])
    by_alias = break_at_addr(interp, "third")
    assert by_alias.target == [1, 1]
    await cont_async(interp)
    assert (log, ptr(interp), by_list.hit_count) == (["a"], [1, 0], 1)
    await cont_async(interp)
    assert (log, ptr(interp), by_alias.hit_count) == (["a", "b"], [1, 1], 1)
    await cont_async(interp)
    assert log == ["a", "b", "c", "a"]


@pytest.mark.asyncio
async def test_segment_address_stops_at_its_first_node():
    log = []
    interp = WorkflowInterpreter((recorder(log, "a") >> chain(log, "bc")).render())
    break_at_addr(interp, [1])
    await cont_async(interp)
    assert (log, ptr(interp)) == (["a"], [1, 0])


@pytest.mark.asyncio
async def test_condition_decides_and_sees_the_interpreter():
    log = []
    seen = []
    counter = {"n": 0}

    @Node(tag="tick", wrap_to_async=False)
    def tick():
        counter["n"] += 1
        log.append(counter["n"])

    def third_time(pc):
        seen.append(pc)
        return counter["n"] == 2

    interp = WorkflowInterpreter(NodeCompose(tick, tick, tick, tick).render())
    bp = break_at_tag(interp, "tick", condition=third_time)
    await cont_async(interp)
    assert log == [1, 2]
    assert bp.hit_count == 1
    assert seen[0] is interp


@pytest.mark.asyncio
async def test_condition_that_raises_counts_as_false():
    log = []
    interp = WorkflowInterpreter(chain(log, "ab").render())

    def broken(pc):
        raise RuntimeError("bad condition")

    bp = break_at_tag(interp, "b", condition=broken)
    await cont_async(interp)
    assert log == ["a", "b"]
    assert bp.hit_count == 0


@pytest.mark.asyncio
async def test_disabled_breakpoint_is_skipped_and_can_be_enabled_again():
    log = []
    interp = WorkflowInterpreter(chain(log, "abab").render())
    bp = break_at_tag(interp, "b")
    bp.enabled = False
    await cont_async(interp)
    assert log == list("abab")
    bp.enabled = True
    log.clear()
    await cont_async(interp)
    assert log == ["a"]


@pytest.mark.asyncio
async def test_first_matching_breakpoint_in_list_order_counts_the_hit():
    log = []
    interp = WorkflowInterpreter(chain(log, "ab").render())
    first = break_at_addr(interp, [1])
    second = break_at_tag(interp, "b")
    await cont_async(interp)
    assert (first.hit_count, second.hit_count) == (1, 0)


@pytest.mark.asyncio
async def test_breakpoint_inside_a_sub_call_lets_cont_progress():
    log = []

    @Node(wrap_to_async=False)
    def cond():
        log.append("cond")
        return True

    body = recorder(log, "body")
    interp = WorkflowInterpreter((recorder(log, "a") >> IF(cond, body) >> recorder(log, "z")).render())
    bp = break_at_tag(interp, "body")
    await cont_async(interp)
    assert log == ["a", "cond"]
    assert bp.hit_count == 1
    await cont_async(interp)
    assert log[-2:] == ["body", "z"]
    assert bp.hit_count == 1
    assert not interp._pointer


@pytest.mark.asyncio
async def test_a_forked_interpreter_sharing_the_middleware_is_not_stopped():
    log = []
    interp = WorkflowInterpreter(chain(log, "ab").render())
    break_at_tag(interp, "b")
    child = interp.fork_interpreter()
    assert child._middleware is interp._middleware
    await child.run()
    assert log == ["a", "b"]


@pytest.mark.asyncio
async def test_user_middleware_still_runs_behind_the_debugger():
    log = []

    async def wrap(pc):
        return ("wrapped", await pc._call())

    interp = WorkflowInterpreter(chain(log, "abc").render(), middleware=wrap)
    break_at_tag(interp, "c")
    results = []
    with pytest.raises(BreakpointHit):
        async for result in interp.run_step_by():
            results.append(result)
    assert results == [("wrapped", "a"), ("wrapped", "b")]


def test_no_debug_middleware_until_a_breakpoint_is_set():
    interp = WorkflowInterpreter(chain([], "a").render())
    list_breaks(interp)
    assert interp._middleware is None
    break_at_tag(interp, "a")
    assert interp._middleware is not None


@pytest.mark.asyncio
async def test_cleanup_restores_no_middleware():
    log = []
    interp = WorkflowInterpreter(chain(log, "ab").render())
    break_at_tag(interp, "b")
    cleanup(interp)
    assert interp._middleware is None
    await interp.run()
    assert log == ["a", "b"]


def test_cleanup_restores_the_user_middleware_and_is_idempotent(capsys):
    async def wrap(pc):
        return await pc._call()

    interp = WorkflowInterpreter(chain([], "ab").render(), middleware=wrap)
    break_at_addr(interp, [0])
    assert interp._middleware is not wrap
    cleanup(interp)
    cleanup(interp)
    assert interp._middleware is wrap
    list_breaks(interp)
    assert capsys.readouterr().out.splitlines()[-1] == "(no breakpoints)"


def test_cleanup_leaves_a_middleware_installed_later_alone():
    async def later(pc):
        return await pc._call()

    interp = WorkflowInterpreter(chain([], "a").render())
    break_at_tag(interp, "a")
    interp._middleware = later
    cleanup(interp)
    assert interp._middleware is later


def test_set_and_list_breakpoints_print(capsys):
    interp = WorkflowInterpreter((ALIAS(recorder([], "a"), "start") >> recorder([], "b")).render())

    def is_ready(pc):
        return True

    break_at_tag(interp, "b")
    break_at_addr(interp, "start", condition=is_ready)
    disabled = break_at_addr(interp, [1], condition=lambda pc: True)
    disabled.enabled = False
    list_breaks(interp)
    assert capsys.readouterr().out.splitlines() == [
        "🔴 Breakpoint: tag='b' hits=0",
        "🔴 Breakpoint: addr=[0] hits=0 cond",
        "🔴 Breakpoint: addr=[1] hits=0 cond",
        "  1. TAG  'b'  hits=0",
        "  2. ADDR  [0]  hits=0 cond=is_ready",
        "  3. ADDR  [1]  hits=0 cond=<lambda> [DISABLED]",
    ]


@pytest.mark.asyncio
async def test_clear_by_tag_and_by_address_or_alias(capsys):
    log = []
    a, b = recorder(log, "a"), recorder(log, "b")
    interp = WorkflowInterpreter((ALIAS(a, "start") >> b >> b).render())
    break_at_tag(interp, "b")
    break_at_tag(interp, "b")
    break_at_addr(interp, [0])
    break_at_addr(interp, [2])
    capsys.readouterr()
    clear_break_tag(interp, "b")
    clear_break_addr(interp, "start")
    clear_break_addr(interp, [5])
    assert capsys.readouterr().out.splitlines() == [
        "✖  Removed: tag='b' hits=0",
        "✖  Removed: tag='b' hits=0",
        "✖  Removed: addr=[0] hits=0",
    ]
    list_breaks(interp)
    assert capsys.readouterr().out.splitlines() == ["  1. ADDR  [2]  hits=0"]
    await cont_async(interp)
    assert log == ["a", "b"]


def test_breakpoint_str_and_hit_str():
    bp = Breakpoint(target="t", kind="tag")
    assert str(bp) == "tag='t' hits=0"
    bp.hit_count = 2
    assert str(BreakpointHit(bp)) == "tag='t' hits=2"
    assert str(Breakpoint(target=[1, 2], kind="addr", condition=bool)) == "addr=[1, 2] hits=0 cond"
    assert issubclass(BreakpointHit, BaseException) and not issubclass(BreakpointHit, Exception)


def test_bad_arguments_are_refused():
    interp = WorkflowInterpreter(chain([], "a").render())
    with pytest.raises(TypeError):
        break_at_tag(interp, 3)
    with pytest.raises(TypeError):
        break_at_addr(interp, 1.5)
    with pytest.raises(TypeError):
        break_at_addr(interp, [0, "x"])
    with pytest.raises(TypeError):
        break_at_tag(interp, "a", condition="yes")
    with pytest.raises(NullPointerException):
        break_at_addr(interp, "no-such-alias")


@pytest.mark.asyncio
async def test_address_breakpoint_follows_a_hot_swapped_slot():
    from amrita_sense.node import DLLCompose

    log = []
    dll = DLLCompose(chain(log, "ab"))
    interp = WorkflowInterpreter((recorder(log, "s") >> dll).render())
    break_at_addr(interp, [1, 1])
    dll.apply(chain(log, "xyz"))
    await cont_async(interp)
    assert (log, ptr(interp)) == (["s", "x"], [1, 1])


@pytest.mark.asyncio
async def test_jump_onto_a_segment_runs_under_the_debugger_and_meets_its_breakpoint():
    log = []

    @Node(wrap_to_async=False)
    def leap(pc: WorkflowInterpreter):
        pc.jump_far_ptr([3])

    interp = WorkflowInterpreter((recorder(log, "a") >> leap >> recorder(log, "skipped") >> chain(log, "cd")).render())
    bp = break_at_addr(interp, [3])
    await cont_async(interp)
    assert (log, ptr(interp), bp.hit_count) == (["a"], [3, 0], 1)
    await cont_async(interp)
    assert log == ["a", "c", "d"]
