"""snapshot() and restore() at every kind of boundary, and the places that are not one."""

from __future__ import annotations

import asyncio
import pickle

import pytest

from amrita_sense import IF, RESET, SUSPEND, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import (
    CodecError,
    RestoredPanic,
    RestoreError,
    SnapshotUnavailable,
    inspect_snapshot,
    restored_traceback,
)
from amrita_sense.exceptions import BreakLoop, InterruptNotice
from amrita_sense.instructions import BATCH_RUN, CALL, FN, FUN_BLOCK, INT, INTER_FN, PUSH_CONTEXT
from amrita_sense.streaming import SuspendObjectStream
from support.durable_support import PC, abandon, park, rec, tag


def chain(trace: list, *names: str) -> NodeCompose:
    return NodeCompose(*(rec(trace, n) for n in names))


async def resumed(graph, data, **kw) -> WorkflowInterpreter:
    interp = WorkflowInterpreter.restore(graph, data, **kw)
    await interp.run()
    return interp


# ----- idle: between runs ---------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_fresh_interpreter_restores_to_a_full_run():
    trace: list = []
    graph = chain(trace, "a", "b").render()
    data = WorkflowInterpreter(graph).snapshot()
    assert inspect_snapshot(data).status == "ready"
    await resumed(graph, data)
    assert trace == ["a", "b"]


@pytest.mark.asyncio
async def test_a_halted_run_resumes_past_the_halting_node():
    trace: list = []
    graph = NodeCompose(rec(trace, "a"), SUSPEND, rec(trace, "b")).render()
    interp = WorkflowInterpreter(graph)
    await interp.run()
    data = interp.snapshot()
    info = inspect_snapshot(data)
    assert (info.status, info.position, info.pointer) == ("halted", "idle", [1])
    del trace[:]
    await resumed(graph, data)
    assert trace == ["b"]


@pytest.mark.asyncio
async def test_a_finished_run_is_finished_and_a_reset_one_too():
    trace: list = []
    graph = NodeCompose(rec(trace, "a"), RESET, rec(trace, "b")).render()
    interp = WorkflowInterpreter(graph)
    await interp.run()
    assert inspect_snapshot(interp.snapshot()).status == "finished"
    done = WorkflowInterpreter(chain(trace, "c").render())
    await done.run()
    assert inspect_snapshot(done.snapshot()).status == "finished"


class Refused(Exception):
    """An exception whose constructor does not take its own args back."""

    def __init__(self, *, code: int) -> None:
        super().__init__(f"refused with {code}")
        self.code = code


class Pickled(Refused):
    """A `Refused` that pickle can rebuild."""

    def __reduce__(self):
        return (make_pickled, (self.code,))


def make_pickled(code: int) -> Pickled:
    return Pickled(code=code)


@pytest.mark.asyncio
async def test_a_panic_is_restored_with_its_class_args_and_traceback_text():
    trace: list = []
    graph = NodeCompose(rec(trace, "a"), rec(trace, "b", exc=KeyError("k", 3)), rec(trace, "c")).render()
    interp = WorkflowInterpreter(graph)
    with pytest.raises(KeyError):
        await interp.run()
    data = interp.snapshot()
    assert inspect_snapshot(data).status == "panicked"
    again = WorkflowInterpreter.restore(graph, data)
    exc = again.get_exception()
    assert type(exc) is KeyError and exc.args == ("k", 3) and str(exc) == str(interp.get_exception())
    assert "KeyError" in restored_traceback(exc) and "in body" in restored_traceback(exc)
    del trace[:]
    with pytest.raises(KeyError):  # recovering runs the failing node again
        await again.run()
    assert trace == ["b"] and again.get_exception() is not exc


@pytest.mark.asyncio
async def test_a_panic_that_cannot_be_rebuilt_comes_back_as_restored_panic_or_through_the_codec():
    for cls in (Refused, Pickled):
        graph = NodeCompose(rec([], "a", exc=cls(code=7))).render()
        interp = WorkflowInterpreter(graph)
        with pytest.raises(Refused):
            await interp.run()
        exc = WorkflowInterpreter.restore(graph, interp.snapshot()).get_exception()
        assert isinstance(exc, RestoredPanic) and str(exc) == "refused with 7"
        assert exc.type_name == f"test_durable_snapshot:{cls.__qualname__}" and cls.__name__ in exc.traceback_text
        through_codec = WorkflowInterpreter.restore(
            graph, interp.snapshot(pickle), codec=pickle, allow_unsigned=True
        ).get_exception()
        if cls is Pickled:
            assert type(through_codec) is Pickled and through_codec.code == 7
        else:  # pickles, but does not unpickle: the record stands in
            assert isinstance(through_codec, RestoredPanic)


# ----- suspend gates --------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_parked_at_a_node_gate_the_restored_run_starts_with_that_node():
    trace: list = []
    graph = chain(trace, "a", "b", "c").render()
    stream = SuspendObjectStream()
    interp = WorkflowInterpreter(graph, object_io=stream)
    task = await park(stream, interp.run, tag("b"))
    data = interp.snapshot()
    info = inspect_snapshot(data)
    assert (info.status, info.position, info.parked, info.pointer) == ("suspended", "gate", tag("b"), [1])
    await abandon(task)
    assert trace == ["a"]
    await resumed(graph, data)
    assert trace == ["a", "b", "c"]


def asking(trace: list, name: str, stream: SuspendObjectStream, requests: list):
    """An async node that asks the stream to park the run at the next between-node gate."""

    async def body() -> None:
        trace.append(name)
        requests.append(asyncio.ensure_future(stream.wait_to_suspend(PC)))
        await asyncio.sleep(0)

    body.__name__ = body.__qualname__ = name
    from amrita_sense import Node

    return Node()(body)


@pytest.mark.asyncio
async def test_parked_at_the_between_node_gate():
    def build(trace, stream, requests):
        return NodeCompose(rec(trace, "a"), asking(trace, "b", stream, requests), rec(trace, "c")).render()

    trace: list = []
    requests: list = []
    stream = SuspendObjectStream()
    interp = WorkflowInterpreter(build(trace, stream, requests), object_io=stream)
    run = asyncio.ensure_future(interp.run())
    while not requests:
        await asyncio.sleep(0)
    await requests[0]
    data = interp.snapshot()
    info = inspect_snapshot(data)
    assert (info.status, info.position, info.parked, info.pointer) == ("suspended", "between", PC, [2])
    await abandon(run)
    fresh: list = []
    await resumed(build(fresh, stream, []), data)
    assert trace == ["a", "b"] and fresh == ["c"]


@pytest.mark.asyncio
async def test_a_gate_inside_a_sub_call_is_not_a_boundary():
    trace: list = []
    graph = NodeCompose(rec(trace, "a"), IF(rec(trace, "cond"), rec(trace, "then"))).render()
    stream = SuspendObjectStream()
    interp = WorkflowInterpreter(graph, object_io=stream)
    task = await park(stream, interp.run, tag("cond"))
    with pytest.raises(SnapshotUnavailable, match="sub-call"):
        interp.snapshot()
    stream.resume()
    await task
    assert trace == ["a", "cond", "then"]


# ----- inside a node: refused ---------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["inline", "async"])
async def test_a_node_cannot_snapshot_its_own_run(mode):
    seen: list = []

    def body(pc: WorkflowInterpreter) -> None:
        with pytest.raises(SnapshotUnavailable):
            pc.snapshot()
        seen.append("refused")

    async def async_body(pc: WorkflowInterpreter) -> None:
        body(pc)

    from amrita_sense import Node

    node = Node()(async_body) if mode == "async" else Node(wrap_to_async=False)(body)
    await WorkflowInterpreter(NodeCompose(node).render()).run()
    assert seen == ["refused"]


@pytest.mark.asyncio
async def test_no_snapshot_while_a_node_awaits_or_an_injected_call_runs():
    gate = asyncio.Event()
    trace: list = []

    async def slow() -> None:
        trace.append("slow")
        await gate.wait()

    from amrita_sense import Node

    graph = NodeCompose(Node()(slow), rec(trace, "b")).render()
    interp = WorkflowInterpreter(graph)
    run = asyncio.ensure_future(interp.run())
    await asyncio.sleep(0.01)
    with pytest.raises(SnapshotUnavailable, match="node is running"):
        interp.snapshot()
    gate.set()
    await run
    gate.clear()
    idle = WorkflowInterpreter(graph)
    injected = asyncio.ensure_future(idle.call_sub([0], interrupt=True))
    await asyncio.sleep(0.01)
    with pytest.raises(SnapshotUnavailable, match="injected"):
        idle.snapshot()
    gate.set()
    await injected


# ----- middleware and run_step_by -----------------------------------------------------------


@pytest.mark.asyncio
async def test_in_a_middleware_before_call_the_node_runs_after_restore_and_after_call_it_runs_again():
    trace: list = []
    graph = chain(trace, "a", "b", "c").render()
    before, after = [], []

    async def middleware(pc: WorkflowInterpreter):
        before.append(pc.snapshot())
        result = await pc._call()
        after.append(pc.snapshot())
        return result

    await WorkflowInterpreter(graph, middleware=middleware).run()
    assert [inspect_snapshot(d).position for d in before] == ["step"] * 3
    del trace[:]
    await resumed(graph, before[1])
    assert trace == ["b", "c"]
    del trace[:]
    await resumed(graph, after[1])  # at least once: "b" had run, it runs again
    assert trace == ["b", "c"]


@pytest.mark.asyncio
async def test_every_run_step_by_yield_is_a_boundary_after_the_node():
    trace: list = []
    graph = NodeCompose(rec(trace, "a"), IF(rec(trace, "c"), rec(trace, "t")), rec(trace, "z")).render()
    interp = WorkflowInterpreter(graph)
    snapshots = []
    async for _ in interp.run_step_by():
        snapshots.append((len(trace), interp.snapshot()))
    full = list(trace)
    *middle, (_, last) = snapshots
    for done, data in middle:
        del trace[:]
        await resumed(graph, data)
        assert trace == full[done:]
    assert inspect_snapshot(last).status == "finished"  # running it again would start over


# ----- sub-interpreters -----------------------------------------------------------------------


def fun_block_graph(trace: list, nested: bool = False, stream=None, requests=None):
    first = rec(trace, "x") if stream is None else asking(trace, "x", stream, requests)
    inner = NodeCompose(first, rec(trace, "y"), rec(trace, "z"))
    if nested:
        inner = NodeCompose(rec(trace, "w"), FUN_BLOCK(inner.render()))
    return NodeCompose(rec(trace, "a"), FUN_BLOCK(inner.render()), rec(trace, "b")).render()


@pytest.mark.asyncio
@pytest.mark.parametrize("nested", [False, True], ids=["fun_block", "fun_block_in_fun_block"])
@pytest.mark.parametrize("where", ["node_gate", "checkpoint_gate"])
async def test_a_fun_block_child_parked_mid_run_is_restored_into_a_fresh_graph(nested, where):
    trace: list = []
    requests: list = []
    stream = SuspendObjectStream()
    asks = stream if where == "checkpoint_gate" else None
    interp = WorkflowInterpreter(fun_block_graph(trace, nested, asks, requests), object_io=stream)
    if where == "node_gate":
        task = await park(stream, interp.run, tag("y"))
    else:  # "x" asks for a park at the child's next between-node gate
        task = asyncio.ensure_future(interp.run())
        while not requests:
            await asyncio.sleep(0)
        await requests[0]
    data = interp.snapshot()
    info = inspect_snapshot(data)
    assert (info.status, info.position) == ("suspended", "nested")
    parked_trace = list(trace)
    await abandon(task)
    fresh: list = []
    await resumed(fun_block_graph(fresh, nested, asks, []), data)
    full = ["a", *(["w"] if nested else []), "x", "y", "z", "b"]
    assert parked_trace + fresh == full


@pytest.mark.asyncio
async def test_a_fun_block_step_restores_beside_the_run_it_was_taken_from():
    """FUN_BLOCK children are kept per interpreter: a restore on the very graph whose block is still
    parked in the original run gets children of its own and leaves the original's alone."""
    trace: list = []
    graph = fun_block_graph(trace)
    stream = SuspendObjectStream()
    interp = WorkflowInterpreter(graph, object_io=stream)
    task = await park(stream, interp.run, tag("y"))
    data = interp.snapshot()
    block = graph[1]
    child = block._children[interp]
    restored = WorkflowInterpreter.restore(graph, data)
    assert block._children[interp] is child
    del trace[:]
    await restored.run()
    restored_trace = list(trace)
    del trace[:]
    stream.resume()
    await task
    assert restored_trace == trace == ["y", "z", "b"]


def batch_graph(trace: list):
    left = chain(trace, "l1", "l2")
    right = chain(trace, "r1", "r2")
    return NodeCompose(rec(trace, "a"), BATCH_RUN(left, right), rec(trace, "b")).render()


@pytest.mark.asyncio
async def test_a_batch_run_with_children_parked_and_returned_is_restored():
    trace: list = []
    stream = SuspendObjectStream()
    interp = WorkflowInterpreter(batch_graph(trace), object_io=stream)
    task = await park(stream, interp.run, tag("l2"))
    await asyncio.sleep(0.01)  # the right child runs to its end meanwhile
    data = interp.snapshot()
    assert inspect_snapshot(data).position == "nested"
    assert sorted(trace) == ["a", "l1", "r1", "r2"]
    await abandon(task)
    fresh: list = []
    await resumed(batch_graph(fresh), data)
    assert fresh == ["l2", "b"]


# ----- the context stack and node memos ---------------------------------------------------------


@pytest.mark.asyncio
async def test_a_run_halted_inside_an_interrupt_routine_returns_from_it_after_restore():
    def build(trace):
        return NodeCompose(
            rec(trace, "a"),
            INT("isr"),
            rec(trace, "b"),
            INTER_FN("isr", NodeCompose(rec(trace, "in"), SUSPEND, rec(trace, "out"))),
        ).render()

    trace: list = []
    interp = WorkflowInterpreter(build(trace))
    await interp.run()
    assert trace == ["a", "in"] and len(interp.context_stack) == 1
    data = interp.snapshot()
    fresh: list = []
    again = await resumed(build(fresh), data)
    assert fresh == ["out", "b"] and not again.context_stack


@pytest.mark.asyncio
async def test_a_context_holding_the_live_return_stack_still_shares_it():
    trace: list = []
    graph = NodeCompose(
        rec(trace, "a"),
        CALL("f"),
        rec(trace, "end"),
        FN("f", NodeCompose(PUSH_CONTEXT([0], exclude_stack=False), SUSPEND, rec(trace, "f1"))),
    ).render()
    interp = WorkflowInterpreter(graph)
    await interp.run()
    again = WorkflowInterpreter.restore(graph, interp.snapshot())
    assert again.context_stack.stack[0].stack is again._ret_addr_stack
    assert [list(p) for p in again._ret_addr_stack.stack] == [list(p) for p in interp._ret_addr_stack.stack]
    del trace[:]
    await again.run()
    assert trace == ["f1", "end"]


@pytest.mark.asyncio
async def test_a_return_address_a_node_computed_is_given_to_the_fresh_graph():
    def build(trace):
        return NodeCompose(IF(rec(trace, "c"), INT("isr")), rec(trace, "b"), INTER_FN("isr", SUSPEND)).render()

    trace: list = []
    graph = build(trace)
    interp = WorkflowInterpreter(graph)
    await interp.run()
    data = interp.snapshot()
    fresh_graph = build([])
    int_node = next(n for n in fresh_graph[0] if type(n).__name__ == "InterruptIntoNode")
    assert int_node._ret_addr is None
    WorkflowInterpreter.restore(fresh_graph, data)
    original = next(n for n in graph[0] if type(n).__name__ == "InterruptIntoNode")
    assert int_node._ret_addr == original._ret_addr is not None


# ----- pools, codec, identity -------------------------------------------------------------------


class Ctx:
    def __init__(self, value: int) -> None:
        self.value = value


@pytest.mark.asyncio
async def test_the_codec_carries_the_pools_and_callers_may_pass_their_own():
    from amrita_sense import Node

    seen: list = []

    @Node(wrap_to_async=False)
    def use(ctx: Ctx, label: str) -> None:
        seen.append((ctx.value, label))

    graph = NodeCompose(SUSPEND, use).render()
    interp = WorkflowInterpreter(graph, extra_args=(Ctx(1),), extra_kwargs={"label": "x"})
    await interp.run()
    await resumed(graph, interp.snapshot(pickle), codec=pickle, allow_unsigned=True)
    await resumed(graph, interp.snapshot(pickle), codec=pickle, allow_unsigned=True, extra_args=(Ctx(2),))
    await resumed(graph, interp.snapshot(), extra_args=(Ctx(3),), extra_kwargs={"label": "y"})
    assert seen == [(1, "x"), (2, "x"), (3, "y")]


@pytest.mark.asyncio
async def test_user_objects_in_the_context_stack_need_a_codec():
    graph = NodeCompose(PUSH_CONTEXT([0], exclude_deps=False), SUSPEND).render()
    interp = WorkflowInterpreter(graph, extra_args=(Ctx(1),))
    await interp.run()
    interp._ava_args = (interp, Ctx(5))  # the context now holds pools that are not the live ones
    with pytest.raises(CodecError, match="pass a codec"):
        interp.snapshot()
    data = interp.snapshot(pickle)
    with pytest.raises(RestoreError, match="pass the same codec"):
        WorkflowInterpreter.restore(graph, data, extra_args=())
    again = WorkflowInterpreter.restore(graph, data, codec=pickle, allow_unsigned=True)
    ctx = again.context_stack.stack[0]
    assert ctx.s_args[0] is again and ctx.s_args[1].value == 1


@pytest.mark.asyncio
async def test_pass_through_classes_and_the_interpreter_id_come_back():
    graph = NodeCompose(SUSPEND, rec([], "b")).render()
    interp = WorkflowInterpreter(graph, exception_ignored=(LookupError,))
    await interp.run()
    again = WorkflowInterpreter.restore(graph, interp.snapshot())
    assert again._exc_ignored == (LookupError, InterruptNotice, BreakLoop)
    assert again.id == interp.id
    own = WorkflowInterpreter.restore(graph, interp.snapshot(), exception_ignored=(KeyError,))
    assert own._exc_ignored == (KeyError, InterruptNotice, BreakLoop)


def test_a_snapshot_from_one_core_restores_on_the_other(cores):
    from support.dual import run_on

    async def take(sense, _):
        trace: list = []
        graph = (
            sense.sub("node")
            .NodeCompose(rec_on(sense, trace, "a"), sense.sub("instructions").SUSPEND, rec_on(sense, trace, "b"))
            .render()
        )
        interp = sense.sub("runtime.workflow").WorkflowInterpreter(graph)
        await interp.run()
        return interp.snapshot(), interp.graph_fingerprint

    async def give(sense, data):
        trace: list = []
        graph = (
            sense.sub("node")
            .NodeCompose(rec_on(sense, trace, "a"), sense.sub("instructions").SUSPEND, rec_on(sense, trace, "b"))
            .render()
        )
        again = sense.sub("runtime.workflow").WorkflowInterpreter.restore(graph, data)
        await again.run()
        return trace, again.graph_fingerprint

    compiled, pure = cores
    for source, target in ((compiled, pure), (pure, compiled)):
        data, fingerprint = run_on(source, take, None, "asyncio")
        assert run_on(target, give, data, "asyncio") == (["b"], fingerprint)


def rec_on(sense, trace: list, name: str):
    def body() -> None:
        trace.append(name)

    body.__name__ = body.__qualname__ = name
    return sense.sub("node.wrapper").Node(wrap_to_async=False)(body)
