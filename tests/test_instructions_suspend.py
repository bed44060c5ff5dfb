"""SUSPEND (InterruptKeepContext) raised inside an instruction's condition or body, then resumed.

A suspended body counts as finished: the resumed run continues where the
instruction goes after that body. A suspended condition counts as falsy.
"""

from __future__ import annotations

import pytest

from amrita_sense import NodeCompose, WorkflowInterpreter
from amrita_sense.exceptions import InterruptKeepContext
from amrita_sense.instructions import DO, IF, NATIVE_DO, NATIVE_IF, NATIVE_WHILE, SUSPEND, TRIGGER_EVENT, WHILE
from amrita_sense.runtime.types import Flags
from support.dual import Recorder, run_program


async def runs(program, rec, times: int) -> list:
    """Run (and resume) `times` times; each run's trace."""
    if not isinstance(program, NodeCompose):
        program = NodeCompose(program)
    interp = WorkflowInterpreter(program.render())
    traces = []
    for _ in range(times):
        out = await run_program(interp, rec)
        assert out.error is None
        traces.append(out.trace)
    return traces


def halt(rec: Recorder, name: str):
    return rec.act(name, exc=InterruptKeepContext(name))


@pytest.mark.asyncio
async def test_suspend_in_an_if_body_resumes_after_the_if():
    rec = Recorder()
    interp = WorkflowInterpreter((IF(rec.act("c", True), SUSPEND) >> rec.act("y")).render())
    first = await run_program(interp, rec)
    assert first.trace == ["c"] and first.flags == int(Flags.HLT) and first.pointer == [1, 2]
    second = await run_program(interp, rec)
    assert second.trace == ["y"] and second.yields == [None, None] and second.pointer == []


@pytest.mark.asyncio
async def test_suspend_in_an_elif_body_skips_the_remaining_branches():
    rec = Recorder()
    clause = IF(rec.act("c1", 0), rec.act("x")).ELIF(rec.act("c2", 1), halt(rec, "h")).ELSE(rec.act("e"))
    assert await runs(clause >> rec.act("y"), rec, 2) == [["c1", "c2", "h"], ["y"]]


@pytest.mark.asyncio
async def test_suspend_in_an_else_body():
    rec = Recorder()
    clause = IF(rec.act("c", 0), rec.act("x")).ELSE(halt(rec, "h"))
    assert await runs(clause >> rec.act("y"), rec, 2) == [["c", "h"], ["y"]]


@pytest.mark.asyncio
async def test_suspended_if_condition_counts_as_false():
    rec = Recorder()
    clause = IF(halt(rec, "c1"), rec.act("x")).ELIF(rec.act("c2", 1), rec.act("x2"))
    assert await runs(clause >> rec.act("y"), rec, 2) == [["c1"], ["c2", "x2", "y"]]


@pytest.mark.asyncio
async def test_suspend_in_a_while_body_continues_the_loop(squashed):
    rec = Recorder()
    loop = WHILE(rec.counter("c", 2)).ACTION(SUSPEND) >> rec.act("y")
    assert await runs(loop, rec, 3) == [["c1"], ["c2"], ["c3", "y"]]


@pytest.mark.asyncio
async def test_suspended_while_condition_leaves_the_loop(squashed):
    rec = Recorder()
    assert await runs(WHILE(halt(rec, "c")).ACTION(rec.act("x")) >> rec.act("y"), rec, 2) == [["c"], ["y"]]


@pytest.mark.asyncio
async def test_suspend_in_a_do_body_goes_to_the_check(squashed):
    rec = Recorder()
    loop = DO(SUSPEND).WHILE(rec.counter("c", 1)) >> rec.act("y")
    assert await runs(loop, rec, 3) == [[], ["c1"], ["c2", "y"]]


@pytest.mark.asyncio
async def test_suspended_do_condition_leaves_the_loop(squashed):
    rec = Recorder()
    assert await runs(DO(rec.act("x")).WHILE(halt(rec, "c")) >> rec.act("y"), rec, 2) == [["x", "c"], ["y"]]


@pytest.mark.asyncio
async def test_native_if_single_body_and_condition():
    rec = Recorder()
    body = NATIVE_IF(rec.act("c", 1), halt(rec, "h")).ELSE(rec.act("e"))
    assert await runs(body >> rec.act("y"), rec, 2) == [["c", "h"], ["y"]]
    rec.trace.clear()
    cond = NATIVE_IF(halt(rec, "c"), rec.act("x")).ELSE(rec.act("e"))
    assert await runs(cond >> rec.act("y"), rec, 2) == [["c"], ["e", "y"]]


@pytest.mark.asyncio
async def test_native_if_compose_body_suspends_as_a_plain_step():
    rec = Recorder()
    body = NATIVE_IF(rec.act("c", 1), rec.act("a") >> SUSPEND >> rec.act("b")).ELSE(rec.act("e"))
    assert await runs(body >> rec.act("y"), rec, 2) == [["c", "a"], ["b", "y"]]


@pytest.mark.asyncio
async def test_native_loops_suspend():
    rec = Recorder()
    loop = NATIVE_WHILE(rec.counter("c", 2)).ACTION(rec.act("x") >> SUSPEND)
    assert await runs(loop >> rec.act("y"), rec, 3) == [["c1", "x"], ["c2", "x"], ["c3", "y"]]
    rec.trace.clear()
    cond = NATIVE_WHILE(halt(rec, "c")).ACTION(rec.act("x"))
    assert await runs(cond >> rec.act("y"), rec, 2) == [["c"], ["y"]]
    rec.trace.clear()
    do_cond = NATIVE_DO(rec.act("x")).WHILE(halt(rec, "c"))
    assert await runs(do_cond >> rec.act("y"), rec, 2) == [["x", "c"], ["y"]]


@pytest.mark.asyncio
async def test_resume_reaches_a_target_inside_a_nested_segment():
    rec = Recorder()
    program = NodeCompose(rec.act("a"), IF(rec.act("c", 1), SUSPEND), NodeCompose(NodeCompose(rec.act("deep"))))
    assert await runs(program, rec, 2) == [["a", "c"], ["deep"]]


@pytest.mark.asyncio
async def test_suspended_event_constructor_skips_the_dispatch():
    from amrita_sense.hook.event import BaseEvent

    rec = Recorder()

    class Never(BaseEvent):
        def get_event_type(self) -> str:
            return "never"

        @property
        def event_type(self) -> str:
            return "never"

        @classmethod
        def constructor(cls):
            rec.trace.append("ctor")
            raise InterruptKeepContext("wait")

    assert await runs(TRIGGER_EVENT(Never) >> rec.act("y"), rec, 2) == [["ctor"], ["y"]]
