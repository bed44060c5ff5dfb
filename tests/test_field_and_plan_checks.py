"""Checks (issue 14) on what issue 12 moved into the core: the Python layer's fields, the run's
bookkeeping, the shared plan tables and the worker-thread batches.

Every field Python can write checks the value where it is written (the compiled loop reads them
unchecked); the core's own bookkeeping is read-only; plans the core runs are CallPlans; a batch of
worker-thread nodes delivers a StopIteration as the RuntimeError an `async def` node gives.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from amrita_sense import NodeCompose, WorkflowInterpreter, _core
from amrita_sense.di import DependencyStore
from amrita_sense.node.wrapper import Node
from amrita_sense.runtime.dicache import DIRecord
from amrita_sense.runtime.plans import shape_of
from amrita_sense.streaming import SuspendObjectStream
from support.dual import Recorder


def graph():
    rec = Recorder()
    return NodeCompose(rec.act("a"), rec.act("b")).render()


# ----- the Python layer's fields: checked at the write ---------------------------------------------

# field -> (a value it refuses, values it takes)
FIELDS = {
    "_shape": (5, lambda: [None, shape_of((1,), {})]),
    "_exc_ignored": ((5,), lambda: [(KeyError,), ()]),
    "_ava_args_v": (5, lambda: [(1, 2)]),
    "_ava_kwargs_v": ([1], lambda: [{"a": 1}]),
    "_args_hash": ("x", lambda: [None, 7]),
    "_dep_store_v": ({}, lambda: [None, DependencyStore()]),
    "_di_record": ({}, lambda: [None, DIRecord()]),
    "_glob_lock_v": (object(), lambda: [None, _core.InterpretLock()]),
    "_graph": (5, lambda: [graph()]),
    "_interpreter_id": (5, lambda: [None, "an-id"]),
    "_lifecycles_v": ([], lambda: [None, {}]),
    "_object_io": (5, lambda: [None, SuspendObjectStream()]),
    "_parent_interpreter": (graph(), lambda: [None, WorkflowInterpreter(graph())]),
    "_provider_values": ([], lambda: [None, {}]),
    "_sub_interpreters": (None, lambda: [{}]),
    "_sub_interpreters_all": ([], lambda: [None, {}]),
    "_top_interpreter": ("top", lambda: [None, WorkflowInterpreter(graph())]),
    "_values_key": ([1], lambda: [None, (1,)]),
    "_waiter": (5, lambda: [None, _core.RUNNING]),
    "_panic_exc": (ValueError, lambda: [None, KeyError("k")]),
    "_signal": (True, lambda: [_core.SuspendFlag()]),
}


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_a_field_refuses_a_wrong_value_and_keeps_its_own(name):
    interp = WorkflowInterpreter(graph())
    bad, _ = FIELDS[name]
    before = getattr(interp, name)
    with pytest.raises(TypeError, match=name):
        setattr(interp, name, bad)
    assert getattr(interp, name) is before


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_a_field_takes_what_it_holds_and_cannot_be_deleted(name):
    interp = WorkflowInterpreter(graph())
    _, good = FIELDS[name]
    for value in good():
        setattr(interp, name, value)
        assert getattr(interp, name) == value
    with pytest.raises(AttributeError, match=name):
        delattr(interp, name)


def test_the_pools_and_the_pass_through_types_take_a_list():
    interp = WorkflowInterpreter(graph())
    interp._ava_args_v = [interp, 1]
    interp._exc_ignored = [KeyError]
    assert interp._ava_args_v == (interp, 1) and interp._exc_ignored == (KeyError,)


@pytest.mark.asyncio
async def test_the_waiter_takes_a_future_of_the_run():
    interp = WorkflowInterpreter(graph())
    interp._waiter = asyncio.get_running_loop().create_future()
    assert interp.is_running
    interp.reset()
    assert not interp.is_running
    await interp.run()


def test_a_stream_written_to_the_field_brings_its_suspend_flag():
    interp = WorkflowInterpreter(graph())
    stream = SuspendObjectStream()
    interp._object_io = stream
    assert interp._signal is stream._suspend_flag and interp.object_io is stream
    interp._object_io = None
    assert interp._signal is _core.NEVER_PENDING


def test_a_parent_that_would_make_a_cycle_is_refused():
    root = WorkflowInterpreter(graph())
    child = root.fork_interpreter()
    with pytest.raises(ValueError, match="cycle"):
        root._parent_interpreter = child
    with pytest.raises(ValueError, match="cycle"):
        child._parent_interpreter = child
    assert root.parent is None and child.parent is root


@pytest.mark.parametrize("name", ["_prog", "_run_task", "_plans_valid", "_force_inline", "_squashed_loops"])
def test_the_cores_own_bookkeeping_is_read_only(name):
    interp = WorkflowInterpreter(graph())
    before = getattr(interp, name)
    with pytest.raises(AttributeError):
        setattr(interp, name, before)


# ----- construction: the core checks what it stores ---------------------------------------------


def test_layer_init_takes_only_the_programs_graph_and_a_pool_shape():
    interp = WorkflowInterpreter(graph())
    own = interp.get_graph()
    with pytest.raises(TypeError, match="graph"):
        interp._layer_init(graph(), (), None, (), False, shape_of, 0.001)
    with pytest.raises(TypeError, match="PoolShape"):
        interp._layer_init(own, (1,), None, (), False, lambda args, kwargs: "shape", 0.001)
    assert interp._ava_args_v == (interp,)  # nothing was half-written
    interp._layer_init(own, [1], {"k": 2}, [KeyError], False, shape_of, 0.5)
    assert interp._ava_args_v == (interp, 1) and interp._ava_kwargs_v == {"k": 2}
    assert interp._exc_ignored[0] is KeyError and interp._yield_interval == 0.5


# ----- the plans the core runs ---------------------------------------------------------------------


def test_a_program_is_initialised_once_and_its_static_plans_are_call_plans():
    prog = WorkflowInterpreter(graph())._prog
    with pytest.raises(TypeError, match="once"):
        prog.__init__(None, [], [], [], [], [], [], [], [], [], None, {})
    fresh = _core.Program.__new__(_core.Program)
    with pytest.raises(TypeError, match="static plan"):
        fresh.__init__(
            None, [None], [None], [0], [(5, None, {})], [0], [()], [(-1, -1, -1, -1)], [None], [(0,)], None, {}
        )


def injected_graph(seen: list):
    """Nodes whose plans live in the program's shared table (they take a value from the pools)."""

    @Node(wrap_to_async=False)
    def first(number: int):
        seen.append(number)

    @Node(wrap_to_async=False)
    def second(number: int):
        seen.append(-number)

    return NodeCompose(first, second).render()


@pytest.mark.asyncio
async def test_a_plan_table_read_from_python_is_a_copy():
    seen: list = []
    interp = WorkflowInterpreter(injected_graph(seen), extra_args=(4,))
    await interp.run()
    table = interp._prog.table_for(interp._shape)
    assert isinstance(table, tuple) and all(isinstance(p, _core.CallPlan) for p in table)
    plans = interp._plans
    plans[0] = "not a plan"
    assert interp._plans[0] is table[0]
    await WorkflowInterpreter(interp.get_graph(), extra_args=(5,)).run()
    assert seen == [4, -4, 5, -5]


class Misplanning(WorkflowInterpreter):
    def _shared_plan(self, node, as_handler):
        return (None, {}, {})  # the old tuple plans


@pytest.mark.asyncio
async def test_a_plan_that_is_not_a_call_plan_fails_the_run():
    seen: list = []
    interp = Misplanning(injected_graph(seen), extra_args=(4,))
    with pytest.raises(TypeError, match="CallPlan"):
        await interp.run()
    assert seen == []


@pytest.mark.asyncio
async def test_the_step_coroutines_check_their_plan_and_row():
    interp = WorkflowInterpreter(graph())
    fut = asyncio.get_running_loop().create_future()
    with pytest.raises(TypeError):
        await interp._call_with_plan(0, None)
    with pytest.raises(IndexError):
        await interp._call_with_plan(99, _core.NO_ARGUMENTS)
    with pytest.raises(TypeError):
        interp._batch_in_worker(0, "plan", None, fut)
    with pytest.raises(IndexError):
        interp._batch_in_worker(99, _core.NO_ARGUMENTS, None, fut)


# ----- a worker-thread batch -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_stop_iteration_inside_a_worker_thread_batch_fails_the_run():
    threads: list[tuple[str, int]] = []

    def make(name, body):
        def node():
            threads.append((name, threading.get_ident()))
            return body()

        node.__name__ = name
        return Node()(node)

    chain = NodeCompose(
        make("first", lambda: 1), make("exhausted", lambda: next(iter(()))), make("after", lambda: 3)
    ).render()
    for _ in range(2):  # the first run makes the shared plans a batch needs
        threads.clear()
        interp = WorkflowInterpreter(chain)
        with pytest.raises(RuntimeError, match="raised StopIteration") as info:
            await asyncio.wait_for(interp.run(), 10)
        assert isinstance(info.value.__cause__, StopIteration)
        assert [name for name, _ in threads] == ["first", "exhausted"] and interp.get_exception() is info.value
    assert threads[0][1] == threads[1][1]  # one batch ran both
