"""Random workflows for the durable-run tests, with all their node state in one injected object.

The instruction programs of `test_differential_instructions` (branches, loops,
Try, CALL into FN blocks, INVOKE, SUSPEND, failures) and the raw programs of
`test_differential_composes` (nested segments, empty segments, jumps and
pointer writes of every kind, `call_sub` and its variants from user nodes) are
built here with recording nodes whose counters and trace live in a `RunState`
passed in `extra_args`, not in closures. A snapshot taken with `codec=pickle` therefore
carries everything the rest of the run depends on, and a restored run (in a
fresh interpreter, on a freshly built graph, on either core, in another
process) must produce exactly the trace the original would have produced.

`drive` is the driver every test uses: it runs, resumes after halts, recovers
after `ValueError` panics, up to `MAX_RUNS` runs, and returns a comparable record.
"""

from __future__ import annotations

import os
from typing import Any

from test_differential_composes import PROGRAMS as RAW_PROGRAMS
from test_differential_composes import Builder as RawBuilder
from test_differential_instructions import PROGRAMS, Builder

MAX_RUNS = 6
CONTINUING = ("running", "suspended")
"""Snapshot statuses taken in the middle of a run: the restored interpreter continues that run."""

__all__ = [
    "CONTINUING",
    "MAX_RUNS",
    "PROGRAMS",
    "RAW_PROGRAMS",
    "RawStateBuilder",
    "RunState",
    "StateBuilder",
    "drive",
    "passthrough",
]


class RunState:
    """Everything a program's nodes remember: the trace, per-node call counts, runs started.

    `sink` (a file path) also appends every trace entry, one JSON-ish line each,
    with one `write` per line so that a killed process never leaves half a line.
    """

    def __init__(self, sink: str | None = None, delay: float = 0.0) -> None:
        self.trace: list[str] = []
        self.calls: dict[str, int] = {}
        self.runs = 0
        self.sink = sink
        self.delay = delay

    def record(self, name: str) -> None:
        self.trace.append(name)
        self.write(name)
        if self.delay:
            import time

            time.sleep(self.delay)

    def write(self, line: str) -> None:
        if self.sink is not None:
            fd = os.open(self.sink, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, (line + "\n").encode())
            finally:
                os.close(fd)

    def count(self, name: str) -> int:
        """How many times `name` ran before, then count this call."""
        seen = self.calls.get(name, 0)
        self.calls[name] = seen + 1
        return seen


class StateRecorder:
    """`dual.Recorder`'s node makers (act, cond, counter), with the state in an injected `RunState`."""

    def __init__(self, sense: Any) -> None:
        self._node = sense.sub("node.wrapper").Node
        self.trace = None  # the trace is the state's

    def _make(self, name: str, body: Any, mode: str) -> Any:
        if mode == "async":

            async def step(state: RunState) -> Any:
                state.record(name)
                return body(state)

        else:

            def step(state: RunState) -> Any:
                state.record(name)
                return body(state)

        step.__name__ = f"n_{name}"
        return self._node(wrap_to_async=mode == "thread")(step)

    def act(self, name: str, ret: Any = None, *, exc: BaseException | None = None, mode: str = "inline") -> Any:
        def body(state: RunState) -> Any:
            if exc is not None:
                raise exc
            return ret

        return self._make(name, body, mode)

    def cond(self, name: str, *values: Any, mode: str = "inline") -> Any:
        return self._make(name, lambda state: values[min(state.count(name), len(values) - 1)], mode)

    def counter(self, name: str, limit: int, mode: str = "inline") -> Any:
        def step(state: RunState) -> bool:
            calls = state.count(name) + 1
            state.record(f"{name}{calls}")
            return calls <= limit

        step.__name__ = f"n_{name}"
        return self._node(wrap_to_async=mode == "thread")(step)


class StateBuilder(Builder):
    """The differential instruction builder, making its nodes with a `StateRecorder`."""

    def __init__(self, sense: Any, spec: dict) -> None:
        super().__init__(sense, spec)
        self.rec = StateRecorder(sense)


class RawStateBuilder(RawBuilder):
    """The differential foundation builder, keeping its trace and "act only `times` times" counters in the
    `RunState` of the interpreter's pools (`pc._ava_args[1]`)."""

    def record(self, node_id: int, pc: Any, *extra: Any) -> None:
        pc._ava_args_v[1].record(repr((node_id, list(pc._pointer), len(pc._ret_addr_stack), *extra)))

    @staticmethod
    def first_time(node_id: int, make_exc: Any) -> Any:
        def body(pc: Any) -> Any:
            if not pc._ava_args_v[1].count(f"first{node_id}"):
                raise make_exc()
            return node_id

        return body

    def _jump(self, node_id: int, addr: list[int], width: int, action: tuple, times: int, mode: str) -> Any:
        move = self.mover(action, addr, width)

        def body(pc: Any) -> Any:
            if pc._ava_args_v[1].count(f"jump{node_id}") < times:
                move(pc)
            return ("j", node_id)

        return self.wrap(node_id, body, mode)

    def _call(self, node_id: int, addr: list[int], width: int, action: tuple, times: int, extras: bool) -> Any:
        kind, pick = action
        target = self.argument(kind, pick, addr, width)
        record = self.record
        args, kwargs = (("extra",), {"unused_extra": node_id}) if extras else ((), {})

        async def step(pc: self.interp_type) -> Any:
            record(node_id, pc)
            if pc._ava_args_v[1].count(f"call{node_id}") >= times:
                return ("c", node_id)
            result = await getattr(pc, kind)(target.copy() if isinstance(target, list) else target, *args, **kwargs)
            record(node_id, pc, "back", result)
            return ("c", node_id, result)

        step.__name__ = f"n{node_id}"
        return self.node()(step)


async def passthrough(interp: Any) -> Any:
    """A middleware that changes nothing (it only forces the general path)."""
    return await interp._call()


def _wants_a_run(interp: Any, state: RunState) -> bool:
    if state.runs >= MAX_RUNS:
        return False
    if state.runs == 0:
        return True
    exc = interp.get_exception()
    if exc is not None:
        return isinstance(exc, ValueError)
    return bool(interp._flag_bits & 2)  # halted: the next run steps past the halting node


async def drive(interp: Any, state: RunState, *, continuing: bool = False) -> tuple:
    """Run to the program's end; with `continuing`, first finish the run the interpreter is in."""
    while continuing or _wants_a_run(interp, state):
        if not continuing:
            state.runs += 1
        continuing = False
        try:
            await interp.run()
        except Exception:  # noqa: BLE001 - recorded through get_exception()
            pass
    return record_of(interp, state)


def record_of(interp: Any, state: RunState) -> tuple:
    exc = interp.get_exception()
    error = None if exc is None else (type(exc).__name__, str(exc))
    return tuple(state.trace), error, list(interp._pointer), int(interp._flag_bits), state.runs
