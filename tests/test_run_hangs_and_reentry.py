"""Runs that must neither hang nor run twice (issue 14):

- a default `@Node()` (worker-thread) function raising StopIteration;
- a node awaiting its own interpreter's end (`terminate()`, `wait`, `wait_all_forks()`, ...);
- one interpreter started from two threads at once;
- a KeyboardInterrupt landing inside the loop's lock release (a Python frame in the pure build).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import types

import pytest

from amrita_sense import IllegalState, NodeCompose, WorkflowInterpreter
from amrita_sense.instructions import FUN_BLOCK
from amrita_sense.node.wrapper import Node
from support.dual import Recorder, new_loop

LOOPS = ["asyncio", "uvloop"]

# ----- StopIteration from a node ----------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["thread", "inline", "async"])
async def test_stop_iteration_from_a_node_fails_the_run_like_a_coroutine(mode):
    rec = Recorder()

    def exhausted():
        return next(iter(()))

    interp = WorkflowInterpreter(NodeCompose(rec._make("n", exhausted, mode), rec.act("after")).render())
    with pytest.raises(RuntimeError, match="raised StopIteration") as info:
        await asyncio.wait_for(interp.run(), 10)
    assert isinstance(info.value.__cause__, StopIteration)
    assert rec.trace == ["n"] and interp.get_exception() is info.value
    interp.rebase_ptr([1])
    await interp.run()
    assert rec.trace == ["n", "after"]


# ----- waiting for one's own run -----------------------------------------------------------------------


async def _own_terminate(pc):
    await pc.terminate()


async def _own_wait(pc):
    await pc.wait


async def _own_wait_all_forks(pc):
    await pc.wait_all_forks()


async def _own_wait_all(pc):
    await pc.wait_all()


@pytest.mark.asyncio
@pytest.mark.parametrize("waits", [_own_terminate, _own_wait, _own_wait_all_forks, _own_wait_all])
async def test_a_node_waiting_for_its_own_run_fails_at_once(waits):
    rec = Recorder()

    @Node()
    async def self_waiting(pc: WorkflowInterpreter):
        await waits(pc)

    interp = WorkflowInterpreter(NodeCompose(rec.act("a"), self_waiting, rec.act("b")).render())
    with pytest.raises(IllegalState, match="own run"):
        await asyncio.wait_for(interp.run(), 10)
    assert rec.trace == ["a"] and not interp.is_running
    interp.rebase_ptr([2])
    await interp.run()
    assert rec.trace == ["a", "b"]


@pytest.mark.asyncio
async def test_a_node_may_wait_for_its_forks_and_terminate_the_others():
    rec = Recorder()
    outcomes = []

    @Node()
    async def waits_for_children(pc: WorkflowInterpreter):
        child = pc.fork_interpreter(NodeCompose(rec.act("child")).render())
        task = asyncio.ensure_future(child.run())
        await asyncio.sleep(0)
        outcomes.append(await pc.wait_all_forks(exclude_self=True))
        outcomes.append(await pc.terminate_all_forks())
        await task

    interp = WorkflowInterpreter(NodeCompose(waits_for_children, rec.act("b")).render())
    await asyncio.wait_for(interp.run(), 10)
    own, child = outcomes[1]
    assert outcomes[0] is None and isinstance(own, IllegalState) and child is None
    assert rec.trace == ["child", "b"]


@pytest.mark.asyncio
async def test_a_function_block_terminating_its_parent_fails_at_once():
    rec = Recorder()
    parent: dict = {}

    @Node()
    async def stop_parent():
        await parent["interp"].terminate()

    block = FUN_BLOCK(NodeCompose(rec.act("in"), stop_parent).render())
    parent["interp"] = WorkflowInterpreter(NodeCompose(block, rec.act("after")).render())
    with pytest.raises(IllegalState, match="own run"):
        await asyncio.wait_for(parent["interp"].run(), 10)
    assert rec.trace == ["in"]


def test_wait_outside_a_run_and_from_another_task_still_work():
    async def scenario():
        rec = Recorder()
        gate = asyncio.Event()

        @Node()
        async def hold():
            await gate.wait()

        interp = WorkflowInterpreter(NodeCompose(hold, rec.act("b")).render())
        with pytest.raises(IllegalState, match="not running"):
            interp.wait
        run = asyncio.ensure_future(interp.run())
        await asyncio.sleep(0)
        waiting = asyncio.ensure_future(interp.wait_all_forks())
        gate.set()
        await asyncio.wait_for(waiting, 10)
        await run
        return rec.trace

    for name in LOOPS:
        loop = new_loop(name)
        try:
            assert loop.run_until_complete(scenario()) == ["b"]
        finally:
            loop.close()


# ----- one interpreter, two threads ------------------------------------------------------------------------


class _PausingFuture(asyncio.Future):
    """A finished future whose `done()` (the running check of `run()` asks it) pauses thread "first"
    until the other thread's run has started: an unguarded check-then-claim then lets both runs in."""

    def __init__(self, loop, paused: threading.Event, other_started: threading.Event):
        super().__init__(loop=loop)
        self.set_result(None)
        self.paused, self.other_started = paused, other_started

    def done(self):
        if threading.current_thread().name == "first" and not self.paused.is_set():
            self.paused.set()
            self.other_started.wait(5)
        return super().done()


@pytest.mark.parametrize("loop_name", LOOPS)
def test_one_interpreter_started_from_two_threads_runs_once(loop_name):
    paused, second_started, first_done = threading.Event(), threading.Event(), threading.Event()
    ran, outcomes = [], {}

    @Node()
    def body():
        ran.append("body")
        second_started.set()
        if len(ran) == 1:  # the run of "second" lasts until "first" gave up (or ran too)
            first_done.wait(5)

    interp = WorkflowInterpreter(NodeCompose(body).render())
    loops = {"first": new_loop(loop_name), "second": new_loop(loop_name)}
    interp._waiter = _PausingFuture(loops["first"], paused, second_started)  # a run's finished future

    def start(name, loop):
        if name == "second":
            paused.wait(5)
        try:
            loop.run_until_complete(interp.run())
            outcomes[name] = "ran"
        except IllegalState as exc:
            outcomes[name] = exc
        finally:
            if name == "first":
                first_done.set()
            loop.close()

    threads = [threading.Thread(target=start, args=(name, loop), name=name) for name, loop in loops.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert outcomes.get("second") == "ran" and isinstance(outcomes.get("first"), IllegalState), (outcomes, ran)
    assert ran == ["body"] and not interp.is_running


# ----- KeyboardInterrupt inside the lock release ---------------------------------------------------------------


class _Interrupter:
    """Raises KeyboardInterrupt at the `at`-th trace event (call or line) of `code` in the task that
    armed it (the run's own task, where the loop releases its lock)."""

    def __init__(self, code, at: int):
        self.code, self.at, self.seen, self.task, self.fired = code, at, 0, None, False

    def arm(self) -> None:
        self.task = asyncio.current_task()

    def _count(self) -> None:
        if self.task is not None and not self.fired and asyncio.current_task() is self.task:
            self.seen += 1
            if self.seen == self.at:
                self.fired = True
                raise KeyboardInterrupt

    def _local(self, frame, event, arg):
        if event == "line":
            self._count()
        return self._local

    def __call__(self, frame, event, arg):
        if frame.f_code is not self.code:
            return None
        self._count()
        return self._local


async def _interrupted_run(interrupter: _Interrupter, contended: bool):
    """Run a 3-node workflow whose first node arms `interrupter` (with an external call parked on
    the lock when `contended`); return whether it fired and the trace of a second, full run."""
    rec = Recorder()
    external: dict = {}

    @Node()
    async def first(pc: WorkflowInterpreter):
        if contended and "call" not in external:
            external["call"] = asyncio.ensure_future(pc.call_sub([2], interrupt=True))
            await asyncio.sleep(0)
        interrupter.arm()

    interp = WorkflowInterpreter(NodeCompose(first, rec.act("b"), rec.act("c")).render())
    sys.settrace(interrupter)
    try:
        await interp.run()
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(None)
    if contended:
        await asyncio.wait_for(external["call"], 10)
    assert not interp._interpret_lock.locked()
    interp.reset()
    rec.trace.clear()
    await asyncio.wait_for(interp.run(), 10)
    return interrupter.fired, rec.trace


@pytest.mark.parametrize("contended", [False, True], ids=["alone", "waiter"])
@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_keyboard_interrupt_inside_the_lock_release_leaves_the_lock_free(loop_name, contended):
    interp = WorkflowInterpreter(NodeCompose(Recorder().act("x")).render())
    kind = type(interp._interpret_lock)
    release = getattr(kind, "_release", kind.async_release)  # what the loop calls (a C method: not traced)
    code = release.__code__ if isinstance(release, types.FunctionType) else None  # compiled: nothing to trace
    at = 1
    while True:
        loop = new_loop(loop_name)
        try:
            fired, trace = loop.run_until_complete(_interrupted_run(_Interrupter(code, at), contended))
        finally:
            loop.close()
        assert trace == ["b", "c"]
        if not fired:
            break
        at += 1
    assert (at > 1) == (code is not None)
