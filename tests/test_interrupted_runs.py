"""A BaseException landing anywhere in a run leaves the interpreter idle and reusable.

A KeyboardInterrupt can land between any two steps of the run's start and end: in the pure build
inside the core's own frames, in both builds inside the Python layer's, and inside any Python code
the compiled core calls. Two injectors cover that:

- `_Cutter` (a trace function) raises at the n-th trace event (a call or a line) of the package's
  code in the run's task; the test sweeps n over every event of the run, so no point is missed;
- `_StartCutter` does the same at the n-th bytecode of the run's start (up to its first node), so
  a cut between two instructions of one line (the two stores of the run's claim) is not missed;
- `_Alarm` (a real SIGALRM whose handler raises) lands where the interpreter checks for signals,
  the compiled core's C code included, at spread delays.

After each cut the test asks what a user would: the run is not running, the lock is free, a new
`run()` is accepted (from a new task and from the task that caught the interrupt), and after
`reset()` a full run does the whole work again.
"""

from __future__ import annotations

import asyncio
import dis
import linecache
import os
import signal
import sys

import pytest

import amrita_sense
from amrita_sense import NodeCompose, WorkflowInterpreter
from amrita_sense.durable import Checkpointing, MemoryCheckpointStore
from amrita_sense.hook.matcher import Depends
from amrita_sense.node.wrapper import Node
from support.drivers import drive
from support.dual import new_loop
from support.sampling import sweep_positions

# A cut can land in a weakref callback the collector runs inside the run's task; Python reports it
# as unraisable and goes on, which is what this module expects of it.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

LOOPS = ["asyncio", "uvloop"]
DRIVERS = ["run", "steps", "checkpointed", "depends"]
PACKAGE_DIR = os.path.dirname(amrita_sense.__file__)
_NOP = dis.opmap["NOP"]
SWEEP_CAP = 20_000
"""More trace events than any of these runs has (a sweep that reaches it fails: the run never ends)."""


def _workflow(trace: list) -> NodeCompose:
    @Node(wrap_to_async=False)
    def first(x: int = 0):
        trace.append("a")

    @Node(wrap_to_async=False)
    def second():
        trace.append("b")

    return NodeCompose(first, second)


def _provider() -> int:
    return 1


def _interpreter(driver: str, trace: list) -> WorkflowInterpreter:
    graph = _workflow(trace).render()
    if driver == "depends":  # a `Depends` in the pools: resolved by the run's start work
        return WorkflowInterpreter(graph, extra_kwargs={"x": Depends(_provider)})
    interp = WorkflowInterpreter(graph)
    if driver == "checkpointed":
        interp.checkpointing = Checkpointing(MemoryCheckpointStore(), "run")
    return interp


async def _drive(interp: WorkflowInterpreter, driver: str) -> None:
    await drive(interp, "steps" if driver == "steps" else "run")


def _outside_handlers(frame) -> bool:
    """True at a line event no asynchronous exception can land at: a NOP (a `try` line, a `break`
    inside a `try` whose `finally` follows) and the exit of a `with` block, which the compiler
    leaves outside the exception handlers around them. A signal lands only where the interpreter
    checks for one (a call's start or end, a loop's jump back); these hold neither, yet a trace
    function can raise there."""
    if frame.f_code.co_code[frame.f_lasti] == _NOP:
        return True
    return linecache.getline(frame.f_code.co_filename, frame.f_lineno).lstrip().startswith("with ")


class _Cutter:
    """A trace function raising KeyboardInterrupt at the `at`-th trace event of the package's code
    in the task that armed it."""

    def __init__(self, at: int):
        self.at, self.seen, self.task, self.fired, self.where = at, 0, None, False, ""

    def arm(self) -> None:
        self.task = asyncio.current_task()

    def _count(self, frame, event: str) -> None:
        if self.fired or self.task is None or asyncio.current_task() is not self.task:
            return
        self.seen += 1
        if self.seen == self.at:
            self.fired = True
            code = frame.f_code
            self.where = f"cut at {event} of {code.co_name} ({os.path.basename(code.co_filename)}:{frame.f_lineno})"
            raise KeyboardInterrupt

    def _local(self, frame, event, arg):
        if event == "line" and not _outside_handlers(frame):
            self._count(frame, event)
        return self._local

    def __call__(self, frame, event, arg):
        if not frame.f_code.co_filename.startswith(PACKAGE_DIR):
            return None
        self._count(frame, event)
        return self._local


def _assert_idle_and_reusable(loop, interp: WorkflowInterpreter, driver: str, trace: list, where: str = "") -> None:
    assert not interp.is_running, where
    assert not interp._interpret_lock.locked(), where
    loop.run_until_complete(asyncio.wait_for(_drive(interp, driver), 10))  # accepted without reset()
    interp.reset()
    trace.clear()
    loop.run_until_complete(asyncio.wait_for(_drive(interp, driver), 10))
    assert trace == ["a", "b"]


async def _cut_run(interp: WorkflowInterpreter, driver: str, cutter: _Cutter, again_here: bool) -> None:
    """One run with `cutter` set; with `again_here`, a second run from the task that caught the cut."""
    cutter.arm()
    sys.settrace(cutter)
    try:
        await _drive(interp, driver)
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(None)
    if again_here and cutter.fired:
        assert not interp.is_running, cutter.where
        await asyncio.wait_for(_drive(interp, driver), 10)


async def _cut_start(interp: WorkflowInterpreter, driver: str, cutter: _StartCutter) -> None:
    """One run with `cutter` installed (a trace function or a monitoring tool)."""
    cutter.arm()
    cutter.install()
    try:
        await _drive(interp, driver)
    except KeyboardInterrupt:
        pass
    finally:
        cutter.remove()


@pytest.mark.parametrize("again_here", [False, True], ids=["new-task", "same-task"])
@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_keyboard_interrupt_at_any_trace_event_leaves_the_interpreter_idle(loop_name, driver, again_here):
    cuts = 0
    for at in sweep_positions(SWEEP_CAP):
        trace: list = []
        interp = _interpreter(driver, trace)
        cutter = _Cutter(at)
        loop = new_loop(loop_name)
        try:
            loop.run_until_complete(_cut_run(interp, driver, cutter, again_here))
            _assert_idle_and_reusable(loop, interp, driver, trace, cutter.where)
        finally:
            loop.close()
        if not cutter.fired:
            break
        cuts += 1
    else:
        pytest.fail(f"a run still cut at trace event {SWEEP_CAP}: it never ends")
    assert cuts > 0  # the sweep cut the run at least once


class _StartCutter:
    """A trace function raising KeyboardInterrupt before the `at`-th bytecode of the package's code
    that the task that armed it runs before the run's first node starts (`started()`): every
    instruction of the run's start in turn, the pure core's own included (the compiled core's C
    functions run none). A NOP is skipped: no asynchronous exception lands there (`_outside_handlers`)."""

    def __init__(self, at: int, started) -> None:
        self.at, self.started, self.seen, self.task, self.fired, self.where = at, started, 0, None, False, ""
        self.code_name = ""

    def arm(self) -> None:
        self.task = asyncio.current_task()

    def _local(self, frame, event, arg):
        if event != "opcode" or self.fired or self.task is None or self.started():
            return self._local
        if asyncio.current_task() is not self.task or frame.f_code.co_code[frame.f_lasti] == _NOP:
            return self._local
        self.seen += 1
        if self.seen == self.at:
            self.fired = True
            code = frame.f_code
            self.code_name = code.co_name
            self.where = (
                f"cut before {dis.opname[code.co_code[frame.f_lasti]]} at offset {frame.f_lasti} of "
                f"{code.co_name} ({os.path.basename(code.co_filename)}:{frame.f_lineno})"
            )
            raise KeyboardInterrupt
        return self._local

    def __call__(self, frame, event, arg):
        if not frame.f_code.co_filename.startswith(PACKAGE_DIR):
            return None
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return self._local

    def install(self) -> None:
        sys.settrace(self)

    def remove(self) -> None:
        sys.settrace(None)


class _MonitoredStartCutter(_StartCutter):
    """The same cut through `sys.monitoring`'s INSTRUCTION events (3.12+): there, opcode events
    asked for in a trace function's call event do not reach every frame (Debian's 3.14 and 3.15
    traced none of `_open_run`'s or `_start_run`'s bytecodes once the interpreter had run a
    graph), while a monitoring tool sees each instruction of every code object."""

    def install(self) -> None:
        monitoring = sys.monitoring
        monitoring.use_tool_id(_TOOL, "start cutter")
        monitoring.register_callback(_TOOL, monitoring.events.INSTRUCTION, self._instruction)
        monitoring.set_events(_TOOL, monitoring.events.INSTRUCTION)

    def remove(self) -> None:
        monitoring = sys.monitoring
        monitoring.set_events(_TOOL, 0)
        monitoring.register_callback(_TOOL, monitoring.events.INSTRUCTION, None)
        monitoring.free_tool_id(_TOOL)
        monitoring.restart_events()  # the locations this cutter disabled are seen by the next one

    def _instruction(self, code, offset):
        if not code.co_filename.startswith(PACKAGE_DIR):
            return sys.monitoring.DISABLE
        if self.fired or self.task is None or self.started() or asyncio.current_task() is not self.task:
            return None
        if code.co_code[offset] == _NOP:
            return None
        self.seen += 1
        if self.seen == self.at:
            self.fired = True
            self.code_name = code.co_name
            line = next((line for start, end, line in code.co_lines() if start <= offset < end), None)
            self.where = (
                f"cut before {dis.opname[code.co_code[offset]]} at offset {offset} of "
                f"{code.co_name} ({os.path.basename(code.co_filename)}:{line})"
            )
            raise KeyboardInterrupt
        return None


_TOOL = 4  # a sys.monitoring tool id with no predefined use (0 debugger, 1 coverage, 2 profiler, 5 optimizer)
START_CUTTER = _MonitoredStartCutter if sys.version_info >= (3, 12) else _StartCutter


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_keyboard_interrupt_at_any_bytecode_of_the_run_start_leaves_the_interpreter_idle(loop_name, driver):
    """Issue 43: the pure build's claim stored the running mark, then the claim; a KeyboardInterrupt
    between the two stores left the interpreter running with nobody's claim, for good. The compiled
    core's claim is C (no bytecode in between); there the sweep cuts the Python layer's start only."""
    cut_in: set[str] = set()
    for at in sweep_positions(SWEEP_CAP):
        trace: list = []
        interp = _interpreter(driver, trace)
        cutter = START_CUTTER(at, trace.__len__)
        loop = new_loop(loop_name)
        try:
            loop.run_until_complete(_cut_start(interp, driver, cutter))
            _assert_idle_and_reusable(loop, interp, driver, trace, cutter.where)
        finally:
            loop.close()
        if not cutter.fired:
            break
        cut_in.add(cutter.code_name)
    else:
        pytest.fail(f"a start still cut at bytecode {SWEEP_CAP}: it never reaches its first node")
    assert cut_in  # the sweep cut the start at least once
    if amrita_sense.IMPLEMENTATION == "python":
        assert "_start_run" in cut_in, cut_in  # the sweep went through the core's claim


class _Alarm:
    """A SIGALRM after `delay` seconds whose handler raises KeyboardInterrupt once, while armed, in
    the package's code (a Python frame of the layer or of the pure core, or the frame the compiled
    core runs under); elsewhere it tries again a little later. An interrupt inside the event loop's
    own code can lose the loop's tasks, which no library can repair."""

    def __init__(self) -> None:
        self.armed = False
        self.fired = False
        self._previous = signal.signal(signal.SIGALRM, self._handle)

    def _handle(self, signum, frame):
        if not self.armed:
            return
        if frame is None or not frame.f_code.co_filename.startswith(PACKAGE_DIR):
            signal.setitimer(signal.ITIMER_REAL, 5e-5)  # outside the run's code (the loop's): later
            return
        self.armed = False
        self.fired = True
        raise KeyboardInterrupt

    def start(self, delay: float) -> None:
        self.fired = False
        self.armed = True
        signal.setitimer(signal.ITIMER_REAL, delay)

    def stop(self) -> None:
        self.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)

    def close(self) -> None:
        self.stop()
        signal.signal(signal.SIGALRM, self._previous)


def _alarmed_trial(loop_name: str, driver: str, alarm: _Alarm, delay: float) -> bool:
    """One run with an alarm after `delay`; where it landed outside the run's task, the task is
    cancelled as `asyncio.run` does (or closed, when the loop lost it). True when the alarm fired."""
    trace: list = []
    interp = _interpreter(driver, trace)
    loop = new_loop(loop_name)
    try:
        task = loop.create_task(_drive(interp, driver))
        try:
            alarm.start(delay)
            loop.run_until_complete(task)
        except KeyboardInterrupt:
            pass
        finally:
            alarm.stop()
        if not task.done():
            task.cancel()
            loop.run_until_complete(asyncio.wait([task], timeout=10))
        if not task.done():  # the alarm landed in the loop between taking the task's step and running it
            task.get_coro().close()  # what collecting the lost task does: its `finally` clauses run
        fired = alarm.fired
        _assert_idle_and_reusable(loop, interp, driver, trace)
    finally:
        loop.close()
    return fired


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")
@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_keyboard_interrupt_from_a_signal_leaves_the_interpreter_idle(loop_name, driver):
    alarm = _Alarm()
    fired = 0
    try:
        for trial in range(200):
            delay = 1e-6 * (1 + trial % 100)  # 1 to 100 us: the run's first and last instructions
            fired += _alarmed_trial(loop_name, driver, alarm, delay)
    finally:
        alarm.close()
    assert fired > 0


def _unguarded_signal_points(func) -> list[str]:
    """The places in `func` where a signal can land (a loop's back-edge, a call) without reaching the
    exception handler around them, between the first and the last instruction a handler covers. A
    back-edge counts twice: Python 3.14 looks its handler up at the jump, 3.11 at the instruction
    before the jump's target, and both must find the jump's own handler."""
    code = func.__code__
    entries = dis.Bytecode(code).exception_entries

    def handler(offset: int | None) -> int | None:
        return next((entry.target for entry in entries if entry.start <= offset < entry.end), None)

    instructions = list(dis.get_instructions(code))
    before = {after.offset: ins.offset for ins, after in zip(instructions, instructions[1:])}
    first = min(entry.start for entry in entries)
    last = max(entry.end for entry in entries)
    found = []
    for ins in instructions:
        if not first <= ins.offset < last:
            continue
        own = handler(ins.offset)
        if ins.opname == "JUMP_BACKWARD":
            if own is None or handler(before.get(ins.argval)) != own:
                found.append(f"the back-edge at line {ins.positions.lineno}")
        elif ins.opname.startswith("CALL") and ins.opname != "CALL_INTRINSIC_1" and own is None:
            found.append(f"{ins.opname} at line {ins.positions.lineno}")
    return found


def test_the_step_loop_has_no_signal_point_outside_its_handlers():
    """Python 3.14's compiler leaves a loop's back-edge after an `if` with no `else` outside the
    handlers around the loop, and 3.11 looks a back-edge's handler up at the instruction before the
    loop's head: a KeyboardInterrupt landing there skipped the run's end (the run stayed running for
    good). The step loop is written so that every such point reaches its handler."""
    from amrita_sense.runtime.steps import step_loop

    assert _unguarded_signal_points(step_loop) == []
