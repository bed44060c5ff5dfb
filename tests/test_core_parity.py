"""What both cores must do alike where they once differed (issue 18): each test runs on the
compiled core and on the pure build (the two test passes), and says what both must do."""

from __future__ import annotations

import copy
import pickle
import sys
import threading

import pytest

from amrita_sense import Node, NodeCompose, PointerVector, Stack, WorkflowInterpreter
from amrita_sense._core import IMPLEMENTATION, InterpretLock, SuspendFlag


class TaggedStack(Stack):
    def __init__(self, tag: str) -> None:  # another signature than Stack's
        super().__init__(3)
        self.tag = tag


class TaggedVector(PointerVector):
    pass


def bound_pointer() -> PointerVector:
    """A pointer bound to a row of a program (the lazy view), as an interpreter holds it."""

    @Node(wrap_to_async=False)
    def a():
        return None

    vec = WorkflowInterpreter(NodeCompose(a, a).render())._pointer
    assert vec._items is None, "the test needs a bound vector"
    return vec


# ----- Stack.copy ---------------------------------------------------------------------------------


def test_copy_of_a_stack_subclass_is_a_stack_with_its_items_and_capacity():
    stack = TaggedStack("t")
    stack.push("x")
    copied = stack.copy()
    assert type(copied) is Stack
    assert (copied.stack, copied.ovf) == (["x"], 3)
    copied.push("y")
    assert stack.stack == ["x"]


def test_copy_module_keeps_a_stack_subclass_without_calling_its_init():
    stack = TaggedStack("t")
    stack.push([1])
    for copied in (copy.copy(stack), copy.deepcopy(stack)):
        assert type(copied) is TaggedStack
        assert (copied.stack, copied.ovf, copied.tag) == ([[1]], 3, "t")
        assert copied.stack is not stack.stack
    assert copy.copy(stack).stack[0] is stack.stack[0]
    assert copy.deepcopy(stack).stack[0] is not stack.stack[0]


# ----- copying and pickling -------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_a_pointer_copies_and_pickles_as_its_address(how):
    duplicate = {"copy": copy.copy, "deepcopy": copy.deepcopy, "pickle": lambda v: pickle.loads(pickle.dumps(v))}[how]
    for vec in (PointerVector([1, 2]), bound_pointer()):
        copied = duplicate(vec)
        assert type(copied) is PointerVector
        assert copied == vec and list(copied) == list(vec)
        copied.append(5)
        assert len(vec) != len(copied)


def test_a_pointer_subclass_pickles_as_itself_with_its_attributes():
    vec = TaggedVector([4])
    vec.note = "n"
    restored = pickle.loads(pickle.dumps(vec))
    assert type(restored) is TaggedVector
    assert (list(restored), restored.note) == ([4], "n")


@pytest.mark.parametrize("build", [lambda: PointerVector([1]), lambda: Stack(4)])
def test_a_pickle_names_no_core_so_it_loads_on_either_build(build):
    data = pickle.dumps(build())
    assert b"_sense_core" not in data and b"_core_py" not in data and b".pure" not in data
    assert b"amrita_sense.core.portable" in data


@pytest.mark.parametrize("build", [lambda: PointerVector([1, 2]), lambda: Stack(4)])
def test_a_pickle_made_before_the_core_moved_still_loads(build):
    made = build()
    data = pickle.dumps(made, protocol=0).replace(b"amrita_sense.core.portable", b"amrita_sense._portable")
    assert b"amrita_sense._portable" in data
    restored = pickle.loads(data)
    assert type(restored) is type(made) and pickle.dumps(restored) == pickle.dumps(made)


def test_a_stack_pickles_with_its_items_and_capacity():
    stack = Stack(5)
    stack.push(PointerVector([2]))
    restored = pickle.loads(pickle.dumps(stack))
    assert type(restored) is Stack
    assert (restored.ovf, restored.stack) == (5, [PointerVector([2])])


# ----- what cannot be written or deleted ---------------------------------------------------------------


@pytest.mark.parametrize(("make", "name"), [(PointerVector, "base_addr"), (Stack, "stack"), (Stack, "ovf")])
def test_the_public_fields_cannot_be_deleted(make, name):
    obj = make()
    with pytest.raises(AttributeError, match=f"{name} cannot be deleted"):
        delattr(obj, name)
    assert getattr(obj, name) is not None


@pytest.mark.skipif(
    IMPLEMENTATION != "cython",
    reason="the pure build keeps the pointer's view fields plain slots: a property each cost its step loop a quarter",
)
@pytest.mark.parametrize("name", ["_items", "_row", "_prog"])
def test_the_view_fields_of_a_pointer_are_read_only(name):
    vec = bound_pointer()
    before = (vec._items, vec._row, vec._prog)
    with pytest.raises(AttributeError):
        setattr(vec, name, [9])
    with pytest.raises(AttributeError):
        delattr(vec, name)
    assert (vec._items, vec._row, vec._prog) == before


def test_no_weak_reference_to_a_pointer_as_in_113():
    import weakref

    with pytest.raises(TypeError):
        weakref.ref(PointerVector())


def test_a_suspend_flag_reads_as_the_truth_of_what_was_stored():
    # the compiled core stores a bool; the pure build keeps the value (its step loop reads the plain slot)
    flag = SuspendFlag()
    flag.pending = "yes"
    assert flag.pending and (flag.pending is True or IMPLEMENTATION == "python")
    flag.pending = []
    assert not flag.pending and (flag.pending is False or IMPLEMENTATION == "python")


@pytest.mark.asyncio
async def test_the_lock_keeps_its_waiters_in_a_list_and_checks_the_write():
    lock = InterpretLock()
    assert lock._waiters == [] or lock._waiters is None
    with pytest.raises(TypeError):
        lock._waiters = (1,)
    lock._waiters = None  # no waiter yet: the first one makes the list
    await lock.acquire()
    import asyncio

    waiter = asyncio.ensure_future(lock.acquire())
    await asyncio.sleep(0)
    assert type(lock._waiters) is list and len(lock._waiters) == 1
    lock.release()
    assert await waiter is True and lock.locked()
    lock.release()
    assert not lock.locked()


# ----- thread safety: each method is atomic (1.1.3's contract) -----------------------------------------


@pytest.fixture
def busy_switching():
    """Threads switch as often as CPython allows, so a check-then-write race shows."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _in_threads(work, n: int = 8) -> None:
    start = threading.Barrier(n)

    def run():
        start.wait()
        work()

    threads = [threading.Thread(target=run) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_moves_from_threads_lose_no_update(busy_switching):
    vec = PointerVector([0, 0])

    def move():
        for _ in range(2000):
            vec.offset(1)
            vec.offset_far([1, 0])

    _in_threads(move)
    assert list(vec) == [8 * 2000, 8 * 2000]


def test_readers_see_one_whole_address_while_writers_replace_it(busy_switching):
    """Writers replace a pointer's address (rebound to a row as the core binds it, a list, an empty one)
    while readers read it in every way a caller can: each read is one of the addresses written, never a
    mix, never an error."""

    @Node(wrap_to_async=False)
    def a():
        return None

    interp = WorkflowInterpreter(NodeCompose(a, a).render())
    vec = interp._pointer
    row_view = vec.copy()  # bound to the first row, as the core leaves the pointer
    assert row_view._items is None, "the test needs a bound vector"
    bound = tuple(row_view.base_addr)
    written = {bound, (4, 5, 6), ()}
    seen: set[tuple] = set()
    errors: list[BaseException] = []
    counter = iter(range(1 << 30))

    def write(i: int) -> None:
        if i % 4 == 0:
            vec.far_to([4, 5, 6])
        elif i % 4 == 1:
            vec.clear()
        elif i % 4 == 2:
            vec.base_addr = [4, 5, 6]
        else:
            interp._rebase_to(row_view)  # the core's own bind of its pointer

    def read() -> None:
        seen.update({tuple(vec.base_addr), tuple(vec), tuple(vec.copy())})
        assert len(vec) in (0, 3, len(bound))
        assert repr(vec).startswith("PointerVector([")

    def work() -> None:
        writer = next(counter) % 2 == 0
        try:
            for i in range(1500):
                if writer:
                    write(i)
                else:
                    read()
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    _in_threads(work)
    assert errors == []
    assert seen and seen <= written


def test_a_stack_shared_by_threads_keeps_every_item(busy_switching):
    """Pushes and pops from many threads, with readers of the whole stack between them: nothing is lost
    or doubled, the limit holds, and a reader never fails."""
    stack = Stack(8 * 300)
    errors: list[BaseException] = []
    popped: list[int] = []
    counter = iter(range(1 << 30))

    def work() -> None:
        me = next(counter)
        try:
            for i in range(300):
                stack.push(me * 1000 + i)
                assert 1 <= len(stack) <= stack.ovf
                assert isinstance(stack.stack, list) and repr(stack).startswith("[")
                copy.copy(stack)
            popped.extend(stack.pop() for _ in range(300))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    _in_threads(work)
    assert errors == []
    assert sorted(popped) == sorted(me * 1000 + i for me in range(8) for i in range(300))
    assert len(stack) == 0 and not stack


# ----- the lock through a run ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_lock_stays_taken_between_steps_while_nobody_waits():
    """The loop hands the lock over only to a waiter (or at a suspend, a stop, a clock check): from
    the first node to the last of a run of plain steps, every Python call the loop thread makes (the
    core's own, in the pure build) sees the lock taken."""
    seen: list[bool] = []
    active = [False]

    @Node(wrap_to_async=False)
    def first():
        active[0] = True

    @Node(wrap_to_async=False)
    def step():
        return None

    @Node(wrap_to_async=False)
    def last():
        active[0] = False

    interp = WorkflowInterpreter(NodeCompose(first, *([step] * 40), last).render())  # fewer steps than a clock check
    lock = interp._interpret_lock

    def watch(frame, event, arg):
        if active[0]:
            seen.append(lock.locked())

    sys.setprofile(watch)
    try:
        await interp.run()
    finally:
        sys.setprofile(None)
    assert len(seen) >= 40 and all(seen)


def _program_args(graph) -> list:
    """The arguments `node.table.build_program` gives `Program` for `graph`, as a list to edit."""
    from amrita_sense._opcodes import dense_row
    from amrita_sense.node.table import _walked

    builder = _walked(graph)
    ops, operands = builder.compile_ops()
    rows = [dense_row(args) for args in operands]
    return [
        graph,
        builder.nodes,
        builder.funcs,
        builder.bits,
        builder.static_plans,
        ops,
        operands,
        rows,
        builder.landings(),
        builder.addrs,
        builder.row_of,
        builder.seg_row,
    ]


def _two_node_graph():
    @Node(wrap_to_async=False)
    def a():
        pass

    @Node(wrap_to_async=False)
    def b():
        pass

    return (a >> b).render()


def test_a_program_checks_its_tables_when_made_on_both_cores():
    from amrita_sense._core import Program

    graph = _two_node_graph()
    prog = Program(*_program_args(graph))
    assert prog.nrows == 2 and type(prog.nodes) is tuple and type(prog.bits) is tuple
    with pytest.raises(TypeError, match="initialised once"):
        prog.__init__(*_program_args(graph))
    short = _program_args(graph)
    short[3] = short[3][:1]  # bits of one row for two rows
    with pytest.raises(ValueError, match="every per-row table needs 2 rows"):
        Program(*short)
    outside = _program_args(graph)
    outside[7] = [(5, -1, -1, -1), *outside[7][1:]]  # a dense row naming row 5 of 2
    with pytest.raises(ValueError, match="row 5 is outside the table of 2 rows"):
        Program(*outside)


def test_a_call_plan_is_initialised_once_on_both_cores():
    """A plan's argument sources are read by running loops without a lock: a second `__init__` could
    change them under a run, so it is refused and the plan keeps what it was made with."""
    from amrita_sense._core import CallPlan

    plan = CallPlan((0, "name"), None, False, None)
    with pytest.raises(TypeError, match="initialised once"):
        plan.__init__((1,), None, True, None)
    assert plan.srcs == (0, "name") and plan.slow is False and plan.keyed is True


def test_rebasing_onto_an_uninitialised_vector_fails_and_keeps_the_pointer():
    interp = WorkflowInterpreter(_two_node_graph())
    before = list(interp._pointer)
    with pytest.raises((TypeError, AttributeError)):
        interp._rebase_to(PointerVector.__new__(PointerVector))
    assert list(interp._pointer) == before


# ----- the core's view of the running task ------------------------------------------------------


@pytest.mark.asyncio
async def test_the_core_sees_the_task_asyncio_reports_in_and_out_of_tasks():
    import asyncio

    from amrita_sense import _core

    current = _core._structures_part._current_task
    assert current() is asyncio.current_task() is not None

    async def report():
        return current(), asyncio.current_task()

    seen, expected = await asyncio.create_task(report())
    assert seen is expected and seen is not asyncio.current_task()
    # outside any running loop: None, as the lock and the run start expect
    assert await asyncio.get_running_loop().run_in_executor(None, current) is None
