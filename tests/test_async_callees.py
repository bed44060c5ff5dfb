"""`async def` nodes as conditions, bodies and INVOKE targets of the native opcodes: the opcode
starts the coroutine inline and, when it suspends, parks and finishes once it is done. A run that is
cancelled or fails while such a callee is parked ends as the nodes' own functions would end it:
the frame left, the lock free, the interpreter reusable."""

from __future__ import annotations

import asyncio

import pytest

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.instructions import ALIAS, ARCHIVED_NODES, DO, IF, INVOKE, NOP, WHILE
from support.drivers import drive, interpreter


def waiting_node(log: list, name: str, gate: asyncio.Event, value=True):
    @Node()
    async def node(pc: WorkflowInterpreter):
        log.append((name, list(pc._pointer), len(pc._ret_addr_stack)))
        await gate.wait()
        log.append((name, "resumed"))
        return value

    return node


def recorder(log: list, name: str):
    @Node(wrap_to_async=False)
    def node():
        log.append((name,))

    return node


SHAPES = {
    "IF condition": lambda log, gate: IF(waiting_node(log, "c", gate), recorder(log, "body")),
    "IF body": lambda log, gate: IF(_true(log), waiting_node(log, "body", gate)),
    "WHILE condition": lambda log, gate: WHILE(waiting_node(log, "c", gate, False)).ACTION(recorder(log, "b")),
    "DO body": lambda log, gate: DO(waiting_node(log, "b", gate)).WHILE(_false(log)),
    "INVOKE target": lambda log, gate: NodeCompose(
        INVOKE("t"), ARCHIVED_NODES(ALIAS(waiting_node(log, "t", gate), "t"))
    ),
}


def _true(log: list):
    @Node(wrap_to_async=False)
    def cond():
        log.append(("c",))
        return True

    return cond


def _false(log: list):
    @Node(wrap_to_async=False)
    def cond():
        log.append(("w",))
        return False

    return cond


async def _parked_run(shape: str, mode: str, cancel: bool):
    """Run the shape until its callee waits, then cancel the run (or let it finish)."""
    log: list = []
    gate = asyncio.Event()
    graph = NodeCompose(NOP, SHAPES[shape](log, gate), recorder(log, "end"))
    interp = interpreter(graph, mode)
    task = asyncio.ensure_future(drive(interp, mode))
    for _ in range(20):
        await asyncio.sleep(0)
    if cancel:
        task.cancel()
    else:
        gate.set()
    try:
        await task
        outcome = "done"
    except asyncio.CancelledError:
        outcome = "cancelled"
    return log, outcome, interp, gate


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", list(SHAPES))
async def test_a_parked_callee_finishes_as_the_node_functions_finish_it(shape):
    native = await _parked_run(shape, "run", cancel=False)
    generic = await _parked_run(shape, "steps", cancel=False)
    assert native[:2] == generic[:2]
    assert list(native[2]._pointer) == list(generic[2]._pointer)
    assert native[1] == "done" and native[0][-1] == ("end",)


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", list(SHAPES))
async def test_a_run_cancelled_while_a_callee_is_parked_leaves_the_interpreter_reusable(shape):
    log, outcome, interp, gate = await _parked_run(shape, "run", cancel=True)
    generic_log, generic_outcome, generic, generic_gate = await _parked_run(shape, "steps", cancel=True)
    assert (log, outcome) == (generic_log, generic_outcome) and outcome == "cancelled"
    # the callee's frame was left: the pointer is back on the opcode, nothing on the stack
    assert list(interp._pointer) == list(generic._pointer)
    assert len(interp._ret_addr_stack) == 0 and interp._subcalls == 0
    assert not interp._interpret_lock.locked()
    # the next run starts again at the opcode and finishes, as on the nodes' own functions
    gate.set()
    generic_gate.set()
    await interp.run()
    await drive(generic, "steps")
    assert log == generic_log and log[-1] == ("end",)
