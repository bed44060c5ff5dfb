"""The status register and the context stack: flags, if_flag, dump_interpreter, rebase_context."""

from __future__ import annotations

import pytest

from amrita_sense import Node, PointerVector, Stack, WorkflowInterpreter
from amrita_sense.exceptions import BreakLoop, InterruptKeepContext, InterruptNotice
from amrita_sense.instructions.workfl_ctrl import SUSPEND
from amrita_sense.runtime.types import FLAG_HLT, FLAG_IF, FLAG_JMP, Flags, InterpreterContext


def step(log: list, name: str):
    @Node(wrap_to_async=False)
    def node(pc: WorkflowInterpreter):
        log.append((name, list(pc._pointer), pc.flags))

    return node


def graph3():
    return (step([], "a") >> step([], "b") >> step([], "c")).render()


# ----- the register --------------------------------------------------------------------------


def test_register_bits_and_fresh_state():
    assert (Flags.NONE, Flags.IF, Flags.HLT, Flags.JMP) == (0, 1, 2, 4)
    assert (FLAG_IF, FLAG_HLT, FLAG_JMP) == (1, 2, 4)
    interp = WorkflowInterpreter(graph3())
    assert interp.flags == Flags.NONE
    assert isinstance(interp.flags, Flags)
    assert interp.if_flag is False and interp.jump_marked is False


def test_if_flag_sets_and_clears_only_its_bit():
    interp = WorkflowInterpreter(graph3())
    interp.if_flag = True
    assert interp.if_flag is True and interp.flags == Flags.IF
    interp.if_flag = False
    assert interp.if_flag is False and interp.flags == Flags.NONE


@pytest.mark.parametrize("value", [1, 0, None, "yes", Flags.IF])
def test_if_flag_accepts_only_bool(value):
    interp = WorkflowInterpreter(graph3())
    with pytest.raises(TypeError):
        interp.if_flag = value
    assert interp.flags == Flags.NONE


@pytest.mark.asyncio
async def test_jump_bit_is_set_by_the_first_jump_of_a_cycle_only():
    seen: list = []

    @Node(wrap_to_async=False)
    def jumper(pc: WorkflowInterpreter):
        pc.jump_to([2])
        seen.append((pc.jump_marked, list(pc._pointer)))
        pc.jump_to([1])  # ignored: a jump already happened in this cycle
        seen.append(list(pc._pointer))

    log: list = []
    interp = WorkflowInterpreter((jumper >> step(log, "skipped") >> step(log, "target")).render())
    await interp.run()
    assert seen == [(True, [2]), [2]]
    assert [entry[:2] for entry in log] == [("target", [2])]
    assert log[0][2] == Flags.NONE  # the loop consumed JMP before the next step


@pytest.mark.asyncio
async def test_unmarkup_lets_the_loop_advance_after_a_jump():
    @Node(wrap_to_async=False)
    def jumper(pc: WorkflowInterpreter):
        pc.jump_to([1])
        pc.unmarkup()
        assert not pc.jump_marked

    log: list = []
    interp = WorkflowInterpreter((jumper >> step(log, "one") >> step(log, "two")).render())
    await interp.run()
    assert [entry[0] for entry in log] == ["two"]


@pytest.mark.asyncio
async def test_halt_bit_after_a_suspend_and_cleared_by_an_explicit_move():
    interp = WorkflowInterpreter((step([], "a") >> SUSPEND >> step([], "b")).render())
    await interp.run()
    assert interp.flags == Flags.HLT
    interp.rebase_ptr([0])
    assert interp.flags == Flags.NONE


# ----- dump_interpreter -----------------------------------------------------------------------


def test_dump_defaults_exclude_pools_and_stack():
    interp = WorkflowInterpreter(graph3(), exception_ignored=(KeyError,), extra_args=(1,), extra_kwargs={"k": 2})
    interp.rebase_ptr([1])
    interp._ret_addr_stack.push(PointerVector([0]))
    ctx = interp.dump_interpreter()
    assert isinstance(ctx, InterpreterContext)
    assert list(ctx.ptr) == [1]
    assert set(ctx.exception_ignored) == {KeyError, InterruptNotice, BreakLoop}
    assert ctx.s_args is None and ctx.s_kwargs is None
    assert ctx.stack is None
    assert ctx.exception is None
    assert ctx.flags == Flags.NONE
    assert ctx.extra == {}


def test_dump_pointer_is_a_copy():
    interp = WorkflowInterpreter(graph3())
    ctx = interp.dump_interpreter()
    interp.rebase_ptr([2])
    assert list(ctx.ptr) == [0]
    ctx.ptr.near_to(1)
    assert list(interp._pointer) == [2]


def test_dump_with_pools_and_stack():
    interp = WorkflowInterpreter(graph3(), extra_args=(1,), extra_kwargs={"k": 2})
    interp._ret_addr_stack.push(PointerVector([0]))
    ctx = interp.dump_interpreter(exclude_deps=False, exclude_stack=False)
    assert ctx.s_args == (interp, 1)
    assert ctx.s_kwargs == {"k": 2}
    assert isinstance(ctx.stack, Stack)
    assert [list(p) for p in ctx.stack.stack] == [[0]]


def test_dump_records_the_panic_and_strips_only_halt():
    interp = WorkflowInterpreter(graph3())
    interp._panic_exc = ValueError("recorded")
    interp._flags = Flags.IF | Flags.HLT | Flags.JMP
    ctx = interp.dump_interpreter()
    assert ctx.exception is interp._panic_exc
    assert ctx.flags == Flags.IF | Flags.JMP
    assert interp.flags == Flags.IF | Flags.HLT | Flags.JMP  # the live register keeps HLT


# ----- rebase_context -------------------------------------------------------------------------


def test_rebase_restores_pointer_types_panic_and_the_whole_register():
    interp = WorkflowInterpreter(graph3())
    boom = ValueError("old panic")
    ctx = InterpreterContext(
        ptr=PointerVector([2]),
        exception_ignored=(KeyError,),
        exception=boom,
        flags=Flags.IF | Flags.JMP,
    )
    interp._flags = Flags.HLT
    interp.rebase_context(ctx)
    assert list(interp._pointer) == [2]
    assert interp._exc_ignored == (KeyError,)
    assert interp.get_exception() is boom
    assert interp.flags == Flags.IF | Flags.JMP
    assert interp.if_flag and interp.jump_marked


def test_rebase_restores_pools_when_the_snapshot_has_them():
    interp = WorkflowInterpreter(graph3(), extra_args=(1,), extra_kwargs={"k": 2})
    ctx = interp.dump_interpreter(exclude_deps=False)
    interp._ava_args = (interp, 99)
    interp._ava_kwargs = {"k": 100}
    interp.rebase_context(ctx)
    assert interp._ava_args == (interp, 1)
    assert interp._ava_kwargs == {"k": 2}
    assert interp.args_hash_trustable is False


def test_rebase_without_pools_or_stack_keeps_the_live_ones():
    interp = WorkflowInterpreter(graph3(), extra_args=(1,))
    live_stack = interp._ret_addr_stack
    live_stack.push(PointerVector([1]))
    ctx = interp.dump_interpreter()
    interp.rebase_context(ctx)
    assert interp._ava_args == (interp, 1)
    assert interp._ret_addr_stack is live_stack and len(live_stack) == 1


def test_rebase_installs_a_snapshot_stack():
    interp = WorkflowInterpreter(graph3())
    saved = Stack()
    saved.push(PointerVector([2]))
    interp.rebase_context(InterpreterContext(ptr=PointerVector([0]), exception_ignored=(), stack=saved))
    assert [list(p) for p in interp._ret_addr_stack.stack] == [[2]]


def test_dump_then_rebase_round_trips():
    interp = WorkflowInterpreter(graph3())
    interp.rebase_ptr([1])
    interp.if_flag = True
    ctx = interp.dump_interpreter()
    interp.rebase_ptr([2])
    interp.if_flag = False
    interp.rebase_context(ctx)
    assert list(interp._pointer) == [1]
    assert interp.flags == Flags.IF


@pytest.mark.asyncio
async def test_rebase_from_a_node_redirects_the_run():
    log: list = []
    rewinds = [True]

    @Node(wrap_to_async=False)
    def rewind_once(pc: WorkflowInterpreter):
        log.append(("rewind", list(pc._pointer), pc.flags))
        if rewinds:
            rewinds.pop()
            pc.rebase_context(InterpreterContext(ptr=PointerVector([0]), exception_ignored=pc._exc_ignored))

    interp = WorkflowInterpreter((step(log, "a") >> rewind_once >> step(log, "c")).render())
    await interp.run()
    # not a marked jump: the loop advances from the restored pointer
    assert [entry[:2] for entry in log] == [("a", [0]), ("rewind", [1]), ("rewind", [1]), ("c", [2])]
    assert all(entry[2] == Flags.NONE for entry in log)


# ----- the context stack -----------------------------------------------------------------------


def test_context_stack_is_a_bounded_stack():
    interp = WorkflowInterpreter(graph3())
    assert isinstance(interp.context_stack, Stack)
    assert interp.context_stack is interp._context_stack
    interp.context_stack.resize(2)
    interp.context_stack.push(interp.dump_interpreter())
    interp.context_stack.push(interp.dump_interpreter())
    with pytest.raises(OverflowError):
        interp.context_stack.push(interp.dump_interpreter())


def test_context_stack_can_be_supplied():
    stack = Stack()
    stack.push(InterpreterContext(ptr=PointerVector([1]), exception_ignored=()))
    interp = WorkflowInterpreter(graph3(), context_stack=stack)
    assert interp.context_stack is stack


def test_reset_clears_register_stacks_and_panic():
    interp = WorkflowInterpreter(graph3())
    interp.context_stack.push(interp.dump_interpreter())
    interp._ret_addr_stack.push(PointerVector([0]))
    interp._flags = Flags.IF | Flags.HLT
    interp._panic_exc = ValueError("x")
    interp.reset()
    assert interp.flags == Flags.NONE
    assert not interp.context_stack and not interp._ret_addr_stack
    assert interp.get_exception() is None
    assert list(interp._pointer) == []


@pytest.mark.asyncio
async def test_keep_context_preserves_the_context_stack():
    @Node(wrap_to_async=False)
    def save_and_pause(pc: WorkflowInterpreter):
        pc.context_stack.push(pc.dump_interpreter())
        raise InterruptKeepContext()

    interp = WorkflowInterpreter((save_and_pause >> step([], "b")).render())
    await interp.run()
    assert len(interp.context_stack) == 1
    assert interp.context_stack.stack[0].flags == Flags.NONE
