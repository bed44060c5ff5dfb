"""`WorkflowInterpreter`'s jumps, sub-calls, `rebase_ptr`, `reset` and the flags register
(semantics sections C and D); construction, running and state are in test_interpreter_api.py."""

from __future__ import annotations

import asyncio
import sys

import pytest

from amrita_sense import (
    Node,
    NodeCompose,
    NullPointerException,
    PointerVector,
    WorkflowInterpreter,
)
from amrita_sense.runtime.types import Flags
from support.recorders import act, act_async, jump_graph, names, once, rec, steps

# ----- jumps -------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_jump_to_absolute_address():
    log: list = []
    await WorkflowInterpreter(jump_graph(log, lambda pc: pc.jump_to([2, 1]))).run()
    assert log == [("j", [0]), ("c", [2, 1]), ("d", [2, 2]), ("e", [3])]


@pytest.mark.asyncio
async def test_jump_to_a_segment_starts_at_its_first_node():
    log: list = []
    await WorkflowInterpreter(jump_graph(log, lambda pc: pc.jump_to([2]))).run()
    assert log == [("j", [0]), ("b", [2, 0]), ("c", [2, 1]), ("d", [2, 2]), ("e", [3])]


@pytest.mark.asyncio
async def test_jump_to_a_missing_address_raises():
    log: list = []
    interp = WorkflowInterpreter(jump_graph(log, lambda pc: pc.jump_to([2, 7])))
    with pytest.raises(NullPointerException, match=r"\[2, 7\]"):
        await interp.run()
    assert names(log) == ["j"]
    assert interp._pointer == PointerVector([0])


@pytest.mark.asyncio
async def test_jump_to_through_a_node_raises():
    interp = WorkflowInterpreter(jump_graph([], lambda pc: pc.jump_to([1, 0])))
    with pytest.raises(NullPointerException):
        await interp.run()


@pytest.mark.asyncio
async def test_jump_near_sets_the_last_index():
    log: list = []

    def jump_in_segment(pc):
        pc.jump_near(2)

    graph = (
        rec(log, "a") >> (act(log, "j", jump_in_segment) >> rec(log, "x") >> rec(log, "y")) >> rec(log, "z")
    ).render()
    await WorkflowInterpreter(graph).run()
    assert names(log) == ["a", "j", "y", "z"]


@pytest.mark.asyncio
async def test_jump_offset_adds_to_the_last_index():
    log: list = []
    await WorkflowInterpreter(jump_graph(log, lambda pc: pc.jump_offset(3))).run()
    assert log == [("j", [0]), ("e", [3])]


@pytest.mark.asyncio
async def test_jump_offset_zero_reruns_the_node():
    log: list = []
    counter = {"n": 0}

    def again(pc):
        counter["n"] += 1
        if counter["n"] < 3:
            pc.jump_offset(0)

    await WorkflowInterpreter((act(log, "j", again) >> rec(log, "a")).render()).run()
    assert names(log) == ["j", "j", "j", "a"]


@pytest.mark.asyncio
async def test_backward_jump_with_a_counter():
    log: list = []
    counter = {"n": 0}

    def loop_back(pc):
        counter["n"] += 1
        if counter["n"] < 3:
            pc.jump_offset(-1)

    graph = (rec(log, "a") >> (rec(log, "b") >> act(log, "back", loop_back)) >> rec(log, "c")).render()
    await WorkflowInterpreter(graph).run()
    assert names(log) == ["a", "b", "back", "b", "back", "b", "back", "c"]


@pytest.mark.asyncio
async def test_jump_far_ptr_is_absolute():
    log: list = []
    graph = (
        rec(log, "a")
        >> (act(log, "j", once(lambda pc: pc.jump_far_ptr([2, 1]))) >> rec(log, "x"))
        >> (rec(log, "p") >> rec(log, "q"))
    ).render()
    await WorkflowInterpreter(graph).run()
    assert names(log) == ["a", "j", "q"]


@pytest.mark.asyncio
async def test_jump_offset_far_adds_element_wise():
    log: list = []
    await WorkflowInterpreter(jump_graph(log, lambda pc: pc.jump_offset_far([2, 2]))).run()
    assert log == [("j", [0]), ("d", [2, 2]), ("e", [3])]


@pytest.mark.asyncio
async def test_jump_offset_far_truncates():
    log: list = []
    graph = (
        rec(log, "a")
        >> (rec(log, "b") >> act(log, "j", once(lambda pc: pc.jump_offset_far([1, -5]))))
        >> rec(log, "c")
        >> rec(log, "d")
    ).render()
    await WorkflowInterpreter(graph).run()
    assert names(log) == ["a", "b", "j", "c", "d"]
    assert log[3] == ("c", [2])


@pytest.mark.asyncio
async def test_jump_to_top():
    log: list = []
    graph = (
        rec(log, "a")
        >> (rec(log, "b") >> (act(log, "j", once(lambda pc: pc.jump_to_top(3)))))
        >> rec(log, "c")
        >> rec(log, "d")
    ).render()
    await WorkflowInterpreter(graph).run()
    assert log[-1] == ("d", [3])
    assert names(log) == ["a", "b", "j", "d"]


@pytest.mark.asyncio
async def test_jump_offset_top_from_a_nested_segment():
    log: list = []
    graph = (
        rec(log, "a")
        >> (rec(log, "b") >> (rec(log, "c") >> act(log, "j", once(lambda pc: pc.jump_offset_top(1)))))
        >> rec(log, "d")
        >> rec(log, "e")
    ).render()
    await WorkflowInterpreter(graph).run()
    assert names(log) == ["a", "b", "c", "j", "d", "e"]
    assert ("d", [2]) in log


@pytest.mark.asyncio
async def test_jump_offset_top_from_the_top_level():
    log: list = []
    await WorkflowInterpreter(jump_graph(log, lambda pc: pc.jump_offset_top(3))).run()
    assert log == [("j", [0]), ("e", [3])]


@pytest.mark.asyncio
async def test_jump_offset_top_second_component_is_truncated():
    log: list = []
    graph = (
        rec(log, "a")
        >> (rec(log, "b") >> rec(log, "c") >> act(log, "j", once(lambda pc: pc.jump_offset_top(2))))
        >> rec(log, "d")
        >> rec(log, "e")
    ).render()
    await WorkflowInterpreter(graph).run()
    assert names(log) == ["a", "b", "c", "j", "e"]
    assert log[-1] == ("e", [3])


@pytest.mark.asyncio
async def test_only_the_first_jump_of_a_cycle_counts():
    log: list = []

    def two_jumps(pc):
        pc.jump_offset(3)
        pc.jump_to([1])
        pc.jump_near(2)

    await WorkflowInterpreter(jump_graph(log, two_jumps)).run()
    assert names(log) == ["j", "e"]


@pytest.mark.asyncio
async def test_second_jump_is_not_validated():
    log: list = []

    def jump_then_bad(pc):
        pc.jump_offset(1)
        pc.jump_to([99])

    await WorkflowInterpreter(jump_graph(log, jump_then_bad)).run()
    assert names(log)[:2] == ["j", "a"]


@pytest.mark.asyncio
async def test_jump_mark_is_visible_inside_the_node():
    seen = []

    def look(pc):
        seen.append(pc.jump_marked)
        pc.jump_offset(1)
        seen.append((pc.jump_marked, bool(pc.flags & Flags.JMP)))

    await WorkflowInterpreter(jump_graph([], look)).run()
    assert seen == [False, (True, True)]


@pytest.mark.asyncio
async def test_jump_mark_is_consumed_after_the_step():
    seen = []

    def look(pc):
        seen.append(pc.jump_marked)

    graph = (act([], "j", lambda pc: pc.jump_offset(1)) >> act([], "look", look)).render()
    interp = WorkflowInterpreter(graph)
    await interp.run()
    assert seen == [False]
    assert interp.jump_marked is False


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "action",
    [
        lambda pc: pc.jump_near(9),
        lambda pc: pc.jump_offset(9),
        lambda pc: pc.jump_far_ptr([9, 9]),
        lambda pc: pc.jump_offset_far([9]),
        lambda pc: pc.jump_to_top(9),
        lambda pc: pc.jump_offset_top(9),
    ],
    ids=["near", "offset", "far_ptr", "offset_far", "to_top", "offset_top"],
)
async def test_unvalidated_jumps_fail_when_the_target_runs(action):
    log: list = []
    interp = WorkflowInterpreter(jump_graph(log, action))
    with pytest.raises(NullPointerException):
        await interp.run()
    assert names(log) == ["j"]


@pytest.mark.asyncio
async def test_jump_from_an_async_node():
    log: list = []

    async def jump(pc):
        await asyncio.sleep(0)
        pc.jump_to([3])

    graph = (act_async(log, "j", jump) >> rec(log, "a") >> rec(log, "b") >> rec(log, "c")).render()
    await WorkflowInterpreter(graph).run()
    assert names(log) == ["j", "c"]


@pytest.mark.asyncio
async def test_jump_from_a_worker_thread_node():
    log: list = []

    @Node()
    def threaded(pc: WorkflowInterpreter):
        log.append(("t", list(pc._pointer)))
        pc.jump_near(3)

    graph = (threaded >> rec(log, "a") >> rec(log, "b") >> rec(log, "c")).render()
    await WorkflowInterpreter(graph).run()
    assert names(log) == ["t", "c"]


def test_markup_decorator_outside_a_run():
    interp = WorkflowInterpreter((rec([], "a") >> rec([], "b") >> rec([], "c")).render())
    calls = []

    def move(self, where):
        calls.append(where)
        self._pointer.far_to(where)

    marked = WorkflowInterpreter.markup(move)
    marked(interp, [2])
    assert interp.jump_marked is True
    assert interp._pointer == PointerVector([2])
    marked(interp, [1])
    interp.jump_near(0)
    assert calls == [[2]]
    assert interp._pointer == PointerVector([2])
    interp.unmarkup()
    assert interp.jump_marked is False
    interp.jump_near(1)
    assert interp._pointer == PointerVector([1])


def test_markup_clears_hlt():
    interp = WorkflowInterpreter((rec([], "a") >> rec([], "b")).render())
    interp._flags = Flags.HLT
    interp.jump_offset(1)
    assert interp.flags == Flags.JMP


def test_jump_methods_outside_a_run():
    graph = (rec([], "a") >> (rec([], "b") >> rec([], "c")) >> rec([], "d")).render()
    interp = WorkflowInterpreter(graph)
    cases = [
        (lambda: interp.jump_to([1, 1]), [1, 1]),
        (lambda: interp.jump_near(0), [1, 0]),
        (lambda: interp.jump_offset(1), [1, 1]),
        (lambda: interp.jump_offset_far([1, -1]), [2, 0]),
        (lambda: interp.jump_offset_far([-1, -1]), [1]),
        (lambda: interp.jump_offset_far([-2, 0]), []),
        (lambda: interp.jump_far_ptr([1, 0]), [1, 0]),
        (lambda: interp.jump_offset_top(1), [2]),
        (lambda: interp.jump_to_top(0), [0]),
    ]
    for move, expected in cases:
        interp.unmarkup()
        move()
        assert list(interp._pointer) == expected


@pytest.mark.asyncio
async def test_jump_made_before_a_run_is_honoured_once():
    log: list = []
    interp = WorkflowInterpreter((rec(log, "a") >> rec(log, "b") >> rec(log, "c")).render())
    interp.jump_to([1])
    await interp.run()
    assert names(log) == ["b", "c"]


def test_jump_to_an_empty_segment_is_accepted():
    interp = WorkflowInterpreter((rec([], "a") >> NodeCompose() >> rec([], "b")).render())
    interp.jump_to([1])
    assert interp._pointer == PointerVector([1])


# ----- sub-calls ---------------------------------------------------------------------------


def sub_graph(log: list, caller_action):
    """`[caller, x, (y, z), w]`; the caller runs `caller_action(pc)` (awaited)."""
    return (
        act_async(log, "caller", caller_action) >> rec(log, "x") >> (rec(log, "y") >> rec(log, "z")) >> rec(log, "w")
    ).render()


@pytest.mark.asyncio
async def test_call_sub_runs_one_node_and_restores_the_pointer():
    log: list = []
    seen = {}

    async def call(pc):
        seen["result"] = await pc.call_sub([2, 1])
        seen["after"] = list(pc._pointer)
        seen["stack"] = len(pc._ret_addr_stack)

    await WorkflowInterpreter(sub_graph(log, call)).run()
    assert seen == {"result": "z", "after": [0], "stack": 0}
    assert names(log) == ["caller", "z", "x", "y", "z", "w"]
    assert log[1] == ("z", [2, 1])


@pytest.mark.asyncio
async def test_call_sub_accepts_a_pointer_vector():
    log: list = []

    async def call(pc):
        return await pc.call_sub(PointerVector([1]))

    interp = WorkflowInterpreter(sub_graph(log, call))
    assert (await steps(interp))[0] == "x"


@pytest.mark.asyncio
async def test_call_sub_of_a_segment_runs_its_first_node():
    log: list = []

    async def call(pc):
        return await pc.call_sub([2])

    assert (await steps(WorkflowInterpreter(sub_graph(log, call))))[0] == "y"
    assert log[1] == ("y", [2, 0])


@pytest.mark.asyncio
async def test_return_stack_holds_the_caller_during_the_call():
    seen = []

    @Node(wrap_to_async=False)
    def callee(pc: WorkflowInterpreter):
        seen.append((list(pc._pointer), [list(p) for p in pc._ret_addr_stack.stack], pc.outer_interpreting))

    async def call(pc):
        await pc.call_offset_far([0, 1])

    graph = (rec([], "a") >> (act_async([], "caller", call) >> callee)).render()
    await WorkflowInterpreter(graph).run()
    assert seen[0] == ([1, 1], [[1, 0]], True)
    assert seen[1] == ([1, 1], [], False)


@pytest.mark.asyncio
async def test_call_offset():
    log: list = []

    async def call(pc):
        return await pc.call_offset(3)

    assert (await steps(WorkflowInterpreter(sub_graph(log, call))))[0] == "w"
    assert log[1] == ("w", [3])


@pytest.mark.asyncio
async def test_call_near():
    log: list = []

    async def call(pc):
        return await pc.call_near(1)

    assert (await steps(WorkflowInterpreter(sub_graph(log, call))))[0] == "x"


@pytest.mark.asyncio
async def test_call_offset_far():
    log: list = []

    async def call(pc):
        return await pc.call_offset_far([2, 1])

    assert (await steps(WorkflowInterpreter(sub_graph(log, call))))[0] == "z"
    assert log[1] == ("z", [2, 1])


@pytest.mark.asyncio
async def test_calls_do_not_move_the_pointer():
    seen = []

    async def call(pc):
        await pc.call_offset(1)
        await pc.call_near(3)
        await pc.call_offset_far([2, 0])
        await pc.call_sub([2, 1])
        seen.append(list(pc._pointer))

    log: list = []
    await WorkflowInterpreter(sub_graph(log, call)).run()
    assert seen == [[0]]
    assert names(log) == ["caller", "x", "w", "y", "z", "x", "y", "z", "w"]


@pytest.mark.asyncio
async def test_called_node_that_jumps_moves_the_callers_step():
    log: list = []

    @Node(wrap_to_async=False)
    def jumper(pc: WorkflowInterpreter):
        log.append(("jumper", list(pc._pointer)))
        pc.jump_to([4])

    async def call(pc):
        await pc.call_offset(2)
        log.append(("back", list(pc._pointer)))

    graph = (act_async(log, "caller", call) >> rec(log, "x") >> jumper >> rec(log, "y") >> rec(log, "z")).render()
    await WorkflowInterpreter(graph).run()
    assert log == [("caller", [0]), ("jumper", [2]), ("back", [4]), ("z", [4])]


@pytest.mark.asyncio
async def test_nested_sub_calls():
    log: list = []

    async def inner(pc):
        return ("inner", await pc.call_offset(1))

    async def outer(pc):
        result = await pc.call_offset(1)
        pc.jump_offset(3)
        return result

    @Node(wrap_to_async=False)
    def leaf(pc: WorkflowInterpreter):
        log.append(("leaf", list(pc._pointer), [list(p) for p in pc._ret_addr_stack.stack]))
        return "leaf"

    graph = (act_async(log, "outer", outer) >> act_async(log, "inner", inner) >> leaf >> rec(log, "end")).render()
    assert await steps(WorkflowInterpreter(graph)) == [("inner", "leaf"), "end"]
    assert ("leaf", [2], [[0], [1]]) in log


@pytest.mark.asyncio
async def test_call_sub_without_the_lock_outside_a_node_raises():
    interp = WorkflowInterpreter((rec([], "a") >> rec([], "b")).render())
    with pytest.raises(RuntimeError, match="interrupt"):
        await interp.call_sub([1])
    assert interp._pointer == PointerVector([0])
    assert len(interp._ret_addr_stack) == 0


@pytest.mark.asyncio
async def test_call_sub_with_interrupt_when_idle():
    log: list = []
    interp = WorkflowInterpreter((rec(log, "a") >> rec(log, "b")).render())
    assert await interp.call_sub([1], interrupt=True) == "b"
    assert log == [("b", [1])]
    assert interp._pointer == PointerVector([0])
    assert len(interp._ret_addr_stack) == 0


@pytest.mark.asyncio
async def test_call_sub_with_interrupt_inside_a_node_is_refused():
    errors = []

    async def call(pc):
        try:
            await pc.call_offset(1, interrupt=True)
        except RuntimeError as exc:
            errors.append(str(exc))

    log: list = []
    interp = WorkflowInterpreter(sub_graph(log, call))
    await interp.run()
    assert errors and "already holding" in errors[0]
    assert names(log) == ["caller", "x", "y", "z", "w"]


@pytest.mark.asyncio
async def test_call_sub_to_a_missing_address_raises():
    async def call(pc):
        await pc.call_sub([9])

    interp = WorkflowInterpreter(sub_graph([], call))
    with pytest.raises(NullPointerException):
        await interp.run()
    assert interp._pointer == PointerVector([0])
    assert len(interp._ret_addr_stack) == 0


def _stack_depth() -> int:
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


@pytest.mark.asyncio
async def test_infinite_recursion_through_call_sub_is_a_recursion_error():
    """Wherever the limit is hit (the current-task lookup of the lock check too), the run raises and
    records `RecursionError`, and releases the lock. The limit moves over a range so that every
    frame of one recursion level is the one that hits it for some limit."""

    async def recurse(pc):
        return await pc.call_sub(list(pc._pointer))

    graph = act_async([], "r", recurse).as_compose().render()
    saved, base = sys.getrecursionlimit(), _stack_depth()
    outcomes = set()
    for extra in range(150, 230):
        interp = WorkflowInterpreter(graph)
        sys.setrecursionlimit(base + extra)
        try:
            await interp.run()
        except BaseException as exc:  # noqa: BLE001 - the kind is what is compared
            outcomes.add(type(exc).__name__)
        finally:
            sys.setrecursionlimit(saved)
        assert isinstance(interp.get_exception(), RecursionError)
        assert not interp._interpret_lock.locked() and len(interp._ret_addr_stack) == 0
    assert outcomes == {"RecursionError"}


@pytest.mark.asyncio
async def test_return_stack_overflow():
    async def recurse(pc):
        return await pc.call_offset(0)

    interp = WorkflowInterpreter((act_async([], "r", recurse) >> rec([], "x")).render())
    interp._ret_addr_stack.resize(3)
    with pytest.raises(OverflowError, match="Stack overflow"):
        await interp.run()
    assert isinstance(interp.get_exception(), OverflowError)
    assert interp._pointer == PointerVector([0])


# ----- rebase_ptr / reset / flags ----------------------------------------------------------


@pytest.mark.asyncio
async def test_rebase_ptr_inside_a_node_then_advances():
    log: list = []
    await WorkflowInterpreter(jump_graph(log, lambda pc: pc.rebase_ptr([2, 1]))).run()
    assert log == [("j", [0]), ("d", [2, 2]), ("e", [3])]


@pytest.mark.asyncio
async def test_rebase_ptr_accepts_a_pointer_vector_and_copies_it():
    log: list = []
    target = PointerVector([2, 0])
    await WorkflowInterpreter(jump_graph(log, lambda pc: pc.rebase_ptr(target))).run()
    assert names(log) == ["j", "c", "d", "e"]
    assert target == PointerVector([2, 0])


def test_rebase_ptr_clears_hlt_but_does_not_mark_a_jump():
    interp = WorkflowInterpreter((rec([], "a") >> rec([], "b")).render())
    interp._flags = Flags.HLT | Flags.IF
    interp.rebase_ptr([1])
    assert interp.flags == Flags.IF
    assert interp._pointer == PointerVector([1])


def test_rebase_ptr_copies_a_list():
    interp = WorkflowInterpreter((rec([], "a") >> rec([], "b")).render())
    target = [1]
    interp.rebase_ptr(target)
    target[0] = 0
    assert interp._pointer == PointerVector([1])


@pytest.mark.asyncio
async def test_reset_clears_the_state():
    interp = WorkflowInterpreter((rec([], "a") >> rec([], "b")).render())
    interp._pointer.far_to([1])
    interp._ret_addr_stack.push(PointerVector([0]))
    interp.context_stack.push("ctx")
    interp._flags = Flags.IF | Flags.JMP
    interp.reset()
    assert list(interp._pointer) == []
    assert len(interp._ret_addr_stack) == 0
    assert len(interp.context_stack) == 0
    assert interp.flags == Flags.NONE
    assert interp.get_exception() is None
    assert interp.pending_stop is False


@pytest.mark.asyncio
async def test_run_after_reset_starts_from_the_beginning():
    log: list = []
    interp = WorkflowInterpreter((rec(log, "a") >> rec(log, "b")).render())
    interp._pointer.far_to([1])
    interp.reset()
    await interp.run()
    assert names(log) == ["a", "b"]


@pytest.mark.asyncio
async def test_reset_clears_a_panic():
    interp = WorkflowInterpreter(act([], "boom", lambda pc: 1 / 0).as_compose().render())
    with pytest.raises(ZeroDivisionError):
        await interp.run()
    interp.reset()
    assert interp.get_exception() is None


def test_if_flag_accepts_only_bools():
    interp = WorkflowInterpreter(rec([], "a").as_compose().render())
    interp.if_flag = True
    assert interp.if_flag is True
    assert interp.flags == Flags.IF
    interp.if_flag = False
    assert interp.if_flag is False
    for bad in (1, 0, None, "yes"):
        with pytest.raises(TypeError):
            interp.if_flag = bad
    assert interp.flags == Flags.NONE


def test_flags_register_values():
    assert (int(Flags.NONE), int(Flags.IF), int(Flags.HLT), int(Flags.JMP)) == (0, 1, 2, 4)
    interp = WorkflowInterpreter(rec([], "a").as_compose().render())
    assert isinstance(interp.flags, Flags)
    interp.if_flag = True
    interp.jump_offset(0)
    assert interp.flags == Flags.IF | Flags.JMP
    assert interp.jump_marked is True
