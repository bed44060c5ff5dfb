"""Suspend points of the interpreter: the `PC_CHECKPOINT` gate between nodes and each node's own gate."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from amrita_sense import Node, NodeCompose, NullPointerException, PointerVector, WorkflowInterpreter
from amrita_sense.exceptions import BreakLoop
from amrita_sense.instructions import (
    BATCH_RUN,
    BREAK_LOOP,
    CALL,
    FN,
    FUN_BLOCK,
    IF,
    JMP,
    NATIVE_IF,
    NATIVE_WHILE,
    WHILE,
    Try,
)
from amrita_sense.runtime.workflow import PC_CHECKPOINT
from amrita_sense.streaming import SuspendObjectStream
from support.dual import Recorder, run_program

GUARD = 10.0  # seconds: turns a hang into a failure; never reached when the code is right


def tag_of(name: str) -> str:
    """The default gate tag of a `Recorder` node."""
    return f"NodeSuspend::n_{name}"


def chain(rec: Recorder, *names: str) -> Any:
    graph = rec.act(names[0]).as_compose()
    for name in names[1:]:
        graph = graph >> rec.act(name)
    return graph


async def request(stream: SuspendObjectStream, *tags: str) -> asyncio.Task:
    """Register `wait_to_suspend(*tags)` and return its task."""
    task = asyncio.create_task(stream.wait_to_suspend(*tags))
    await asyncio.sleep(0)
    assert stream._suspend_flag.pending
    return task


async def parked_or_finished(waiter: asyncio.Task, run: asyncio.Task) -> bool:
    """True when the request was taken (the producer parked); False when the run ended first."""
    await asyncio.wait_for(asyncio.wait({waiter, run}, return_when=asyncio.FIRST_COMPLETED), GUARD)
    if waiter.done():
        waiter.result()
        return True
    waiter.cancel()
    run.result()
    return False


async def drive(
    interp: WorkflowInterpreter,
    tags: tuple[str, ...],
    at_park: Callable[[WorkflowInterpreter], Any] = lambda interp: None,
    runner: Callable[[], Any] | None = None,
) -> int:
    """Run `interp`, parking at every gate matching `tags` and calling `at_park` there; returns the parks."""
    stream = interp.object_io
    waiter = await request(stream, *tags)  # set before the run starts
    run = asyncio.create_task(runner() if runner is not None else interp.run())
    parks = 0
    while await parked_or_finished(waiter, run):
        parks += 1
        at_park(interp)
        waiter = await request(stream, *tags)  # registered before the producer can move on
        stream.resume()
    return parks


# ----- the timing rule ----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_request_made_before_the_run_parks_at_the_first_checkpoint():
    rec = Recorder()
    interp = WorkflowInterpreter(chain(rec, "a", "b").render())
    stream = interp.object_io
    waiter = await request(stream, PC_CHECKPOINT)
    run = asyncio.create_task(interp.run())
    await asyncio.wait_for(waiter, GUARD)
    assert rec.trace == [] and list(interp._pointer) == [0]
    assert not interp._interpret_lock.locked()  # the checkpoint is outside the lock
    stream.resume()
    await run
    assert rec.trace == ["a", "b"]


@pytest.mark.asyncio
async def test_a_request_for_a_node_tag_parks_just_before_that_node():
    rec = Recorder()
    interp = WorkflowInterpreter(chain(rec, "a", "b", "c").render())
    stream = interp.object_io
    waiter = await request(stream, tag_of("b"))
    run = asyncio.create_task(interp.run())
    await asyncio.wait_for(waiter, GUARD)
    assert rec.trace == ["a"] and list(interp._pointer) == [1]
    assert interp._interpret_lock.locked()  # a node's own gate is inside the lock
    stream.resume()
    await run
    assert rec.trace == ["a", "b", "c"]


@pytest.mark.asyncio
async def test_a_request_made_during_the_run_parks_at_the_next_matching_gate():
    rec = Recorder()
    started, proceed = asyncio.Event(), asyncio.Event()

    @Node()
    async def n_slow():
        rec.trace.append("slow")
        started.set()
        await proceed.wait()

    interp = WorkflowInterpreter((rec.act("a") >> n_slow >> rec.act("b") >> rec.act("c")).render())
    stream = interp.object_io
    run = asyncio.create_task(interp.run())
    await asyncio.wait_for(started.wait(), GUARD)
    waiter = await request(stream, PC_CHECKPOINT)
    proceed.set()
    await asyncio.wait_for(waiter, GUARD)
    assert rec.trace == ["a", "slow"] and list(interp._pointer) == [2]
    stream.resume()
    await run
    assert rec.trace == ["a", "slow", "b", "c"]


@pytest.mark.asyncio
async def test_run_step_by_parks_at_the_same_points():
    rec = Recorder()
    interp = WorkflowInterpreter(chain(rec, "a", "b", "c").render())
    seen: list = []

    async def consume():
        return [value async for value in interp.run_step_by()]

    parks = await drive(interp, (PC_CHECKPOINT,), lambda i: seen.append(list(i._pointer)), consume)
    assert parks == 3 and seen == [[0], [1], [2]]
    assert rec.trace == ["a", "b", "c"]


# ----- single-stepping from outside ------------------------------------------------------------


@pytest.mark.asyncio
async def test_single_stepping_runs_one_node_per_resume():
    rec = Recorder()
    interp = WorkflowInterpreter(chain(rec, "a", "b", "c", "d").render())
    seen: list = []
    parks = await drive(interp, (PC_CHECKPOINT,), lambda i: seen.append((list(i._pointer), list(rec.trace))))
    assert parks == 4
    assert seen == [([0], []), ([1], ["a"]), ([2], ["a", "b"]), ([3], ["a", "b", "c"])]
    assert rec.trace == ["a", "b", "c", "d"]


@pytest.mark.asyncio
async def test_single_stepping_a_nested_graph_shows_the_full_pointer():
    rec = Recorder()
    graph = (rec.act("a") >> (rec.act("b") >> rec.act("c")) >> rec.act("d")).render()
    interp = WorkflowInterpreter(graph)
    seen: list = []
    await drive(interp, (PC_CHECKPOINT,), lambda i: seen.append(list(i._pointer)))
    assert seen == [[0], [1, 0], [1, 1], [2]]
    assert rec.trace == ["a", "b", "c", "d"]


@pytest.mark.asyncio
async def test_an_unfiltered_request_parks_at_both_kinds_of_gate():
    rec = Recorder()
    interp = WorkflowInterpreter(chain(rec, "a", "b").render())
    seen: list = []
    await drive(interp, (), lambda i: seen.append((list(i._pointer), list(rec.trace), i._interpret_lock.locked())))
    assert seen == [
        ([0], [], False),  # checkpoint
        ([0], [], True),  # a's own gate
        ([1], ["a"], False),
        ([1], ["a"], True),
    ]


@pytest.mark.asyncio
async def test_stepping_through_instructions_parks_only_at_main_loop_steps():
    def program(rec: Recorder) -> Any:
        return NodeCompose(IF(rec.cond("c", True), rec.act("x")), rec.act("y")).render()

    rec = Recorder()
    parks = await drive(WorkflowInterpreter(program(rec)), (PC_CHECKPOINT,))
    assert rec.trace == ["c", "x", "y"]
    plain = await run_program(WorkflowInterpreter(program(Recorder())))
    assert parks == len(plain.yields)  # one checkpoint per yielded main-loop step


@pytest.mark.asyncio
async def test_node_gates_also_apply_to_sub_calls():
    rec = Recorder()
    program = NodeCompose(IF(rec.cond("c", True), rec.act("x")), rec.act("y"))
    interp = WorkflowInterpreter(program.render())
    seen: list = []
    parks = await drive(interp, (tag_of("c"), tag_of("x")), lambda i: seen.append(list(rec.trace)))
    assert parks == 2 and seen == [[], ["c"]]
    assert rec.trace == ["c", "x", "y"]


# ----- redirecting at the checkpoint: write the pointer -----------------------------------------


def redirect_once(at: list[int], move: Callable[[PointerVector], Any]):
    done = [False]

    def at_park(interp: WorkflowInterpreter) -> None:
        if not done[0] and list(interp._pointer) == at:
            done[0] = True
            move(interp._pointer)

    return at_park


@pytest.mark.asyncio
async def test_near_to_at_the_checkpoint_skips_ahead():
    rec = Recorder()
    interp = WorkflowInterpreter(chain(rec, "a", "b", "c", "d").render())
    await drive(interp, (PC_CHECKPOINT,), redirect_once([1], lambda p: p.near_to(3)))
    assert rec.trace == ["a", "d"]


@pytest.mark.asyncio
async def test_near_to_at_the_checkpoint_goes_back():
    rec = Recorder()
    interp = WorkflowInterpreter(chain(rec, "a", "b", "c").render())
    await drive(interp, (PC_CHECKPOINT,), redirect_once([2], lambda p: p.near_to(0)))
    assert rec.trace == ["a", "b", "a", "b", "c"]


@pytest.mark.asyncio
async def test_far_to_at_the_checkpoint_enters_a_nested_segment():
    rec = Recorder()
    graph = (rec.act("a") >> (rec.act("b") >> rec.act("c")) >> rec.act("d")).render()
    interp = WorkflowInterpreter(graph)
    await drive(interp, (PC_CHECKPOINT,), redirect_once([0], lambda p: p.far_to([1, 1])))
    assert rec.trace == ["c", "d"]


@pytest.mark.asyncio
async def test_far_to_a_segment_at_the_checkpoint_lands_on_its_first_node():
    rec = Recorder()
    graph = (rec.act("a") >> (rec.act("b") >> rec.act("c")) >> rec.act("d")).render()
    interp = WorkflowInterpreter(graph)
    await drive(interp, (PC_CHECKPOINT,), redirect_once([2], lambda p: p.far_to([1])))
    assert rec.trace == ["a", "b", "c", "b", "c", "d"]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("move", "trace"),
    [
        (lambda i: setattr(i, "_pointer", PointerVector([3])), ["a", "d"]),
        (lambda i: i.rebase_ptr([3]), ["a", "d"]),
        (lambda i: i._pointer.offset(1), ["a", "c", "d"]),
        (lambda i: i._pointer.clear(), ["a", "a", "b", "c", "d"]),  # an empty pointer restarts at [0]
    ],
    ids=["replace", "rebase_ptr", "offset", "clear"],
)
async def test_other_pointer_writes_at_the_checkpoint(move, trace):
    rec = Recorder()
    interp = WorkflowInterpreter(chain(rec, "a", "b", "c", "d").render())
    await drive(interp, (PC_CHECKPOINT,), redirect_once([1], lambda _p: move(interp)))
    assert rec.trace == trace


@pytest.mark.asyncio
async def test_a_pointer_written_out_of_the_graph_panics_the_run():
    rec = Recorder()
    interp = WorkflowInterpreter(chain(rec, "a", "b").render())
    with pytest.raises(NullPointerException):
        await drive(interp, (PC_CHECKPOINT,), redirect_once([1], lambda p: p.near_to(99)))
    assert rec.trace == ["a"]
    assert isinstance(interp.get_exception(), NullPointerException)
    interp.rebase_ptr([1])
    await interp.run()  # recovered from the panic
    assert rec.trace == ["a", "b"]


@pytest.mark.asyncio
async def test_writing_the_pointer_with_a_single_request_before_the_run():
    rec = Recorder()
    interp = WorkflowInterpreter(chain(rec, "a", "b", "c").render())
    stream = interp.object_io
    waiter = await request(stream, PC_CHECKPOINT)
    run = asyncio.create_task(interp.run())
    await asyncio.wait_for(waiter, GUARD)
    interp._pointer.near_to(2)
    stream.resume()
    await run
    assert rec.trace == ["c"]


# ----- redirecting at a node's own gate: the official jump API ------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "jump",
    [
        lambda i: i.jump_to([3]),
        lambda i: i.jump_near(3),
        lambda i: i.jump_offset(2),
        lambda i: i.jump_far_ptr([3]),
    ],
    ids=["jump_to", "jump_near", "jump_offset", "jump_far_ptr"],
)
async def test_a_jump_at_a_node_gate_takes_effect_after_that_node(jump):
    rec = Recorder()
    interp = WorkflowInterpreter(chain(rec, "a", "b", "c", "d").render())
    fired = [False]

    def at_park(i: WorkflowInterpreter) -> None:
        assert list(i._pointer) == [1]  # the address of the node about to run
        if not fired[0]:
            fired[0] = True
            jump(i)

    await drive(interp, (tag_of("b"),), at_park)
    assert rec.trace == ["a", "b", "d"]
    assert not interp.jump_marked


@pytest.mark.asyncio
async def test_a_backward_jump_at_a_node_gate():
    rec = Recorder()
    interp = WorkflowInterpreter(chain(rec, "a", "b", "c").render())
    jumps = [0]

    def at_park(i: WorkflowInterpreter) -> None:
        if jumps[0] == 0:
            jumps[0] += 1
            i.jump_to([0])

    await drive(interp, (tag_of("c"),), at_park)
    assert rec.trace == ["a", "b", "c", "a", "b", "c"]


@pytest.mark.asyncio
async def test_a_jump_at_a_jump_instructions_gate_wins_over_its_own_jump():
    rec = Recorder()
    graph = NodeCompose(rec.act("a"), JMP([3]), rec.act("b"), rec.act("c"), rec.act("d")).render()
    interp = WorkflowInterpreter(graph)
    await drive(interp, (graph[1].tag,), lambda i: i.jump_to([2]))
    assert rec.trace == ["a", "b", "c", "d"]  # JMP([3]) found the jump already made this cycle


@pytest.mark.asyncio
async def test_a_refused_jump_at_a_node_gate_changes_nothing():
    rec = Recorder()
    interp = WorkflowInterpreter(chain(rec, "a", "b").render())
    errors: list = []

    def at_park(i: WorkflowInterpreter) -> None:
        with pytest.raises(NullPointerException, match="not a valid address"):
            i.jump_to([9])
        errors.append(i.jump_marked)

    await drive(interp, (tag_of("a"),), at_park)
    assert errors == [False]  # the address is checked before the jump is marked
    assert rec.trace == ["a", "b"]


# ----- the lock while parked -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_injection_waits_while_parked_at_a_node_gate():
    rec = Recorder()
    log = rec.trace
    flow = chain(rec, "a", "b", "c") >> JMP([5]) >> rec.act("injected") >> rec.act("end")
    interp = WorkflowInterpreter(flow.render())
    stream = interp.object_io
    waiter = await request(stream, tag_of("b"))
    run = asyncio.create_task(interp.run())
    await asyncio.wait_for(waiter, GUARD)
    injection = asyncio.create_task(interp.call_sub(PointerVector([4]), interrupt=True))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not injection.done() and log == ["a"]  # the parked step holds the lock
    stream.resume()
    await asyncio.wait_for(injection, GUARD)
    await run
    assert log[:2] == ["a", "b"] and sorted(log[2:]) == ["c", "end", "injected"]


# ----- an idle stream changes nothing -----------------------------------------------------------


def programs(rec: Recorder) -> dict[str, Any]:
    def breaker():
        raise BreakLoop()

    return {
        "chain": chain(rec, "a", "b", "c"),
        "if": NodeCompose(IF(rec.cond("c", False), rec.act("x")), rec.act("y")),
        "while": NodeCompose(WHILE(rec.counter("w", 3)).ACTION(rec.act("body"))),
        "native": NodeCompose(
            NATIVE_WHILE(rec.counter("n", 5)).ACTION(
                rec.act("m") >> NATIVE_IF(rec.cond("k", False, True), BREAK_LOOP())
            ),
            rec.act("after"),
        ),
        "call": NodeCompose(CALL("sub"), rec.act("back"), JMP([4]), FN("sub", rec.act("in_sub")), rec.act("end")),
        "try": NodeCompose(
            Try(rec.act("t", exc=ValueError("v"))).CATCH(ValueError, rec.act("caught")).FINALLY(rec.act("fin")),
            rec.act("z"),
        ),
        "nested": rec.act("p") >> (rec.act("q") >> (rec.act("r") >> rec.act("s"))) >> rec.act("u"),
        "breaker": NodeCompose(rec.act("before"), Node(wrap_to_async=False)(breaker)),
    }


async def outcome(name: str, make_stream: Callable[[], Any] | None, parked_gates: tuple[str, ...] | None = None):
    rec = Recorder()
    program = programs(rec)[name]
    if not isinstance(program, NodeCompose):
        program = NodeCompose(program)
    stream = make_stream() if make_stream is not None else None
    interp = WorkflowInterpreter(program.render(), object_io=stream)
    if parked_gates is None:
        return (await run_program(interp, rec)).summary()
    result: list = []

    async def consume():
        result.append(await run_program(interp, rec))

    await drive(interp, parked_gates, runner=consume)
    return result[0].summary()


PROGRAMS = ["chain", "if", "while", "native", "call", "try", "nested", "breaker"]


@pytest.mark.asyncio
@pytest.mark.parametrize("name", PROGRAMS)
async def test_an_attached_idle_stream_does_not_change_results(name):
    baseline = await outcome(name, None)
    assert await outcome(name, SuspendObjectStream) == baseline
    assert await outcome(name, lambda: SuspendObjectStream(queue_size=0, queue_timeout=None)) == baseline


@pytest.mark.asyncio
@pytest.mark.parametrize("name", PROGRAMS)
async def test_parking_and_resuming_does_not_change_results(name):
    baseline = await outcome(name, None)
    assert await outcome(name, SuspendObjectStream, parked_gates=(PC_CHECKPOINT,)) == baseline
    assert await outcome(name, SuspendObjectStream, parked_gates=()) == baseline


@pytest.mark.asyncio
@pytest.mark.parametrize("name", PROGRAMS)
async def test_a_request_that_never_matches_does_not_change_results(name):
    baseline = await outcome(name, None)
    stream = SuspendObjectStream()
    waiter = await request(stream, "no gate has this tag")
    try:
        assert await outcome(name, lambda: stream) == baseline
    finally:
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
    assert not stream._suspend_flag.pending


@pytest.mark.asyncio
async def test_the_flag_stays_down_during_an_idle_run():
    stream = SuspendObjectStream()
    seen = []

    @Node(wrap_to_async=False)
    def look():
        seen.append(stream._suspend_flag.pending)

    interp = WorkflowInterpreter((look >> look).render(), object_io=stream)
    await interp.run()
    assert seen == [False, False]


@pytest.mark.asyncio
async def test_a_stream_without_a_flag_is_asked_at_every_gate():
    calls: list = []

    class Gatekeeper:
        async def _wait_for_continue(self, tag=None):
            calls.append(tag)
            return False

    rec = Recorder()
    interp = WorkflowInterpreter(chain(rec, "a", "b").render(), object_io=Gatekeeper())
    await interp.run()
    assert calls == [PC_CHECKPOINT, tag_of("a"), PC_CHECKPOINT, tag_of("b")]


# ----- one stream, several interpreters -----------------------------------------------------------


@pytest.mark.asyncio
async def test_a_forked_child_parks_on_the_shared_stream():
    rec = Recorder()
    sub = (rec.act("x") >> rec.act("y")).render()
    interp = WorkflowInterpreter(NodeCompose(rec.act("a"), FUN_BLOCK(sub), rec.act("b")).render())
    seen: list = []

    def at_park(parent: WorkflowInterpreter) -> None:
        (child,) = parent.sub_interpreters.values()
        assert child.object_io is parent.object_io
        seen.append((list(rec.trace), list(child._pointer), parent._interpret_lock.locked()))

    parks = await drive(interp, (tag_of("y"),), at_park)
    assert parks == 1 and seen == [(["a", "x"], [1], True)]
    assert rec.trace == ["a", "x", "y", "b"]


@pytest.mark.asyncio
async def test_every_matching_gate_of_concurrent_children_parks_exactly_once():
    rec = Recorder()

    def tagged(name: str) -> Any:
        @Node("shared-tag", wrap_to_async=False)
        def node():
            rec.trace.append(name)

        return node

    batch = BATCH_RUN(rec.act("p") >> tagged("t1"), rec.act("q") >> tagged("t2"), rec.act("r") >> tagged("t3"))
    interp = WorkflowInterpreter(NodeCompose(batch, rec.act("after")).render())
    stream = interp.object_io
    waves: list = []
    await drive(interp, ("shared-tag",), lambda i: waves.append(len(stream._suspend_flag.parked)))
    assert sum(waves) == 3
    assert sorted(rec.trace[:-1]) == ["p", "q", "r", "t1", "t2", "t3"] and rec.trace[-1] == "after"


@pytest.mark.asyncio
async def test_two_independent_interpreters_on_one_stream():
    rec = Recorder()
    stream = SuspendObjectStream()
    first = WorkflowInterpreter(chain(rec, "a1", "a2").render(), object_io=stream)
    second = WorkflowInterpreter(chain(rec, "b1", "b2").render(), object_io=stream)
    waves: list = []

    async def both():
        await asyncio.gather(first.run(), second.run())

    await drive(first, (tag_of("a2"), tag_of("b2")), lambda i: waves.append(len(stream._suspend_flag.parked)), both)
    assert sum(waves) == 2
    assert sorted(rec.trace) == ["a1", "a2", "b1", "b2"]
