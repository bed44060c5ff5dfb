"""Runs that wait (issue 46): WAIT / SLEEP / SLEEP_UNTIL in the graph, `Checkpointing(graph=)`,
`store.send`, and a `Waker` resuming the runs; on the memory and the SQLite store, both builds,
both loops. (Processes killed mid-run: tests/test_durable_waits_kill.py.)
"""

from __future__ import annotations

import asyncio
import math
import pickle
import time
from datetime import datetime, timezone
from typing import Any

import pytest

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import (
    SLEEP,
    SLEEP_UNTIL,
    STATUSES,
    WAIT,
    Checkpointing,
    Keyring,
    LeaseLost,
    MemoryCheckpointStore,
    Message,
    WaitError,
    WaitTimeout,
    Waker,
    inspect_snapshot,
)
from amrita_sense.durable.errors import TamperedMessage
from amrita_sense.instructions import FUN_BLOCK, WHILE, Try

STORES = ["memory", "sqlite", "postgres"]


class Log:
    """What the nodes saw (kept in the process: these runs all run in it)."""

    def __init__(self) -> None:
        self.items: list[Any] = []


def recorder(name: str) -> Any:
    async def record(log: Log, pc: WorkflowInterpreter) -> None:
        log.items.append(name)

    record.__name__ = record.__qualname__ = name
    return Node()(record)


@Node()
async def got(log: Log, message: Message, pc: WorkflowInterpreter) -> None:
    """Records the message injected by type, and what the stream's reverse channel holds."""
    log.items.append(("message", message.topic, message.payload, message.message_id))
    log.items.append(("stream", [m.payload for m in pc.object_io.drain_producer_input()]))


def start(program: Any, store: Any, run_id: str, log: Log, **policy: Any) -> WorkflowInterpreter:
    interp = WorkflowInterpreter(program, extra_args=(log,))
    policy.setdefault("graph", "g")
    interp.checkpointing = Checkpointing(store, run_id, **policy)
    return interp


def waker_for(store: Any, graph: Any, log: Log, **options: Any) -> Waker:
    options.setdefault("restore_kwargs", {"extra_args": (log,)})
    return Waker(store, {"g": lambda: graph}, **options)


async def until_resumed(waker: Waker, rounds: int = 400) -> int:
    """Rounds of `waker` until one resumes a run (a timer's run is not due at once)."""
    for _ in range(rounds):
        resumed = await waker.run_once()
        if resumed:
            return resumed
        await asyncio.sleep(0.01)
    raise AssertionError("no run became due")


# ----- declaration ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: WAIT(""), ValueError),
        (lambda: WAIT(7), TypeError),
        (lambda: WAIT("t" * 513), ValueError),
        (lambda: WAIT("t", timeout=0), ValueError),
        (lambda: WAIT("t", timeout=-1), ValueError),
        (lambda: WAIT("t", timeout=math.inf), ValueError),
        (lambda: WAIT("t", timeout=math.nan), ValueError),
        (lambda: WAIT("t", timeout="5"), TypeError),
        (lambda: SLEEP(0), ValueError),
        (lambda: SLEEP(True), TypeError),
        (lambda: SLEEP(math.inf), ValueError),
        (lambda: SLEEP_UNTIL(datetime(2030, 1, 1)), ValueError),
        (lambda: SLEEP_UNTIL("tomorrow"), TypeError),
        (lambda: SLEEP_UNTIL(math.nan), ValueError),
    ],
)
def test_bad_arguments_are_refused_at_declaration(make, error):
    with pytest.raises(error):
        make()


def test_waiting_is_a_status_after_the_old_ones():
    assert STATUSES[:6] == ("ready", "running", "suspended", "halted", "panicked", "finished")
    assert STATUSES[6] == "waiting"


def test_a_graph_name_needs_a_store_that_keeps_waits():
    class PlainStore:  # the checkpoint protocol only, as a third-party store may have
        def __init__(self) -> None:
            self.inner = MemoryCheckpointStore()

        def save(self, run_id, data, *, expected_version=None):
            return self.inner.save(run_id, data, expected_version=expected_version)

        def load(self, run_id):
            return self.inner.load(run_id)

        def list(self, *, status=None):
            return self.inner.list(status=status)

        def delete(self, run_id, *, expected_version=None):
            return self.inner.delete(run_id, expected_version=expected_version)

    with pytest.raises(TypeError, match="keeps waits"):
        Checkpointing(PlainStore(), "r", graph="g")
    Checkpointing(PlainStore(), "r")  # without a graph name it is a checkpoint store as before
    with pytest.raises(ValueError, match="graph"):
        Checkpointing(MemoryCheckpointStore(), "r", graph="")


# ----- a wait outside a run that can wait -----------------------------------------------------------


@pytest.mark.asyncio
async def test_a_wait_without_checkpointing_says_what_to_pass():
    interp = WorkflowInterpreter(NodeCompose(WAIT("t"), recorder("after")).render(), extra_args=(Log(),))
    with pytest.raises(WaitError, match=r"Checkpointing\(store, run_id, graph=NAME\)"):
        await interp.run()


@pytest.mark.asyncio
async def test_a_wait_under_a_policy_without_a_graph_name_names_the_run():
    store, log = MemoryCheckpointStore(), Log()
    interp = start(NodeCompose(SLEEP(5), recorder("after")).render(), store, "r-1", log, graph=None)
    with pytest.raises(WaitError, match=r"'r-1'.*graph=NAME"):
        await interp.run()
    assert log.items == []


@pytest.mark.asyncio
async def test_a_wait_in_a_fun_block_sub_interpreter_is_refused():
    store, log = MemoryCheckpointStore(), Log()
    graph = NodeCompose(FUN_BLOCK(NodeCompose(WAIT("t"), recorder("inner")).render()), recorder("after")).render()
    interp = start(graph, store, "r-fb", log)
    with pytest.raises(BaseException) as caught:
        await interp.run()
    found = caught.value
    while found is not None and not isinstance(found, WaitError):
        found = found.__cause__ or found.__context__ or (found.exceptions[0] if hasattr(found, "exceptions") else None)
    assert isinstance(found, WaitError), caught.value
    assert "sub-interpreter" in str(found)
    assert "inner" not in log.items


# ----- WAIT, send, a waker ----------------------------------------------------------------------------


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_wait_parks_and_a_waker_delivers_the_message_by_type_and_through_the_stream(kind, durability, make_store):
    store, log = make_store(kind), Log()
    graph = NodeCompose(recorder("before"), WAIT("approval"), got, recorder("after")).render()
    interp = start(graph, store, "exp-1", log, durability=durability, history=True)
    await interp.run()
    policy_options = {"durability": durability, "history": True}
    assert log.items == ["before"]
    assert store.load("exp-1").record.status == "waiting"
    assert inspect_snapshot(store.load("exp-1").data).status == "waiting"
    waker = waker_for(store, graph, log, policy_options=policy_options)
    assert await waker.run_once() == 0  # nothing sent yet: not due

    store.send("exp-1", "approval", {"ok": True}, message_id="m-1")
    assert await waker.run_once() == 1
    assert log.items == [
        "before",
        ("message", "approval", {"ok": True}, "m-1"),
        ("stream", [{"ok": True}]),
        "after",
    ]
    assert store.load("exp-1").record.status == "finished"
    assert [r.status for r in store.history("exp-1")][-1] == "finished"
    assert "waiting" in [r.status for r in store.history("exp-1")]
    assert store.messages("exp-1") == []  # delivered
    assert [m.message_id for m in store.messages("exp-1", pending=False)] == ["m-1"]
    assert await waker.run_once() == 0
    assert not waker.failures and waker.resumed == 1


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_a_message_sent_before_the_run_reaches_its_wait_is_delivered_there(kind, make_store):
    store, log = make_store(kind), Log()

    @Node()
    async def send_early(log: Log) -> None:  # the run exists (saved after the first node)
        store.send("early", "go", "sent while running", message_id="e-1")
        log.items.append("sent")

    graph = NodeCompose(recorder("first"), send_early, WAIT("go"), got).render()
    await start(graph, store, "early", log).run()
    assert store.load("early").record.status == "waiting"
    assert await waker_for(store, graph, log).run_once() == 1
    assert log.items == [
        "first",
        "sent",
        ("message", "go", "sent while running", "e-1"),
        ("stream", ["sent while running"]),
    ]


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_two_waits_on_one_topic_get_two_messages_in_order(kind, make_store):
    store, log = make_store(kind), Log()
    graph = NodeCompose(WAIT("chat"), got, WAIT("chat"), got).render()
    await start(graph, store, "chat-1", log).run()
    store.send("chat-1", "chat", "first", message_id="b")
    store.send("chat-1", "chat", "second", message_id="a")
    waker = waker_for(store, graph, log)
    resumed = 0
    for _ in range(10):
        resumed += await waker.run_once()
        if store.load("chat-1").record.status == "finished":
            break
    assert resumed == 2
    assert [item[2] for item in log.items if item[0] == "message"] == ["first", "second"]
    assert store.messages("chat-1") == []


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_a_wait_timeout_raises_wait_timeout_that_try_catch_handles(kind, make_store):
    store, log = make_store(kind), Log()

    @Node()
    async def on_timeout(log: Log, exc_val: BaseException) -> None:
        log.items.append(("timeout", type(exc_val).__name__, str(exc_val)))

    graph = NodeCompose(Try(WAIT("reply", timeout=0.2)).CATCH(WaitTimeout, on_timeout), recorder("after")).render()
    await start(graph, store, "to-1", log).run()
    assert store.load("to-1").record.status == "waiting"
    assert await until_resumed(waker_for(store, graph, log)) == 1
    assert log.items[0][:2] == ("timeout", "WaitTimeout")
    assert "'reply'" in log.items[0][2] and "'to-1'" in log.items[0][2]
    assert log.items[1:] == ["after"]
    assert store.load("to-1").record.status == "finished"


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_a_wait_timeout_uncaught_panics_the_run_with_it(kind, make_store):
    store, log = make_store(kind), Log()
    graph = NodeCompose(WAIT("reply", timeout=0.1), recorder("after")).render()
    await start(graph, store, "to-2", log).run()
    waker = waker_for(store, graph, log)
    await until_resumed(waker)
    assert store.load("to-2").record.status == "panicked"
    assert any(isinstance(error, WaitTimeout) for _, error in waker.failures)
    assert log.items == []


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_sleep_resumes_only_after_its_time(kind, make_store):
    store, log = make_store(kind), Log()

    @Node()
    async def woke(log: Log) -> None:
        log.items.append(("woke", time.time()))

    graph = NodeCompose(SLEEP(0.3), woke).render()
    began = time.time()
    await start(graph, store, "nap", log).run()
    assert store.load("nap").record.status == "waiting"
    await until_resumed(waker_for(store, graph, log))
    (name, at), *rest = log.items
    assert name == "woke" and at >= began + 0.3 and not rest


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_serve_restores_a_timer_run_ahead_and_starts_it_at_its_time(kind, make_store):
    """`lookahead`: the run is claimed and restored before its timer ends, and its next node runs
    only once it has."""
    store, log = make_store(kind), Log()
    restored: list[float] = []

    @Node()
    async def woke(log: Log) -> None:
        log.items.append(("woke", time.time()))

    def restore_kwargs(run_id: str, name: str) -> dict:
        restored.append(time.time())
        return {"extra_args": (log,)}

    graph = NodeCompose(SLEEP(1.2), woke).render()
    await start(graph, store, "nap", log).run()
    due = store.next_due()
    waker = Waker(
        store, {"g": graph}, restore_kwargs=restore_kwargs, lookahead=1.0, lease_seconds=3, poll_interval=0.05
    )
    async with waker:
        await until(lambda: log.items, "the run woke")
    ((name, woke_at),) = log.items
    assert name == "woke" and restored[0] < due - 0.5 and woke_at >= due
    assert waker.resumed == 1 and not waker.failures and store.load("nap").record.status == "finished"


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_a_stopped_waker_releases_the_runs_it_held_for_their_timers_unstarted(kind, make_store):
    store, log = make_store(kind), Log()
    graph = NodeCompose(SLEEP(5), recorder("woke")).render()
    await start(graph, store, "nap", log).run()
    due = store.next_due()
    async with waker_for(store, graph, log, lookahead=8, poll_interval=0.05) as waker:
        # held: the next timer to wake for is the lease's end, past the run's own
        await until(lambda: store.next_due() > due + 1, "the run was claimed ahead")
    assert log.items == [] and waker.resumed == 0 and not waker.failures
    assert store.next_due() == pytest.approx(due)  # released: free for any waker once due
    (claim,) = store.claim_due("w2", lease_seconds=1, now=due + 0.1)
    assert claim.run_id == "nap" and claim.record.status == "waiting"


def test_lookahead_is_at_most_a_third_of_the_lease():
    store, graph = MemoryCheckpointStore(), NodeCompose(SLEEP(5), recorder("woke")).render()
    with pytest.raises(ValueError, match="lookahead"):
        Waker(store, {"g": graph}, lease_seconds=3, lookahead=1.5)
    with pytest.raises(ValueError, match="lookahead"):
        Waker(store, {"g": graph}, lookahead=-1)
    assert Waker(store, {"g": graph}, lease_seconds=1.5).lookahead == 0.5  # the default, bounded
    assert Waker(store, {"g": graph}).lookahead == 1.0


@pytest.mark.asyncio
async def test_sleep_until_an_aware_datetime_already_passed_resumes_at_the_next_round():
    store, log = MemoryCheckpointStore(), Log()
    graph = NodeCompose(SLEEP_UNTIL(datetime(2001, 1, 1, tzinfo=timezone.utc)), recorder("after")).render()
    await start(graph, store, "past", log).run()
    assert store.load("past").record.status == "waiting"
    assert await waker_for(store, graph, log).run_once() == 1
    assert log.items == ["after"]


@pytest.mark.asyncio
async def test_a_message_with_the_run_codec_and_keyring_round_trips():
    store, log = MemoryCheckpointStore(), Log()
    keys = Keyring({"k1": b"a test key of the waits suite...."})
    graph = NodeCompose(WAIT("t"), got).render()
    interp = WorkflowInterpreter(graph, extra_args=(log,))
    interp.checkpointing = Checkpointing(store, "signed", codec=pickle, keyring=keys, graph="g")
    await interp.run()
    store.send("signed", "t", {1, 2}, codec=pickle, keyring=keys, message_id="s")
    waker = Waker(store, {"g": graph}, codec=pickle, keyring=keys)
    assert await waker.run_once() == 1
    # the pools came back through the codec: the log the waker's run wrote is a copy
    assert store.load("signed").record.status == "finished"
    assert not waker.failures


@pytest.mark.asyncio
async def test_a_bad_payload_is_a_typed_error_and_the_run_and_message_are_kept():
    store, log = MemoryCheckpointStore(), Log()
    keys = Keyring({"k1": b"a test key of the waits suite...."})
    graph = NodeCompose(WAIT("t"), got).render()
    interp = WorkflowInterpreter(graph, extra_args=(log,))
    interp.checkpointing = Checkpointing(store, "bad", codec=pickle, keyring=keys, graph="g")
    await interp.run()
    store.send("bad", "t", "unsigned", codec=pickle, message_id="u")  # not signed: refused by the waker
    waker = Waker(store, {"g": graph}, codec=pickle, keyring=keys)
    assert await waker.run_once() == 0
    (run_id, error), *_ = waker.failures
    assert run_id == "bad" and isinstance(error, TamperedMessage)
    assert store.load("bad").record.status == "waiting"
    assert [m.message_id for m in store.messages("bad")] == ["u"]


@pytest.mark.asyncio
async def test_a_changed_graph_is_refused_naming_the_run_and_migrate_moves_it():
    store, log = MemoryCheckpointStore(), Log()
    old = NodeCompose(recorder("a"), WAIT("t"), got).render()
    await start(old, store, "moved", log).run()
    store.send("moved", "t", "hello", message_id="h")
    new = NodeCompose(recorder("a"), WAIT("t"), got, recorder("added")).render()
    refusing = waker_for(store, new, log)
    assert await refusing.run_once() == 0
    (run_id, error), *_ = refusing.failures
    assert isinstance(error, WaitError) and "'moved'" in str(error) and "migrate=True" in str(error)
    assert store.load("moved").record.status == "waiting"  # not lost, lease released
    migrating = waker_for(store, new, log, migrate=True)
    assert await migrating.run_once() == 1
    assert log.items[-1] == "added"
    assert ("message", "t", "hello", "h") in log.items


@pytest.mark.asyncio
async def test_a_run_of_a_graph_the_waker_was_not_given_is_left_waiting():
    store, log = MemoryCheckpointStore(), Log()
    graph = NodeCompose(WAIT("t"), got).render()
    await start(graph, store, "other", log, graph="other-graph").run()
    store.send("other", "t", 1)
    assert await waker_for(store, graph, log).run_once() == 0
    assert store.load("other").record.status == "waiting"
    assert len(store.messages("other")) == 1


@pytest.mark.asyncio
async def test_a_waker_resumes_from_the_checkpoint_its_claim_read_and_reads_no_more():
    class CountingLoads(MemoryCheckpointStore):
        loads = 0

        def load(self, run_id, *, version=None):
            self.loads += 1
            return super().load(run_id, version=version)

    store, log = CountingLoads(), Log()
    program = NodeCompose(recorder("a"), WAIT("t"), got, recorder("b")).render()
    await start(program, store, "r", log).run()
    store.send("r", "t", "yes", message_id="m")
    store.loads = 0
    assert await waker_for(store, program, log).run_once() == 1
    assert store.loads == 0
    assert log.items[1:] == [("message", "t", "yes", "m"), ("stream", ["yes"]), "b"]
    assert store.load("r").record.status == "finished"


class CountingReleases(MemoryCheckpointStore):
    def __init__(self) -> None:
        super().__init__()
        self.releases: list[str] = []

    def release(self, run_id, owner):
        self.releases.append(run_id)
        return super().release(run_id, owner)


class ReleasesByCallOnly(CountingReleases):
    """A store whose `save` has the protocol's minimum (no `release=`), as a third-party one may."""

    def save(self, run_id, data, *, expected_version=None, history=False, wait=None, graph=None, delivered=()):
        return super().save(
            run_id,
            data,
            expected_version=expected_version,
            history=history,
            wait=wait,
            graph=graph,
            delivered=delivered,
        )


@pytest.mark.asyncio
@pytest.mark.parametrize("store_class", [CountingReleases, ReleasesByCallOnly], ids=["with-save", "by-call"])
async def test_a_run_that_parks_again_is_free_for_any_waker_at_once(store_class):
    store, log = store_class(), Log()
    program = NodeCompose(WAIT("t"), got, WAIT("t"), got, recorder("end")).render()
    await start(program, store, "r", log).run()
    store.send("r", "t", 1, message_id="m1")
    store.send("r", "t", 2, message_id="m2")
    assert await waker_for(store, program, log, owner="w1").run_once() == 1  # parked at the second WAIT
    assert await waker_for(store, program, log, owner="w2").run_once() == 1  # no lease left to wait for
    assert [item[2] for item in log.items if item[0] == "message"] == [1, 2] and log.items[-1] == "end"
    # the last save gave each lease up with its write; a store whose save cannot is released by a call
    assert store.releases == ([] if store_class is CountingReleases else ["r", "r"])


class CountingSaves(MemoryCheckpointStore):
    def __init__(self) -> None:
        super().__init__()
        self.saves: list[tuple[str, tuple]] = []  # (status, the messages it marks delivered)

    def save(self, run_id, data, **options):
        record = super().save(run_id, data, **options)
        self.saves.append((record.status, tuple(options.get("delivered", ()))))
        return record


@pytest.mark.asyncio
async def test_a_resumed_wait_step_is_saved_with_the_next_step_not_on_its_own():
    store, log = CountingSaves(), Log()
    program = NodeCompose(recorder("a"), WAIT("t"), got, recorder("b")).render()
    await start(program, store, "r", log).run()
    store.send("r", "t", "yes", message_id="m")
    store.saves.clear()
    assert await waker_for(store, program, log).run_once() == 1
    # no save after the WAIT's step: the save after `got` marks the message delivered
    assert store.saves == [("running", ("m",)), ("finished", ())]
    assert store.messages("r") == []


@pytest.mark.asyncio
async def test_a_run_that_dies_right_after_its_wait_is_resumed_again_with_the_same_message():
    store, log, calls = MemoryCheckpointStore(), Log(), []

    @Node()
    async def fragile(message: Message) -> None:
        calls.append(message.message_id)
        if len(calls) == 1:
            raise RuntimeError("the waker's process dies here")
        log.items.append(("took", message.message_id))

    program = NodeCompose(WAIT("t"), fragile, recorder("b")).render()
    await start(program, store, "r", log).run()
    store.send("r", "t", "yes", message_id="m")
    options = {"policy_options": {"on_panic": False}}  # nothing saved after the failure: as a crash
    assert await waker_for(store, program, log, **options).run_once() == 1
    assert store.load("r").record.status == "waiting" and [m.message_id for m in store.messages("r")] == ["m"]
    assert await waker_for(store, program, log, **options).run_once() == 1
    assert calls == ["m", "m"] and log.items == [("took", "m"), "b"] and store.messages("r") == []


@pytest.mark.asyncio
async def test_a_wait_inside_a_block_is_saved_with_its_step():
    store, log = CountingSaves(), Log()
    program = NodeCompose(Try(NodeCompose(WAIT("t"), got)).CATCH(WaitTimeout, recorder("late")), recorder("b"))
    program = program.render()
    await start(program, store, "r", log).run()
    store.send("r", "t", "yes", message_id="m")
    store.saves.clear()
    assert await waker_for(store, program, log).run_once() == 1
    # the Try's step took the message and ran `got`: saved on its own, as every step
    assert store.saves == [("running", ("m",)), ("running", ()), ("finished", ())]


@pytest.mark.asyncio
async def test_resume_refuses_a_latest_checkpoint_of_another_run():
    store, log = MemoryCheckpointStore(), Log()
    program = NodeCompose(recorder("a"), SLEEP(60)).render()
    await start(program, store, "other", log).run()
    policy = Checkpointing(store, "r", graph="g")
    with pytest.raises(ValueError, match="checkpoint of run 'other', not of 'r'"):
        await policy.resume(program, latest=store.load("other"))


@pytest.mark.asyncio
async def test_serve_resumes_runs_as_they_become_due_and_stops_cleanly():
    store, log = MemoryCheckpointStore(), Log()
    graph = NodeCompose(WAIT("t"), got).render()
    for n in range(3):
        await start(graph, store, f"s-{n}", log).run()
    async with waker_for(store, graph, log, poll_interval=0.05):
        for n in range(3):
            store.send(f"s-{n}", "t", n, message_id=f"m{n}")
        for _ in range(400):
            if all(store.load(f"s-{n}").record.status == "finished" for n in range(3)):
                break
            await asyncio.sleep(0.01)
    assert sorted(item[2] for item in log.items if item[0] == "message") == [0, 1, 2]


class Gate:
    """Holds the run whose message is "slow" until `release` is set; counts the runs in flight."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.done: list[Any] = []
        self.in_flight = self.most = 0


@Node()
async def gated(gate: Gate, message: Message) -> None:
    gate.in_flight += 1
    gate.most = max(gate.most, gate.in_flight)
    try:
        if message.payload == "slow":
            await gate.release.wait()
        gate.done.append(message.payload)
    finally:
        gate.in_flight -= 1


async def until(condition: Any, what: str) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_serve_claims_again_as_each_run_ends_so_a_slow_run_holds_back_no_other(kind, make_store):
    """`concurrency` runs in flight at most; a run that takes long keeps its own place only."""
    store, gate = make_store(kind), Gate()
    graph = NodeCompose(WAIT("t"), gated).render()
    names = ["slow", "a", "b", "c"]
    for name in names:
        interp = WorkflowInterpreter(graph, extra_args=(gate,))
        interp.checkpointing = Checkpointing(store, name, graph="g")
        await interp.run()
    waker = Waker(store, {"g": graph}, restore_kwargs={"extra_args": (gate,)}, concurrency=2, poll_interval=0.05)
    async with waker:
        try:
            store.send("slow", "t", "slow")
            await until(lambda: gate.in_flight == 1, "the slow run started")
            for name in names[1:]:
                store.send(name, "t", name)
            await until(lambda: sorted(gate.done) == ["a", "b", "c"], "the other runs ended beside the slow one")
            assert gate.in_flight == 1
        finally:  # the waker stops only once its runs ended
            gate.release.set()
        await until(lambda: store.load("slow").record.status == "finished", "the slow run ended")
    assert gate.most <= 2 and gate.done[-1] == "slow" and waker.resumed == 4
    assert all(store.load(name).record.status == "finished" for name in names)
    assert not waker.failures


# ----- step keys ----------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_step_key_needs_a_checkpointed_run():
    seen: list[Any] = []

    @Node()
    async def key(pc: WorkflowInterpreter) -> None:
        try:
            seen.append(pc.step_key)
        except WaitError as exc:
            seen.append(exc)

    await WorkflowInterpreter(NodeCompose(key).render()).run()
    assert isinstance(seen[0], WaitError) and "Checkpointing" in str(seen[0])


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
@pytest.mark.asyncio
async def test_step_keys_are_distinct_across_steps_loop_iterations_and_waits_and_survive_a_restore(durability):
    store, keys = MemoryCheckpointStore(), []

    @Node()
    async def key(pc: WorkflowInterpreter) -> None:
        keys.append(pc.step_key)

    counter = {"n": 0}

    @Node()
    async def more() -> bool:
        counter["n"] += 1
        return counter["n"] <= 3

    graph = NodeCompose(key, WHILE(more).ACTION(key), key, SLEEP_UNTIL(0.5), key, key).render()
    interp = WorkflowInterpreter(graph)
    interp.checkpointing = Checkpointing(store, "keys", graph="g", durability=durability)
    await interp.run()
    assert store.load("keys").record.status == "waiting"
    first = list(keys)
    assert len(first) == 5 and len(set(first)) == 5
    assert all(k.startswith("keys#") for k in first)
    assert await Waker(store, {"g": graph}).run_once() == 1
    assert len(keys) == 7 and len(set(keys)) == 7


@pytest.mark.asyncio
async def test_an_async_postgres_store_parks_sends_and_wakes_a_serving_waker(request, postgres_dsn):
    from amrita_sense.durable import AsyncPostgresCheckpointStore
    from support.postgres_cluster import drop_schema_after

    log = Log()
    graph = NodeCompose(recorder("before"), WAIT("approval"), got, SLEEP(0.2), recorder("after")).render()
    async with AsyncPostgresCheckpointStore(postgres_dsn, schema=drop_schema_after(request, postgres_dsn)) as store:
        await start(graph, store, "apg", log).run()
        assert (await store.load("apg")).record.status == "waiting"
        async with waker_for(store, graph, log, poll_interval=0.2):
            await store.send("apg", "approval", "yes", message_id="a")
            for _ in range(1000):
                if (await store.load("apg")).record.status == "finished":
                    break
                await asyncio.sleep(0.01)
        assert (await store.load("apg")).record.status == "finished"
        assert await store.messages("apg") == []
    assert log.items == ["before", ("message", "approval", "yes", "a"), ("stream", ["yes"]), "after"]


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_a_wait_resumed_before_it_is_due_parks_again_with_the_same_deadline(kind, make_store):
    store, log = make_store(kind), Log()
    graph = NodeCompose(SLEEP(3600), recorder("after")).render()
    await start(graph, store, "early", log).run()
    parked = inspect_snapshot(store.load("early").data)
    interp = await Checkpointing(store, "early", graph="g").resume(graph, extra_args=(log,))
    due = interp._durable_wait
    await interp.run()  # nothing delivered, not due: it parks again
    assert log.items == []
    assert store.load("early").record.status == "waiting"
    assert interp._durable_wait == due and parked.pointer == inspect_snapshot(store.load("early").data).pointer
    assert await waker_for(store, graph, log).run_once() == 0


@pytest.mark.asyncio
async def test_a_waker_that_loses_its_lease_stops_the_run_and_saves_nothing_over_the_new_holder():
    store, log = MemoryCheckpointStore(), Log()

    @Node()
    async def slow(log: Log) -> None:  # while it runs, another waker takes the run over
        store.release("lost", "first")
        assert [c.run_id for c in store.claim_due("thief", lease_seconds=60)] == ["lost"]
        await asyncio.sleep(0.3)  # the first waker's renewal (every 0.05 s) finds the lease gone
        log.items.append("slow")

    graph = NodeCompose(WAIT("t"), slow, recorder("after")).render()
    await start(graph, store, "lost", log).run()
    store.send("lost", "t", 1, message_id="m")
    waker = waker_for(store, graph, log, lease_seconds=0.15, owner="first")
    assert await waker.run_once() == 0
    assert any(isinstance(error, LeaseLost) for _, error in waker.failures)
    assert log.items == ["slow"]  # stopped at the next step boundary: "after" never ran
    version = store.load("lost").record.version
    assert store.load("lost").record.status != "finished"
    assert store.renew("lost", "thief", 60)  # the thief still holds it; nothing was saved over it
    assert store.load("lost").record.version == version


@pytest.mark.asyncio
async def test_a_chat_loop_waits_for_each_user_message_in_turn():
    from amrita_sense.instructions import NATIVE_WHILE

    store, log = MemoryCheckpointStore(), Log()

    @Node()
    async def open_turns(log: Log) -> bool:
        return sum(1 for item in log.items if item[0] == "message") < 3

    graph = NodeCompose(NATIVE_WHILE(open_turns).ACTION(NodeCompose(WAIT("user"), got)), recorder("bye")).render()
    await start(graph, store, "chat", log, codec=pickle, allow_unsigned=True).run()
    waker = waker_for(store, graph, log, codec=pickle, allow_unsigned=True, restore_kwargs=None)
    for n in range(3):
        assert store.load("chat").record.status == "waiting"
        store.send("chat", "user", f"turn {n}", message_id=f"u{n}")
        assert await waker.run_once() == 1
    assert store.load("chat").record.status == "finished"
    assert not waker.failures
    assert [m.message_id for m in store.messages("chat", pending=False)] == ["u0", "u1", "u2"]
    assert store.messages("chat") == []


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_a_named_run_that_never_waits_finishes_as_before_and_refuses_later_messages(kind, make_store):
    from amrita_sense.durable import RunEnded

    store, log = make_store(kind), Log()
    graph = NodeCompose(recorder("only")).render()
    await start(graph, store, "plain", log).run()
    assert log.items == ["only"] and store.load("plain").record.status == "finished"
    with pytest.raises(RunEnded, match="'plain'"):
        store.send("plain", "t", 1)
