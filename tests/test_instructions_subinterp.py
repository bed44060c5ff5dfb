"""FUN_BLOCK, BATCH_RUN and TRIGGER_EVENT: instructions that run work outside the main step loop."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass

import pytest

from amrita_sense import NodeCompose, WorkflowInterpreter
from amrita_sense.hook.event import BaseEvent, ConstructableEvent
from amrita_sense.hook.matcher import EventRegistry, Matcher
from amrita_sense.instructions import BATCH_RUN, FUN_BLOCK, IF, NATIVE_WHILE, TRIGGER_EVENT
from amrita_sense.instructions.batch import BatchRun
from amrita_sense.instructions.enum import BuiltinTags
from amrita_sense.instructions.func_block import FuncBlock
from amrita_sense.instructions.trigger_event import EventTrigger, TriggerInstruction
from amrita_sense.node.wrapper import Node
from amrita_sense.runtime.workflow import UNSET
from support.dual import Recorder, run_program

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup


async def run(program, rec, **kw):
    if not isinstance(program, NodeCompose):
        program = NodeCompose(program)
    interp = WorkflowInterpreter(program.render(), **kw)
    return interp, await run_program(interp, rec)


# ----- FUN_BLOCK -------------------------------------------------------------------------


def test_fun_block_node():
    rec = Recorder()
    sub = (rec.act("x") >> rec.act("y")).render()
    block = FUN_BLOCK(sub)
    assert isinstance(block, FuncBlock)
    assert (block._comp_rendered, block._mdw, block._io, block._interpreter, block._onetime) == (
        sub,
        UNSET,
        None,
        None,
        False,
    )
    assert (block.tag, block.address_able, block.wrap_to_async) == ("NodeSuspend::__call__", True, False)
    assert (block.__sdb_dis__, block.__sdb_cmt__) == ("FN", "FuncBlock")


@pytest.mark.asyncio
async def test_fun_block_runs_the_sub_graph_as_one_step():
    rec = Recorder()
    sub = (rec.act("f1", 1) >> rec.act("f2", 2)).render()
    interp, out = await run(NodeCompose(rec.act("a", 0), FUN_BLOCK(sub), rec.act("b", 3)), rec)
    assert out.trace == ["a", "f1", "f2", "b"] and out.yields == [0, None, 3] and out.error is None
    assert len(interp.sub_interpreters) == 1
    child = next(iter(interp.sub_interpreters.values()))
    assert child.parent is interp and child.top_interpreter is interp and child.get_graph() is sub
    assert list(child._pointer) == [] and child in interp.all_sub_interpreters.values()


@pytest.mark.asyncio
async def test_fun_block_reuses_its_child_unless_one_time():
    rec = Recorder()
    sub = rec.act("f").as_compose().render()
    reused = FUN_BLOCK(sub)
    interp, out = await run(NATIVE_WHILE(rec.counter("c", 2)).ACTION(reused), rec)
    assert out.trace == ["c1", "f", "c2", "f", "c3"] and len(interp.sub_interpreters) == 1
    rec.trace.clear()
    once = FUN_BLOCK(sub, one_time_interp=True)
    interp, out = await run(NATIVE_WHILE(rec.counter("c", 2)).ACTION(once), rec)
    assert out.trace == ["c1", "f", "c2", "f", "c3"]
    assert interp.sub_interpreters == {} and once._interpreter is None


@pytest.mark.asyncio
async def test_fun_block_failure_propagates_and_the_child_is_reset():
    rec = Recorder()
    block = FUN_BLOCK((rec.act("f1", exc=ValueError("boom")) >> rec.act("f2")).render())
    interp, out = await run(NodeCompose(rec.act("a"), block, rec.act("b")), rec)
    assert isinstance(out.error, ValueError) and out.trace == ["a", "f1"] and out.pointer == [1]
    assert list(block._interpreter._pointer) == []


@pytest.mark.asyncio
async def test_fun_block_child_sees_the_parent_in_its_pool():
    seen = []

    @Node(wrap_to_async=False)
    def probe(me: WorkflowInterpreter, label: str):
        seen.append((me.parent is not None, label))

    _, out = await run(FUN_BLOCK(probe.as_compose().render()), None, extra_kwargs={"label": "k"})
    assert out.error is None and seen == [(True, "k")]


@pytest.mark.asyncio
async def test_fun_block_middleware_is_inherited_unless_given():
    rec = Recorder()
    wrapped = []

    async def middleware(interp):
        wrapped.append(interp.parent is not None)
        return await interp._call()

    sub = rec.act("f").as_compose().render()
    await run(FUN_BLOCK(sub), rec, middleware=middleware)
    assert wrapped == [False, True]
    wrapped.clear()
    await run(FUN_BLOCK(sub, middleware=None), rec, middleware=middleware)
    assert wrapped == [False]


class Ctx:
    def __init__(self, name: str):
        self.name = name


@pytest.mark.asyncio
async def test_each_interpreter_of_a_shared_graph_runs_its_own_fun_block():
    seen = []

    @Node(wrap_to_async=False)
    def node(ctx: Ctx):
        seen.append(ctx.name)

    graph = NodeCompose(FUN_BLOCK(NodeCompose(node).render())).render()
    for name in "abc":
        await WorkflowInterpreter(graph, extra_args=(Ctx(name),)).run()
    assert seen == ["a", "b", "c"]


@pytest.mark.asyncio
async def test_each_interpreter_of_a_shared_graph_runs_its_own_batch():
    seen = []
    both_inside = asyncio.Event()

    @Node()
    async def node(ctx: Ctx):
        seen.append(ctx.name)
        if len(seen) == 2:
            both_inside.set()
        await both_inside.wait()

    graph = NodeCompose(BATCH_RUN(NodeCompose(node))).render()
    runs = asyncio.gather(*(WorkflowInterpreter(graph, extra_args=(Ctx(name),)).run() for name in "ab"))
    await asyncio.wait_for(runs, 5)
    assert sorted(seen) == ["a", "b"]


# ----- BATCH_RUN -------------------------------------------------------------------------


def test_batch_run_node():
    rec = Recorder()
    batch = BATCH_RUN(rec.act("a"), rec.act("b") >> rec.act("c"), IF(rec.act("d"), rec.act("e")))
    assert isinstance(batch, BatchRun) and batch._fail_fast is True
    assert BatchRun()._fail_fast is False
    assert (batch.tag, batch.__sdb_dis__, batch.address_able, batch.wrap_to_async) == (
        BuiltinTags.BATCH_RUN,
        "BATCH 3",
        True,
        False,
    )
    NodeCompose(batch).render()
    assert len(batch._graphs) == 3 and not hasattr(batch, "_origin")
    caller = batch._graphs[-1][0]
    assert caller.tag is BuiltinTags.BATCH_CALLER
    with pytest.raises(RuntimeError, match="BATCH_RUN node has already been compiled"):
        NodeCompose(batch).render()


@pytest.mark.asyncio
async def test_batch_run_runs_payloads_concurrently():
    both = asyncio.Event()
    arrived = []

    def meeting(name):
        @Node()
        async def node():
            arrived.append(name)
            if len(arrived) == 2:
                both.set()
            await asyncio.wait_for(both.wait(), 5)

        return node

    rec = Recorder()
    _, out = await run(NodeCompose(BATCH_RUN(meeting("n1"), meeting("g1").as_compose()), rec.act("after")), rec)
    assert out.error is None and sorted(arrived) == ["g1", "n1"] and out.trace == ["after"]


@pytest.mark.asyncio
async def test_batch_run_collects_failures_without_fail_fast():
    rec = Recorder()
    batch = BATCH_RUN(
        rec.act("p1", exc=ValueError("v")), rec.act("p2") >> rec.act("p3", exc=KeyError("k")), fail_fast=False
    )
    interp, out = await run(NodeCompose(rec.act("a"), batch, rec.act("b")), rec)
    assert isinstance(out.error, ExceptionGroup) and "when running nodes" in str(out.error)
    assert sorted(type(e).__name__ for e in out.error.exceptions) == ["ExceptionGroup", "KeyError"]
    assert "b" not in out.trace and interp.sub_interpreters == {}


@pytest.mark.asyncio
async def test_batch_run_fail_fast_raises_the_first_failure():
    rec = Recorder()
    batch = BATCH_RUN((rec.act("p1", exc=KeyError("k"))).as_compose())
    _, out = await run(NodeCompose(batch, rec.act("b")), rec)
    assert isinstance(out.error, KeyError)


@pytest.mark.asyncio
async def test_batch_run_runs_its_payload_every_time():
    rec = Recorder()
    interp, out = await run(NATIVE_WHILE(rec.counter("c", 3)).ACTION(BATCH_RUN(rec.act("p"))), rec)
    assert out.trace == ["c1", "p", "c2", "p", "c3", "p", "c4"] and interp.sub_interpreters == {}


# ----- TRIGGER_EVENT ---------------------------------------------------------------------


@dataclass
class Ping(ConstructableEvent):
    label: str

    def get_event_type(self) -> str:
        return "instr-test-ping"

    @property
    def event_type(self) -> str:
        return "instr-test-ping"

    @classmethod
    def constructor(cls, label: str) -> Ping:
        return cls(label)


@pytest.fixture
def registry():
    yield EventRegistry()
    EventRegistry()._event_handlers.clear()


def test_trigger_event_layout():
    graph = TRIGGER_EVENT(Ping).extract().render()
    assert isinstance(graph[0], EventTrigger) and len(graph) == 3
    assert (graph[0].tag, graph[0].address_able, graph[0].__sdb_dis__, graph[0].__sdb_cmt__) == (
        BuiltinTags.EVENT_TRIGGER_CALL,
        False,
        "EVENT",
        "EventTrigger",
    )
    assert graph[1].tag is BuiltinTags.TRIGGER_CONSTRUCTOR and graph[1].address_able is False
    assert isinstance(TRIGGER_EVENT(Ping), TriggerInstruction)


def test_trigger_event_needs_an_event_class():
    with pytest.raises(TypeError, match="TRIGGER_EVENT"):
        TRIGGER_EVENT(object())


@pytest.mark.asyncio
async def test_trigger_event_builds_and_dispatches(registry):
    got = []

    @Matcher("instr-test-ping").handle()
    async def on_ping(event: Ping, label: str):
        got.append((event.label, label))

    rec = Recorder()
    _, out = await run(TRIGGER_EVENT(Ping) >> rec.act("after"), rec, extra_kwargs={"label": "hello"})
    assert out.error is None and got == [("hello", "hello")] and out.trace == ["after"]
    assert out.yields == [None, None, None, None]


@pytest.mark.asyncio
async def test_trigger_event_rejects_a_constructor_that_returns_no_event(registry):
    class NotAnEvent(Ping):
        @classmethod
        def constructor(cls) -> int:
            return 3

    _, out = await run(TRIGGER_EVENT(NotAnEvent), None)
    assert isinstance(out.error, TypeError) and "Expected an event object" in str(out.error)


def test_base_event_is_the_hook_class():
    assert issubclass(Ping, BaseEvent)


# ----- the interpreter tree the sub-graph instructions rely on ---------------------------


@pytest.mark.asyncio
async def test_forks_are_registered_in_the_tree_and_leave_it_on_terminate():
    from amrita_sense import IllegalState

    rec = Recorder()
    root = WorkflowInterpreter(rec.act("a").as_compose().render())
    child = root.fork_interpreter(None)
    grandchild = child.fork_interpreter(None)
    assert (child.parent, grandchild.parent, grandchild.top_interpreter) == (root, child, root)
    assert set(root.all_sub_interpreters.values()) == {child, grandchild}
    assert list(child.sub_interpreters.values()) == [grandchild]
    with pytest.raises(RuntimeError, match="not a top-level interpreter"):
        child.all_sub_interpreters
    with pytest.raises(IllegalState):
        await child.wait_all()
    with pytest.raises(IllegalState):
        await child.terminate_all()
    await root.terminate_all_forks(exclude_self=True)
    assert root.sub_interpreters == {} and child.parent is None
    await root.terminate_all()
    assert root.all_sub_interpreters == {}
