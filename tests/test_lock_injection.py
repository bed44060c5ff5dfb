"""External interrupts: `call_sub(interrupt=True)` serialised with the main loop by the lock."""

from __future__ import annotations

import asyncio

import pytest

from amrita_sense import Node, PointerVector, WorkflowInterpreter
from amrita_sense.runtime.workflow import PC_CHECKPOINT


def jump_to(addr: list[int]):
    @Node(wrap_to_async=False)
    def jump(pc: WorkflowInterpreter):
        pc.jump_to(addr)

    return jump


def with_archive(flow: list, archived: list):
    """`flow`, then a jump over `archived` to a final no-op: the archived nodes run only when called.

    Returns the graph and the addresses of the archived nodes.
    """
    end = len(flow) + 1 + len(archived)

    @Node(wrap_to_async=False)
    def final():
        return None

    graph = flow[0].as_compose()
    for node in [*flow[1:], jump_to([end]), *archived, final]:
        graph = graph >> node
    return graph.render(), [[len(flow) + 1 + i] for i in range(len(archived))]


def recorder(log: list, name: str):
    @Node(wrap_to_async=False)
    def node(pc: WorkflowInterpreter):
        log.append((name, list(pc._pointer), [list(p) for p in pc._ret_addr_stack.stack], pc.outer_interpreting))
        return name

    return node


def gated(log: list, name: str, gate: asyncio.Event, entered: asyncio.Event | None = None):
    """An async node that records its start, waits for `gate`, records its end."""

    @Node()
    async def node(pc: WorkflowInterpreter):
        log.append((f"{name} start", list(pc._pointer)))
        if entered is not None:
            entered.set()
        await gate.wait()
        log.append((f"{name} end", list(pc._pointer)))

    return node


async def started(graph, entered: asyncio.Event) -> tuple[WorkflowInterpreter, asyncio.Task]:
    """An interpreter on `graph` running in a task, once its gated node has set `entered`."""
    interp = WorkflowInterpreter(graph)
    run = asyncio.create_task(interp.run())
    await entered.wait()
    return interp, run


# ----- interrupt=False needs the lock -------------------------------------------------------------


@pytest.mark.asyncio
async def test_plain_call_sub_from_outside_is_refused():
    log: list = []
    graph, (target,) = with_archive([recorder(log, "a")], [recorder(log, "sub")])
    interp = WorkflowInterpreter(graph)
    with pytest.raises(RuntimeError, match="lock"):
        await interp.call_sub(PointerVector(target))
    assert log == []
    assert list(interp._pointer) == [0] and not interp._ret_addr_stack


@pytest.mark.asyncio
async def test_plain_call_sub_from_another_task_during_a_run_is_refused():
    log: list = []
    gate, entered = asyncio.Event(), asyncio.Event()
    graph, (target,) = with_archive([gated(log, "a", gate, entered), recorder(log, "b")], [recorder(log, "sub")])
    interp, run = await started(graph, entered)
    with pytest.raises(RuntimeError, match="lock"):
        await interp.call_sub(PointerVector(target))
    assert list(interp._pointer) == [0] and not interp._ret_addr_stack
    gate.set()
    await run
    assert [entry[0] for entry in log] == ["a start", "a end", "b"]


@pytest.mark.asyncio
async def test_interrupt_call_from_inside_a_node_is_refused_not_deadlocked():
    log: list = []
    errors: list = []

    @Node()
    async def reentrant(pc: WorkflowInterpreter):
        try:
            await pc.call_sub(PointerVector([3]), interrupt=True)
        except RuntimeError as exc:
            errors.append(str(exc))
        log.append(("after", list(pc._pointer), len(pc._ret_addr_stack)))

    graph, _ = with_archive([reentrant, recorder(log, "b")], [recorder(log, "sub")])
    interp = WorkflowInterpreter(graph)
    await interp.run()
    assert errors and "already holding" in errors[0]
    assert log[0] == ("after", [0], 0)
    assert [entry[0] for entry in log] == ["after", "b"]


@pytest.mark.asyncio
async def test_plain_call_sub_inside_a_node_works():
    log: list = []

    @Node()
    async def caller(pc: WorkflowInterpreter):
        log.append(("result", await pc.call_sub(PointerVector([3]))))

    graph, _ = with_archive([caller, recorder(log, "b")], [recorder(log, "sub")])
    await WorkflowInterpreter(graph).run()
    assert log == [("sub", [3], [[0]], True), ("result", "sub"), ("b", [1], [], False)]


# ----- interrupt=True from outside --------------------------------------------------------------


@pytest.mark.asyncio
async def test_injection_on_an_idle_interpreter():
    log: list = []
    graph, (target,) = with_archive([recorder(log, "a")], [recorder(log, "sub")])
    interp = WorkflowInterpreter(graph)
    assert await interp.call_sub(PointerVector(target), interrupt=True) == "sub"
    assert log == [("sub", target, [[0]], True)]
    assert list(interp._pointer) == [0] and not interp._ret_addr_stack
    assert not interp._interpret_lock.locked()
    assert not interp.outer_interpreting


@pytest.mark.asyncio
async def test_injection_waits_for_the_running_node_and_runs_before_the_next():
    log: list = []
    gate, entered = asyncio.Event(), asyncio.Event()
    graph, (target,) = with_archive(
        [gated(log, "a", gate, entered), recorder(log, "b"), recorder(log, "c")], [recorder(log, "injected")]
    )
    interp, run = await started(graph, entered)
    injection = asyncio.create_task(interp.call_sub(PointerVector(target), interrupt=True))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not injection.done()  # node `a` still holds the lock
    gate.set()
    assert await injection == "injected"
    await run
    assert log == [
        ("a start", [0]),
        ("a end", [0]),
        # between `a` and `b`: the main pointer (already at `b`) is the saved return address
        ("injected", target, [[1]], True),
        ("b", [1], [], False),
        ("c", [2], [], False),
    ]


@pytest.mark.asyncio
async def test_step_by_holds_the_lock_while_the_consumer_has_a_value():
    log: list = []
    graph, (target,) = with_archive([recorder(log, "a"), recorder(log, "b")], [recorder(log, "injected")])
    interp = WorkflowInterpreter(graph)
    steps = interp.run_step_by()
    assert await steps.__anext__() == "a"
    injection = asyncio.create_task(interp.call_sub(PointerVector(target), interrupt=True))
    for _ in range(3):
        await asyncio.sleep(0)
    assert not injection.done()  # the step is not over until the consumer asks for the next one
    assert await steps.__anext__() == "b"
    assert injection.done()
    rest = [value async for value in steps]
    assert [entry[0] for entry in log] == ["a", "injected", "b"]
    assert log[1][2] == [[1]]
    assert rest == [None, None]  # the jump over the archive, then the final no-op


@pytest.mark.asyncio
async def test_injection_gets_extra_arguments_by_injection():
    seen: list = []

    @Node(wrap_to_async=False)
    def sub(tag: str, count: int):
        seen.append((tag, count))
        return count * 2

    graph, (target,) = with_archive([recorder([], "a")], [sub])
    interp = WorkflowInterpreter(graph)
    assert await interp.call_sub(PointerVector(target), 21, interrupt=True, tag="x") == 42
    assert seen == [("x", 21)]


@pytest.mark.asyncio
async def test_injection_that_jumps_redirects_the_main_loop():
    log: list = []
    gate, entered = asyncio.Event(), asyncio.Event()

    @Node(wrap_to_async=False)
    def redirect(pc: WorkflowInterpreter):
        pc.jump_to([2])

    graph, (target,) = with_archive(
        [gated(log, "a", gate, entered), recorder(log, "b"), recorder(log, "c")], [redirect]
    )
    interp, run = await started(graph, entered)
    injection = asyncio.create_task(interp.call_sub(PointerVector(target), interrupt=True))
    await asyncio.sleep(0)
    gate.set()
    await injection
    await run
    assert [entry[0] for entry in log] == ["a start", "a end", "c"]


@pytest.mark.asyncio
async def test_injection_while_parked_at_the_checkpoint():
    log: list = []
    graph, (target,) = with_archive([recorder(log, "a"), recorder(log, "b")], [recorder(log, "injected")])
    interp = WorkflowInterpreter(graph)
    stream = interp.object_io
    run = asyncio.create_task(interp.run())
    await stream.wait_to_suspend(PC_CHECKPOINT)
    # the checkpoint gate is outside the lock
    assert not interp._interpret_lock.locked()
    assert await interp.call_sub(PointerVector(target), interrupt=True) == "injected"
    stream.resume()
    await run
    assert [entry[0] for entry in log] == ["injected", "a", "b"]
    assert log[0][2] == [[0]]


@pytest.mark.asyncio
async def test_failing_injection_raises_to_the_injector_and_leaves_the_run_alone():
    log: list = []
    gate, entered = asyncio.Event(), asyncio.Event()

    @Node(wrap_to_async=False)
    def broken():
        raise KeyError("injected failure")

    graph, (target,) = with_archive([gated(log, "a", gate, entered), recorder(log, "b")], [broken])
    interp, run = await started(graph, entered)
    injection = asyncio.create_task(interp.call_sub(PointerVector(target), interrupt=True))
    await asyncio.sleep(0)
    gate.set()
    with pytest.raises(KeyError):
        await injection
    await run
    assert [entry[0] for entry in log] == ["a start", "a end", "b"]
    assert log[-1][1:3] == ([1], [])
    assert interp.get_exception() is None


# ----- many injections ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_thousand_injections_run_once_each_in_order_between_nodes():
    trace: list = []
    nodes_in_flow = 200

    @Node()
    async def work(pc: WorkflowInterpreter):
        here = pc._pointer[0]
        trace.append(("start", here))
        await asyncio.sleep(0)
        trace.append(("end", here))

    @Node(wrap_to_async=False)
    def injected(pc: WorkflowInterpreter, seq: int):
        trace.append(("inj", seq, len(pc._ret_addr_stack)))

    graph, (target,) = with_archive([work] * nodes_in_flow, [injected])
    interp = WorkflowInterpreter(graph)
    run = asyncio.create_task(interp.run())

    async def inject_all() -> list:
        tasks = []
        for seq in range(1000):
            tasks.append(asyncio.create_task(interp.call_sub(PointerVector(target), interrupt=True, seq=seq)))
            if seq % 7 == 0:
                await asyncio.sleep(0)
        return await asyncio.gather(*tasks)

    await asyncio.gather(run, inject_all())

    injections = [entry for entry in trace if entry[0] == "inj"]
    assert [entry[1] for entry in injections] == list(range(1000))
    assert all(entry[2] == 1 for entry in injections)  # exactly one saved main pointer each time

    open_node = None
    flow_order = []
    for entry in trace:
        if entry[0] == "start":
            assert open_node is None
            open_node = entry[1]
            flow_order.append(entry[1])
        elif entry[0] == "end":
            assert open_node == entry[1]
            open_node = None
        else:
            assert open_node is None, f"injection {entry[1]} ran inside node {open_node}"
    assert flow_order == list(range(nodes_in_flow))
    assert not interp._ret_addr_stack and not interp._interpret_lock.locked()

    completed, gaps = 0, set()
    for entry in trace:
        if entry[0] == "end":
            completed += 1
        elif entry[0] == "inj":
            gaps.add(completed)
    assert len(gaps) > 1  # the injections were spread over the run, not queued up front


@pytest.mark.asyncio
async def test_injections_interleave_with_a_long_run():
    """Injected calls issued one after another each get in between two nodes, without waiting for the end."""
    progress: list[int] = []

    @Node()
    async def work(pc: WorkflowInterpreter):
        progress.append(pc._pointer[0])
        await asyncio.sleep(0)

    seen_at: list[int] = []

    @Node(wrap_to_async=False)
    def injected():
        seen_at.append(len(progress))

    graph, (target,) = with_archive([work] * 300, [injected])
    interp = WorkflowInterpreter(graph)
    run = asyncio.create_task(interp.run())
    for _ in range(20):
        await interp.call_sub(PointerVector(target), interrupt=True)
    await run
    assert len(seen_at) == 20
    assert seen_at == sorted(seen_at)
    assert seen_at[-1] < 300  # they did not all wait for the end of the run
    assert progress == list(range(300))


# ----- fairness ---------------------------------------------------------------------------------


def spinning_graph(counter: list[int], total: int):
    """One inline sync node that jumps to itself `total` times: a long run that never awaits."""

    @Node(wrap_to_async=False)
    def spin(pc: WorkflowInterpreter):
        counter[0] += 1
        if counter[0] < total:
            pc.jump_to([0])

    @Node(wrap_to_async=False)
    def done():
        return None

    return (spin >> done).render()


SPINS = 50_000


@pytest.mark.asyncio
async def test_inline_sync_run_lets_an_injection_in_before_it_ends():
    counter = [0]
    interp = WorkflowInterpreter(spinning_graph(counter, SPINS))
    seen: list[int] = []

    async def inject() -> None:
        await asyncio.sleep(0)
        await interp.call_sub(PointerVector([1]), interrupt=True)  # the `done` node
        seen.append(counter[0])

    await asyncio.gather(interp.run(), inject())
    assert counter[0] == SPINS
    assert 0 < seen[0] < SPINS


@pytest.mark.asyncio
async def test_inline_sync_run_honours_a_suspend_request_before_it_ends():
    counter = [0]
    interp = WorkflowInterpreter(spinning_graph(counter, SPINS))
    stream = interp.object_io
    run = asyncio.create_task(interp.run())
    await asyncio.sleep(0)
    await stream.wait_to_suspend(PC_CHECKPOINT)
    parked_at = counter[0]
    for _ in range(3):
        await asyncio.sleep(0)
    assert counter[0] == parked_at  # parked: no progress while suspended
    assert 0 < parked_at < SPINS
    stream.resume()
    await run
    assert counter[0] == SPINS


@pytest.mark.asyncio
async def test_inline_sync_run_can_be_cancelled_midway():
    counter = [0]
    interp = WorkflowInterpreter(spinning_graph(counter, SPINS))
    run = asyncio.create_task(interp.run())

    async def cancel_soon() -> int:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        run.cancel()
        return counter[0]

    at_cancel = await cancel_soon()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert counter[0] < SPINS
    assert at_cancel <= counter[0]
    assert not interp.is_running and not interp._interpret_lock.locked()


@pytest.mark.asyncio
async def test_two_inline_sync_runs_interleave():
    first, second = [0], [0]
    one = WorkflowInterpreter(spinning_graph(first, SPINS))
    two = WorkflowInterpreter(spinning_graph(second, SPINS))
    second_when_first_done: list[int] = []

    async def run_one() -> None:
        await one.run()
        second_when_first_done.append(second[0])

    await asyncio.gather(run_one(), two.run())
    assert first[0] == SPINS and second[0] == SPINS
    assert second_when_first_done[0] > 0


# ----- cancellation -------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_cancelling_the_run_mid_node_releases_everything_and_stays_reusable():
    log: list = []
    gate, entered = asyncio.Event(), asyncio.Event()
    graph, _ = with_archive([recorder(log, "a"), gated(log, "slow", gate, entered), recorder(log, "c")], [])
    interp, run = await started(graph, entered)
    waiter = interp.wait
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert not interp._interpret_lock.locked()
    assert waiter.done()
    assert not interp.is_running
    assert interp.get_exception() is None  # a cancellation is not a panic
    assert list(interp._pointer) == [1]  # the pointer stays on the interrupted node

    gate.set()
    await interp.run()  # the interrupted node runs again, then the rest
    assert [entry[0] for entry in log] == ["a", "slow start", "slow start", "slow end", "c"]


@pytest.mark.asyncio
async def test_cancelled_step_by_consumer_releases_the_lock():
    gate, entered = asyncio.Event(), asyncio.Event()
    log: list = []
    graph, _ = with_archive([gated(log, "slow", gate, entered), recorder(log, "b")], [])
    interp = WorkflowInterpreter(graph)

    async def consume() -> None:
        async for _ in interp.run_step_by():
            pass

    task = asyncio.create_task(consume())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not interp._interpret_lock.locked() and not interp.is_running
    gate.set()
    await interp.run()
    assert [entry[0] for entry in log] == ["slow start", "slow start", "slow end", "b"]


@pytest.mark.asyncio
async def test_cancelled_injection_while_waiting_for_the_lock():
    log: list = []
    gate, entered = asyncio.Event(), asyncio.Event()
    graph, (target,) = with_archive([gated(log, "a", gate, entered), recorder(log, "b")], [recorder(log, "injected")])
    interp, run = await started(graph, entered)
    injection = asyncio.create_task(interp.call_sub(PointerVector(target), interrupt=True))
    await asyncio.sleep(0)
    injection.cancel()
    with pytest.raises(asyncio.CancelledError):
        await injection
    gate.set()
    await run
    assert [entry[0] for entry in log] == ["a start", "a end", "b"]
    assert log[-1][1:3] == ([1], [])
    assert not interp._interpret_lock.locked()


@pytest.mark.asyncio
async def test_cancelled_injection_while_it_runs_restores_the_main_state():
    log: list = []
    main_gate, main_entered = asyncio.Event(), asyncio.Event()
    inj_gate, inj_entered = asyncio.Event(), asyncio.Event()
    graph, (target,) = with_archive(
        [gated(log, "a", main_gate, main_entered), recorder(log, "b")], [gated(log, "injected", inj_gate, inj_entered)]
    )
    interp = WorkflowInterpreter(graph)
    run = asyncio.create_task(interp.run())
    await main_entered.wait()
    injection = asyncio.create_task(interp.call_sub(PointerVector(target), interrupt=True))
    await asyncio.sleep(0)
    main_gate.set()
    await inj_entered.wait()
    injection.cancel()
    with pytest.raises(asyncio.CancelledError):
        await injection
    await run
    assert [entry[0] for entry in log] == ["a start", "a end", "injected start", "b"]
    assert log[-1][1:3] == ([1], [])
    assert not interp._interpret_lock.locked() and not interp.outer_interpreting


@pytest.mark.asyncio
async def test_cancelling_a_run_that_waits_for_the_lock():
    log: list = []
    inj_gate, inj_entered = asyncio.Event(), asyncio.Event()
    graph, (target,) = with_archive(
        [recorder(log, "a"), recorder(log, "b")], [gated(log, "injected", inj_gate, inj_entered)]
    )
    interp = WorkflowInterpreter(graph)
    injection = asyncio.create_task(interp.call_sub(PointerVector(target), interrupt=True))
    await inj_entered.wait()  # the injection holds the lock
    run = asyncio.create_task(interp.run())
    for _ in range(3):
        await asyncio.sleep(0)
    assert log == [("injected start", target)]  # the run is parked on the lock
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert not interp.is_running
    inj_gate.set()
    await injection
    assert not interp._interpret_lock.locked()
    await interp.run()
    assert [entry[0] for entry in log] == ["injected start", "injected end", "a", "b"]


@pytest.mark.asyncio
async def test_cancelling_a_run_parked_at_the_checkpoint():
    log: list = []
    graph, _ = with_archive([recorder(log, "a"), recorder(log, "b")], [])
    interp = WorkflowInterpreter(graph)
    stream = interp.object_io
    run = asyncio.create_task(interp.run())
    await stream.wait_to_suspend(PC_CHECKPOINT)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert not interp.is_running and not interp._interpret_lock.locked()
    stream.resume()
    await interp.run()
    assert [entry[0] for entry in log] == ["a", "b"]


@pytest.mark.asyncio
async def test_injected_call_instruction_runs_the_routine_then_resumes_after_the_parked_node():
    """Pinned 1.1.3 behaviour: call_sub pops the CALL's own return entry, so RET goes back to
    the main pointer that call_sub saved ([0]), and the loop continues at [0] + 1."""
    from amrita_sense.instructions import ALIAS, ARCHIVED_NODES, CALL, FN

    log: list = []
    graph = (
        recorder(log, "a")
        >> recorder(log, "b")
        >> ARCHIVED_NODES(ALIAS(CALL("routine"), "trap"))
        >> FN("routine", recorder(log, "body"))
    ).render()
    interp = WorkflowInterpreter(graph)
    stream = interp.object_io
    run = asyncio.create_task(interp.run())
    await stream.wait_to_suspend(PC_CHECKPOINT)
    trap = graph.alias2vector_map["trap"]
    await interp.call_sub(PointerVector(list(trap)), interrupt=True)
    stream.resume()
    await run
    assert [entry[0] for entry in log] == ["body", "b"]
    assert log[0][2] == [[0]]
    assert not interp._ret_addr_stack
