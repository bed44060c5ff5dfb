"""Differential test: random programs built from the instruction set run on both cores in one process.

Each generated program is a small tree of instructions (branches, call_sub
loops, native loops with BREAK_LOOP / CONTINUE, JMP to later labels, CALL into
FN blocks, INVOKE of archived nodes, Try blocks, SUSPEND, failures). It is built twice, once
on each core's copy of the package (`dual.load_sense`) and run until it ends
(resuming after every SUSPEND), either step by step (`run_step_by`) or whole
(`run()`: the step loop with its native opcodes); the two runs must agree on
traces, yielded results, errors, pointers, stack depths and flags.

Termination: loop conditions are counters that turn false for good after a
few calls, jumps only go forward, FN bodies make no calls, and every run is
capped anyway (in steps, or by a timeout for `run()`).

The programs of `movers` (a node that moves the pointer or the stacks in every
instruction slot, and random programs made of such slots) run on both cores too.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import movers
from support.dual import Recorder, SenseCopy, run_on, run_program, run_whole
from support.sampling import sized

MAX_STEPS = 400
RUN_TIMEOUT = 2.0  # seconds; a program that needs more is looping, and the cores' records then differ
MAX_RUNS = 6
LOOPS = ["asyncio", "uvloop"]

# ----- program specs (plain data) --------------------------------------------------------

MODES = st.sampled_from(["inline", "inline", "async", "thread"])
RESULTS = st.one_of(st.none(), st.integers(-3, 3))
COND_VALUES = st.lists(st.booleans(), min_size=1, max_size=3).map(tuple)
LIMITS = st.integers(0, 3)
CATCHABLE = {"ValueError": ValueError, "LookupError": LookupError, "Exception": Exception}


def simple() -> st.SearchStrategy:
    """A statement that is one node."""
    return st.one_of(
        st.tuples(st.just("act"), RESULTS, MODES),
        st.tuples(st.just("act"), RESULTS, MODES),
        st.just(("nop",)),
        st.just(("suspend",)),
        st.just(("fail",)),
        st.just(("brk",)),
        st.just(("halt",)),
        st.just(("jmp",)),
        st.just(("call",)),
        st.just(("invoke",)),
    )


def statement(depth: int, in_loop: bool = False) -> st.SearchStrategy:
    """A statement; inside a native loop body, blocks may also hold BREAK_LOOP / CONTINUE."""
    if depth <= 0:
        return simple()
    inner = block(depth - 1, in_loop)
    branch = st.tuples(COND_VALUES, simple())
    native_branch = st.tuples(COND_VALUES, st.one_of(simple(), inner))
    return st.one_of(
        simple(),
        st.tuples(st.just("if"), st.lists(branch, min_size=1, max_size=3), st.one_of(st.none(), simple())),
        st.tuples(
            st.just("nif"), st.lists(native_branch, min_size=1, max_size=3), st.one_of(st.none(), simple(), inner)
        ),
        st.tuples(st.just("while"), LIMITS, simple()),
        st.tuples(st.just("do"), simple(), LIMITS),
        st.tuples(st.just("nwhile"), LIMITS, block(depth - 1, True)),
        st.tuples(st.just("ndo"), block(depth - 1, True), LIMITS),
        st.tuples(st.just("seq"), inner),
        st.tuples(
            st.just("try"),
            simple(),
            st.lists(st.sampled_from(sorted(CATCHABLE)), max_size=2),
            st.one_of(st.none(), simple()),
            st.one_of(st.none(), simple()),
        ),
    )


def block(depth: int, in_loop: bool = False) -> st.SearchStrategy:
    item = statement(depth, in_loop)
    if in_loop:
        item = st.one_of(item, st.sampled_from([("break",), ("continue",)]))
    return st.lists(item, min_size=1, max_size=3)


PROGRAMS = st.fixed_dictionaries(
    {
        "main": st.lists(st.one_of(statement(2), st.just(("label",))), min_size=1, max_size=5),
        "functions": st.lists(st.lists(st.tuples(st.just("act"), RESULTS, MODES), min_size=1, max_size=2), max_size=2),
        "archived": st.integers(0, 2),
        "middleware": st.booleans(),
        "driver": st.sampled_from(["steps", "run"]),
    }
)

# ----- building a spec on one copy of the package ----------------------------------------


class Builder:
    """Turns a spec into a `NodeCompose` of one package copy; node names are assigned in build order."""

    def __init__(self, sense: SenseCopy, spec: dict):
        self.rec = Recorder(sense)
        self.ins = sense.sub("instructions")
        self.native = sense.sub("instructions.native")
        self.exc = sense.sub("exceptions")
        self.compose = sense.sub("node").NodeCompose
        self.spec = spec
        self.count = 0
        self.labels_after: list[int] = []

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def program(self) -> Any:
        ins, main = self.ins, self.spec["main"]
        label_slots = [i for i, item in enumerate(main) if item == ("label",)]
        nodes = []
        for index, item in enumerate(main):
            self.labels_after = [i for i in label_slots if i > index]
            nodes.append(ins.ALIAS(self.rec.act(f"L{index}"), f"L{index}") if item == ("label",) else self.stmt(item))
        for number, body in enumerate(self.spec["functions"]):
            nodes.append(ins.FN(f"f{number}", self.compose(*(self.stmt(s) for s in body))))
        if self.spec["archived"]:
            archived = [ins.ALIAS(self.rec.act(f"s{k}", k), f"s{k}") for k in range(self.spec["archived"])]
            nodes.append(ins.ARCHIVED_NODES(*archived))
        return self.compose(*nodes)

    def stmt(self, item: tuple) -> Any:
        return getattr(self, f"_{item[0]}")(*item[1:])

    def body(self, items: Any) -> Any:
        if isinstance(items, list):
            return self.compose(*(self.stmt(s) for s in items))
        return self.stmt(items)

    def cond(self, values: tuple) -> Any:
        return self.rec.cond(self.name("c"), *values)

    # simple statements

    def _act(self, result: Any, mode: str) -> Any:
        return self.rec.act(self.name("a"), result, mode=mode)

    def _nop(self) -> Any:
        return self.ins.NOP

    def _suspend(self) -> Any:
        return self.ins.SUSPEND

    def _fail(self) -> Any:
        name = self.name("x")
        return self.rec.act(name, exc=ValueError(name))

    def _brk(self) -> Any:
        return self.rec.act(self.name("b"), exc=self.exc.BreakLoop())

    def _halt(self) -> Any:
        name = self.name("h")
        return self.rec.act(name, exc=self.exc.InterruptKeepContext(name))

    def _jmp(self) -> Any:
        if not self.labels_after:
            return self._act(None, "inline")
        return self.ins.JMP(f"L{self.labels_after[0]}")

    def _call(self) -> Any:
        functions = len(self.spec["functions"])
        return self.ins.CALL(f"f{self.count % functions}") if functions else self._nop()

    def _invoke(self) -> Any:
        archived = self.spec["archived"]
        return self.ins.INVOKE(f"s{self.count % archived}") if archived else self._nop()

    def _break(self) -> Any:
        return self.ins.BREAK_LOOP()

    def _continue(self) -> Any:
        return self.native.CONTINUE()

    # compound statements

    def _if(self, branches: list, otherwise: Any) -> Any:
        (values, body), *rest = branches
        clause = self.ins.IF(self.cond(values), self.stmt(body))
        for values, body in rest:
            clause = clause.ELIF(self.cond(values), self.stmt(body))
        return clause if otherwise is None else clause.ELSE(self.stmt(otherwise))

    def _nif(self, branches: list, otherwise: Any) -> Any:
        (values, body), *rest = branches
        clause = self.ins.NATIVE_IF(self.cond(values), self.body(body))
        for values, body in rest:
            clause = clause.ELIF(self.cond(values), self.body(body))
        return clause if otherwise is None else clause.ELSE(self.body(otherwise))

    def _while(self, limit: int, body: Any) -> Any:
        return self.ins.WHILE(self.rec.counter(self.name("w"), limit)).ACTION(self.stmt(body))

    def _do(self, body: Any, limit: int) -> Any:
        return self.ins.DO(self.stmt(body)).WHILE(self.rec.counter(self.name("d"), limit))

    def _nwhile(self, limit: int, body: list) -> Any:
        return self.ins.NATIVE_WHILE(self.rec.counter(self.name("nw"), limit)).ACTION(self.body(body))

    def _ndo(self, body: list, limit: int) -> Any:
        return self.ins.NATIVE_DO(self.body(body)).WHILE(self.rec.counter(self.name("nd"), limit))

    def _seq(self, body: list) -> Any:
        return self.body(body)

    def _try(self, body: Any, catches: list, then: Any, finally_: Any) -> Any:
        clause = self.ins.Try(self.stmt(body))
        for name in catches:
            clause = clause.CATCH(CATCHABLE[name], self._act(name, "inline"))
        if then is not None:
            clause = clause.THEN(self.stmt(then))
        if finally_ is not None or not catches:
            clause = clause.FINALLY(self.stmt(finally_) if finally_ is not None else self._act(None, "inline"))
        return clause


# ----- running -----------------------------------------------------------------------------


async def _wrap(interp: Any) -> Any:
    return ("mw", await interp._call())


async def _drive(sense: SenseCopy, spec: dict) -> list:
    """Build, render and run `spec` on `sense`, resuming after suspends; the comparable record."""
    builder = Builder(sense, spec)
    try:
        graph = builder.program().render()
    except Exception as exc:
        return [("build", type(exc).__name__, str(exc))]
    # the middleware turns every result into a (truthy) tuple, conditions included, so loops under it
    # end only by the step cap of the step-by-step driver
    middleware = _wrap if spec["middleware"] and spec["driver"] == "steps" else None
    interp = sense.sub("runtime.workflow").WorkflowInterpreter(graph, middleware=middleware)
    record = []
    for _ in range(MAX_RUNS):
        if spec["driver"] == "run":
            out = await run_whole(interp, builder.rec, timeout=RUN_TIMEOUT)
        else:
            out = await run_program(interp, builder.rec, max_steps=MAX_STEPS)
        record.append(out.summary())
        if out.error is not None or out.truncated or not out.flags & 2:
            break
    return record


@pytest.mark.parametrize("loop_name", LOOPS)
@settings(
    max_examples=sized(80),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=PROGRAMS)
def test_both_cores_agree(cores, loop_name, spec):
    compiled, pure = cores
    assert run_on(compiled, _drive, spec, loop_name) == run_on(pure, _drive, spec, loop_name)


def test_the_copies_are_independent(cores):
    compiled, pure = cores
    assert compiled.root.IMPLEMENTATION == "cython" and pure.root.IMPLEMENTATION == "python"
    assert compiled.root is not pure.root
    assert compiled.sub("instructions").NOP is not pure.sub("instructions").NOP
    assert compiled.sub("runtime.workflow").WorkflowInterpreter is not pure.sub("runtime.workflow").WorkflowInterpreter


@pytest.mark.parametrize("driver", ["steps", "run"])
def test_a_fixed_program_gives_the_same_record_on_both_cores(cores, driver):
    spec = {
        "main": [
            ("nwhile", 2, [("act", 1, "inline"), ("if", [((True, False), ("call",))], ("suspend",)), ("continue",)]),
            ("jmp",),
            ("act", 5, "async"),
            ("label",),
            ("do", ("invoke",), 1),
            ("nif", [((False,), [("act", 2, "thread"), ("break",)])], [("halt",), ("act", 3, "inline")]),
            ("try", ("fail",), ["LookupError", "ValueError"], None, None),
        ],
        "functions": [[("act", 7, "inline")]],
        "archived": 1,
        "middleware": False,
        "driver": driver,
    }
    compiled, pure = cores
    record = run_on(compiled, _drive, spec, "asyncio")
    assert record == run_on(pure, _drive, spec, "asyncio")
    assert len(record) >= 2 and record[0][1]


# ----- pointer-moving nodes in instruction slots (`movers`) --------------------------------


async def _movers_records(sense: SenseCopy, programs: dict) -> dict:
    return await movers.record_all(movers.Api(sense.sub), programs, "run")


@pytest.mark.parametrize("loop_name", LOOPS)
def test_pointer_moving_nodes_in_every_slot_agree_on_both_cores(cores, loop_name):
    programs = movers.every_slot_program()
    compiled, pure = (run_on(sense, _movers_records, programs, loop_name) for sense in cores)
    assert [key for key in programs if compiled[key] != pure[key]] == []


@pytest.mark.parametrize("loop_name", LOOPS)
@pytest.mark.parametrize("mode", ["run", "steps"])
@settings(max_examples=sized(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_programs_with_pointer_moving_nodes_agree_on_both_cores(cores, loop_name, mode, data):
    program = movers.random_program(lambda options: data.draw(st.sampled_from(options)))

    async def drive(sense: SenseCopy, program: dict) -> list:
        return await movers.record(movers.Api(sense.sub), program, mode)

    compiled, pure = cores
    assert run_on(compiled, drive, program, loop_name) == run_on(pure, drive, program, loop_name)
