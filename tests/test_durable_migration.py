"""Moving parked runs onto an edited graph: `restore(..., migrate=True)` and `plan_migration`.

Hand-picked edits around where a run is parked (halted, at a gate, panicked, between nodes,
backing off; before / after / at the pointer, a CALL in flight, inside IF / WHILE / Try /
loops, an interrupt routine, a FUN_BLOCK step, a pointer past the end of a segment or at a
segment), the refusals (gone, ambiguous, reordered duplicates, a loop left), context
migrations, snapshots that predate migration support, malformed identities, and a property
over random programs and random edits (`support.migration_programs`): a migrated run either
is refused or runs on exactly as the edited graph does from the same point.
"""

from __future__ import annotations

import asyncio
import os
import pickle

import pytest

from amrita_sense import IF, SUSPEND, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import (
    Checkpointing,
    CorruptSnapshot,
    GraphMismatch,
    MemoryCheckpointStore,
    MigrationPlan,
    RestoreError,
    graph_fingerprint,
    plan_migration,
)
from amrita_sense.durable.snapshots import format as fmt
from amrita_sense.exceptions import InterruptKeepContext, NullPointerException
from amrita_sense.instructions import CALL, FN, FUN_BLOCK, INT, INTER_FN, NATIVE_IF, NATIVE_WHILE, WHILE, Try
from amrita_sense.policies import Retry
from amrita_sense.streaming import SuspendObjectStream
from support.durable_support import abandon, park, rec, reframed, tag
from support.migration_programs import Tally, check_case

CASES = int(os.environ.get("AMRITA_SENSE_MIGRATION_CASES", "400"))


def chain(trace: list, names: str) -> object:
    """A graph of recording nodes; "S" is SUSPEND."""
    return NodeCompose(*(SUSPEND if n == "S" else rec(trace, n) for n in names.split())).render()


def counting(counts: dict, name: str, limit: int) -> object:
    """A loop condition whose count lives in `counts` (shared by the builds of one test)."""

    def body() -> bool:
        counts[name] = counts.get(name, 0) + 1
        return counts[name] <= limit

    body.__name__ = body.__qualname__ = name
    return Node()(body)


async def halted(graph: object, **kw) -> bytes:
    interp = WorkflowInterpreter(graph, **kw)
    await interp.run()
    return interp.snapshot()


async def parked(graph: object, name: str) -> bytes:
    """The snapshot of a run of `graph` parked at the gate of node `name`."""
    stream = SuspendObjectStream()
    interp = WorkflowInterpreter(graph, object_io=stream)
    task = await park(stream, interp.run, tag(name))
    data = interp.snapshot()
    await abandon(task)
    return data


async def run_to_end(interp: WorkflowInterpreter, runs: int = 6) -> WorkflowInterpreter:
    """Run, and run again after every halt."""
    for _ in range(runs):
        await interp.run()
        if not interp._flag_bits & 2:
            break
    return interp


async def migrated(graph: object, data: bytes, **kw) -> WorkflowInterpreter:
    return await run_to_end(WorkflowInterpreter.restore(graph, data, migrate=True, **kw))


def moves_of(plan: MigrationPlan) -> dict:
    return {slot: (old, new) for slot, old, new in plan.moves}


def without_identity(data: bytes) -> bytes:
    """`data` as a snapshot written before migration support (no "identity" key)."""
    document = dict(fmt.decode(data).document)
    del document["identity"]
    return reframed(data, document=document)


# ----- what lies between: inserted, removed ---------------------------------------------------------


@pytest.mark.asyncio
async def test_a_node_inserted_before_the_pointer_does_not_run_and_one_inserted_after_it_does():
    data = await halted(chain([], "a b S c d"))
    before: list = []
    plan = plan_migration(chain([], "a X b S c d"), data)
    assert moves_of(plan) == {"pointer": ((2,), (3,))} and not plan.identical
    await migrated(chain(before, "a X b S c d"), data)
    assert before == ["c", "d"]
    after: list = []
    await migrated(chain(after, "a b S Y c d"), data)
    assert after == ["Y", "c", "d"]


@pytest.mark.asyncio
async def test_a_node_removed_behind_the_pointer_and_one_ahead_of_it():
    data = await parked(chain([], "a b c d e"), "c")
    behind: list = []
    await migrated(chain(behind, "a c d e"), data)
    assert behind == ["c", "d", "e"]
    ahead: list = []
    await migrated(chain(ahead, "a b c e"), data)
    assert ahead == ["c", "e"]


@pytest.mark.asyncio
async def test_a_panicked_run_recovers_at_its_failing_node_on_the_edited_graph():
    def build(trace: list, edited: bool) -> object:
        failing = rec(trace, "f", exc=ValueError("f failed"))
        nodes = [rec(trace, "a"), *([rec(trace, "new")] if edited else []), failing, rec(trace, "b")]
        return NodeCompose(*nodes).render()

    interp = WorkflowInterpreter(build([], False))
    with pytest.raises(ValueError):
        await interp.run()
    data = interp.snapshot()
    fresh: list = []
    again = WorkflowInterpreter.restore(build(fresh, True), data, migrate=True)
    assert isinstance(again.get_exception(), ValueError)
    with pytest.raises(ValueError, match="f failed"):  # recovering runs the failing node again, not "new"
        await again.run()
    assert fresh == ["f"]


@pytest.mark.asyncio
async def test_between_nodes_the_next_node_is_the_pointers_node():
    trace: list = []
    interp = WorkflowInterpreter(chain(trace, "a b c"))
    steps = interp.run_step_by()
    await steps.__anext__()  # "a" has run: the snapshot points at "b"
    data = interp.snapshot()
    await steps.aclose()
    assert moves_of(plan_migration(chain([], "X a Y b c"), data)) == {"pointer": ((1,), (3,))}
    fresh: list = []
    await migrated(chain(fresh, "X a Y b c"), data)
    assert fresh == ["b", "c"]


@pytest.mark.asyncio
async def test_the_node_at_the_pointer_removed_is_refused_naming_it():
    data = await parked(chain([], "a b c d"), "c")
    edited = chain([], "a b d")
    with pytest.raises(GraphMismatch) as caught:
        WorkflowInterpreter.restore(edited, data, migrate=True)
    error = caught.value
    assert str(error).startswith("cannot move the pointer [2] (row 2 of the snapshot's graph: Node `")
    assert "support.durable_support:c` tagged 'NodeSuspend::c'" in str(error)
    assert str(error).endswith("its node is not in this graph")
    assert (error.address, error.row) == ([2], 2)
    assert (error.expected, error.actual) == (graph_fingerprint(chain([], "a b c d")), graph_fingerprint(edited))
    with pytest.raises(GraphMismatch) as planned:
        plan_migration(edited, data)
    assert str(planned.value) == str(error)


@pytest.mark.asyncio
async def test_a_node_made_ambiguous_by_a_duplicate_is_refused():
    data = await parked(chain([], "a b c d"), "c")
    with pytest.raises(GraphMismatch, match="appears once in the snapshot's graph and 2 times in this one"):
        WorkflowInterpreter.restore(chain([], "a b c d c"), data, migrate=True)
    duplicated = await parked(chain([], "a c b c d"), "c")  # parked at the first c
    with pytest.raises(GraphMismatch, match="appears 2 times in the snapshot's graph and once in this one"):
        WorkflowInterpreter.restore(chain([], "a b c d"), duplicated, migrate=True)
    same: list = []  # as many c as before, around the same neighbours: the first is still the first
    await migrated(chain(same, "a c X b c d"), duplicated)
    assert same == ["c", "X", "b", "c", "d"]


# ----- stacks: a CALL in flight, loops, contexts --------------------------------------------------


def call_graph(trace: list, edited: bool = False) -> object:
    body = ["x", "S", "y"] if not edited else ["w", "x", "S", "y"]
    function = FN("f", NodeCompose(*(SUSPEND if n == "S" else rec(trace, n) for n in body)))
    if not edited:
        return NodeCompose(rec(trace, "a"), CALL("f"), rec(trace, "b"), function).render()
    main = [rec(trace, "a0"), rec(trace, "a"), CALL("f"), rec(trace, "after_call"), rec(trace, "b")]
    return NodeCompose(function, *main).render()


@pytest.mark.asyncio
async def test_a_call_in_flight_moves_with_its_subroutine_and_returns_after_its_call():
    trace: list = []
    data = await halted(call_graph(trace))
    assert trace == ["a", "x"]
    plan = plan_migration(call_graph([], edited=True), data)
    assert moves_of(plan) == {"pointer": ((3, 2, 1), (0, 2, 2)), "return address 0": ((1,), (3,))}
    fresh: list = []
    await migrated(call_graph(fresh, edited=True), data)
    assert fresh == ["y", "after_call", "b"]


def block_graph(trace: list, counts: dict, kind: str, edited: bool) -> object:
    if kind == "if":
        block = IF(rec(trace, "cond"), SUSPEND)
    elif kind == "while":
        block = WHILE(counting(counts, "w", 2)).ACTION(SUSPEND)
    elif kind == "try":
        block = Try(SUSPEND).FINALLY(rec(trace, "fin"))
    elif kind == "native_if":
        block = NATIVE_IF(rec(trace, "cond"), NodeCompose(rec(trace, "x"), SUSPEND, rec(trace, "y")))
    else:
        body = [rec(trace, "x"), SUSPEND, rec(trace, "y")]
        block = NATIVE_WHILE(counting(counts, "w", 2)).ACTION(
            NodeCompose(*([rec(trace, "z")] if edited else []), *body)
        )
    nodes = [rec(trace, "a"), block, rec(trace, "b")]
    if edited:
        nodes = [rec(trace, "before"), *nodes[:2], rec(trace, "after"), nodes[2]]
    return NodeCompose(*nodes).render()


REMAINDERS = {
    "if": ["after", "b"],
    "while": ["after", "b"],  # the second turn halts again: run_to_end runs on after it
    "try": ["after", "b"],
    "native_if": ["y", "after", "b"],
    "native_while": ["y", "z", "x", "y", "after", "b"],  # the second turn runs the new z
}


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", sorted(REMAINDERS))
async def test_a_run_halted_inside_a_block_moves_with_the_block(kind):
    counts: dict = {}
    trace: list = []
    data = await halted(block_graph(trace, counts, kind, edited=False))
    fresh: list = []
    await migrated(block_graph(fresh, counts, kind, edited=True), data)
    assert fresh == REMAINDERS[kind]


def two_loops(trace: list, counts: dict, order: str, head: tuple = ()) -> object:
    loops = {
        "1": NATIVE_WHILE(counting(counts, "w1", 1)).ACTION(NodeCompose(rec(trace, "x1"), rec(trace, "y1"))),
        "2": NATIVE_WHILE(counting(counts, "w2", 1)).ACTION(NodeCompose(rec(trace, "x2"), rec(trace, "y2"))),
    }
    return NodeCompose(
        *(rec(trace, n) for n in head), rec(trace, "a"), *(loops[k] for k in order), rec(trace, "b")
    ).render()


@pytest.mark.asyncio
async def test_duplicates_are_told_apart_by_their_neighbours_and_refused_once_reordered():
    counts: dict = {}
    data = await parked(two_loops([], counts, "12"), "y1")  # the first loop's head is on the return stack
    fresh: list = []
    await migrated(two_loops(fresh, counts, "12", head=("new",)), data)
    assert fresh == ["y1", "x2", "y2", "b"]
    with pytest.raises(GraphMismatch) as caught:
        WorkflowInterpreter.restore(two_loops([], counts, "21"), data, migrate=True)
    assert str(caught.value).startswith("cannot move the return address 0 [1, 0] (row 1 of the snapshot's graph: ")
    assert "appears 2 times in both graphs, but the rows around occurrence 0 changed" in str(caught.value)


@pytest.mark.asyncio
async def test_a_node_moved_out_of_the_loop_it_was_parked_in_is_refused():
    counts: dict = {}

    def build(trace: list, moved: bool) -> object:
        body = [rec(trace, "y")] if moved else [rec(trace, "x"), rec(trace, "y")]
        loop = NATIVE_WHILE(counting(counts, "w", 1)).ACTION(NodeCompose(*body))
        return NodeCompose(rec(trace, "a"), loop, *([rec(trace, "x")] if moved else []), rec(trace, "b")).render()

    data = await parked(build([], False), "x")
    with pytest.raises(GraphMismatch, match=r"return address 0 \[1, 0\] .*the pointer lies in the segment the entry"):
        WorkflowInterpreter.restore(build([], True), data, migrate=True)


@pytest.mark.asyncio
async def test_an_interrupt_context_and_the_return_address_it_computed_move_too():
    def build(trace: list, edited: bool) -> object:
        routine = INTER_FN("isr", NodeCompose(rec(trace, "in"), SUSPEND, rec(trace, "out")))
        head = [rec(trace, "new")] if edited else []
        return NodeCompose(*head, rec(trace, "a"), INT("isr"), rec(trace, "b"), routine).render()

    data = await halted(build([], False))
    plan = moves_of(plan_migration(build([], True), data))
    assert plan["context 0"] == ((1,), (2,)) and plan["memo 0 node"] == plan["memo 0 address"] == ((1,), (2,))
    fresh: list = []
    graph = build(fresh, True)
    again = await migrated(graph, data)
    assert fresh == ["out", "b"] and not again.context_stack
    assert graph[2]._ret_addr == [2]  # the INT's kept return address, moved with it


def policy_graph(calls: list, edited: bool) -> object:
    @Node(retry=Retry(attempts=2, retry_on=ConnectionError, delay=0.2, jitter=0))
    async def flaky() -> None:
        calls.append(1)
        raise ConnectionError(f"attempt {len(calls)} failed")

    return NodeCompose(rec([], "a"), *([rec([], "new")] if edited else []), flaky, rec([], "b")).render()


@pytest.mark.asyncio
async def test_the_attempts_of_a_node_backing_off_move_with_it():
    calls: list = []
    interp = WorkflowInterpreter(policy_graph(calls, False))
    task = asyncio.ensure_future(interp.run())
    while not calls:
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.02)  # the first attempt failed: the node waits out its backoff
    data = interp.snapshot()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert moves_of(plan_migration(policy_graph([], True), data))["attempts 0"] == ((1,), (2,))
    again = WorkflowInterpreter.restore(policy_graph(calls, True), data, migrate=True)
    with pytest.raises(ConnectionError, match="attempt 2 failed"):  # the last attempt, not a fresh first one
        await again.run()
    assert len(calls) == 2


# ----- a step in flight --------------------------------------------------------------------------------


def fun_block_graph(trace: list, edited: str = "") -> object:
    inner = NodeCompose(rec(trace, "x"), rec(trace, "y"), *([rec(trace, "inner")] if edited == "sub" else []))
    nodes = [rec(trace, "a"), FUN_BLOCK(inner.render()), rec(trace, "b")]
    if edited == "around":
        nodes.insert(0, rec(trace, "new"))
    return NodeCompose(*nodes).render()


@pytest.mark.asyncio
async def test_a_fun_block_step_in_flight_moves_only_with_its_sub_graph_unchanged():
    data = await parked(fun_block_graph([]), "y")
    fresh: list = []
    assert moves_of(plan_migration(fun_block_graph([], "around"), data))["step in flight"] == ((1,), (2,))
    await migrated(fun_block_graph(fresh, "around"), data)
    assert fresh == ["y", "b"]
    with pytest.raises(GraphMismatch, match=r"the pointer \[1\] .*a step in flight moves only with its sub-graphs"):
        WorkflowInterpreter.restore(fun_block_graph([], "sub"), data, migrate=True)


# ----- addresses that are not a row ----------------------------------------------------------------------


def off_row_graph(trace: list, target: list[int], edited: str = "", done: list | None = None) -> object:
    """a, [b, h, c], d: h points the run at `target` (past the end of its segment, or a segment) and halts,
    the first time (of the builds sharing `done`)."""
    done = [] if done is None else done

    def h(pc: WorkflowInterpreter) -> None:
        trace.append("h")
        if not done:
            done.append(1)
            pc.rebase_ptr(list(target))
            raise InterruptKeepContext("h")

    h.__name__ = h.__qualname__ = "h"
    segment = [rec(trace, "b"), Node()(h), rec(trace, "c")]
    if edited == "start":
        segment.insert(0, rec(trace, "first"))
    if edited == "end":
        segment.append(rec(trace, "last"))
    nodes = [rec(trace, "a"), NodeCompose(*segment), rec(trace, "d")]
    if edited == "before":
        nodes.insert(0, rec(trace, "new"))
    return NodeCompose(*nodes).render()


@pytest.mark.asyncio
async def test_a_pointer_past_the_end_of_a_segment_moves_with_the_row_it_ran_past():
    data = await halted(off_row_graph([], [1, 3]))
    assert moves_of(plan_migration(off_row_graph([], [1, 3], "before"), data)) == {"pointer": ((1, 3), (2, 3))}
    original = WorkflowInterpreter.restore(off_row_graph([], [1, 3]), data)
    with pytest.raises(NullPointerException) as expected:
        await original.run()
    with pytest.raises(NullPointerException) as got:
        await migrated(off_row_graph([], [1, 3], "before"), data)
    assert str(got.value) == str(expected.value)
    with pytest.raises(GraphMismatch, match=r"pointer \[1, 3\] \(row 3 .*: it is past the end of the segment"):
        plan_migration(off_row_graph([], [1, 3], "end"), data)


@pytest.mark.asyncio
async def test_a_pointer_at_a_segment_keeps_naming_the_segment():
    done: list = []
    data = await halted(off_row_graph([], [1], done=done))
    assert moves_of(plan_migration(off_row_graph([], [1], "before"), data)) == {"pointer": ((1,), (2,))}
    fresh: list = []
    await migrated(off_row_graph(fresh, [1], "before", done), data)
    assert fresh == ["b", "h", "c", "d"]  # stepping past a segment address enters it
    with pytest.raises(GraphMismatch, match=r"its node does not start a segment 1 up"):
        plan_migration(off_row_graph([], [1], "start"), data)


# ----- context migrations ---------------------------------------------------------------------------------


class Ctx:
    def __init__(self, value: int) -> None:
        self.value = value


def ctx_graph(seen: list, edited: bool) -> object:
    @Node(wrap_to_async=False)
    def use(ctx: Ctx, label: str) -> None:
        seen.append((ctx.value, label))

    return NodeCompose(*([rec([], "new")] if edited else []), SUSPEND, use).render()


def times_ten(args: tuple, kwargs: dict) -> tuple:
    return tuple(Ctx(a.value * 10) for a in args), {**kwargs, "label": kwargs["label"] + "!"}


@pytest.mark.asyncio
async def test_a_context_migration_rewrites_the_stored_pools_of_its_graph_only():
    seen: list = []
    old = ctx_graph([], False)
    data = await run_to_end(WorkflowInterpreter(old, extra_args=(Ctx(1),), extra_kwargs={"label": "x"}))
    data = data.snapshot(pickle)
    fingerprint = graph_fingerprint(old)
    await migrated(
        ctx_graph(seen, True), data, codec=pickle, allow_unsigned=True, context_migrations={fingerprint: times_ten}
    )
    await migrated(
        ctx_graph(seen, True), data, codec=pickle, allow_unsigned=True, context_migrations={"0" * 32: times_ten}
    )
    await migrated(
        ctx_graph(seen, False), data, codec=pickle, allow_unsigned=True, context_migrations={fingerprint: times_ten}
    )
    assert seen == [(10, "x!"), (1, "x"), (10, "x!")]


@pytest.mark.asyncio
async def test_a_failing_context_migration_is_a_restore_error_naming_the_graph():
    old = ctx_graph([], False)
    interp = await run_to_end(WorkflowInterpreter(old, extra_args=(Ctx(1),), extra_kwargs={"label": "x"}))
    data, fingerprint = interp.snapshot(pickle), graph_fingerprint(old)

    def boom(args: tuple, kwargs: dict) -> tuple:
        raise KeyError("version 2 has no label")

    for migration, message in ((boom, "raised KeyError"), (lambda a, k: [a, k], "returned list, not")):
        with pytest.raises(RestoreError, match=f"context migration for graph {fingerprint} {message}"):
            WorkflowInterpreter.restore(ctx_graph([], True), data, codec=pickle, allow_unsigned=True, migrate=True,
                                        context_migrations={fingerprint: migration})  # fmt: skip


@pytest.mark.asyncio
async def test_bad_migration_arguments_are_type_errors_at_the_call():
    data = await halted(chain([], "a S b"))
    graph = chain([], "a S b")
    for bad, message in (
        ({"migrate": 1}, "migrate must be True or False"),
        ({"context_migrations": [times_ten]}, "must map graph fingerprints to callables"),
        ({"context_migrations": {1: times_ten}}, "is a graph fingerprint"),
        ({"context_migrations": {"f" * 32: "times_ten"}}, "must be callable"),
    ):
        with pytest.raises(TypeError, match=message):
            WorkflowInterpreter.restore(graph, data, **bad)
    with pytest.raises(TypeError, match="rendered graph"):
        plan_migration(NodeCompose(rec([], "a")), data)


# ----- compatibility: without migrate, old snapshots, bad identities --------------------------------------------


@pytest.mark.asyncio
async def test_without_migrate_an_edited_graph_is_refused_as_before():
    data = await halted(chain([], "a b S c d"))
    with pytest.raises(GraphMismatch) as plain:
        WorkflowInterpreter.restore(chain([], "a X b S c d"), data)
    with pytest.raises(GraphMismatch) as explicit:
        WorkflowInterpreter.restore(chain([], "a X b S c d"), data, migrate=False)
    assert str(plain.value) == str(explicit.value) and plain.value.address == [1]
    assert "the graph differs from the snapshot's graph first at [1] (row 1)" in str(plain.value)


@pytest.mark.asyncio
async def test_migrate_on_the_snapshots_own_graph_is_a_plain_restore():
    trace: list = []
    data = await halted(chain([], "a b S c"))
    plan = plan_migration(chain([], "a b S c"), data)
    assert plan.identical and plan.old_fingerprint == plan.new_fingerprint
    assert moves_of(plan) == {"pointer": ((2,), (2,))}
    await migrated(chain(trace, "a b S c"), data)
    assert trace == ["c"]


@pytest.mark.asyncio
async def test_a_snapshot_that_predates_migration_support_restores_as_before_and_does_not_migrate():
    data = without_identity(await halted(chain([], "a b S c d")))
    same: list = []
    await run_to_end(WorkflowInterpreter.restore(chain(same, "a b S c d"), data))
    await migrated(chain(same, "a b S c d"), data)
    assert same == ["c", "d", "c", "d"]
    assert plan_migration(chain([], "a b S c d"), data) == MigrationPlan(
        graph_fingerprint(chain([], "a b S c d")), graph_fingerprint(chain([], "a b S c d")), (), True
    )
    with pytest.raises(GraphMismatch, match="predates migration support") as caught:
        WorkflowInterpreter.restore(chain([], "a X b S c d"), data, migrate=True)
    assert caught.value.address is None
    passed: list = []  # with accept_passed_edits too, the edits it accepts are accepted as before
    await migrated(chain(passed, "A b S c d"), data, accept_passed_edits=True)
    assert passed == ["c", "d"]


def anchor(**changes) -> list:
    """An anchor of the halted sample (see `migrate`) with some fields changed."""
    fields = dict(
        at=[1], kind="row", depth=0, frames=0, row=1, id="0" * 16, nth=0, of=1, gap=None, enters=None, node="n"
    )
    fields.update(changes)
    return list(fields.values())


BAD_IDENTITIES = [
    ("x", r"identity: expected a list of anchors"),
    ([1], r"identity\[0\]: expected an anchor \(a list of 11 fields\)"),
    ([anchor()[:9]], r"identity\[0\]: expected an anchor"),
    ([anchor(at=[])], r"identity\[0\]\[0\]: expected a non-empty address"),
    ([anchor(kind="beside")], r"identity\[0\]\[1\]: expected one of row, first, after"),
    ([anchor(depth=1)], r"identity\[0\]\[2\]: a depth of 1 does not fit"),
    ([anchor(frames=2)], r"identity\[0\]\[3\]: expected an integer in \[0, 1\]"),
    ([anchor(row=99)], r"identity\[0\]\[4\]: expected an integer in \[0, 2\]"),
    ([anchor(id="xyz")], r"identity\[0\]\[5\]: expected an identity"),
    ([anchor(id="g" * 16)], r"identity\[0\]\[5\]: expected an identity"),
    ([anchor(nth=1)], r"identity\[0\]\[6\]: expected an integer in \[0, 0\]"),
    ([anchor(of=-1)], r"identity\[0\]\[7\]: expected an integer"),
    ([anchor(gap=[None, None, 0, 1])], r"identity\[0\]\[8\]: a unique row has no gap"),
    ([anchor(of=2, gap=[None, None, 2, 2])], r"identity\[0\]\[8\]\[2\]: expected an integer"),
    ([anchor(of=2, gap=[None, "z", 0, 2])], r"identity\[0\]\[8\]\[1\]: expected an identity"),
    ([anchor(enters="[1]")], r"identity\[0\]\[9\]: expected a segment address or null"),
    ([anchor(node=5)], r"identity\[0\]\[10\]: expected a description"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize("value, message", BAD_IDENTITIES)
async def test_a_malformed_identity_is_a_corrupt_snapshot_naming_it(value, message):
    data = await halted(chain([], "a S b"))
    document = {**fmt.decode(data).document, "identity": value}
    bad = reframed(data, document=document)
    for call in (
        lambda: WorkflowInterpreter.restore(chain([], "a S b"), bad),
        lambda: plan_migration(chain([], "a S b"), bad),
    ):
        with pytest.raises(CorruptSnapshot, match=message):
            call()


@pytest.mark.asyncio
async def test_checkpointing_resumes_a_saved_run_onto_an_edited_graph():
    store = MemoryCheckpointStore()
    interp = WorkflowInterpreter(chain([], "a S b"))
    interp.checkpointing = Checkpointing(store, "run")
    await interp.run()
    fresh: list = []
    again = await Checkpointing(store, "run").resume(chain(fresh, "a S new b"), migrate=True)
    await again.run()
    assert fresh == ["new", "b"]


# ----- the property: random programs, random edits, random points --------------------------------------------


@pytest.mark.asyncio
async def test_a_migrated_run_is_refused_or_runs_on_as_the_edited_graph_does():
    tally = Tally()
    for seed in range(CASES):
        await check_case(seed, tally)
    summary = {key: value for key, value in vars(tally).items() if key not in ("misplaced", "reasons")}
    print(f"\nmigration property: {summary}, refusals by reason: {tally.reasons}")
    assert tally.misplaced == [], f"{len(tally.misplaced)} silent misplacements, first: {tally.misplaced[:3]}"
    assert tally.refused and tally.moved and tally.restored > CASES // 2, summary
