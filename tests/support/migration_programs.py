"""Random workflows, random edits of them, and the runs the migration property compares.

A spec is plain data (nested lists): statements of recording nodes, SUSPEND, plain
segments, IF / ELSE, NATIVE_IF, WHILE, NATIVE_WHILE, Try / FINALLY and CALLs into FN
blocks. Every node is named once in the spec and keeps its name through edits, so
that an edit (insert, delete, duplicate, swap) says which node is which on both
graphs. All node state (the trace, the loop counters) lives in a `RunState` passed in
`extra_args`, so a snapshot taken with `codec=pickle` carries it.

The property (`check_case`): run the old graph until it is parked (the k-th halt at
its SUSPEND, or the k-th park at one node's gate), snapshot, restore on the edited
graph with `migrate=True`. The restore either refuses (`GraphMismatch`, and
`plan_migration` refuses alike), or the restored run's remaining trace (and error)
equals the edited graph's own: a fresh run of the edited graph brought to the same
point (the k-th halt at the same SUSPEND, the k-th park at the same node), given the
old run's counters there, and run on. When the edited graph's own run never gets to
that point (the node was moved into a branch it does not take) there is nothing to
compare with: the case is "unverifiable", and the restored run must end without error.
"""

from __future__ import annotations

import asyncio
import copy
import pickle
import random
from dataclasses import dataclass, field
from typing import Any

from amrita_sense import IF, SUSPEND, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import GraphMismatch, SnapshotUnavailable, plan_migration
from amrita_sense.instructions import CALL, FN, NATIVE_IF, NATIVE_WHILE, WHILE, Try
from amrita_sense.streaming import SuspendObjectStream

HLT = 2
MAX_RUNS = 8
RUN_TIMEOUT = 5.0
GATE_PREFIX = "NodeSuspend::"


class RunState:
    """What the nodes of a program remember: the trace and the loop counters."""

    def __init__(self) -> None:
        self.trace: list[str] = []
        self.calls: dict[str, int] = {}

    def count(self, name: str) -> int:
        seen = self.calls.get(name, 0)
        self.calls[name] = seen + 1
        return seen


def _named(name: str, body: Any) -> Any:
    """A node whose function is named `name` (so its identity and its gate tag are the name's)."""

    def step(state: RunState) -> Any:
        state.trace.append(name)
        return body(state)

    step.__name__ = step.__qualname__ = name
    return Node()(step)


def act(name: str) -> Any:
    return _named(name, lambda state: name)


def cond(name: str, value: bool) -> Any:
    return _named(name, lambda state: value)


def counter(name: str, limit: int) -> Any:
    return _named(name, lambda state: state.count(name) < limit)


# ----- building a spec ------------------------------------------------------------------------------


def build(spec: dict) -> Any:
    """The rendered graph of `spec` (a fresh one on every call)."""
    nodes = [_statement(item) for item in spec["main"]]
    for number, body in enumerate(spec["functions"]):
        nodes.append(FN(f"f{number}", NodeCompose(*(_statement(item) for item in body))))
    return NodeCompose(*nodes).render()


def _block(items: list) -> Any:
    return NodeCompose(*(_statement(item) for item in items))


def _statement(item: list) -> Any:
    kind = item[0]
    if kind == "act":
        return act(item[1])
    if kind == "S":
        return SUSPEND
    if kind == "seq":
        return _block(item[1])
    if kind == "call":
        return CALL(f"f{item[1]}")
    if kind == "if":
        clause = IF(cond(item[1], item[2]), _statement(item[3]))
        return clause if item[4] is None else clause.ELSE(_statement(item[4]))
    if kind == "nif":
        clause = NATIVE_IF(cond(item[1], item[2]), _block(item[3]))
        return clause if item[4] is None else clause.ELSE(_block(item[4]))
    if kind == "while":
        return WHILE(counter(item[1], item[2])).ACTION(_statement(item[3]))
    if kind == "nwhile":
        return NATIVE_WHILE(counter(item[1], item[2])).ACTION(_block(item[3]))
    if kind == "try":
        return Try(_statement(item[1])).FINALLY(act(item[2]))
    raise ValueError(f"unknown statement {item!r}")


# ----- random specs -----------------------------------------------------------------------------------


class Generator:
    """Random specs of a few dozen rows at most (names are unique: "a7", "c3", "w2"...)."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.count = 0
        self.functions = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def spec(self) -> dict:
        rnd = self.rnd
        self.functions = rnd.choice([0, 0, 1, 2])
        functions = [self.items(1, in_function=True) for _ in range(self.functions)]
        return {"main": self.items(2), "functions": functions}

    def items(self, depth: int, in_function: bool = False) -> list:
        return [self.statement(depth, in_function) for _ in range(self.rnd.randint(1, 4))]

    def single(self) -> list:
        return ["act", self.name("a")]

    def statement(self, depth: int, in_function: bool) -> list:
        rnd = self.rnd
        kinds = ["act", "act", "act", "act"]
        if self.functions and not in_function:
            kinds += ["call", "call"]
        if depth > 0:
            kinds += ["seq", "if", "nif", "while", "nwhile", "try"]
        kind = rnd.choice(kinds)
        if kind == "act":
            return self.single()
        if kind == "call":
            return ["call", rnd.randrange(self.functions)]
        if kind == "seq":
            return ["seq", self.items(depth - 1, in_function)]
        if kind == "if":
            otherwise = self.single() if rnd.random() < 0.5 else None
            return ["if", self.name("c"), rnd.random() < 0.7, self.single(), otherwise]
        if kind == "nif":
            otherwise = self.items(depth - 1, in_function) if rnd.random() < 0.5 else None
            return ["nif", self.name("c"), rnd.random() < 0.7, self.items(depth - 1, in_function), otherwise]
        if kind == "while":
            return ["while", self.name("w"), rnd.randint(0, 2), self.single()]
        if kind == "nwhile":
            return ["nwhile", self.name("w"), rnd.randint(0, 2), self.items(depth - 1, in_function)]
        return ["try", self.single(), self.name("t")]


def _lists(spec: dict) -> list[list]:
    """Every list of statements of `spec` (where statements can be inserted, removed or swapped)."""
    found: list[list] = []

    def visit(items: list) -> None:
        found.append(items)
        for item in items:
            if item[0] == "seq":
                visit(item[1])
            elif item[0] in ("nif",):
                visit(item[3])
                if item[4] is not None:
                    visit(item[4])
            elif item[0] == "nwhile":
                visit(item[3])

    visit(spec["main"])
    for body in spec["functions"]:
        visit(body)
    return found


def _singles(spec: dict) -> list[tuple[list, int]]:
    """`(holder, index)` of every single-node statement slot (the body of IF, WHILE, Try)."""
    found = []

    def visit(items: list) -> None:
        for item in items:
            if item[0] == "seq":
                visit(item[1])
            elif item[0] == "if":
                found.append((item, 3))
                if item[4] is not None:
                    found.append((item, 4))
            elif item[0] == "nif":
                visit(item[3])
                if item[4] is not None:
                    visit(item[4])
            elif item[0] == "while":
                found.append((item, 3))
            elif item[0] == "nwhile":
                visit(item[3])
            elif item[0] == "try":
                found.append((item, 1))

    visit(spec["main"])
    for body in spec["functions"]:
        visit(body)
    return found


def acts(spec: dict) -> list[tuple[list, int]]:
    """`(holder, index)` of every recording node of `spec` (in lists and single slots)."""
    found = [(items, i) for items in _lists(spec) for i, item in enumerate(items) if item[0] == "act"]
    found += [(holder, i) for holder, i in _singles(spec) if holder[i][0] == "act"]
    return found


def place_suspend(spec: dict, rnd: random.Random) -> None:
    """Put one SUSPEND into `spec`: in place of a recording node, or into a list."""
    if rnd.random() < 0.5:
        holder, index = rnd.choice(acts(spec))
        holder[index] = ["S"]
    else:
        items = rnd.choice(_lists(spec))
        items.insert(rnd.randint(0, len(items)), ["S"])


@dataclass
class Edit:
    kind: str
    detail: str


def edit(spec: dict, rnd: random.Random, gen: Generator) -> tuple[dict, Edit]:
    """A copy of `spec` with one random edit: insert, delete, duplicate, swap or move a statement."""
    edited = copy.deepcopy(spec)
    lists = _lists(edited)
    kind = rnd.choice(["insert", "insert", "delete", "delete", "duplicate", "swap", "swap", "move"])
    if kind in ("delete", "swap", "move") and not any(len(items) > 1 for items in lists):
        kind = "insert"
    if kind == "duplicate" and not acts(edited):
        kind = "insert"
    if kind == "move":
        return edited, _move(edited, rnd)
    if kind == "insert":
        items = rnd.choice(lists)
        at = rnd.randint(0, len(items))
        new = gen.single() if rnd.random() < 0.8 else gen.statement(1, in_function=True)  # no CALL: no recursion
        items.insert(at, new)
        return edited, Edit(kind, f"{new} at {at}")
    if kind == "delete":
        items = rnd.choice([items for items in lists if len(items) > 1])
        at = rnd.randrange(len(items))
        return edited, Edit(kind, f"{items.pop(at)}")
    if kind == "duplicate":
        holder, index = rnd.choice(acts(edited))
        items = rnd.choice(lists)
        at = rnd.randint(0, len(items))
        items.insert(at, list(holder[index]))
        return edited, Edit(kind, f"{holder[index]} at {at}")
    items = rnd.choice([items for items in lists if len(items) > 1])
    at = rnd.randrange(len(items) - 1)
    items[at], items[at + 1] = items[at + 1], items[at]
    return edited, Edit(kind, f"{items[at]} <-> {items[at + 1]}")


def _move(spec: dict, rnd: random.Random) -> Edit:
    """Move a statement from its list to a random place of any list (a CALL never into an FN)."""
    source = rnd.choice([items for items in _lists(spec) if len(items) > 1])
    at = rnd.randrange(len(source))
    item = source.pop(at)
    in_functions = [id(items) for items in _lists({"main": [], "functions": spec["functions"]})][1:]
    calls = "'call'" in repr(item)  # a CALL moved into an FN could call itself for ever
    targets = [
        items for items in _lists(spec) if not _contains(item, items) and not (calls and id(items) in in_functions)
    ]
    target = rnd.choice(targets)
    to = rnd.randint(0, len(target))
    target.insert(to, item)
    return Edit("move", f"{item} from {at} to {to}")


def _contains(item: list, items: list) -> bool:
    """True when `items` is `item`'s own list of statements or one inside it."""
    stack = [item]
    while stack:
        current = stack.pop()
        for part in current[1:]:
            if part is items:
                return True
            if isinstance(part, list) and part and isinstance(part[0], list):
                stack.extend(part)
            elif isinstance(part, list) and part and isinstance(part[0], str):
                stack.append(part)
    return False


# ----- running ---------------------------------------------------------------------------------------


@dataclass
class Point:
    """Where a run is parked: the k-th halt (gate None) or the k-th park at the gate of node `gate`."""

    k: int
    gate: str | None = None


@dataclass
class Parked:
    interp: Any
    state: RunState
    task: asyncio.Task | None = None
    stream: SuspendObjectStream | None = None


def _interpreter(graph: Any, state: RunState, stream: SuspendObjectStream | None = None) -> Any:
    return WorkflowInterpreter(graph, stream, extra_args=(state,))


async def park_at(graph: Any, point: Point) -> Parked | None:
    """A fresh run of `graph` brought to `point`, or None when it never gets there."""
    state = RunState()
    if point.gate is None:
        interp = _interpreter(graph, state)
        for _ in range(point.k):
            try:
                await asyncio.wait_for(interp.run(), RUN_TIMEOUT)
            except Exception:  # noqa: BLE001
                return None
            if not interp._flag_bits & HLT:
                return None
        return Parked(interp, state)
    stream = SuspendObjectStream()
    interp = _interpreter(graph, state, stream)
    task = await _park_k_times(interp, stream, GATE_PREFIX + point.gate, point.k)
    return None if task is None else Parked(interp, state, task, stream)


async def _park_k_times(interp: Any, stream: SuspendObjectStream, tag: str, k: int) -> asyncio.Task | None:
    task: asyncio.Task | None = None
    for _ in range(k):
        request = asyncio.ensure_future(stream.wait_to_suspend(tag))
        await asyncio.sleep(0)
        if task is None:
            task = asyncio.ensure_future(interp.run())
        else:
            stream.resume()
        done, _ = await asyncio.wait({request, task}, timeout=RUN_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
        if request not in done:
            request.cancel()
            await asyncio.gather(request, task, return_exceptions=True)
            return None
    return task


async def abandon(parked: Parked) -> None:
    if parked.task is not None:
        parked.task.cancel()
        await asyncio.gather(parked.task, return_exceptions=True)


async def run_on(parked: Parked) -> tuple:
    """Let a parked run go on to its end (resuming after halts); `(trace from here, error)`."""
    start = len(parked.state.trace)
    error = None
    try:
        if parked.task is not None:
            assert parked.stream is not None
            parked.stream.resume()
            await asyncio.wait_for(parked.task, RUN_TIMEOUT)
        else:
            await asyncio.wait_for(parked.interp.run(), RUN_TIMEOUT)
        for _ in range(MAX_RUNS):
            if not parked.interp._flag_bits & HLT:
                break
            await asyncio.wait_for(parked.interp.run(), RUN_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - part of the record
        error = (type(exc).__name__, str(exc))
    return parked.state.trace[start:], error


async def full_trace(spec: dict) -> list[str]:
    """The whole trace of `spec` (resuming after every halt), to pick a point it reaches."""
    state = RunState()
    interp = _interpreter(build(spec), state)
    for _ in range(MAX_RUNS):
        try:
            await asyncio.wait_for(interp.run(), RUN_TIMEOUT)
        except Exception:  # noqa: BLE001
            break
        if not interp._flag_bits & HLT:
            break
        state.trace.append("<halt>")
    return state.trace


# ----- the property ------------------------------------------------------------------------------------


@dataclass
class Tally:
    cases: int = 0
    skipped: int = 0
    refused: int = 0
    restored: int = 0
    moved: int = 0
    unverifiable: int = 0
    misplaced: list = field(default_factory=list)
    reasons: dict = field(default_factory=dict)


async def random_case(seed: int) -> tuple[dict, dict, Edit, Point]:
    """A random spec, a point its run gets to, an edited copy of the spec and the edit."""
    rnd = random.Random(seed)
    gen = Generator(rnd)
    while True:
        spec = gen.spec()
        gate_mode = rnd.random() < 0.4
        if not gate_mode:
            place_suspend(spec, rnd)
        point = _point(await full_trace(spec), rnd, gate_mode)
        if point is not None:
            edited, change = edit(spec, rnd, gen)
            return spec, edited, change, point


def _point(trace: list[str], rnd: random.Random, gate_mode: bool) -> Point | None:
    """The k-th halt, or the k-th park at the gate of a node that ran (None: the run never halts)."""
    if not gate_mode:
        halts = trace.count("<halt>")
        return Point(rnd.randint(1, halts)) if halts else None
    ran = sorted({name for name in trace if name.startswith("a")})
    if not ran:
        return None
    gate = rnd.choice(ran)
    return Point(rnd.randint(1, trace.count(gate)), gate)


async def check_case(seed: int, tally: Tally) -> None:
    """One case of the property; a restore that runs on differently from the edited graph is recorded as misplaced."""
    spec, edited, change, point = await random_case(seed)
    tally.cases += 1
    old = await park_at(build(spec), point)
    if old is None:
        tally.skipped += 1
        return
    try:
        data = old.interp.snapshot(codec=pickle)
    except SnapshotUnavailable:  # a gate inside a sub-call (an IF or WHILE body, a Try part)
        tally.skipped += 1
        await abandon(old)
        return
    at_snapshot = copy.deepcopy(old.state)
    await abandon(old)
    planned, migration = _attempt(plan_migration, build(edited), data)
    refused, restored = _attempt(
        WorkflowInterpreter.restore, build(edited), data, codec=pickle, allow_unsigned=True, migrate=True
    )
    if planned != refused:
        tally.misplaced.append((seed, change, "plan_migration and restore disagree", planned, refused))
        return
    if refused is not None:
        tally.refused += 1
        reason = refused.split(": ")[-1].split(",")[0]
        tally.reasons[reason] = tally.reasons.get(reason, 0) + 1
        return
    tally.restored += 1
    tally.moved += any(old_addr != new_addr for _, old_addr, new_addr in migration.moves)
    got = await run_on(Parked(restored, restored._ava_args_v[1]))
    truth = await park_at(build(edited), point)
    if truth is None:
        # the edited graph's own run never gets there (the node was moved into a branch it does not
        # take): nothing to compare with; the restored run went on from its node and must end cleanly
        tally.unverifiable += 1
        if got[1] is not None:
            tally.misplaced.append((seed, change, "the edited graph never gets to the point", got))
        return
    truth.state.calls = copy.deepcopy(at_snapshot.calls)
    expected = await run_on(truth)
    if got != expected:
        tally.misplaced.append((seed, change, migration.moves, got, expected))


def _attempt(call: Any, *args: Any, **kwargs: Any) -> tuple[str | None, Any]:
    """`(None, result)`, or `(message, None)` when `call` raises `GraphMismatch`."""
    try:
        return None, call(*args, **kwargs)
    except GraphMismatch as exc:
        return str(exc), None
