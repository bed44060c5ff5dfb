"""Exceptions in called subroutines, loops and sub-interpreters reach the right handler at the right stack depth."""

from __future__ import annotations

import pytest

from amrita_sense import InterruptNotice, Node, WorkflowInterpreter
from amrita_sense.exceptions import InterruptKeepContext
from amrita_sense.instructions import (
    ALIAS,
    ARCHIVED_NODES,
    CALL,
    FN,
    FUN_BLOCK,
    INVOKE,
    JMP,
    NATIVE_WHILE,
    PUSH_RET,
    RET,
    SUSPEND,
    WHILE,
    Try,
)
from support.drivers import MODES, drive, interpreter


def probe(log: list, name: str, exc: BaseException | None = None):
    """Records `(name, pointer, return-stack depth)`, then raises `exc` if given."""

    @Node(wrap_to_async=False)
    def node(pc: WorkflowInterpreter):
        log.append((name, list(pc._pointer), len(pc._ret_addr_stack)))
        if exc is not None:
            raise exc

    return node


def handler(log: list, name: str = "h"):
    @Node(wrap_to_async=False)
    def node(pc: WorkflowInterpreter, exc_val: BaseException):
        log.append((name, str(exc_val), len(pc._ret_addr_stack)))

    return node


def counter_condition(limit: int):
    """True for the first `limit` checks."""
    calls = [0]

    @Node(wrap_to_async=False)
    def cond() -> bool:
        calls[0] += 1
        return calls[0] <= limit

    return cond


def failing_on(log: list, name: str, fail_at: int):
    """A loop body that raises on its `fail_at`-th run."""
    runs = [0]

    @Node(wrap_to_async=False)
    def body(pc: WorkflowInterpreter):
        runs[0] += 1
        log.append((name, runs[0], len(pc._ret_addr_stack)))
        if runs[0] == fail_at:
            raise ValueError(f"run {runs[0]}")

    return body


@pytest.mark.asyncio
async def test_exception_in_an_invoked_node_reaches_the_try_around_invoke():
    log: list = []
    graph = (
        probe(log, "s")
        >> Try(INVOKE("sub")).CATCH(ValueError, handler(log))
        >> probe(log, "end")
        >> ARCHIVED_NODES(ALIAS(probe(log, "sub", ValueError("deep")), "sub"))
    )
    interp = WorkflowInterpreter(graph.render())
    await interp.run()
    # two nested sub-calls were unwound; the handler runs one level below the TryNode
    assert [entry[0] for entry in log] == ["s", "sub", "h", "end"]
    assert log[1][2] == 2 and log[2][2] == 1 and log[3][2] == 0
    assert not interp._ret_addr_stack


@pytest.mark.asyncio
async def test_try_inside_a_called_routine_returns_to_each_call_site():
    log: list = []
    routine = Try(probe(log, "risky", ValueError("in fn"))).CATCH(ValueError, handler(log)) >> probe(log, "fn tail")
    graph = probe(log, "s") >> CALL("f") >> probe(log, "between") >> CALL("f") >> probe(log, "end") >> FN("f", routine)
    interp = WorkflowInterpreter(graph.render())
    await interp.run()
    assert [entry[0] for entry in log] == ["s", "risky", "h", "fn tail", "between", "risky", "h", "fn tail", "end"]
    depths = {entry[0]: entry[2] for entry in log}
    # inside the routine: the CALL's return address, plus the Try's sub-call for body and handler
    assert depths == {"s": 0, "risky": 2, "h": 2, "fn tail": 1, "between": 0, "end": 0}
    assert log[4][1] == [2]
    assert not interp._ret_addr_stack


@pytest.mark.asyncio
async def test_panic_inside_a_called_routine_keeps_the_return_stack_and_recovers():
    log: list = []
    failures = [ValueError("flaky")]

    @Node(wrap_to_async=False)
    def flaky(pc: WorkflowInterpreter):
        log.append(("flaky", list(pc._pointer), len(pc._ret_addr_stack)))
        if failures:
            raise failures.pop()

    graph = (
        probe(log, "s") >> CALL("f") >> probe(log, "after") >> FN("f", probe(log, "pre") >> flaky >> probe(log, "post"))
    )
    interp = WorkflowInterpreter(graph.render())
    with pytest.raises(ValueError):
        await interp.run()
    failing_at = log[-1][1]
    assert list(interp._pointer) == failing_at
    assert [list(p) for p in interp._ret_addr_stack.stack] == [[1]]
    await interp.run()
    assert [entry[0] for entry in log] == ["s", "pre", "flaky", "flaky", "post", "after"]
    assert log[-1] == ("after", [2], 0)


@pytest.mark.asyncio
async def test_notice_inside_a_called_routine_clears_the_return_stack():
    log: list = []
    graph = probe(log, "s") >> CALL("f") >> probe(log, "after") >> FN("f", probe(log, "stop", InterruptNotice("x")))
    interp = WorkflowInterpreter(graph.render())
    await interp.run()
    assert [entry[0] for entry in log] == ["s", "stop"]
    assert log[-1][2] == 1
    assert not interp._ret_addr_stack and list(interp._pointer) == []


@pytest.mark.asyncio
async def test_suspend_inside_a_called_routine_resumes_and_returns():
    log: list = []
    graph = (
        probe(log, "s") >> CALL("f") >> probe(log, "after") >> FN("f", probe(log, "in") >> SUSPEND >> probe(log, "out"))
    )
    interp = WorkflowInterpreter(graph.render())
    await interp.run()
    assert len(interp._ret_addr_stack) == 1
    await interp.run()
    assert [entry[0] for entry in log] == ["s", "in", "out", "after"]
    assert [entry[2] for entry in log] == [0, 1, 1, 0]


@pytest.mark.asyncio
async def test_keep_context_raised_by_a_routine_node_is_not_rerun():
    log: list = []
    pauses = [InterruptKeepContext("pause")]

    @Node(wrap_to_async=False)
    def pausing(pc: WorkflowInterpreter):
        log.append(("pausing", list(pc._pointer), len(pc._ret_addr_stack)))
        if pauses:
            raise pauses.pop()

    graph = probe(log, "s") >> CALL("f") >> probe(log, "after") >> FN("f", pausing >> probe(log, "out"))
    interp = WorkflowInterpreter(graph.render())
    await interp.run()
    await interp.run()
    assert [entry[0] for entry in log] == ["s", "pausing", "out", "after"]


@pytest.mark.asyncio
async def test_try_inside_a_native_loop_body_catches_every_iteration():
    log: list = []
    body = Try(failing_on(log, "b", 2)).CATCH(ValueError, handler(log))
    graph = probe(log, "s") >> NATIVE_WHILE(counter_condition(3)).ACTION(body) >> probe(log, "end")
    interp = WorkflowInterpreter(graph.render())
    await interp.run()
    names = [entry[0] if entry[0] != "b" else f"b{entry[1]}" for entry in log]
    assert names == ["s", "b1", "b2", "h", "b3", "end"]
    # inside the body: the loop's own return entry plus the Try's sub-call
    assert [entry[2] for entry in log if entry[0] == "b"] == [2, 2, 2]
    assert log[-1][2] == 0 and not interp._ret_addr_stack


@pytest.mark.asyncio
async def test_exception_in_a_while_body_reaches_a_try_around_the_loop():
    log: list = []
    loop = WHILE(counter_condition(5)).ACTION(failing_on(log, "b", 1))
    graph = probe(log, "s") >> Try(loop).CATCH(ValueError, handler(log)) >> probe(log, "end")
    interp = WorkflowInterpreter(graph.render())
    await interp.run()
    assert [entry[0] for entry in log] == ["s", "b", "h", "end"]
    assert log[-1][2] == 0


@pytest.mark.asyncio
async def test_uncaught_exception_in_a_while_body_panics_on_the_loop_node():
    log: list = []
    loop = WHILE(counter_condition(5)).ACTION(failing_on(log, "b", 2))
    interp = WorkflowInterpreter((probe(log, "s") >> loop >> probe(log, "end")).render())
    with pytest.raises(ValueError):
        await interp.run()
    # the body ran through the loop node's sub-call, which restored the pointer to the loop head
    assert list(interp._pointer) == [1, 0]
    assert not interp._ret_addr_stack


@pytest.mark.asyncio
async def test_exception_in_a_sub_interpreter_reaches_the_parent_try():
    log: list = []
    child_graph = (probe(log, "child a") >> probe(log, "child b", KeyError("child"))).render()
    graph = probe(log, "s") >> Try(FUN_BLOCK(child_graph)).CATCH(KeyError, handler(log)) >> probe(log, "end")
    interp = WorkflowInterpreter(graph.render())
    await interp.run()
    assert [entry[0] for entry in log] == ["s", "child a", "child b", "h", "end"]
    assert interp.get_exception() is None and not interp._ret_addr_stack


# ----- a part that moves the pointer: FINALLY still runs, then the run goes on from there -------


async def _run_in(mode: str, graph) -> WorkflowInterpreter:
    """A fresh interpreter over `graph`, run in `mode` (`drivers`)."""
    interp = interpreter(graph, mode)
    await drive(interp, mode)
    return interp


def _names(log: list) -> list:
    return [entry[0] for entry in log]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_finally_runs_when_the_body_returns_from_a_called_routine(mode):
    log: list = []
    routine = Try(RET()).FINALLY(probe(log, "fin"))
    graph = probe(log, "a") >> CALL("f") >> probe(log, "after") >> FN("f", routine) >> probe(log, "end")
    interp = await _run_in(mode, graph)
    # FINALLY ran at its own slot (as a sub-call, after RET emptied the stack), then the run went on past the CALL
    assert log == [("a", [0], 0), ("fin", [3, 2, 2], 1), ("after", [2], 0), ("end", [4], 0)]
    assert len(interp._ret_addr_stack) == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_finally_runs_when_the_body_pushes_a_return_address(mode):
    log: list = []
    graph = (
        probe(log, "a")
        >> PUSH_RET("L")
        >> Try(PUSH_RET("L")).FINALLY(probe(log, "fin"))
        >> probe(log, "skipped")
        >> ALIAS(probe(log, "L"), "L")
        >> probe(log, "end")
    )
    await _run_in(mode, graph)
    # the body's frame pops the entry the body pushed and moves to it (1.1.3's call_sub): FINALLY runs,
    # then the run goes on after L, as after a RET to L
    assert _names(log) == ["a", "fin", "end"]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_a_jump_out_of_the_body_runs_then_and_finally_and_is_taken(mode):
    log: list = []
    graph = (
        probe(log, "a")
        >> Try(JMP("L")).CATCH(KeyError, probe(log, "h")).THEN(probe(log, "then")).FINALLY(probe(log, "fin"))
        >> probe(log, "skipped")
        >> ALIAS(probe(log, "L"), "L")
        >> probe(log, "end")
    )
    await _run_in(mode, graph)
    assert _names(log) == ["a", "then", "fin", "L", "end"]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_a_handler_that_returns_runs_finally_first(mode):
    log: list = []
    routine = Try(probe(log, "x", ValueError("boom"))).CATCH(ValueError, RET()).FINALLY(probe(log, "fin"))
    graph = probe(log, "a") >> CALL("f") >> probe(log, "after") >> FN("f", routine) >> probe(log, "end")
    await _run_in(mode, graph)
    assert _names(log) == ["a", "x", "fin", "after", "end"]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_a_jump_in_finally_wins_over_the_body_s_return(mode):
    log: list = []
    routine = Try(RET()).FINALLY(JMP("L"))
    graph = (
        probe(log, "a")
        >> CALL("f")
        >> probe(log, "after")
        >> FN("f", routine)
        >> ALIAS(probe(log, "L"), "L")
        >> probe(log, "end")
    )
    await _run_in(mode, graph)
    assert _names(log) == ["a", "L", "end"]
