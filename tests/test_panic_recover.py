"""Panic (an uncaught Exception) and recovery by running again."""

from __future__ import annotations

import asyncio
import logging

import pytest

from amrita_sense import IllegalState, Node, PointerVector, WorkflowInterpreter
from amrita_sense.instructions.interrupt import PUSH_CONTEXT
from amrita_sense.instructions.try_catch import Try
from amrita_sense.runtime.types import Flags


def step(log: list, name: str):
    @Node(wrap_to_async=False)
    def node(pc: WorkflowInterpreter):
        log.append((name, list(pc._pointer)))

    return node


def flaky(log: list, name: str, failures: list[BaseException]):
    """Records each attempt; raises the next queued failure while there is one."""

    @Node(wrap_to_async=False)
    def node(pc: WorkflowInterpreter):
        log.append((name, list(pc._pointer)))
        if failures:
            raise failures.pop(0)

    node.tag = f"NodeSuspend::{name}"
    return node


@Node(wrap_to_async=False)
def push_return(pc: WorkflowInterpreter):
    pc._ret_addr_stack.push(PointerVector([0]))


def names(log: list) -> list[str]:
    return [entry[0] for entry in log]


@pytest.mark.asyncio
@pytest.mark.parametrize("stepwise", [False, True])
async def test_panic_keeps_state_and_recover_reruns_the_failing_node(stepwise):
    log: list = []
    boom = ValueError("boom")
    graph = step(log, "a") >> push_return >> PUSH_CONTEXT([1]) >> flaky(log, "f", [boom]) >> step(log, "b")
    interp = WorkflowInterpreter(graph.render())

    async def drive():
        if stepwise:
            return [v async for v in interp.run_step_by()]
        return await interp.run()

    with pytest.raises(ValueError) as info:
        await drive()
    assert info.value is boom
    assert interp.get_exception() is boom
    assert list(interp._pointer) == [3]
    assert [list(p) for p in interp._ret_addr_stack.stack] == [[0]]
    assert len(interp.context_stack) == 1
    assert interp.flags == Flags.NONE
    assert not interp.is_running

    await drive()
    assert log == [("a", [0]), ("f", [3]), ("f", [3]), ("b", [4])]
    assert interp.get_exception() is None


@pytest.mark.asyncio
async def test_recovery_is_logged_and_clears_the_panic_record(caplog):
    log: list = []
    interp = WorkflowInterpreter((flaky(log, "f", [KeyError("k")]) >> step(log, "b")).render())
    with pytest.raises(KeyError):
        await interp.run()
    with caplog.at_level(logging.DEBUG, logger="amrita_sense"):
        await interp.run()
    assert "Recovered from panic." in caplog.text
    assert interp.get_exception() is None


@pytest.mark.asyncio
async def test_panic_resolves_wait_with_the_exception():
    release = asyncio.Event()
    boom = RuntimeError("late failure")

    @Node()
    async def fail_later():
        await release.wait()
        raise boom

    interp = WorkflowInterpreter((fail_later >> fail_later).render())
    run = asyncio.create_task(interp.run())
    await asyncio.sleep(0)
    assert interp.is_running
    waiter = interp.wait
    release.set()
    with pytest.raises(RuntimeError):
        await run
    assert waiter.done() and waiter.exception() is boom
    with pytest.raises(RuntimeError):
        await waiter


@pytest.mark.asyncio
async def test_panic_inside_a_sub_call_leaves_the_pointer_on_the_caller():
    log: list = []
    boom = ValueError("in the body")
    graph = step(log, "a") >> Try(flaky(log, "body", [boom])).CATCH(KeyError, step(log, "h")) >> step(log, "b")
    interp = WorkflowInterpreter(graph.render())
    with pytest.raises(ValueError):
        await interp.run()
    # the body ran at [1, 1]; call_sub restored the pointer to the TryNode
    assert log == [("a", [0]), ("body", [1, 1])]
    assert list(interp._pointer) == [1, 0]
    assert len(interp._ret_addr_stack) == 0
    await interp.run()
    assert names(log) == ["a", "body", "body", "b"]


@pytest.mark.asyncio
async def test_foreign_base_exception_is_not_a_panic():
    class Abort(BaseException):
        pass

    log: list = []
    interp = WorkflowInterpreter((step(log, "a") >> flaky(log, "f", [Abort()]) >> step(log, "b")).render())
    with pytest.raises(Abort):
        await interp.run()
    assert interp.get_exception() is None
    assert list(interp._pointer) == [1]
    assert not interp.is_running
    await interp.run()
    assert names(log) == ["a", "f", "f", "b"]


@pytest.mark.asyncio
async def test_repeated_panics_each_replace_the_record():
    log: list = []
    first, second = ValueError("1"), KeyError("2")
    interp = WorkflowInterpreter((flaky(log, "f", [first, second]) >> step(log, "b")).render())
    with pytest.raises(ValueError):
        await interp.run()
    assert interp.get_exception() is first
    with pytest.raises(KeyError):
        await interp.run()
    assert interp.get_exception() is second
    await interp.run()
    assert names(log) == ["f", "f", "f", "b"]


@pytest.mark.asyncio
async def test_panic_logs_a_sense_runtime_traceback_at_debug(caplog):
    log: list = []
    graph = step(log, "a") >> push_return >> PUSH_CONTEXT([0]) >> flaky(log, "broken_node", [ValueError("x")])
    interp = WorkflowInterpreter(graph.render())
    with caplog.at_level(logging.DEBUG, logger="amrita_sense"), pytest.raises(ValueError):
        await interp.run()
    assert "Sense Runtime Traceback" in caplog.text
    assert "broken_node" in caplog.text
    debug_records = [r for r in caplog.records if "Sense Runtime Traceback" in r.getMessage()]
    assert debug_records and all(r.levelno == logging.DEBUG for r in debug_records)

    text = interp._make_traceback()
    assert text.startswith("Sense Runtime Traceback")
    assert interp.id in text
    assert "[0]" in text  # the return stack entry and the context snapshot's pointer
    assert "[3]" in text  # the failing position
    assert "NodeSuspend::broken_node" in text


@pytest.mark.asyncio
async def test_traceback_names_the_interpreter_chain():
    interp = WorkflowInterpreter((step([], "a") >> step([], "b")).render())
    child = interp.fork_interpreter(None)
    text = child._make_traceback()
    assert child.id in text and interp.id in text
    assert text.index(interp.id) < text.index(child.id)  # root first, most recent last


@pytest.mark.asyncio
async def test_quiet_without_debug_logging(caplog):
    interp = WorkflowInterpreter(flaky([], "f", [ValueError("x")]).as_compose().render())
    with caplog.at_level(logging.INFO, logger="amrita_sense"), pytest.raises(ValueError):
        await interp.run()
    assert "Sense Runtime Traceback" not in caplog.text


@pytest.mark.asyncio
async def test_starting_a_run_while_one_runs_is_illegal():
    release = asyncio.Event()
    log: list = []

    @Node()
    async def hold():
        await release.wait()

    interp = WorkflowInterpreter((hold >> step(log, "b")).render())
    run = asyncio.create_task(interp.run())
    await asyncio.sleep(0)
    with pytest.raises(IllegalState):
        await interp.run()
    with pytest.raises(IllegalState):
        async for _ in interp.run_step_by():
            pass
    release.set()
    await run
    assert names(log) == ["b"]
    assert interp.get_exception() is None
