"""Native opcodes are an optimisation only: every random program gives the same trace with them
(`run()`, the fast path) and without them (`run_step_by()`, and `run()` under a pass-through
middleware, run each node's own Python function), also when a condition, body, handler, THEN,
FINALLY or ELSE moves the pointer or the stacks (`movers`), and when it is an `async def` node that
finishes at once or suspends (a native opcode starts it inline and parks when it suspends), and
when it is a default `@Node()` sync node (a worker thread runs it, in a batch with the opcodes and
nodes around it that can run there).
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.exceptions import BreakLoop, InterruptKeepContext
from amrita_sense.instructions import ALIAS, ARCHIVED_NODES, CALL, DO, FN, IF, INVOKE, JMP, NOP, RET, WHILE, Try
from amrita_sense.instructions.native import BREAK_LOOP, CONTINUE, NATIVE_DO, NATIVE_IF, NATIVE_WHILE
from support.movers import MOVERS, PLACES, SLOTS, Api, random_program, record, slot_program
from support.sampling import sized

leaf = st.tuples(st.just("rec"), st.sampled_from(["sync", "async", "static"]))
branch = st.tuples(st.just("if"), st.lists(st.booleans(), min_size=1, max_size=3), st.booleans())
loop = st.tuples(st.sampled_from(["while", "do"]), st.integers(0, 4), st.sampled_from(["plain", "break"]))
call = st.sampled_from([("call",), ("invoke",)])
native_branch = st.tuples(
    st.just("nif"),
    st.lists(st.tuples(st.booleans(), st.integers(1, 3)), min_size=1, max_size=3),
    st.integers(0, 3),
)
native_loop = st.tuples(
    st.sampled_from(["nwhile", "ndo"]),
    st.integers(0, 3),
    st.sampled_from(["plain", "break", "continue"]),
    st.lists(st.one_of(leaf, native_branch), min_size=1, max_size=3),
)
try_block = st.tuples(
    st.just("try"),
    st.sampled_from(["ok", "ValueError", "KeyError"]),
    st.lists(st.sampled_from([ValueError, KeyError, LookupError]), max_size=2),
    st.booleans(),
    st.booleans(),
)
item = st.one_of(leaf, branch, loop, call, st.just(("nop",)), native_branch, native_loop, try_block)
program = st.lists(st.one_of(item, st.lists(item, min_size=1, max_size=4)), min_size=1, max_size=12)


STEP_BUDGET = 2000
"""Recorded calls (and steps, for the drivers that can count them) per run: a program that does not
end fails the comparison with `OverBudget` on the same record, instead of hanging the suite."""


class OverBudget(BaseException):
    """The run went over `STEP_BUDGET` (not an `Exception`: no CATCH handler takes it)."""


class _Trace(list):
    def append(self, entry) -> None:
        if len(self) >= STEP_BUDGET:
            raise OverBudget()
        super().append(entry)


class Builder:
    """Builds a fresh graph from a spec; every node records (name, pointer) when it runs."""

    def __init__(self) -> None:
        self.trace: list = _Trace()
        self.count = 0

    def name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}{self.count}"

    def rec(self, style: str | None = None):
        """A recording node; without a `style`, sync, async, suspending ("yield") or run by a
        worker thread ("thread") in turn."""
        name = self.name("n")
        trace = self.trace
        style = style or ("sync", "async", "yield", "thread")[self.count % 4]
        if style == "static":  # no parameters: its plan is known before the first call

            def body():
                trace.append((name,))
                return name

        elif style == "async":

            async def body(pc: WorkflowInterpreter):
                trace.append((name, list(pc._pointer), len(pc._ret_addr_stack)))
                return name

        elif style == "yield":

            async def body(pc: WorkflowInterpreter):
                trace.append((name, list(pc._pointer), len(pc._ret_addr_stack)))
                await asyncio.sleep(0)
                trace.append((name, "resumed", list(pc._pointer), len(pc._ret_addr_stack)))
                return name

        else:

            def body(pc: WorkflowInterpreter):
                trace.append((name, list(pc._pointer), len(pc._ret_addr_stack)))
                return name

        return Node(wrap_to_async=style == "thread", tag=name)(body)

    def answers(self, values: list[bool]):
        name = self.name("c")
        trace = self.trace
        queue = list(values)

        def cond(pc: WorkflowInterpreter):
            trace.append((name, list(pc._pointer), len(pc._ret_addr_stack)))
            return queue.pop(0) if queue else False

        def static_cond():
            trace.append((name,))
            return queue.pop(0) if queue else False

        async def async_cond(pc: WorkflowInterpreter):
            trace.append((name, list(pc._pointer), len(pc._ret_addr_stack)))
            return queue.pop(0) if queue else False

        async def yielding_cond(pc: WorkflowInterpreter):
            trace.append((name, list(pc._pointer), len(pc._ret_addr_stack)))
            await asyncio.sleep(0)
            return queue.pop(0) if queue else False

        kinds = (static_cond, cond, async_cond, yielding_cond, cond)
        kind = self.count % 5
        return Node(wrap_to_async=kind == 4, tag=name)(kinds[kind])  # the last: on a worker thread

    def loop_body(self, mode: str, limit: int):
        name = self.name("b")
        trace = self.trace
        runs = [0]

        def body(pc: WorkflowInterpreter):
            runs[0] += 1
            trace.append((name, list(pc._pointer), len(pc._ret_addr_stack)))
            if mode == "break" and runs[0] >= limit:
                raise BreakLoop()

        async def yielding_body(pc: WorkflowInterpreter):
            await asyncio.sleep(0)
            body(pc)

        kind = self.count % 3
        return Node(wrap_to_async=kind == 2, tag=name)(yielding_body if kind == 1 else body)

    def item(self, spec):
        kind = spec[0]
        if kind == "rec":
            return self.rec(spec[1])
        if kind == "nop":
            return NOP
        if kind == "if":
            conds, has_else = spec[1], spec[2]
            clause = IF(self.answers([conds[0]]), self.rec())
            for value in conds[1:]:
                clause = clause.ELIF(self.answers([value]), self.rec())
            return clause.ELSE(self.rec()) if has_else else clause
        if kind == "while":
            limit, mode = spec[1], spec[2]
            return WHILE(self.answers([True] * (limit + 1))).ACTION(self.loop_body(mode, max(limit, 1)))
        if kind == "do":
            limit, mode = spec[1], spec[2]
            return DO(self.loop_body(mode, max(limit, 1))).WHILE(self.answers([True] * limit))
        if kind == "nif":
            return self.native_if(spec[1], spec[2])
        if kind in ("nwhile", "ndo"):
            return self.native_loop(*spec)
        if kind == "try":
            return self.try_block(*spec[1:])
        if kind == "invoke":
            return INVOKE("sub")
        return CALL("sub")

    def try_block(self, outcome: str, catches, with_then: bool, with_finally: bool):
        name = self.name("t")
        trace = self.trace

        def body():
            trace.append((name,))
            if outcome != "ok":
                raise {"ValueError": ValueError, "KeyError": KeyError}[outcome](name)

        clause = Try(Node(wrap_to_async=False, tag=name)(body))
        for exc in catches:
            clause = clause.CATCH(exc, self.rec("static" if self.count % 2 else "sync"))
        if with_then:
            clause = clause.THEN(self.rec("static"))
        if with_finally or not catches:
            clause = clause.FINALLY(self.rec())
        return clause

    def native_body(self, size: int):
        """A single node (size 1) or a composition of `size` nodes."""
        if size == 1:
            return self.rec("static" if self.count % 2 else "sync")
        return NodeCompose(*[self.rec() for _ in range(size)])

    def native_if(self, branches, else_size: int):
        (taken, size), *others = branches
        clause = NATIVE_IF(self.answers([taken]), self.native_body(size))
        for taken, size in others:
            clause = clause.ELIF(self.answers([taken]), self.native_body(size))
        return clause.ELSE(self.native_body(else_size)) if else_size else clause

    def native_loop(self, kind: str, limit: int, mode: str, body):
        parts = [self.item(spec) for spec in body]
        if mode == "break":
            parts = [*parts, BREAK_LOOP(), self.rec()]
        elif mode == "continue":
            parts = [*parts, CONTINUE(), self.rec()]
        if kind == "nwhile":
            return NATIVE_WHILE(self.answers([True] * limit)).ACTION(NodeCompose(*parts))
        return NATIVE_DO(NodeCompose(*parts)).WHILE(self.answers([True] * limit))

    def build(self, spec):
        parts = []
        for entry in spec:
            if isinstance(entry, list):
                parts.append(NodeCompose(*[self.item(e) for e in entry]))
            else:
                parts.append(self.item(entry))
        subroutine = ARCHIVED_NODES(ALIAS(self.rec("static"), "sub"), self.rec(), RET())
        return NodeCompose(*parts, JMP("end"), subroutine, ALIAS(self.rec(), "end")).render()


async def pass_through(pc: WorkflowInterpreter):
    return await pc._call()


def counting_pass_through():
    """`pass_through` that raises `OverBudget` after `STEP_BUDGET` steps."""
    steps = [0]

    async def middleware(pc: WorkflowInterpreter):
        steps[0] += 1
        if steps[0] > STEP_BUDGET:
            raise OverBudget()
        return await pc._call()

    return middleware


async def _drive(interp: WorkflowInterpreter, driver: str) -> None:
    if driver != "steps":
        await asyncio.wait_for(interp.run(), 60)  # the compiled loop yields to the event loop every ms
        return
    steps = 0
    async for _ in interp.run_step_by():
        steps += 1
        if steps > STEP_BUDGET:
            raise OverBudget()


async def run_spec(spec, driver: str):
    """Run `spec` with `run()` ("run"), `run_step_by()` ("steps") or `run()` under a pass-through
    middleware ("generic")."""
    builder = Builder()
    middleware = counting_pass_through() if driver == "generic" else None
    interp = WorkflowInterpreter(builder.build(spec), middleware=middleware)
    outcome = None
    try:
        await _drive(interp, driver)
    except OverBudget:
        outcome = ("OverBudget",)
    except Exception as exc:  # compared, not hidden
        outcome = (type(exc).__name__, str(exc))
    return list(builder.trace), list(interp._pointer), len(interp._ret_addr_stack), outcome


@pytest.mark.asyncio
@settings(max_examples=sized(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=program)
async def test_native_opcodes_match_the_generic_path(spec):
    native = await run_spec(spec, "run")
    assert native == await run_spec(spec, "generic")
    assert native == await run_spec(spec, "steps")


async def _diverging_modes(program: dict) -> list[str]:
    """The modes whose record differs from `run_step_by()`'s (the nodes' own functions)."""
    api = Api()
    expected = await record(api, program, "steps")
    return [mode for mode in ("run", "generic") if await record(api, program, mode) != expected]


@pytest.mark.asyncio
@pytest.mark.parametrize("slot", list(SLOTS))
async def test_a_node_moving_the_pointer_in_any_slot_gives_what_the_node_functions_give(slot):
    diverged = []
    for place in PLACES:
        for mover in MOVERS:
            diverged += [f"{place}|{mover}|{mode}" for mode in await _diverging_modes(slot_program(place, slot, mover))]
    assert diverged == []


@pytest.mark.asyncio
@settings(max_examples=sized(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
async def test_random_programs_with_pointer_moving_nodes_give_what_the_node_functions_give(data):
    program = random_program(lambda options: data.draw(st.sampled_from(options)))
    assert await _diverging_modes(program) == []


@pytest.mark.asyncio
@pytest.mark.parametrize("driver", ["run", "steps"])
async def test_a_function_returning_early_from_else_in_a_native_loop(driver):
    """The issue's example: RET in an ELSE inside FN "f", CALLed from a NATIVE_WHILE body."""
    trace, calls = [], {}

    def counter(name, limit):
        @Node(wrap_to_async=False)
        def cond():
            calls[name] = calls.get(name, 0) + 1
            trace.append(name)
            return calls[name] <= limit

        return cond

    graph = NodeCompose(
        NATIVE_WHILE(counter("w", 2)).ACTION(NodeCompose(CALL("f"), NOP)),
        FN("f", IF(counter("i", 0), NOP).ELSE(RET())),
    ).render()
    interp = WorkflowInterpreter(graph)
    if driver == "steps":
        async for _ in interp.run_step_by():
            pass
    else:
        await interp.run()
    assert trace == ["w", "i", "w", "i", "w"]
    assert list(interp._pointer) == [] and len(interp._ret_addr_stack) == 0 and interp.get_exception() is None


HALTING_CLAUSES = {
    "IF body": lambda b, halt: IF(b.answers([True]), halt).ELSE(b.rec()),
    "NATIVE_IF body": lambda b, halt: NATIVE_IF(b.answers([True]), halt).ELSE(b.rec()),
    "NATIVE_IF condition": lambda b, halt: NATIVE_IF(halt, b.rec()).ELSE(b.rec()),
    "NATIVE_WHILE condition": lambda b, halt: NATIVE_WHILE(halt).ACTION(b.rec()),
    "NATIVE_DO condition": lambda b, halt: NATIVE_DO(b.rec()).WHILE(halt),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("where", list(HALTING_CLAUSES))
async def test_suspend_inside_an_instruction_resumes_the_same_way_on_both_paths(where):
    async def scenario(generic: bool):
        builder = Builder()

        @Node(wrap_to_async=False)
        def halt():
            builder.trace.append(("halt",))
            raise InterruptKeepContext("pause")

        clause = HALTING_CLAUSES[where](builder, halt)
        graph = (builder.rec() >> clause >> builder.rec()).render()
        interp = WorkflowInterpreter(graph, middleware=pass_through if generic else None)
        await interp.run()
        await interp.run()
        return builder.trace, list(interp._pointer)

    assert await scenario(False) == await scenario(True)
