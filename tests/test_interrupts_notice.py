"""InterruptNotice ends a run for good; InterruptKeepContext / SUSPEND halts it resumably."""

from __future__ import annotations

import asyncio

import pytest

from amrita_sense import InterruptNotice, Node, PointerVector, WorkflowInterpreter
from amrita_sense.exceptions import InterruptKeepContext
from amrita_sense.instructions.interrupt import PUSH_CONTEXT
from amrita_sense.instructions.try_catch import Try
from amrita_sense.instructions.workfl_ctrl import INTERRUPT, INTERRUPT_KEEP_CTX, RESET, SUSPEND
from amrita_sense.runtime.types import Flags


def step(log: list, name: str, exc: BaseException | None = None):
    """An inline node that records `(name, pointer)` and then raises `exc` if given."""

    @Node(wrap_to_async=False)
    def node(pc: WorkflowInterpreter):
        log.append((name, list(pc._pointer)))
        if exc is not None:
            raise exc

    return node


def names(log: list) -> list[str]:
    return [entry[0] for entry in log]


@Node(wrap_to_async=False)
def dirty_state(pc: WorkflowInterpreter):
    """Leave something on every stack and in the register, so a reset is visible."""
    pc._ret_addr_stack.push(PointerVector([0]))
    pc.if_flag = True


def assert_reset(interp: WorkflowInterpreter) -> None:
    assert list(interp._pointer) == []
    assert len(interp._ret_addr_stack) == 0
    assert len(interp.context_stack) == 0
    assert interp.flags == Flags.NONE
    assert interp.get_exception() is None
    assert not interp.is_running


# ----- InterruptNotice --------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("stepwise", [False, True])
async def test_notice_from_a_node_ends_the_run_normally_and_resets(stepwise):
    log: list = []
    graph = (
        step(log, "a")
        >> PUSH_CONTEXT([0])
        >> dirty_state
        >> step(log, "stop", InterruptNotice("bye"))
        >> step(log, "never")
    )
    interp = WorkflowInterpreter(graph.render())
    if stepwise:
        async for _ in interp.run_step_by():
            pass
    else:
        assert await interp.run() is None
    assert names(log) == ["a", "stop"]
    assert_reset(interp)


@pytest.mark.asyncio
@pytest.mark.parametrize("node", [RESET, INTERRUPT], ids=["RESET", "INTERRUPT"])
async def test_reset_node_terminates(node):
    assert INTERRUPT is RESET
    log: list = []
    interp = WorkflowInterpreter((step(log, "a") >> dirty_state >> node >> step(log, "never")).render())
    await interp.run()
    assert names(log) == ["a"]
    assert_reset(interp)


@pytest.mark.asyncio
async def test_terminated_workflow_is_not_resumed_but_restarted():
    log: list = []
    interp = WorkflowInterpreter((step(log, "a") >> step(log, "b") >> RESET >> step(log, "c")).render())
    await interp.run()
    await interp.run()
    assert names(log) == ["a", "b", "a", "b"]


@pytest.mark.asyncio
async def test_notice_cannot_be_held_by_except_exception_in_node_code():
    log: list = []

    @Node()
    async def stubborn():
        try:
            raise InterruptNotice("deep")
        except Exception:  # noqa: BLE001 - the point: this does not match
            log.append(("swallowed", None))

    interp = WorkflowInterpreter((stubborn >> step(log, "after")).render())
    await interp.run()
    assert log == []
    assert_reset(interp)


@pytest.mark.asyncio
async def test_notice_raised_deep_inside_a_sub_call_still_terminates():
    log: list = []
    body = (
        Try(step(log, "body", InterruptNotice("inside")))
        .CATCH(BaseException, step(log, "handler"))
        .FINALLY(step(log, "fin"))
    )
    interp = WorkflowInterpreter((step(log, "a") >> dirty_state >> body >> step(log, "never")).render())
    await interp.run()
    assert names(log) == ["a", "body", "fin"]
    assert_reset(interp)


@pytest.mark.asyncio
async def test_notice_thrown_in_from_outside_through_an_awaited_future():
    log: list = []
    loop = asyncio.get_running_loop()
    watchdog: asyncio.Future = loop.create_future()
    entered = asyncio.Event()

    @Node()
    async def waiting(pc: WorkflowInterpreter):
        log.append(("waiting", list(pc._pointer)))
        entered.set()
        await watchdog

    interp = WorkflowInterpreter((step(log, "a") >> dirty_state >> waiting >> step(log, "never")).render())
    run = asyncio.create_task(interp.run())
    await entered.wait()
    watchdog.set_exception(InterruptNotice("Timeout: workflow exceeded time limit"))
    assert await run is None
    assert names(log) == ["a", "waiting"]
    assert_reset(interp)


@pytest.mark.asyncio
async def test_notice_thrown_in_by_a_middleware():
    log: list = []
    calls = 0

    async def watchdog(pc: WorkflowInterpreter):
        nonlocal calls
        calls += 1
        if calls == 3:
            raise InterruptNotice("budget exhausted")
        return await pc._call()

    graph = step(log, "a") >> dirty_state >> step(log, "never") >> step(log, "never 2")
    interp = WorkflowInterpreter(graph.render(), middleware=watchdog)
    await interp.run()
    assert names(log) == ["a"]
    assert_reset(interp)


@pytest.mark.asyncio
async def test_wait_resolves_with_none_after_a_notice():
    release = asyncio.Event()

    @Node()
    async def hold():
        await release.wait()

    interp = WorkflowInterpreter((hold >> RESET).render())
    run = asyncio.create_task(interp.run())
    await asyncio.sleep(0)
    waiter = interp.wait
    release.set()
    await run
    assert waiter.done() and waiter.result() is None


# ----- InterruptKeepContext / SUSPEND ---------------------------------------------------


@pytest.mark.asyncio
async def test_keep_context_halts_and_resumes_past_the_halting_node():
    log: list = []
    graph = step(log, "a") >> PUSH_CONTEXT([0]) >> step(log, "halt", InterruptKeepContext("pause")) >> step(log, "c")
    interp = WorkflowInterpreter(graph.render())
    assert await interp.run() is None
    assert names(log) == ["a", "halt"]
    assert list(interp._pointer) == [2]
    assert interp.flags == Flags.HLT
    assert len(interp.context_stack) == 1
    assert interp.get_exception() is None
    await interp.run()
    # the halting node is not run again
    assert log == [("a", [0]), ("halt", [2]), ("c", [3])]
    assert list(interp._pointer) == [] and interp.flags == Flags.NONE


@pytest.mark.asyncio
async def test_keep_context_keeps_the_return_stack():
    log: list = []
    graph = step(log, "a") >> dirty_state >> step(log, "halt", InterruptKeepContext()) >> step(log, "c")
    interp = WorkflowInterpreter(graph.render())
    await interp.run()
    assert [list(p) for p in interp._ret_addr_stack.stack] == [[0]]
    assert interp.flags == Flags.HLT | Flags.IF


@pytest.mark.asyncio
async def test_suspend_node_and_its_alias():
    assert INTERRUPT_KEEP_CTX is SUSPEND
    log: list = []
    interp = WorkflowInterpreter(
        (step(log, "a") >> SUSPEND >> step(log, "b") >> INTERRUPT_KEEP_CTX >> step(log, "c")).render()
    )
    await interp.run()
    assert names(log) == ["a"]
    await interp.run()
    assert names(log) == ["a", "b"]
    await interp.run()
    assert names(log) == ["a", "b", "c"]


@pytest.mark.asyncio
async def test_trailing_suspend_ends_then_the_next_run_restarts():
    log: list = []
    interp = WorkflowInterpreter((step(log, "a") >> step(log, "b") >> SUSPEND).render())
    await interp.run()
    assert interp.flags == Flags.HLT and list(interp._pointer) == [2]
    await interp.run()  # steps past the SUSPEND: nothing follows
    assert names(log) == ["a", "b"]
    assert list(interp._pointer) == [] and interp.flags == Flags.NONE
    await interp.run()
    assert names(log) == ["a", "b", "a", "b"]


@pytest.mark.asyncio
async def test_step_by_stops_at_suspend_and_resumes():
    log: list = []
    interp = WorkflowInterpreter((step(log, "a") >> SUSPEND >> step(log, "b")).render())
    first = [v async for v in interp.run_step_by()]
    second = [v async for v in interp.run_step_by()]
    assert first == [None] and second == [None]
    assert names(log) == ["a", "b"]


@pytest.mark.asyncio
async def test_wait_resolves_with_none_after_a_suspend():
    release = asyncio.Event()

    @Node()
    async def hold():
        await release.wait()

    interp = WorkflowInterpreter((hold >> SUSPEND >> hold).render())
    run = asyncio.create_task(interp.run())
    await asyncio.sleep(0)
    waiter = interp.wait
    release.set()
    await run
    assert waiter.done() and waiter.result() is None
    assert interp.flags == Flags.HLT
