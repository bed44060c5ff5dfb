"""Stored-value checks (issue 14): the program counter, the return stack and the interpreter's kept attributes
check what they store, so the compiled core's unchecked fast paths only ever see what they assume.

Each case here crashed the compiled core (SIGSEGV or `SystemError`) or was accepted silently
before; both builds now raise the same typed error and stay usable.
"""

from __future__ import annotations

import pytest

from amrita_sense import NodeCompose, PointerVector, Stack, WorkflowInterpreter
from amrita_sense._core import InterpretLock
from amrita_sense.exceptions import InvalidOperand
from amrita_sense.node.wrapper import Node
from support.dual import Recorder

NOT_AN_ADDRESS = [0, -1, 1.5, "ab", {0: 1}, {1}, object(), [0, "x"], [None]]


def interpreter(rec: Recorder, *names: str) -> WorkflowInterpreter:
    return WorkflowInterpreter(NodeCompose(*(rec.act(name) for name in names)).render())


# ----- the empty pointer ------------------------------------------------------------------------


def _emptied_by_pop() -> PointerVector:
    vec = PointerVector([3])
    vec.pop()
    return vec


def _emptied_by_clear() -> PointerVector:
    vec = PointerVector([1, 2])
    vec.clear()
    return vec


@pytest.mark.parametrize("make_empty", [_emptied_by_pop, _emptied_by_clear])
@pytest.mark.parametrize(("move", "arg"), [("offset", 1), ("near_to", 0)])
def test_moving_an_empty_vector_is_an_index_error(make_empty, move, arg):
    vec = make_empty()
    with pytest.raises(IndexError, match="empty pointer"):
        getattr(vec, move)(arg)
    assert list(vec) == []
    vec.append(2)
    assert getattr(vec, move)(arg) is vec


async def _finished(interp: WorkflowInterpreter) -> None:
    await interp.run()


async def _reset(interp: WorkflowInterpreter) -> None:
    interp.reset()


async def _jumped_to_nothing(interp: WorkflowInterpreter) -> None:
    interp.jump_to([])
    interp.unmarkup()


async def _rebased_to_nothing(interp: WorkflowInterpreter) -> None:
    interp.rebase_ptr([])


@pytest.mark.asyncio
@pytest.mark.parametrize("empty_it", [_finished, _reset, _jumped_to_nothing, _rebased_to_nothing])
@pytest.mark.parametrize(("jump", "arg"), [("jump_offset", 1), ("jump_near", 0)])
async def test_a_jump_from_the_empty_pointer_is_refused_and_unmarked(empty_it, jump, arg):
    rec = Recorder()
    interp = interpreter(rec, "a", "b")
    await empty_it(interp)
    assert list(interp._pointer) == []
    with pytest.raises(IndexError, match="empty pointer"):
        getattr(interp, jump)(arg)
    assert not interp.jump_marked
    with pytest.raises(IndexError, match="empty pointer"):
        getattr(interp._pointer, "offset" if jump == "jump_offset" else "near_to")(arg)
    rec.trace.clear()
    await interp.run()
    assert rec.trace == ["a", "b"]


@pytest.mark.asyncio
async def test_a_node_moving_the_pointer_it_cleared_panics_and_the_interpreter_recovers():
    rec = Recorder()

    @Node(wrap_to_async=False)
    def clears(pc: WorkflowInterpreter):
        pc._pointer.clear()
        pc._pointer.offset(1)

    interp = WorkflowInterpreter(NodeCompose(rec.act("a"), clears, rec.act("b")).render())
    with pytest.raises(IndexError, match="empty pointer"):
        await interp.run()
    assert isinstance(interp.get_exception(), IndexError)
    interp.rebase_ptr([2])
    await interp.run()
    assert rec.trace == ["a", "b"]


# ----- what a PointerVector holds ----------------------------------------------------------------


@pytest.mark.parametrize("base", NOT_AN_ADDRESS)
def test_the_constructor_wants_none_or_an_address(base):
    with pytest.raises(TypeError, match=r"PointerVector\(base\)"):
        PointerVector(base)


def test_the_constructor_takes_a_tuple_or_a_vector_as_a_copy_and_keeps_a_list():
    assert PointerVector((0, 2)).base_addr == [0, 2]
    assert PointerVector(()).base_addr == [0]
    source = PointerVector([1, 4])
    copied = PointerVector(source)
    copied.offset(1)
    assert list(source) == [1, 4] and list(copied) == [1, 5]
    kept = [3]
    PointerVector(kept).offset(2)
    assert kept == [5]


@pytest.mark.parametrize("value", NOT_AN_ADDRESS + [None])
def test_base_addr_wants_an_address(value):
    vec = PointerVector([1])
    with pytest.raises(TypeError, match="base_addr"):
        vec.base_addr = value
    assert list(vec) == [1]


def test_base_addr_takes_a_tuple_as_a_list():
    vec = PointerVector([1])
    vec.base_addr = (0, 3)
    assert vec.base_addr == [0, 3] and type(vec.base_addr) is list
    vec.offset(1)
    assert list(vec) == [0, 4]


@pytest.mark.parametrize(
    ("method", "arg"),
    [
        ("offset", "1"),
        ("offset", 1.5),
        ("offset", None),
        ("near_to", None),
        ("near_to", 2.0),
        ("append", "x"),
        ("far_to", 5),
        ("far_to", None),
        ("far_to", ["x"]),
        ("offset_far", 3),
        ("offset_far", [0.5]),
    ],
)
def test_movers_check_their_argument(method, arg):
    vec = PointerVector([1, 2])
    with pytest.raises(TypeError, match=method):
        getattr(vec, method)(arg)
    assert list(vec) == [1, 2]


def test_item_assignment_checks_the_value():
    vec = PointerVector([1, 2])
    with pytest.raises(TypeError):
        vec[0] = "x"
    with pytest.raises(TypeError):
        vec[0:1] = [None]
    vec[0:1] = (7, 8)
    assert list(vec) == [7, 8, 2]


@pytest.mark.parametrize("other", [5, [1], None])
def test_arithmetic_with_a_non_vector_is_a_type_error_and_1_1_3s_attribute_error(other):
    with pytest.raises(InvalidOperand, match=r"PointerVector \+ needs a PointerVector"):
        PointerVector([1]) + other
    with pytest.raises(AttributeError, match="PointerVector - needs a PointerVector"):
        PointerVector([1]) - other


def test_a_vector_made_without_init_raises_instead_of_reading_nothing():
    vec = PointerVector.__new__(PointerVector)
    with pytest.raises((TypeError, AttributeError)):
        repr(vec)
    with pytest.raises((TypeError, AttributeError)):
        vec.offset(1)


@pytest.mark.asyncio
async def test_a_node_may_set_the_pointer_to_a_tuple():
    rec = Recorder()

    @Node(wrap_to_async=False)
    def skip(pc: WorkflowInterpreter):
        pc._pointer.base_addr = (2,)

    interp = WorkflowInterpreter(NodeCompose(skip, rec.act("b"), rec.act("c"), rec.act("d")).render())
    await interp.run()
    assert rec.trace == ["d"]


# ----- Stack ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("ovf", ["x", 1.5, None, [3]])
def test_stack_capacity_is_an_int(ovf):
    with pytest.raises(TypeError, match=r"Stack\(ovf\)"):
        Stack(ovf)
    stack = Stack(2)
    with pytest.raises(TypeError, match=r"resize\(size\)"):
        stack.resize(ovf)
    with pytest.raises(TypeError, match="Stack.ovf"):
        stack.ovf = ovf
    assert stack.ovf == 2


def test_stack_capacity_beyond_a_c_size_is_an_overflow_error():
    with pytest.raises(OverflowError):
        Stack(2**70)


@pytest.mark.parametrize("items", [None, (1,), "ab", {1: 2}])
def test_stack_items_are_a_list(items):
    stack = Stack()
    stack.push(1)
    with pytest.raises(TypeError, match="Stack.stack"):
        stack.stack = items
    assert stack.pop() == 1


# ----- the interpreter's kept attributes -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("_pointer", None),
        ("_pointer", [0]),
        ("_pointer", (0,)),
        ("_ret_addr_stack", None),
        ("_ret_addr_stack", []),
        ("_context_stack", None),
        ("_context_stack", [1]),
        ("_interpret_lock", None),
        ("_interpret_lock", object()),
        ("_middleware", 5),
        ("_middleware", "run"),
    ],
)
@pytest.mark.asyncio
async def test_kept_attributes_refuse_a_wrong_type_and_the_interpreter_still_runs(name, value):
    rec = Recorder()
    interp = interpreter(rec, "a", "b")
    before = getattr(interp, name)
    with pytest.raises(TypeError, match=name):
        setattr(interp, name, value)
    assert getattr(interp, name) is before
    await interp.run()
    assert rec.trace == ["a", "b"]


@pytest.mark.parametrize("name", ["_pointer", "_ret_addr_stack", "_context_stack", "_interpret_lock"])
def test_kept_attributes_cannot_be_deleted(name):
    interp = interpreter(Recorder(), "a")
    with pytest.raises(AttributeError):
        delattr(interp, name)
    assert getattr(interp, name) is not None


@pytest.mark.asyncio
async def test_kept_attributes_take_values_of_their_type():
    rec = Recorder()
    interp = interpreter(rec, "a", "b", "c")
    interp._pointer = PointerVector([2])
    interp._ret_addr_stack = Stack(4)
    interp._context_stack = Stack()
    interp._interpret_lock = InterpretLock()
    seen = []

    async def middleware(pc):
        seen.append(list(pc._pointer))
        return await pc._call()

    interp._middleware = middleware
    await interp.run()
    assert rec.trace == ["c"] and seen == [[2]]
    interp._middleware = None
    assert interp._middleware is None


@pytest.mark.parametrize(
    ("keyword", "value"),
    [("addr_stack", []), ("addr_stack", 5), ("context_stack", [1]), ("middleware", 5)],
)
def test_the_constructor_names_a_wrong_stack_or_middleware(keyword, value):
    graph = NodeCompose(Recorder().act("a")).render()
    with pytest.raises(TypeError, match=keyword):
        WorkflowInterpreter(graph, **{keyword: value})


def test_advance_pointer_wants_a_vector():
    interp = interpreter(Recorder(), "a", "b")
    with pytest.raises(TypeError):
        interp.advance_pointer([0])
    assert interp.advance_pointer(PointerVector([0])) is True


@pytest.mark.parametrize(
    ("jump", "arg"),
    [
        ("jump_to", 5),
        ("jump_to", ["x"]),
        ("jump_near", "1"),
        ("jump_offset", None),
        ("jump_far_ptr", 3),
        ("jump_offset_far", None),
        ("jump_to_top", [1]),
        ("jump_offset_top", "1"),
    ],
)
@pytest.mark.asyncio
async def test_a_jump_with_a_bad_argument_is_refused_before_it_is_marked(jump, arg):
    rec = Recorder()
    outcome = []

    @Node(wrap_to_async=False)
    def jumps(pc: WorkflowInterpreter):
        try:
            getattr(pc, jump)(arg)
        except TypeError as exc:
            outcome.append(jump in str(exc) or "address" in str(exc) or "int" in str(exc))
        pc.jump_offset(2)

    interp = WorkflowInterpreter(NodeCompose(jumps, rec.act("skipped"), rec.act("c")).render())
    await interp.run()
    assert outcome == [True] and rec.trace == ["c"]


@pytest.mark.parametrize("ptr", [5, None, {}, "ab", [0, None]])
def test_rebase_ptr_wants_an_address(ptr):
    interp = interpreter(Recorder(), "a", "b")
    with pytest.raises(TypeError, match="rebase_ptr"):
        interp.rebase_ptr(ptr)
    assert list(interp._pointer) == [0]


def test_a_program_successor_is_a_program_and_never_a_cycle():
    interp = interpreter(Recorder(), "a")
    prog = interp._prog
    with pytest.raises(TypeError):
        prog.successor = 5
    with pytest.raises(ValueError, match="cycle"):
        prog.successor = prog
    assert prog.successor is None
