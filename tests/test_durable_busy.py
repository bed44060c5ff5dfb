"""The second message (issue 46): a start under a run id still in use, `Checkpointing(on_busy=)`:
rejected (`RunBusy`), queued behind the active run (a `Waker` starts it once that run finished), or
taking the run id over (the old run stops with `RunInterrupted` at its next save); `BusyOutcome` in
the stream. Memory, SQLite and Postgres stores (sync and async), both builds, both loops; the old
run of an interrupt in a process of its own as well.
"""

from __future__ import annotations

import asyncio
import base64
import os
import pickle
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import (
    WAIT,
    BusyOutcome,
    CheckpointConflict,
    CheckpointError,
    Checkpointing,
    Keyring,
    MemoryCheckpointStore,
    RunBusy,
    RunEnded,
    RunInterrupted,
    Waker,
    graph_fingerprint,
)
from amrita_sense.durable.snapshots.messages import decode_payload
from amrita_sense.durable.stores.waiting import START_TOPIC
from support.runtime_path import RUNTIME_DIR

STORES = ["memory", "sqlite", "postgres"]
KEYS = Keyring({"k1": b"a test key of the busy suite....."})
TRACE: list[Any] = []
WORKER = Path(__file__).resolve().parent / "support" / "busy_worker.py"


@pytest.fixture(autouse=True)
def fresh_trace():
    TRACE.clear()
    yield
    TRACE.clear()


@dataclass(frozen=True)
class Who:
    """Which start a run is (kept in its pools, through the pickle codec)."""

    name: str


@dataclass
class Gate:
    """Holds a node until the test releases it (not picklable: runs with codec=None)."""

    entered: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


@Node()
async def hello(who: Who, pc: WorkflowInterpreter) -> None:
    seen = [(o.outcome, o.previous_status) for o in pc.object_io.drain_producer_input() if isinstance(o, BusyOutcome)]
    TRACE.append(("hello", who.name, seen))


@Node()
async def bye(who: Who) -> None:
    TRACE.append(("bye", who.name))


@Node()
async def held(who: Who, gate: Gate) -> None:
    TRACE.append(("held", who.name))
    gate.entered.set()
    await gate.release.wait()


WAITING = NodeCompose(hello, WAIT("go"), bye).render()
"""Graph "g": a run parks at its WAIT until a message on "go"."""
PLAIN = NodeCompose(hello, bye).render()
OLD = NodeCompose(hello, held, bye).render()
NEW = NodeCompose(hello, bye, bye).render()


def start(store: Any, run_id: str, name: str, program: Any = WAITING, **policy: Any) -> WorkflowInterpreter:
    interp = WorkflowInterpreter(program, extra_args=(Who(name),))
    policy.setdefault("graph", "g")
    interp.checkpointing = Checkpointing(store, run_id, codec=pickle, keyring=KEYS, **policy)
    return interp


async def settle(value: Any) -> Any:
    return await value if asyncio.iscoroutine(value) else value


async def rounds_until(waker: Waker, condition: Any, rounds: int = 400) -> None:
    for _ in range(rounds):
        await waker.run_once()
        if await condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the waker never got there")


# ----- declaration ----------------------------------------------------------------------------------


def test_bad_on_busy_values_are_refused_at_declaration():
    store = MemoryCheckpointStore()
    with pytest.raises(ValueError, match="on_busy is None or one of"):
        Checkpointing(store, "r", on_busy="queue")
    with pytest.raises(ValueError, match="'r'.*needs graph=NAME"):
        Checkpointing(store, "r", on_busy="enqueue")
    assert issubclass(RunBusy, CheckpointConflict) and issubclass(RunInterrupted, CheckpointError)


# ----- reject ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("on_busy", ["reject"])
@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_a_start_under_an_active_run_is_rejected_before_any_node_runs(kind, on_busy, make_store):
    store = make_store(kind)
    await start(store, "chat", "first").run()
    assert store.load("chat").record.status == "waiting"
    version = store.load("chat").record.version
    second = start(store, "chat", "second", on_busy=on_busy)
    with pytest.raises(RunBusy) as busy:
        await second.run()
    assert busy.value.run_id == "chat" and busy.value.status == "waiting"
    assert "'chat'" in str(busy.value) and "on_busy='enqueue'" in str(busy.value)
    assert TRACE == [("hello", "first", [])]  # nothing of the second start ran
    assert store.load("chat").record.version == version  # nothing was written
    assert second.get_exception() is None


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_a_finished_run_id_stays_taken_by_default_and_is_free_with_on_busy(kind, make_store):
    store = make_store(kind)
    fresh = start(store, "chat", "first", PLAIN, on_busy="reject")
    await fresh.run()
    assert fresh.checkpointing.outcome == BusyOutcome("chat", "reject", "started", None)
    assert TRACE == [("hello", "first", []), ("bye", "first")]  # a new id: nothing in the stream
    unchecked = start(store, "chat", "again", PLAIN)  # the default reads nothing before the run
    with pytest.raises(CheckpointConflict) as taken:
        await unchecked.run()
    assert not isinstance(taken.value, RunBusy)
    assert unchecked.checkpointing.outcome is None
    assert TRACE[2:] == [("hello", "again", [])]  # its first node ran; its save found the run
    del TRACE[2:]
    again = start(store, "chat", "again", PLAIN, on_busy="reject", history=True)
    await again.run()
    assert again.checkpointing.outcome == BusyOutcome("chat", "reject", "started", "finished")
    assert TRACE[2:] == [("hello", "again", [("started", "finished")]), ("bye", "again")]
    assert store.load("chat").record.status == "finished"


# ----- enqueue --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_enqueued_starts_run_one_after_the_other_once_the_active_run_finished(kind, make_store):
    store = make_store(kind)
    await start(store, "chat", "first").run()
    queued = []
    for name in ("A", "B"):
        interp = start(store, "chat", name, on_busy="enqueue")
        await interp.run()  # returns at once: queued
        assert interp.checkpointing.outcome == BusyOutcome("chat", "enqueue", "enqueued", "waiting")
        assert interp.object_io.drain_producer_input() == [interp.checkpointing.outcome]
        queued.append(interp)
    assert TRACE == [("hello", "first", [])]
    assert len(store.messages("chat", topic=START_TOPIC)) == 2
    waker = Waker(store, {"g": WAITING}, codec=pickle, keyring=KEYS)
    assert await waker.run_once() == 0  # the active run waits: nothing is due

    async def status_is(status: str) -> Any:
        async def check() -> bool:
            return store.load("chat").record.status == status

        return check

    store.send("chat", "go", "1", message_id="m-1", keyring=KEYS)
    await rounds_until(waker, await status_is("finished"))
    assert TRACE[-1] == ("bye", "first")
    with pytest.raises(RunBusy, match="2 queued start"):  # a finished run with queued starts is busy
        await start(store, "chat", "C", on_busy="reject").run()
    await rounds_until(waker, await status_is("waiting"))
    assert TRACE[-1] == ("hello", "A", [("started", "finished")])
    store.send("chat", "go", "2", message_id="m-2", keyring=KEYS)
    await rounds_until(waker, await status_is("finished"))
    await rounds_until(waker, await status_is("waiting"))
    store.send("chat", "go", "3", message_id="m-3", keyring=KEYS)
    await rounds_until(waker, await status_is("finished"))
    assert TRACE == [
        ("hello", "first", []),
        ("bye", "first"),
        ("hello", "A", [("started", "finished")]),
        ("bye", "A"),
        ("hello", "B", [("started", "finished")]),
        ("bye", "B"),
    ]
    assert store.messages("chat", topic=START_TOPIC) == []  # each queued start delivered, once
    assert await waker.run_once() == 0
    assert not waker.failures


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_a_start_queues_behind_a_finished_run_whose_queued_starts_have_not_run(kind, make_store):
    store = make_store(kind)
    await start(store, "chat", "first").run()
    await start(store, "chat", "A", on_busy="enqueue").run()
    store.send("chat", "go", "1", message_id="m-1", keyring=KEYS)
    waker = Waker(store, {"g": WAITING}, codec=pickle, keyring=KEYS)
    while store.load("chat").record.status != "finished":
        await waker.run_once()
    with pytest.raises(RunEnded):  # the run ended: an ordinary message is refused
        store.send("chat", "go", "late", keyring=KEYS)
    later = start(store, "chat", "B", on_busy="enqueue")
    await later.run()  # the reserved topic is accepted: B queues behind A
    assert later.checkpointing.outcome == BusyOutcome("chat", "enqueue", "enqueued", "finished")
    assert len(store.messages("chat", topic=START_TOPIC)) == 2
    interrupting = start(store, "chat", "I", PLAIN, graph="g2", on_busy="interrupt")
    await interrupting.run()  # takes the id over at once (nothing ran to interrupt); A and B stay queued
    assert interrupting.checkpointing.outcome == BusyOutcome("chat", "interrupt", "started", "finished")
    assert len(store.messages("chat", topic=START_TOPIC)) == 2
    both = Waker(store, {"g": WAITING, "g2": PLAIN}, codec=pickle, keyring=KEYS)  # I's graph claims it
    for _ in range(400):
        if await both.run_once():
            break
    assert not both.failures
    assert TRACE[-3:] == [
        ("hello", "I", [("started", "finished")]),
        ("bye", "I"),
        ("hello", "A", [("started", "finished")]),
    ]


@pytest.mark.asyncio
async def test_a_queued_start_is_encrypted_as_checkpoints_are_and_only_its_keyring_starts_it():
    pytest.importorskip("cryptography")
    store, sealed = MemoryCheckpointStore(), Keyring({"k1": b"a test key of the busy suite....."}, encrypt=True)
    first = WorkflowInterpreter(WAITING, extra_args=(Who("first"),))
    first.checkpointing = Checkpointing(store, "chat", codec=pickle, keyring=sealed, graph="g")
    await first.run()
    queued = WorkflowInterpreter(PLAIN, extra_args=(Who("a-very-private-name"),))
    queued.checkpointing = Checkpointing(store, "chat", codec=pickle, keyring=sealed, graph="g2", on_busy="enqueue")
    await queued.run()
    (kept,) = store.messages("chat", topic=START_TOPIC)
    payload = decode_payload(kept.payload, keyring=sealed, run_id="chat", topic=START_TOPIC, message_id=kept.message_id)
    assert b"a-very-private-name" not in base64.b64decode(payload["snapshot"])
    store.send("chat", "go", "1", message_id="m-1", keyring=sealed)
    other = Keyring({"k2": b"another key, not the run's one..."})
    plain = Waker(store, {"g": WAITING, "g2": PLAIN}, codec=pickle, keyring=other)
    for _ in range(3):
        await plain.run_once()
    assert TRACE == [("hello", "first", [])] and store.load("chat").record.status == "waiting"
    waker = Waker(store, {"g": WAITING, "g2": PLAIN}, codec=pickle, keyring=sealed)
    for _ in range(400):
        await waker.run_once()
        if TRACE[-1] == ("bye", "a-very-private-name"):
            break
    assert TRACE[1:] == [
        ("bye", "first"),
        ("hello", "a-very-private-name", [("started", "finished")]),
        ("bye", "a-very-private-name"),
    ]
    assert not waker.failures and store.messages("chat", topic=START_TOPIC) == []


@pytest.mark.asyncio
async def test_an_unsigned_queued_start_is_refused_by_a_waker_with_a_keyring():
    store = MemoryCheckpointStore()
    await start(store, "chat", "first", PLAIN).run()
    store.send("chat", START_TOPIC, {"format": 1, "graph": "g", "snapshot": ""}, message_id="forged")
    waker = Waker(store, {"g": PLAIN}, codec=pickle, keyring=KEYS)
    assert await waker.run_once() == 0
    (run_id, error), *_ = waker.failures
    assert run_id == "chat" and "forged" in str(error)
    assert [m.message_id for m in store.messages("chat", topic=START_TOPIC)] == ["forged"]  # kept
    assert TRACE == [("hello", "first", []), ("bye", "first")]


# ----- interrupt ------------------------------------------------------------------------------------


@pytest.mark.parametrize("durability", ["sync", "async"])
@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_interrupt_takes_the_run_id_over_and_the_old_run_stops_at_its_next_save(kind, durability, make_store):
    store, gate, saved = make_store(kind), Gate(), []
    old = WorkflowInterpreter(OLD, extra_args=(Who("old"), gate))
    old.checkpointing = Checkpointing(
        store, "chat", graph="g", durability=durability, history=True, on_saved=lambda r: saved.append(r.version)
    )
    task = asyncio.ensure_future(old.run())
    await gate.entered.wait()
    while not saved:  # async durability: the save after `hello` is written in the background
        await asyncio.sleep(0.01)
    found = store.load("chat").record.version
    new = WorkflowInterpreter(NEW, extra_args=(Who("new"),))
    new.checkpointing = Checkpointing(store, "chat", graph="g", history=True, on_busy="interrupt")
    await new.run()
    assert new.checkpointing.outcome == BusyOutcome("chat", "interrupt", "interrupted", "running")
    assert ("hello", "new", [("interrupted", "running")]) in TRACE
    gate.release.set()
    with pytest.raises(RunInterrupted) as stopped:
        await task
    assert stopped.value.run_id == "chat" and stopped.value.version == found
    assert old.get_exception() is None
    assert max(saved) == found  # nothing of the old run was written after the takeover
    latest = store.load("chat").record
    assert latest.status == "finished" and latest.fingerprint == graph_fingerprint(NEW)
    history = store.history("chat")
    assert [r.fingerprint for r in history if r.version > found] == [graph_fingerprint(NEW)] * (latest.version - found)
    if durability == "sync":
        assert ("bye", "old") not in TRACE  # stopped at the save right after `held`


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.asyncio
async def test_a_waker_running_an_interrupted_run_logs_it_and_releases_its_lease(kind, make_store, caplog):
    store, gate = make_store(kind), Gate()
    graph = NodeCompose(hello, WAIT("go"), held, bye).render()
    old = WorkflowInterpreter(graph, extra_args=(Who("old"), gate))
    old.checkpointing = Checkpointing(store, "chat", graph="g")
    await old.run()
    store.send("chat", "go", "x", message_id="m")
    waker = Waker(
        store,
        {"g": graph},
        restore_kwargs={"extra_args": (Who("old"), gate)},
        policy_options={"durability": "exit"},  # no saves between nodes: it notices at its end
    )
    caplog.set_level("INFO")
    task = asyncio.ensure_future(waker.run_once())
    await gate.entered.wait()
    new = WorkflowInterpreter(PLAIN, extra_args=(Who("new"),))
    new.checkpointing = Checkpointing(store, "chat", graph="g2", on_busy="interrupt")
    await new.run()
    assert new.checkpointing.outcome == BusyOutcome("chat", "interrupt", "interrupted", "waiting")
    gate.release.set()
    assert await task == 1
    assert not waker.failures
    assert "'chat' was interrupted" in caplog.text
    assert store.renew("chat", waker.owner, 5.0) is False  # the lease was given back
    assert store.load("chat").record.fingerprint == graph_fingerprint(PLAIN)
    assert store.load("chat").record.status == "finished"


@pytest.mark.asyncio
async def test_an_async_postgres_store_rejects_queues_and_interrupts(request, postgres_dsn):
    from amrita_sense.durable import AsyncPostgresCheckpointStore
    from support.postgres_cluster import drop_schema_after

    async with AsyncPostgresCheckpointStore(postgres_dsn, schema=drop_schema_after(request, postgres_dsn)) as store:
        await start(store, "chat", "first").run()
        with pytest.raises(RunBusy):
            await start(store, "chat", "rejected", on_busy="reject").run()
        queued = start(store, "chat", "A", on_busy="enqueue")
        await queued.run()
        assert queued.checkpointing.outcome.outcome == "enqueued"
        taking = start(store, "chat", "new", PLAIN, on_busy="interrupt")
        await taking.run()
        assert taking.checkpointing.outcome == BusyOutcome("chat", "interrupt", "interrupted", "waiting")
        assert (await store.load("chat")).record.status == "finished"
        waker = Waker(store, {"g": WAITING}, codec=pickle, keyring=KEYS)
        for _ in range(400):
            if await waker.run_once():
                break
            await asyncio.sleep(0.01)
        assert (await store.load("chat")).record.status == "waiting"
        assert not waker.failures
    assert TRACE == [
        ("hello", "first", []),
        ("hello", "new", [("interrupted", "waiting")]),
        ("bye", "new"),
        ("hello", "A", [("started", "finished")]),
    ]


# ----- interrupt, the old run in another process ----------------------------------------------------


def new_loop(loop: str) -> asyncio.AbstractEventLoop:
    if loop == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("durability", ["sync", "async"])
def test_the_old_run_in_another_process_stops_by_itself_after_an_interrupt(tmp_path, shared_store, durability, loop):
    """Both processes on `loop`: the old run in the worker, the interrupting start here."""
    (database, store), release = shared_store, tmp_path / "release"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([RUNTIME_DIR, str(WORKER.parents[1])]))
    env.pop("AMRITA_SENSE_REQUIRE_EXTENSIONS", None)
    command = [sys.executable, str(WORKER), database, str(release), durability, loop]
    old = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert old.stdout is not None
    try:
        said: list[str] = []
        while not ("gate" in said and any(line.startswith("saved") for line in said)):
            line = old.stdout.readline()
            assert line, f"the old run ended early: {said} {old.stderr.read() if old.stderr else ''}"
            said.append(line.strip())
        found = store.load("chat").record.version
        new = WorkflowInterpreter(NEW, extra_args=(Who("new"),))
        new.checkpointing = Checkpointing(store, "chat", graph="new", history=True, on_busy="interrupt")
        runner = new_loop(loop)
        try:
            runner.run_until_complete(new.run())
        finally:
            runner.close()
        assert new.checkpointing.outcome == BusyOutcome("chat", "interrupt", "interrupted", "running")
        release.touch()
        rest, errors = old.communicate(timeout=120)
    finally:
        if old.poll() is None:
            old.kill()
            old.wait()
    assert old.returncode == 0, errors
    said += rest.splitlines()
    assert f"interrupted chat {found}" in said, said
    versions = [int(line.split()[1]) for line in said if line.startswith("saved")]
    assert max(versions) == found  # nothing of the old run written after the takeover
    if durability == "sync":
        assert "node two" not in said
    latest = store.load("chat").record
    assert latest.status == "finished" and latest.fingerprint == graph_fingerprint(NEW)
