"""`WorkflowInterpreter`: construction, running, threads, state, panics and the compatibility
names `_pointer` / `_ret_addr_stack` (semantics sections B and D); jumps and sub-calls are in
test_interpreter_jumps_and_calls.py."""

from __future__ import annotations

import asyncio
import os
import threading
import uuid

import pytest

from amrita_sense import (
    IllegalState,
    Node,
    NodeCompose,
    NullPointerException,
    PointerVector,
    Stack,
    WorkflowInterpreter,
)
from amrita_sense.instructions.alias import ALIAS
from amrita_sense.runtime.types import Flags
from amrita_sense.runtime.workflow import PC_CHECKPOINT, UNSET
from support.recorders import act, act_async, jump_graph, names, rec, steps

# ----- construction ------------------------------------------------------------------------


def test_new_interpreter_state():
    graph = rec([], "a").as_compose().render()
    interp = WorkflowInterpreter(graph)
    assert interp.get_graph() is graph
    assert isinstance(interp._pointer, PointerVector)
    assert interp._pointer == PointerVector([0])
    assert isinstance(interp._ret_addr_stack, Stack)
    assert len(interp._ret_addr_stack) == 0
    assert interp._ret_addr_stack.ovf == 1024
    assert isinstance(interp.context_stack, Stack) and len(interp.context_stack) == 0
    assert interp.flags == Flags.NONE
    assert interp.jump_marked is False and interp.if_flag is False
    assert interp.get_exception() is None
    assert interp.is_running is False
    assert interp.outer_interpreting is False
    assert interp.pending_stop is False
    assert interp.parent is None
    assert interp.top_interpreter is interp
    assert interp._middleware is None


def test_id_is_a_unique_hex_string():
    graph = rec([], "a").as_compose().render()
    first, second = WorkflowInterpreter(graph), WorkflowInterpreter(graph)
    assert len(first.id) == 32
    int(first.id, 16)
    assert first.id != second.id
    assert first.id == first.id
    assert uuid.UUID(hex=first.id).version == 4


@pytest.mark.parametrize("fill", [0x00, 0xFF, 0x5A, 0xA5])
def test_the_id_is_the_text_uuid4_makes_of_the_same_random_bytes(monkeypatch, fill):
    """`uuid4_hex` (what `id` is made with) gives `uuid.uuid4().hex`'s text for the same `os.urandom` bytes."""
    from amrita_sense.runtime.workflow import uuid4_hex

    raw = bytes((fill + 37 * i) % 256 for i in range(16))
    monkeypatch.setattr(os, "urandom", lambda n: raw[:n])
    assert uuid4_hex() == uuid.UUID(bytes=raw, version=4).hex == uuid.uuid4().hex


def test_constructor_keeps_a_given_stream():
    from amrita_sense.streaming import SuspendObjectStream

    stream = SuspendObjectStream()
    interp = WorkflowInterpreter(rec([], "a").as_compose().render(), stream)
    assert interp.object_io is stream


def test_default_stream_is_a_suspend_object_stream():
    from amrita_sense.streaming import SuspendObjectStream

    interp = WorkflowInterpreter(rec([], "a").as_compose().render())
    assert isinstance(interp.object_io, SuspendObjectStream)


def test_constructor_keeps_given_non_empty_stacks():
    addr_stack, ctx_stack = Stack(7), Stack(9)
    addr_stack.push(PointerVector([0]))
    ctx_stack.push("ctx")
    interp = WorkflowInterpreter(rec([], "a").as_compose().render(), addr_stack=addr_stack, context_stack=ctx_stack)
    assert interp._ret_addr_stack is addr_stack
    assert interp.context_stack is ctx_stack


def test_constructor_pools_and_pass_through_types():
    from amrita_sense.exceptions import BreakLoop, InterruptNotice

    interp = WorkflowInterpreter(
        rec([], "a").as_compose().render(),
        exception_ignored=(KeyError,),
        extra_args=(1, "x"),
        extra_kwargs={"k": 2},
    )
    assert interp._ava_args == (interp, 1, "x")
    assert interp._ava_kwargs == {"k": 2}
    assert interp._exc_ignored == (KeyError, InterruptNotice, BreakLoop)


def test_constructor_copies_extra_kwargs():
    kwargs = {"k": 1}
    interp = WorkflowInterpreter(rec([], "a").as_compose().render(), extra_kwargs=kwargs)
    kwargs["late"] = 2
    assert interp._ava_kwargs == {"k": 1}


def test_parent_interpreter_links_the_tree():
    graph = rec([], "a").as_compose().render()
    parent = WorkflowInterpreter(graph)
    child = WorkflowInterpreter(graph, parent_interpreter=parent)
    assert child.parent is parent
    assert child.top_interpreter is parent
    assert parent.sub_interpreters == {child.id: child}
    assert parent.all_sub_interpreters == {child.id: child}
    with pytest.raises(RuntimeError):
        child.all_sub_interpreters


def test_module_constants():
    assert PC_CHECKPOINT == "WorkflowInterpreter::each_node"
    assert UNSET is not None


# ----- run and run_step_by -----------------------------------------------------------------


@pytest.mark.asyncio
async def test_run_executes_every_node_in_order():
    log: list = []
    graph = (rec(log, "a") >> (rec(log, "b") >> (rec(log, "c") >> rec(log, "d"))) >> rec(log, "e")).render()
    assert await WorkflowInterpreter(graph).run() is None
    assert log == [("a", [0]), ("b", [1, 0]), ("c", [1, 1, 0]), ("d", [1, 1, 1]), ("e", [2])]


@pytest.mark.asyncio
async def test_run_step_by_yields_each_node_result():
    log: list = []
    graph = (rec(log, "a") >> (rec(log, "b") >> rec(log, "c")) >> rec(log, "d")).render()
    assert await steps(WorkflowInterpreter(graph)) == ["a", "b", "c", "d"]


@pytest.mark.asyncio
async def test_the_step_loop_without_yields_runs_the_whole_run_at_its_first_step():
    """`step_loop(..., yields=False)` (what `drain` runs: a checkpointed run) yields nothing: the run
    goes to its end at the generator's first `__anext__`, as `run()` does."""
    from amrita_sense.runtime.steps import drain, step_loop

    log: list = []
    graph = (rec(log, "a") >> (rec(log, "b") >> rec(log, "c")) >> rec(log, "d")).render()
    interp = WorkflowInterpreter(graph)
    assert [v async for v in step_loop(interp, yields=False)] == []
    assert names(log) == ["a", "b", "c", "d"] and not interp.is_running
    log.clear()
    interp = WorkflowInterpreter(graph)
    assert await drain(interp) is None
    assert names(log) == ["a", "b", "c", "d"] and not interp.is_running


@pytest.mark.asyncio
async def test_run_step_by_runs_lazily():
    log: list = []
    interp = WorkflowInterpreter((rec(log, "a") >> rec(log, "b") >> rec(log, "c")).render())
    gen = interp.run_step_by()
    assert log == []
    assert await gen.__anext__() == "a"
    assert names(log) == ["a"]
    assert await gen.__anext__() == "b"
    assert names(log) == ["a", "b"]
    assert [v async for v in gen] == ["c"]


@pytest.mark.asyncio
async def test_yields_none_for_nodes_without_result():
    @Node(wrap_to_async=False)
    def nothing():
        return None

    assert await steps(WorkflowInterpreter((nothing >> nothing).render())) == [None, None]


@pytest.mark.asyncio
async def test_sub_called_nodes_are_not_yielded():
    log: list = []

    async def call_next_and_skip(pc):
        result = await pc.call_offset(1)
        pc.jump_offset(2)
        return ("called", result)

    graph = (act_async(log, "caller", call_next_and_skip) >> rec(log, "sub") >> rec(log, "after")).render()
    assert await steps(WorkflowInterpreter(graph)) == [("called", "sub"), "after"]


@pytest.mark.asyncio
async def test_async_and_thread_nodes_are_awaited():
    @Node()
    async def coro():
        await asyncio.sleep(0)
        return "async"

    @Node()
    def threaded():
        return "thread"

    assert await steps(WorkflowInterpreter((coro >> threaded).render())) == ["async", "thread"]


@pytest.mark.asyncio
async def test_fresh_interpreter_on_an_empty_graph_fails_at_slot_zero():
    interp = WorkflowInterpreter(NodeCompose().render())
    with pytest.raises(NullPointerException):
        await interp.run()


@pytest.mark.asyncio
async def test_empty_pointer_on_an_empty_graph_ends_at_once():
    interp = WorkflowInterpreter(NodeCompose().render())
    interp.reset()
    assert await steps(interp) == []
    await interp.run()
    assert interp.is_running is False
    assert interp.get_exception() is None


@pytest.mark.asyncio
async def test_pointer_is_empty_after_a_finished_run():
    log: list = []
    interp = WorkflowInterpreter((rec(log, "a") >> (rec(log, "b") >> rec(log, "c"))).render())
    await interp.run()
    assert isinstance(interp._pointer, PointerVector)
    assert list(interp._pointer) == []
    assert not interp._pointer


@pytest.mark.asyncio
async def test_finished_interpreter_restarts_from_the_beginning():
    log: list = []
    interp = WorkflowInterpreter((rec(log, "a") >> rec(log, "b")).render())
    await interp.run()
    await interp.run()
    assert log == [("a", [0]), ("b", [1]), ("a", [0]), ("b", [1])]
    assert await steps(interp) == ["a", "b"]


@pytest.mark.asyncio
async def test_interpreter_built_from_a_self_compile_instruction_runs():
    from amrita_sense.node.self_compile import SelfCompileInstruction

    log: list = []

    class Pair(SelfCompileInstruction):
        def extract(self):
            return rec(log, "x") >> rec(log, "y")

    await WorkflowInterpreter(Pair()).run()
    assert log == [("x", [0]), ("y", [1])]


@pytest.mark.asyncio
async def test_run_starts_at_a_preset_pointer():
    log: list = []
    interp = WorkflowInterpreter((rec(log, "a") >> rec(log, "b") >> rec(log, "c")).render())
    interp._pointer.far_to([1])
    await interp.run()
    assert names(log) == ["b", "c"]


@pytest.mark.asyncio
async def test_run_at_a_segment_address_enters_it():
    log: list = []
    interp = WorkflowInterpreter((rec(log, "a") >> (rec(log, "b") >> rec(log, "c"))).render())
    interp.rebase_ptr([1])
    await interp.run()
    assert log == [("b", [1, 0]), ("c", [1, 1])]


@pytest.mark.asyncio
async def test_running_into_an_empty_segment_raises_null_pointer():
    log: list = []
    interp = WorkflowInterpreter((rec(log, "a") >> NodeCompose() >> rec(log, "b")).render())
    with pytest.raises(NullPointerException):
        await interp.run()
    assert names(log) == ["a"]
    assert interp._pointer == PointerVector([1])


# ----- threads -----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_default_sync_node_runs_on_a_worker_thread():
    seen = []

    @Node()
    def where():
        seen.append(threading.current_thread())

    await WorkflowInterpreter(where.as_compose().render()).run()
    assert seen and seen[0] is not threading.current_thread()


@pytest.mark.asyncio
async def test_unwrapped_sync_node_runs_on_the_loop_thread():
    seen = []

    @Node(wrap_to_async=False)
    def where():
        seen.append(threading.current_thread())

    await WorkflowInterpreter(where.as_compose().render()).run()
    assert seen == [threading.current_thread()]


@pytest.mark.asyncio
async def test_async_node_runs_on_the_loop_thread():
    seen = []

    @Node()
    async def where():
        seen.append(threading.current_thread())

    await WorkflowInterpreter(where.as_compose().render()).run()
    assert seen == [threading.current_thread()]


@pytest.mark.asyncio
async def test_worker_thread_node_sees_the_interpreter_state():
    seen = []

    @Node()
    def where(pc: WorkflowInterpreter):
        seen.append((list(pc._pointer), pc.is_running))

    await WorkflowInterpreter((where >> (where >> where)).render()).run()
    assert seen == [([0], True), ([1, 0], True), ([1, 1], True)]


@pytest.mark.asyncio
async def test_async_library_is_pinned_for_the_run_on_the_loop_thread():
    import sniffio

    seen = []

    @Node(wrap_to_async=False)
    def inline():
        seen.append(("inline", sniffio.thread_local.name))

    @Node()
    def threaded():
        seen.append(("thread", sniffio.thread_local.name))

    @Node(wrap_to_async=False)
    def boom():
        raise KeyError("after the pin")

    before = sniffio.thread_local.name
    await WorkflowInterpreter((inline >> threaded).render()).run()
    assert seen == [("inline", "asyncio"), ("thread", None)]
    assert sniffio.thread_local.name == before
    with pytest.raises(KeyError):
        await WorkflowInterpreter(boom.as_compose().render()).run()
    assert sniffio.thread_local.name == before


# ----- advance_pointer / find_node_alias / get_graph ------------------------------------------


def test_advance_pointer_moves_the_interpreters_pointer():
    interp = WorkflowInterpreter((rec([], "a") >> (rec([], "b") >> rec([], "c"))).render())
    visited = [list(interp._pointer)]
    while interp.advance_pointer():
        visited.append(list(interp._pointer))
    assert visited == [[0], [1, 0], [1, 1]]
    assert list(interp._pointer) == []
    assert interp.advance_pointer() is False


def test_advance_pointer_on_a_given_vector():
    interp = WorkflowInterpreter((rec([], "a") >> (rec([], "b") >> rec([], "c")) >> rec([], "d")).render())
    ptr = PointerVector([1, 1])
    assert interp.advance_pointer(ptr) is True
    assert ptr == PointerVector([2])
    assert interp._pointer == PointerVector([0])


def test_advance_pointer_matches_the_calculator():
    graph = (
        rec([], "a")
        >> NodeCompose()
        >> (rec([], "b") >> (NodeCompose() >> NodeCompose()))
        >> (NodeCompose(rec([], "c")) >> rec([], "d"))
        >> NodeCompose()
    ).render()
    interp = WorkflowInterpreter(graph)
    for start in ([0], [1], [2], [2, 1], [2, 1, 0], [3], [3, 0], [3, 0, 0], [3, 1], [4]):
        mine, reference = PointerVector(list(start)), PointerVector(list(start))
        assert interp.advance_pointer(mine) == graph.calc.advance(reference), start
        assert mine == reference, start


def nested_graph():
    """`[a, ((b, c), d), e]`: slot 1 starts with a nested segment."""
    a, b, c, d, e = (rec([], name) for name in "abcde")
    return NodeCompose(a, NodeCompose(NodeCompose(b, c), d), e).render()


def test_advance_pointer_enters_one_level_at_a_time():
    interp = WorkflowInterpreter(nested_graph())
    visited = [list(interp._pointer)]
    while interp.advance_pointer():
        visited.append(list(interp._pointer))
    assert visited == [[0], [1, 0], [1, 0, 0], [1, 0, 1], [1, 1], [2]]


def test_advance_pointer_on_a_given_vector_enters_one_level_at_a_time():
    interp = WorkflowInterpreter(nested_graph())
    for start, expected in (([0], [1, 0]), ([1], [1, 0]), ([1, 0], [1, 0, 0]), ([1, 1], [2])):
        ptr = PointerVector(list(start))
        assert interp.advance_pointer(ptr) is True
        assert list(ptr) == expected, start


def test_advance_pointer_matches_the_calculator_on_nested_segments():
    graph = NodeCompose(
        rec([], "a"),
        NodeCompose(),
        NodeCompose(rec([], "b"), NodeCompose(NodeCompose(), NodeCompose())),
        NodeCompose(NodeCompose(rec([], "c")), rec([], "d")),
        NodeCompose(NodeCompose(NodeCompose(rec([], "e")))),
    ).render()
    interp = WorkflowInterpreter(graph)
    for start in ([0], [1], [2], [2, 1], [2, 1, 0], [2, 1, 1], [3], [3, 0], [3, 0, 0], [3, 1], [4], [4, 0]):
        mine, reference = PointerVector(list(start)), PointerVector(list(start))
        assert interp.advance_pointer(mine) == graph.calc.advance(reference), start
        assert mine == reference, start


@pytest.mark.asyncio
async def test_middleware_sees_the_pointer_before_the_node_call_descends():
    seen = []

    async def look(pc):
        before = list(pc._pointer)
        await pc._call()
        seen.append((before, list(pc._pointer)))

    await WorkflowInterpreter(nested_graph(), middleware=look).run()
    assert seen == [([0], [0]), ([1, 0], [1, 0, 0]), ([1, 0, 1], [1, 0, 1]), ([1, 1], [1, 1]), ([2], [2])]


@pytest.mark.asyncio
async def test_panic_on_an_empty_nested_segment_leaves_the_pointer_on_it():
    interp = WorkflowInterpreter(NodeCompose(NodeCompose(NodeCompose()), rec([], "b")).render())
    with pytest.raises(NullPointerException, match=r"\[0, 0\]"):
        await interp.run()
    assert interp._pointer == PointerVector([0, 0])


def test_advance_pointer_segment_descends():
    interp = WorkflowInterpreter((rec([], "a") >> (rec([], "b") >> rec([], "c"))).render())
    interp.rebase_ptr([1])
    assert interp.advance_pointer() is True
    assert interp._pointer == PointerVector([1, 0])


def test_find_node_alias():
    target = rec([], "t")
    graph = (rec([], "a") >> (rec([], "b") >> ALIAS(target, "deep"))).render()
    interp = WorkflowInterpreter(graph)
    found = interp.find_node_alias("deep")
    assert found is graph[1][1]
    assert found.node is target
    with pytest.raises(NullPointerException):
        interp.find_node_alias("missing")


# ----- running state: is_running, wait, IllegalState ---------------------------------------


@pytest.mark.asyncio
async def test_is_running_inside_a_node():
    seen = []

    @Node(wrap_to_async=False)
    def look(pc: WorkflowInterpreter):
        seen.append(pc.is_running)

    interp = WorkflowInterpreter(look.as_compose().render())
    assert interp.is_running is False
    await interp.run()
    assert seen == [True]
    assert interp.is_running is False


def test_wait_when_not_running_raises_illegal_state():
    interp = WorkflowInterpreter(rec([], "a").as_compose().render())
    with pytest.raises(IllegalState, match="not running"):
        interp.wait


@pytest.mark.asyncio
async def test_wait_after_a_finished_run_raises_illegal_state():
    interp = WorkflowInterpreter(rec([], "a").as_compose().render())
    await interp.run()
    with pytest.raises(IllegalState):
        interp.wait


@pytest.mark.asyncio
async def test_wait_resolves_when_the_run_ends():
    gate = asyncio.Event()
    entered = asyncio.Event()

    async def hold(pc):
        entered.set()
        await gate.wait()
        return "held"

    interp = WorkflowInterpreter((act_async([], "hold", hold) >> rec([], "after")).render())
    task = asyncio.create_task(interp.run())
    await asyncio.wait_for(entered.wait(), 10)
    assert interp.is_running is True
    waiter = interp.wait
    assert isinstance(waiter, asyncio.Future)
    assert not waiter.done()
    gate.set()
    assert await asyncio.wait_for(waiter, 10) is None
    await task
    assert interp.is_running is False


@pytest.mark.asyncio
async def test_wait_carries_the_panic():
    gate = asyncio.Event()
    entered = asyncio.Event()

    async def hold(pc):
        entered.set()
        await gate.wait()
        raise KeyError("late failure")

    interp = WorkflowInterpreter(act_async([], "hold", hold).as_compose().render())
    task = asyncio.create_task(interp.run())
    await asyncio.wait_for(entered.wait(), 10)
    waiter = interp.wait
    gate.set()
    with pytest.raises(KeyError, match="late failure"):
        await asyncio.wait_for(waiter, 10)
    with pytest.raises(KeyError):
        await task


@pytest.mark.asyncio
async def test_starting_a_second_run_while_running_raises_illegal_state():
    gate = asyncio.Event()
    entered = asyncio.Event()
    log: list = []

    async def hold(pc):
        entered.set()
        await gate.wait()

    interp = WorkflowInterpreter((act_async(log, "hold", hold) >> rec(log, "after")).render())
    task = asyncio.create_task(interp.run())
    await asyncio.wait_for(entered.wait(), 10)
    with pytest.raises(IllegalState, match="already running"):
        await interp.run()
    with pytest.raises(IllegalState):
        await interp.run_step_by().__anext__()
    gate.set()
    await asyncio.wait_for(task, 10)
    assert names(log) == ["hold", "after"]
    await interp.run()
    assert names(log) == ["hold", "after", "hold", "after"]


@pytest.mark.asyncio
async def test_run_from_inside_its_own_node_raises_illegal_state():
    async def rerun(pc):
        await pc.run()

    interp = WorkflowInterpreter(act_async([], "rerun", rerun).as_compose().render())
    with pytest.raises(IllegalState):
        await interp.run()
    assert isinstance(interp.get_exception(), IllegalState)


# ----- panic and get_exception ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_panic_records_the_exception_and_keeps_the_pointer():
    log: list = []
    boom = ValueError("boom")

    def fail(pc):
        raise boom

    interp = WorkflowInterpreter((rec(log, "a") >> (rec(log, "b") >> act(log, "f", fail)) >> rec(log, "c")).render())
    with pytest.raises(ValueError, match="boom"):
        await interp.run()
    assert interp.get_exception() is boom
    assert interp._pointer == PointerVector([1, 1])
    assert interp.is_running is False


@pytest.mark.asyncio
async def test_recover_reruns_the_failing_node():
    log: list = []
    attempts = {"n": 0}

    def flaky(pc):
        attempts["n"] += 1
        if attempts["n"] == 1:
            raise RuntimeError("first time")

    interp = WorkflowInterpreter((rec(log, "a") >> act(log, "flaky", flaky) >> rec(log, "b")).render())
    with pytest.raises(RuntimeError):
        await interp.run()
    await interp.run()
    assert interp.get_exception() is None
    assert names(log) == ["a", "flaky", "flaky", "b"]


@pytest.mark.asyncio
async def test_panic_inside_a_sub_call_leaves_the_pointer_at_the_caller():
    def fail(pc):
        raise LookupError("deep")

    async def call(pc):
        await pc.call_offset_far([0, 1])

    graph = (rec([], "a") >> (act_async([], "caller", call) >> act([], "f", fail))).render()
    interp = WorkflowInterpreter(graph)
    with pytest.raises(LookupError):
        await interp.run()
    assert interp._pointer == PointerVector([1, 0])
    assert len(interp._ret_addr_stack) == 0
    assert isinstance(interp.get_exception(), LookupError)


@pytest.mark.asyncio
async def test_interpreter_is_usable_after_a_panic():
    log: list = []
    interp = WorkflowInterpreter((rec(log, "a") >> act(log, "j", lambda pc: pc.jump_to([7]))).render())
    with pytest.raises(NullPointerException):
        await interp.run()
    interp.reset()
    log.clear()
    with pytest.raises(NullPointerException):
        await interp.run()
    assert names(log) == ["a", "j"]


# ----- the pointer as seen and written by user code ---------------------------------------------


@pytest.mark.asyncio
async def test_pointer_inside_nodes_shows_their_address():
    log: list = []
    graph = (
        rec(log, "a") >> NodeCompose(NodeCompose(rec(log, "b")), rec(log, "c")) >> (rec(log, "d") >> rec(log, "e"))
    ).render()
    await WorkflowInterpreter(graph).run()
    assert log == [("a", [0]), ("b", [1, 0, 0]), ("c", [1, 1]), ("d", [2, 0]), ("e", [2, 1])]


@pytest.mark.asyncio
async def test_pointer_between_steps():
    log: list = []
    interp = WorkflowInterpreter((rec(log, "a") >> (rec(log, "b") >> rec(log, "c"))).render())
    seen = []
    async for _ in interp.run_step_by():
        seen.append(list(interp._pointer))
    assert seen == [[0], [1, 0], [1, 1]]


@pytest.mark.asyncio
async def test_writing_the_pointer_inside_a_node_redirects_execution():
    log: list = []
    await WorkflowInterpreter(jump_graph(log, lambda pc: pc._pointer.far_to([2, 0]))).run()
    assert names(log) == ["j", "c", "d", "e"]


@pytest.mark.asyncio
async def test_setting_a_pointer_coordinate_inside_a_node():
    log: list = []

    def poke(pc):
        pc._pointer[-1] = 2

    await WorkflowInterpreter(jump_graph(log, poke)).run()
    assert names(log) == ["j", "b", "c", "d", "e"]


@pytest.mark.asyncio
async def test_replacing_the_pointer_object_inside_a_node():
    log: list = []

    def replace(pc):
        pc._pointer = PointerVector([2, 1])

    await WorkflowInterpreter(jump_graph(log, replace)).run()
    assert names(log) == ["j", "d", "e"]


@pytest.mark.asyncio
async def test_writing_the_pointer_with_a_jump_mark_runs_the_target():
    log: list = []

    def write_and_mark(pc):
        pc._pointer.far_to([2, 1])
        pc.jump_offset(0)

    await WorkflowInterpreter(jump_graph(log, write_and_mark)).run()
    assert names(log) == ["j", "c", "d", "e"]


@pytest.mark.asyncio
async def test_writing_the_pointer_between_steps_redirects_execution():
    log: list = []
    interp = WorkflowInterpreter((rec(log, "a") >> rec(log, "b") >> rec(log, "c") >> rec(log, "d")).render())
    gen = interp.run_step_by()
    assert await gen.__anext__() == "a"
    interp._pointer.far_to([2])
    assert [v async for v in gen] == ["d"]


@pytest.mark.asyncio
async def test_clearing_the_pointer_inside_a_node_ends_the_run():
    log: list = []
    await WorkflowInterpreter(jump_graph(log, lambda pc: pc._pointer.clear())).run()
    assert names(log) == ["j"]


@pytest.mark.asyncio
async def test_pointer_copy_inside_a_node_is_a_snapshot():
    copies = []

    @Node(wrap_to_async=False)
    def keep(pc: WorkflowInterpreter):
        copies.append(pc._pointer.copy())

    await WorkflowInterpreter((keep >> (keep >> keep)).render()).run()
    assert copies == [PointerVector([0]), PointerVector([1, 0]), PointerVector([1, 1])]


@pytest.mark.asyncio
async def test_pointer_equality_and_hash_inside_a_node():
    seen = []

    @Node(wrap_to_async=False)
    def look(pc: WorkflowInterpreter):
        seen.append((pc._pointer == PointerVector([1, 0]), hash(pc._pointer) == hash((1, 0)), len(pc._pointer)))

    await WorkflowInterpreter((rec([], "a") >> (look >> rec([], "b"))).render()).run()
    assert seen == [(True, True, 2)]


# ----- middleware ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_middleware_result_is_what_run_step_by_yields():
    log: list = []

    async def wrap(pc):
        return ("wrapped", await pc._call())

    interp = WorkflowInterpreter((rec(log, "a") >> (rec(log, "b") >> rec(log, "c"))).render(), middleware=wrap)
    assert await steps(interp) == [("wrapped", "a"), ("wrapped", "b"), ("wrapped", "c")]
    assert names(log) == ["a", "b", "c"]


@pytest.mark.asyncio
async def test_middleware_replaces_the_node_call():
    log: list = []
    seen = []

    async def skip(pc):
        seen.append(list(pc._pointer))
        return "skipped"

    interp = WorkflowInterpreter((rec(log, "a") >> (rec(log, "b") >> rec(log, "c"))).render(), middleware=skip)
    assert await steps(interp) == ["skipped"] * 3
    assert log == []
    assert seen == [[0], [1, 0], [1, 1]]


@pytest.mark.asyncio
async def test_middleware_also_replaces_sub_calls():
    seen = []

    async def mw(pc):
        seen.append((list(pc._pointer), pc.outer_interpreting))
        return await pc._call()

    async def call(pc):
        return await pc.call_offset(2)

    graph = (act_async([], "caller", call) >> rec([], "x") >> rec([], "y")).render()
    interp = WorkflowInterpreter(graph, middleware=mw)
    assert await steps(interp) == ["y", "x", "y"]
    assert seen[:2] == [([0], False), ([2], True)]


@pytest.mark.asyncio
async def test_middleware_can_jump():
    log: list = []

    async def mw(pc):
        result = await pc._call()
        if result == "a":
            pc.jump_to([3])
        return result

    graph = (rec(log, "a") >> rec(log, "b") >> rec(log, "c") >> rec(log, "d")).render()
    assert await steps(WorkflowInterpreter(graph, middleware=mw)) == ["a", "d"]


@pytest.mark.asyncio
async def test_middleware_may_call_the_node_twice():
    log: list = []

    async def twice(pc):
        return (await pc._call(), await pc._call(no_cache=True))

    interp = WorkflowInterpreter((rec(log, "a") >> rec(log, "b")).render(), middleware=twice)
    assert await steps(interp) == [("a", "a"), ("b", "b")]
    assert names(log) == ["a", "a", "b", "b"]


# ----- compatibility details of the pointer object and `_call` -------------------------------------


@pytest.mark.asyncio
async def test_pointer_object_is_updated_in_place_between_steps():
    log: list = []
    interp = WorkflowInterpreter((rec(log, "a") >> (rec(log, "b") >> rec(log, "c"))).render())
    held = interp._pointer
    seen = []
    async for _ in interp.run_step_by():
        seen.append((list(held), held is interp._pointer))
    assert seen == [([0], True), ([1, 0], True), ([1, 1], True)]
    assert list(held) == []


@pytest.mark.asyncio
async def test_sub_call_replaces_the_pointer_object():
    log: list = []

    async def call(pc):
        return await pc.call_offset(1)

    interp = WorkflowInterpreter((rec(log, "a") >> act_async(log, "caller", call) >> rec(log, "d")).render())
    held = interp._pointer
    seen = []
    async for _ in interp.run_step_by():
        seen.append((list(held), held is interp._pointer, list(interp._pointer)))
    assert seen == [([0], True, [0]), ([1], False, [1]), ([1], False, [2])]


@pytest.mark.asyncio
async def test_call_sub_uses_a_given_pointer_vector_as_the_pointer():
    interp = WorkflowInterpreter((rec([], "x") >> rec([], "y")).render())
    target = PointerVector([1])
    assert await interp.call_sub(target, interrupt=True) == "y"
    assert interp._pointer is target
    assert target == PointerVector([0])


@pytest.mark.asyncio
async def test_call_with_a_safe_getter_on_an_empty_segment_returns_none():
    log: list = []
    interp = WorkflowInterpreter((rec(log, "x") >> NodeCompose() >> rec(log, "y")).render())
    interp._pointer.far_to([1])
    assert await interp._call(interp.get_graph().calc.find_addr_safe) is None
    assert log == []


@pytest.mark.asyncio
async def test_call_runs_the_node_at_the_pointer():
    log: list = []
    interp = WorkflowInterpreter((rec(log, "x") >> (rec(log, "y") >> rec(log, "z"))).render())
    interp._pointer.far_to([1])
    assert await interp._call() == "y"
    assert interp._pointer == PointerVector([1, 0])
    assert await interp._call(no_cache=True) == "y"
