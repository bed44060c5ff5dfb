"""The worker of the crash fuzzer (`test_fuzz_crash.py`): runs call sequences on one build.

Run as `python fuzz_worker.py`; the environment picks the build (AMRITA_SENSE_REQUIRE_EXTENSIONS=1
or AMRITA_SENSE_NO_EXTENSIONS=1). Each line on stdin is one sequence (JSON, see `Sequence`); the
worker answers with one line: the outcome of every call, "ok" or the name of the exception class.
A sequence gets a fresh world (vectors, stacks, a stream, an interpreter on a graph of script
nodes and built-in instructions) and an event loop of the kind it names. A call that does not
finish within `CALL_TIMEOUT` seconds answers "HANG"; a worker killed by a signal or stuck outside
the event loop is the parent's to notice.

Values and calls are symbolic, so the same sequence means the same thing in both builds:
a value is `[kind, data]` (see `World.value`), a call is `[target, index, action, *values]`.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from typing import Any

from amrita_sense.runtime.workflow import WorkflowInterpreter

CALL_TIMEOUT = 3.0
STEP_BUDGET = 60  # script-node executions per run: keeps random jumps from looping forever
LOOPING_STEPS = 20  # after this many, every script node returns False, so loops exit
SCRIPT_NODES = 8


class Budget(BaseException):
    """Not an Exception: the run ends like a panic the engine does not absorb."""


class World:
    """The objects one sequence works on."""

    def __init__(self, scripts: dict[str, list]):
        from amrita_sense import PointerVector, Stack
        from amrita_sense.streaming import SuspendObjectStream

        self.scripts = {int(k): v for k, v in scripts.items()}
        self.outcomes: list[str] = []
        self.steps = 0
        self.pvs = [PointerVector([0]), PointerVector([1, 0])]
        self.stacks = [Stack(4)]
        self.streams = [SuspendObjectStream(queue_size=2, queue_timeout=0.05)]
        self.graph = self._graph()
        self.interps = [WorkflowInterpreter(self.graph, self.streams[0], extra_args=(7,), extra_kwargs={"name": "n"})]
        self.classes = {"PointerVector": PointerVector, "Stack": Stack, "WorkflowInterpreter": WorkflowInterpreter}

    # ----- the graph: script nodes that run calls on the interpreter, between built-in instructions -----

    def _script(self, k: int, mode: str):
        from amrita_sense.node.wrapper import Node

        world = self

        def body(pc: WorkflowInterpreter):
            world.steps += 1
            if world.steps > STEP_BUDGET:
                raise Budget()
            for call in world.scripts.get(k, ()):
                world.outcomes.append(world.call_sync(call, pc))
            return world.steps < LOOPING_STEPS and world.steps % 3  # conditions turn false: runs end

        async def async_body(pc: WorkflowInterpreter):
            return body(pc)

        body.__name__ = async_body.__name__ = f"s{k}"
        if mode == "async":
            return Node(tag=f"s{k}")(async_body)
        return Node(tag=f"s{k}", wrap_to_async=mode == "thread")(body)

    def _graph(self):
        from amrita_sense import NodeCompose
        from amrita_sense.instructions import ALIAS, CALL, FN, IF, WHILE, Try
        from amrita_sense.instructions.native import NATIVE_IF
        from amrita_sense.node import DLLCompose

        s = [self._script(k, ("inline", "async", "thread")[k % 3]) for k in range(SCRIPT_NODES)]
        return NodeCompose(
            s[0],
            ALIAS(s[1], "mid"),
            IF(s[2], s[3]).ELSE(s[4]),
            Try(s[5]).CATCH(Exception, s[6]),
            NodeCompose(s[7], s[0]),
            WHILE(s[1]).ACTION(s[2]),
            NATIVE_IF(s[3], NodeCompose(s[4], s[5])),
            CALL("fn"),
            DLLCompose(NodeCompose(s[6], s[7])),
            FN("fn", s[0]),
        ).render()

    # ----- values ---------------------------------------------------------------------------------

    def value(self, spec: list) -> Any:
        kind, data = spec
        if kind == "lit":
            return data
        if kind == "float":
            return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(data, data)
        if kind == "tuple":
            return tuple(self.value(item) for item in data)
        if kind == "list":
            return [self.value(item) for item in data]
        if kind == "pv":
            return self.pvs[data % len(self.pvs)]
        if kind == "stack":
            return self.stacks[data % len(self.stacks)]
        if kind == "interp":
            return self.interps[data % len(self.interps)]
        return self._made(kind)

    def _made(self, kind: str) -> Any:
        from amrita_sense._core import InterpretLock

        if kind == "obj":
            return object()
        if kind == "exc":
            return ValueError("fuzz")
        if kind == "exc_class":
            return KeyError
        if kind == "ctx":
            return self.interps[0].dump_interpreter()
        if kind == "lock":
            return InterpretLock()
        if kind == "stream":
            return self.streams[0]
        if kind == "graph":
            return self.graph
        if kind == "middleware":

            async def middleware(pc):
                return await pc._call()

            return middleware
        if kind == "future":
            return asyncio.get_running_loop().create_future()
        raise ValueError(f"unknown value kind {kind!r}")

    # ----- calls ----------------------------------------------------------------------------------

    def target(self, name: str, index: int, pc: Any = None) -> Any:
        interp = pc if pc is not None else self.interps[index % len(self.interps)]
        return {
            "pv": lambda: self.pvs[index % len(self.pvs)],
            "stack": lambda: self.stacks[index % len(self.stacks)],
            "stream": lambda: self.streams[0],
            "interp": lambda: interp,
            "ptr": lambda: interp._pointer,
            "rets": lambda: interp._ret_addr_stack,
            "ctxs": lambda: interp._context_stack,
            "lock": lambda: interp._interpret_lock,
        }[name]()

    def call_sync(self, call: list, pc: Any) -> str:
        """A call made by a script node inside a run (sync; coroutines are closed unawaited)."""
        try:
            result = self._apply(call, pc)
            if asyncio.iscoroutine(result):
                result.close()
            return "ok"
        except Budget:
            raise
        except BaseException as exc:  # noqa: BLE001 - every outcome is recorded
            if type(exc).__name__ in ("InterruptNotice", "InterruptKeepContext", "BreakLoop"):
                raise
            return type(exc).__name__

    async def call(self, call: list) -> str:
        try:
            result = self._apply(call, None)
            if asyncio.iscoroutine(result):  # an async call; a future returned as a value is just a value
                task = asyncio.ensure_future(result)
                done, _ = await asyncio.wait({task}, timeout=CALL_TIMEOUT)
                if not done:
                    task.cancel()
                    return "HANG"
                task.result()
            return "ok"
        except BaseException as exc:  # noqa: BLE001 - every outcome is recorded
            return type(exc).__name__

    def _apply(self, call: list, pc: Any) -> Any:
        target_name, index, action, *specs = call
        target = self.target(target_name, index, pc)
        args = [self.value(spec) for spec in specs]
        return ACTIONS[action](self, target, *args)


def _new_vector(world: World, _target: Any, base: Any) -> None:
    world.pvs.append(world.classes["PointerVector"](base))


def _new_stack(world: World, _target: Any, ovf: Any) -> None:
    world.stacks.append(world.classes["Stack"](ovf))


def _fork(world: World, interp: Any, compose: Any, middleware: Any) -> None:
    world.interps.append(interp.fork_interpreter(compose, middleware))


def _new_interp(world: World, _target: Any, stream: Any, stack: Any) -> None:
    world.interps.append(world.classes["WorkflowInterpreter"](world.graph, stream, addr_stack=stack))


async def _step_by(interp: Any, limit: Any) -> None:
    steps = interp.run_step_by()
    try:
        count = 0
        async for _ in steps:
            count += 1
            if count >= min(int(limit) if isinstance(limit, int) else 5, 50):
                break
    finally:
        await steps.aclose()


async def _run(interp: Any) -> None:
    try:
        await interp.run()
    except Budget:
        pass


def _set(target: Any, name: str, value: Any) -> None:
    setattr(target, name, value)


ACTIONS = {
    # PointerVector
    "offset": lambda w, t, v: t.offset(v),
    "offset_far": lambda w, t, v: t.offset_far(v),
    "near_to": lambda w, t, v: t.near_to(v),
    "far_to": lambda w, t, v: t.far_to(v),
    "pv_pop": lambda w, t: t.pop(),
    "append": lambda w, t, v: t.append(v),
    "clear": lambda w, t: t.clear(),
    "copy": lambda w, t: t.copy(),
    "add": lambda w, t, v: t + v,
    "sub": lambda w, t, v: t - v,
    "getitem": lambda w, t, v: t[v],
    "setitem": lambda w, t, i, v: t.__setitem__(i, v),
    "delitem": lambda w, t, i: t.__delitem__(i),
    "len": lambda w, t: len(t),
    "iter": lambda w, t: list(t),
    "bool": lambda w, t: bool(t),
    "eq": lambda w, t, v: t == v,
    "hash": lambda w, t: hash(t),
    "repr": lambda w, t: repr(t),
    "set_base": lambda w, t, v: _set(t, "base_addr", v),
    "get_base": lambda w, t: t.base_addr,
    "new_pv": _new_vector,
    # Stack
    "push": lambda w, t, v: t.push(v),
    "pop": lambda w, t: t.pop(),
    "resize": lambda w, t, v: t.resize(v),
    "set_stack": lambda w, t, v: _set(t, "stack", v),
    "set_ovf": lambda w, t, v: _set(t, "ovf", v),
    "new_stack": _new_stack,
    # the interpreter
    "set_attr": lambda w, t, name, v: _set(t, name, v),
    "get_attr": lambda w, t, name: getattr(t, name),
    "jump_to": lambda w, t, v: t.jump_to(v),
    "jump_near": lambda w, t, v: t.jump_near(v),
    "jump_offset": lambda w, t, v: t.jump_offset(v),
    "jump_far_ptr": lambda w, t, v: t.jump_far_ptr(v),
    "jump_offset_far": lambda w, t, v: t.jump_offset_far(v),
    "jump_to_top": lambda w, t, v: t.jump_to_top(v),
    "jump_offset_top": lambda w, t, v: t.jump_offset_top(v),
    "unmarkup": lambda w, t: t.unmarkup(),
    "rebase_ptr": lambda w, t, v: t.rebase_ptr(v),
    "rebase_context": lambda w, t, v: t.rebase_context(v),
    "dump": lambda w, t: t.dump_interpreter(),
    "reset": lambda w, t: t.reset(),
    "advance_pointer": lambda w, t, v: t.advance_pointer(v),
    "resume_from_halt": lambda w, t: t.resume_from_halt(),
    "find_node_alias": lambda w, t, v: t.find_node_alias(v),
    "rehash_args": lambda w, t: t.rehash_args(),
    "run": lambda w, t: _run(t),
    "step_by": lambda w, t, v: _step_by(t, v),
    "call_sub": lambda w, t, v: t.call_sub(v, interrupt=True),
    "call_offset": lambda w, t, v: t.call_offset(v, interrupt=True),
    "call_near": lambda w, t, v: t.call_near(v, interrupt=True),
    "call_offset_far": lambda w, t, v: t.call_offset_far(v, interrupt=True),
    "fork": _fork,
    "new_interp": _new_interp,
    "terminate": lambda w, t: t.terminate(),
    "wait_all_forks": lambda w, t: t.wait_all_forks(return_exc=True),
    # the lock and the stream
    "locked": lambda w, t: t.locked(),
    "owned": lambda w, t: t.async_owned(),
    "yield_response": lambda w, t, v: t.yield_response(v),
    "send_to_producer": lambda w, t, v: t.send_to_producer(v),
    "drain": lambda w, t: t.drain_producer_input(),
    "resume": lambda w, t: t.resume(),
    "queue_done": lambda w, t: t.set_queue_done(),
}


def _loop(name: str) -> asyncio.AbstractEventLoop:
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run_sequence(sequence: dict) -> list[str]:
    """Run one sequence: the top-level calls in order, then what the script nodes recorded."""

    async def drive() -> list[str]:
        world = World(sequence.get("scripts", {}))
        outcomes = [await world.call(call) for call in sequence["calls"]]
        for interp in world.interps:  # let runs started by a call end before the loop closes
            if interp.is_running:
                interp._pending_stop = True
        return outcomes + ["|"] + world.outcomes

    loop = _loop(sequence.get("loop", "asyncio"))
    try:
        return loop.run_until_complete(drive())
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def main() -> None:
    protocol = sys.stdout
    sys.stdout = sys.stderr  # anything the library prints stays out of the answers
    for line in sys.stdin:
        outcomes = run_sequence(json.loads(line))
        protocol.write(json.dumps(outcomes) + "\n")
        protocol.flush()


if __name__ == "__main__":
    main()
