"""The order in which amrita-sense 1.1.3 starts a resolution's providers, worked out once per plan.

1.1.3 resolves the plain providers of one function concurrently with `asyncio.gather`: each gets
a task, and a provider with `Depends` of its own resolves them inside its task with another
`gather` before it is called. Its generator providers follow, one at a time, in the resolving
coroutine, each after its own `Depends`. Which provider starts first is therefore decided by the
event loop's FIFO of ready callbacks: a task runs its first step one pass after it was made, a
finished task wakes its `gather` one pass later, and the `gather` wakes its waiter one pass after
that. `start_order` replays that FIFO over a provider tree (assuming that no provider suspends:
each runs to its end in the step that starts it), so the executor (`_inject.run_schedule`) can
start the providers in the same order without tasks.

A tree is read through the attributes `_inject` gives it: a group has `plain` and `scoped`
(tuples of `(key, prepared)`); a prepared provider has `recipe` (None: its parameters cannot be
matched, so it never starts) and `nested` (its own group, or None).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from typing import Any


class GroupShape:
    """One group of a schedule: its members' `(key, slot, prepared)` (plain ones, then generator
    ones), the slot of the generator provider that must be allowed to start before any of them
    may (`gate`, -1 for none), and whether it is a top group (`root`)."""

    __slots__ = ("gate", "plain", "root", "scoped")

    def __init__(self, plain: tuple, scoped: tuple, gate: int, root: bool) -> None:
        self.plain = plain
        self.scoped = scoped
        self.gate = gate
        self.root = root


class Schedule:
    """A provider tree laid out for one resolution.

    Every provider occurrence has a slot. `steps` are `(slot, prepared, gate, nested, scoped,
    last)` in 1.1.3's start order: `gate` is the slot of the generator provider whose permission
    to start the step waits for (-1: none; a generator provider's own step is gated on itself),
    `nested` the index of its own group in `groups` (-1: none), `scoped` whether it is a
    generator provider, `last` whether every step after it needs its outcome (so nothing has to
    start while it runs: it may be awaited in place). `previous[slot]` is, for a generator provider, `(group, slot of the generator
    provider before it in that group or -1)`. `roots` are the indices of the top groups (one,
    except for a preload batch); `finish_order` lists their positions in `roots` in the order
    their resolutions finish.
    """

    __slots__ = ("finish_order", "groups", "previous", "roots", "size", "steps")

    def __init__(self) -> None:
        self.groups: list[GroupShape] = []
        self.previous: dict[int, tuple[int, int]] = {}
        self.roots: list[int] = []
        self.finish_order: list[int] = []
        self.size = 0
        self.steps: tuple = ()


class _Layout:
    """Slots and groups of a tree, assigned depth first."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.preps: list[Any] = []
        self.nested: list[int] = []

    def group(self, group: Any, gate: int, root: bool = False) -> int:
        schedule = self.schedule
        index = len(schedule.groups)
        shape = GroupShape((), (), gate, root)
        schedule.groups.append(shape)
        plain = []
        for key, prep in group.plain:
            slot = self._slot(prep)
            plain.append((key, slot, prep))
            if prep.nested is not None and prep.recipe is not None:
                self.nested[slot] = self.group(prep.nested, gate)
        scoped = []
        before = -1
        for key, prep in group.scoped:
            slot = self._slot(prep)
            scoped.append((key, slot, prep))
            schedule.previous[slot] = (index, before)
            before = slot
            if prep.nested is not None and prep.recipe is not None:
                self.nested[slot] = self.group(prep.nested, slot)
        shape.plain, shape.scoped = tuple(plain), tuple(scoped)
        return index

    def _slot(self, prep: Any) -> int:
        self.preps.append(prep)
        self.nested.append(-1)
        return len(self.preps) - 1


def build_schedule(roots: list[Any]) -> Schedule:
    """The schedule of resolving `roots` (groups) together: one group is one resolution; several
    are resolved concurrently, each in a task of one `gather`, as 1.1.3's DI preload does."""
    schedule = Schedule()
    layout = _Layout(schedule)
    schedule.roots = [layout.group(root, -1, True) for root in roots]
    schedule.size = len(layout.preps)
    order = start_order(schedule, layout.nested)
    gates = _step_gates(schedule)
    needs = _needs(schedule, layout.nested, gates)
    schedule.steps = tuple(
        (
            slot,
            layout.preps[slot],
            gates[slot],
            layout.nested[slot],
            slot in schedule.previous,
            all(slot in needs(later) for later in order[k + 1 :]),
        )
        for k, slot in enumerate(order)
    )
    return schedule


def _needs(schedule: Schedule, nested: list[int], gates: dict[int, int]) -> Any:
    """`needs(slot)`: the slots whose outcomes the step of `slot` waits for, directly or not (its
    own `Depends`; for a gated step, what its gate's permission depends on)."""
    groups, previous = schedule.groups, schedule.previous
    found: dict[int, frozenset] = {}

    def gate_needs(gate: int) -> set[int]:
        index, before = previous[gate]
        shape = groups[index]
        direct = {slot for _, slot, _ in shape.plain}
        if before >= 0:
            direct.add(before)
        if shape.gate >= 0:
            direct |= gate_needs(shape.gate)
        return direct

    def needs(slot: int) -> frozenset:
        known = found.get(slot)
        if known is None:
            direct: set[int] = set()
            if nested[slot] >= 0:
                shape = groups[nested[slot]]
                direct.update(member for _, member, _ in shape.plain + shape.scoped)
            if gates[slot] >= 0:
                direct |= gate_needs(gates[slot])
            known = found[slot] = frozenset(direct.union(*(needs(other) for other in direct)))
        return known

    return needs


def _step_gates(schedule: Schedule) -> dict[int, int]:
    gates = {}
    for shape in schedule.groups:
        for _, slot, _ in shape.plain:
            gates[slot] = shape.gate
        for _, slot, _ in shape.scoped:
            gates[slot] = slot
    return gates


_Sim = Generator[list, None, bool]


def start_order(schedule: Schedule, nested: list[int]) -> list[int]:
    """The slots in the order 1.1.3 reaches them: a plain provider when it is called (after its own
    `Depends`), a generator provider when it is entered; one that cannot be matched, when it is
    found so. A provider after a statically failed one in its group (a generator provider after
    one that cannot be matched) is never reached and is not listed."""
    groups = schedule.groups
    order: list[int] = []

    def resolve(index: int) -> _Sim:
        shape = groups[index]
        if shape.plain:
            yield [provide(slot, prep) for _, slot, prep in shape.plain]
            if any(prep.recipe is None for _, _, prep in shape.plain):
                return False
        for _, slot, prep in shape.scoped:
            ok = prep.recipe is not None
            if ok and nested[slot] >= 0:
                ok = yield from resolve(nested[slot])
            order.append(slot)
            if not ok:
                return False
        return True

    def provide(slot: int, prep: Any) -> _Sim:
        if prep.recipe is not None and nested[slot] >= 0:
            yield from resolve(nested[slot])
        order.append(slot)
        return True

    def resolution(position: int) -> _Sim:
        ok = yield from resolve(schedule.roots[position])
        schedule.finish_order.append(position)
        return ok

    def batch() -> _Sim:
        yield [resolution(position) for position in range(len(schedule.roots))]
        return True

    _replay(resolution(0) if len(schedule.roots) == 1 else batch())
    return order


def _replay(main: _Sim) -> None:
    """Run `main` and the tasks it gathers as asyncio would: `main` steps at once; a gathered
    task steps one pass after it was made; a finished task wakes its gather one pass later; the
    gather wakes its waiter one pass after that."""
    ready: deque = deque()

    def step(task: list) -> None:
        gen, waiter = task
        try:
            children = gen.send(None)
        except StopIteration:
            if waiter is not None:
                ready.append((done, waiter))
            return
        joined = [len(children), task]
        for child in children:
            ready.append((step, [child, joined]))

    def done(joined: list) -> None:
        joined[0] -= 1
        if joined[0] == 0:
            ready.append((step, joined[1]))

    step([main, None])
    while ready:
        action, argument = ready.popleft()
        action(argument)


__all__ = ["GroupShape", "Schedule", "build_schedule", "start_order"]
