"""Differential test of the foundation: random nested composes run on both cores in one process.

A generated program is a tree of segments (depth <= 5, at most a few hundred
slots) holding recording nodes, empty segments, failing / halting nodes and
plain user nodes that move the pointer with the interpreter API (`jump_*`,
`rebase_ptr`, writes to `_pointer`) or run sub-calls (`call_sub`,
`call_near`, `call_offset`, `call_offset_far`). It is built once on each
core's copy of the package (`dual.load_sense`) and run step by step
(recovering after a panic, resuming after a halt); both runs must agree on
the trace (node id, pointer and return-stack depth at every node), the yields
of `run_step_by`, the errors (type and message) and the final state.

Termination: every pointer-moving or calling node acts only on its first
`times` executions, so jumps (also backward ones) and calls are bounded;
runs are capped in steps anyway.
"""

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.dual import SenseCopy, run_on, run_program
from support.sampling import sized

MAX_STEPS = 600
MAX_RUNS = 4
MAX_DEPTH = 5
HLT = 2
LOOPS = ["asyncio", "uvloop"]

# ----- program specs (plain data) ---------------------------------------------------------

MODES = st.sampled_from(["inline", "inline", "thread", "async"])
PICK = st.integers(0, 10_000)
TIMES = st.integers(1, 2)

# A move names a target slot by a random index; the builder turns it into the
# argument the method needs to reach that slot from the node's own address. The
# "raw" moves pass small numbers unchanged, so some of them miss on purpose.
TARGETED = [
    "jump_to",
    "jump_far_ptr",
    "rebase_ptr",
    "write_far_to",
    "twice",
    "jump_near",
    "jump_offset",
    "write_last",
    "jump_offset_far",
    "jump_to_top",
    "jump_offset_top",
]
JUMPS = st.one_of(
    st.tuples(st.sampled_from(TARGETED), PICK),
    st.tuples(st.sampled_from(TARGETED), PICK),
    st.tuples(st.sampled_from(TARGETED), PICK),
    st.tuples(st.sampled_from(TARGETED), PICK),
    st.tuples(st.just("raw_near"), st.integers(0, 6)),
    st.tuples(st.just("raw_offset_far"), st.lists(st.integers(-2, 2), min_size=1, max_size=3)),
    st.tuples(st.just("jump_to_bad"), st.just(0)),
)
CALLS = st.tuples(st.sampled_from(["call_sub", "call_near", "call_offset", "call_offset_far"]), PICK)

LEAVES = st.one_of(
    st.tuples(st.just("rec"), MODES, st.one_of(st.none(), st.integers(0, 9))),
    st.tuples(st.just("rec"), MODES, st.one_of(st.none(), st.integers(0, 9))),
    st.tuples(st.just("rec"), MODES, st.one_of(st.none(), st.integers(0, 9))),
    st.tuples(st.just("rec"), MODES, st.one_of(st.none(), st.integers(0, 9))),
    st.tuples(st.just("jump"), JUMPS, TIMES, MODES),
    st.tuples(st.just("jump"), JUMPS, TIMES, MODES),
    st.tuples(st.just("call"), CALLS, TIMES, st.booleans()),
    st.tuples(st.just("call"), CALLS, TIMES, st.booleans()),
    st.just(("fail",)),
    st.just(("halt",)),
    st.integers(0, 7).map(lambda n: ("empty",) if n == 0 else ("rec", "inline", n)),
)


def _segment(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.lists(children, min_size=1, max_size=5).map(lambda items: ("seg", items))


def _cap_depth(item: tuple, depth: int = 1) -> tuple:
    """Flatten segments nested deeper than MAX_DEPTH into a recording node."""
    if item[0] != "seg":
        return item
    if depth >= MAX_DEPTH:
        return ("rec", "inline", None)
    return ("seg", [_cap_depth(child, depth + 1) for child in item[1]])


PROGRAMS = st.fixed_dictionaries(
    {
        "main": st.lists(st.recursive(LEAVES, _segment, max_leaves=60), min_size=1, max_size=8).map(
            lambda items: [_cap_depth(item) for item in items]
        ),
        "middleware": st.booleans(),
    }
)


def slots(items: list, prefix: tuple = ()) -> list[tuple[list[int], bool]]:
    """`(address, runnable)` of every slot, depth-first; empty segments are not runnable."""
    found = []
    for index, item in enumerate(items):
        here = (*prefix, index)
        found.append((list(here), item[0] != "empty"))
        if item[0] == "seg":
            found.extend(slots(item[1], here))
    return found


def count_slots(items: list) -> int:
    return len(slots(items))


def far_offset(current: list[int], target: list[int]) -> list[int]:
    """The vector `offset_far` needs to turn `current` into `target` (truncation cuts the rest)."""
    vec = [t - (current[i] if i < len(current) else 0) for i, t in enumerate(target)]
    if len(current) > len(target):
        vec.append(-(current[len(target)] + 1))
    return vec


# ----- building a spec on one copy of the package -------------------------------------------


class Builder:
    """Turns a spec into a `NodeCompose` of one package copy; node ids are assigned in build order."""

    def __init__(self, sense: SenseCopy, spec: dict):
        self.node = sense.sub("node.wrapper").Node
        self.compose = sense.sub("node").NodeCompose
        self.exc = sense.sub("exceptions")
        self.interp_type = sense.sub("runtime.workflow").WorkflowInterpreter
        self.spec = spec
        self.targets = [addr for addr, runnable in slots(spec["main"]) if runnable]
        self.trace: list = []
        self.count = 0

    def program(self) -> Any:
        return self.block(self.spec["main"], [])

    def block(self, items: list, prefix: list[int]) -> Any:
        return self.compose(*(self.item(item, [*prefix, i], len(items)) for i, item in enumerate(items)))

    def item(self, item: tuple, addr: list[int], width: int) -> Any:
        kind = item[0]
        if kind == "seg":
            return self.block(item[1], addr)
        if kind == "empty":
            return self.compose()
        self.count += 1
        return getattr(self, f"_{kind}")(self.count, addr, width, *item[1:])

    def pick(self, index: int) -> list[int]:
        return list(self.targets[index % len(self.targets)])

    def argument(self, kind: str, pick: int, addr: list[int], width: int) -> Any:
        """The argument of `kind` that reaches the picked slot from `addr` (a segment of `width`)."""
        if kind.endswith("near") or kind == "write_last":
            return pick % width
        if kind.endswith("offset"):
            return pick % width - addr[-1]
        top = len(self.spec["main"])
        if kind == "jump_to_top":
            return pick % top
        if kind == "jump_offset_top":
            return pick % top - addr[0]
        if kind.endswith("offset_far"):
            return far_offset(addr, self.pick(pick))
        return self.pick(pick)

    def record(self, node_id: int, pc: Any, *extra: Any) -> None:
        self.trace.append((node_id, list(pc._pointer), len(pc._ret_addr_stack), *extra))

    def wrap(self, node_id: int, body: Any, mode: str) -> Any:
        """A node with the interpreter injected, run in `mode`."""
        interp_type, record = self.interp_type, self.record
        if mode == "async":

            async def step(pc: interp_type) -> Any:  # the copy's class, evaluated now
                record(node_id, pc)
                return body(pc)

        else:

            def step(pc: interp_type) -> Any:
                record(node_id, pc)
                return body(pc)

        step.__name__ = f"n{node_id}"
        return self.node(wrap_to_async=mode == "thread")(step)

    # leaves

    def _rec(self, node_id: int, addr: list[int], width: int, mode: str, result: Any) -> Any:
        return self.wrap(node_id, lambda pc: (node_id, result), mode)

    def _fail(self, node_id: int, addr: list[int], width: int) -> Any:
        return self.wrap(node_id, self.first_time(node_id, lambda: ValueError(f"fail n{node_id}")), "inline")

    def _halt(self, node_id: int, addr: list[int], width: int) -> Any:
        keep = self.exc.InterruptKeepContext
        return self.wrap(node_id, self.first_time(node_id, lambda: keep(f"halt n{node_id}")), "inline")

    @staticmethod
    def first_time(node_id: int, make_exc: Any) -> Any:
        remaining = [1]

        def body(pc: Any) -> Any:
            if remaining[0]:
                remaining[0] -= 1
                raise make_exc()
            return node_id

        return body

    def _jump(self, node_id: int, addr: list[int], width: int, action: tuple, times: int, mode: str) -> Any:
        remaining = [times]
        move = self.mover(action, addr, width)

        def body(pc: Any) -> Any:
            if remaining[0]:
                remaining[0] -= 1
                move(pc)
            return ("j", node_id)

        return self.wrap(node_id, body, mode)

    def mover(self, action: tuple, addr: list[int], width: int) -> Any:
        """The pointer move a jump node performs."""
        kind, pick = action
        if kind == "raw_near":
            return lambda pc: pc.jump_near(pick)
        if kind == "raw_offset_far":
            return lambda pc: pc.jump_offset_far(list(pick))
        if kind == "jump_to_bad":
            return lambda pc: pc.jump_to([97, 3])
        arg = self.argument(kind, pick, addr, width)
        if kind == "write_far_to":
            return lambda pc: pc._pointer.far_to(list(arg))
        if kind == "write_last":
            return lambda pc: pc._pointer.__setitem__(-1, arg)
        if kind == "twice":
            return lambda pc: (pc.jump_offset(1), pc.jump_to(list(arg)))
        return lambda pc: getattr(pc, kind)(arg.copy() if isinstance(arg, list) else arg)

    def _call(self, node_id: int, addr: list[int], width: int, action: tuple, times: int, extras: bool) -> Any:
        kind, pick = action
        remaining = [times]
        target = self.argument(kind, pick, addr, width)
        record = self.record
        args, kwargs = (("extra",), {"unused_extra": node_id}) if extras else ((), {})

        async def step(pc: self.interp_type) -> Any:
            record(node_id, pc)
            if not remaining[0]:
                return ("c", node_id)
            remaining[0] -= 1
            result = await getattr(pc, kind)(target.copy() if isinstance(target, list) else target, *args, **kwargs)
            record(node_id, pc, "back", result)
            return ("c", node_id, result)

        step.__name__ = f"n{node_id}"
        return self.node()(step)


# ----- running ----------------------------------------------------------------------------------


async def _wrap(interp: Any) -> Any:
    return ("mw", list(interp._pointer), await interp._call())


async def _drive(sense: SenseCopy, spec: dict) -> list:
    """Build, render and run `spec` on `sense`, recovering and resuming; the comparable record."""
    builder = Builder(sense, spec)
    try:
        graph = builder.program().render()
    except Exception as exc:
        return [("build", type(exc).__name__, str(exc))]
    interp = builder.interp_type(graph, middleware=_wrap if spec["middleware"] else None)
    record = []
    for _ in range(MAX_RUNS):
        start = len(builder.trace)
        out = await run_program(interp, max_steps=MAX_STEPS)
        out.trace = builder.trace[start:]
        record.append(out.summary())
        recoverable = isinstance(out.error, ValueError) or (out.error is None and out.flags & HLT)
        if out.truncated or not recoverable:
            break
    return record


# ----- tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("loop_name", LOOPS)
@settings(
    max_examples=sized(120),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=PROGRAMS)
def test_both_cores_agree(cores, loop_name, spec):
    compiled, pure = cores
    assert run_on(compiled, _drive, spec, loop_name) == run_on(pure, _drive, spec, loop_name)


@settings(max_examples=sized(30), deadline=None)
@given(spec=PROGRAMS)
def test_generated_programs_stay_small(spec):
    assert count_slots(spec["main"]) <= 400


def _fixed_spec() -> dict:
    return {
        "main": [
            ("rec", "inline", 1),
            (
                "seg",
                [
                    ("rec", "async", 2),
                    ("jump", ("jump_offset", 3), 1, "thread"),
                    ("rec", "thread", 4),
                    ("rec", "inline", 5),
                ],
            ),
            ("call", ("call_sub", 5), 1, True),
            ("seg", [("seg", [("jump", ("jump_offset_top", 4), 1, "inline"), ("rec", "inline", 8)]), ("fail",)]),
            ("halt",),
            ("jump", ("jump_to", 4), 1, "async"),
            ("rec", "inline", 12),
        ],
        "middleware": False,
    }


FIXED_RECORD = [
    (
        [(1, 1), (2, 2), ("j", 3), (5, 5), ("c", 6, (5, 5)), ("j", 7)],
        [
            (1, [0], 0),
            (2, [1, 0], 0),
            (3, [1, 1], 0),
            (5, [1, 3], 0),
            (6, [2], 0),
            (5, [1, 3], 1),
            (6, [2], 0, "back", (5, 5)),
            (7, [3, 0, 0], 0),
            (10, [4], 0),
        ],
        None,
        [4],
        0,
        HLT,
        False,
    ),
    (
        [("j", 11), (4, 4), (5, 5), ("c", 6), ("j", 7), (8, 8)],
        [
            (11, [5], 0),
            (4, [1, 2], 0),
            (5, [1, 3], 0),
            (6, [2], 0),
            (7, [3, 0, 0], 0),
            (8, [3, 0, 1], 0),
            (9, [3, 1], 0),
        ],
        ("ValueError", "fail n9"),
        [3, 1],
        0,
        0,
        False,
    ),
    ([9, 10, ("j", 11), (12, 12)], [(9, [3, 1], 0), (10, [4], 0), (11, [5], 0), (12, [6], 0)], None, [], 0, 0, False),
]


@pytest.mark.parametrize("core", ["cython", "python"])
def test_a_fixed_program_record(cores, core):
    """Jumps, a sub-call with extras, a nested top-level jump, a halt, a panic and its recovery."""
    sense = cores[0] if core == "cython" else cores[1]
    assert run_on(sense, _drive, _fixed_spec(), "asyncio") == FIXED_RECORD
