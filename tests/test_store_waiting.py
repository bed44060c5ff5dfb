"""Waits, messages and leases in every store (`amrita_sense.durable.stores.waiting`): one judge for all.

A message sent before or while a run is parked is kept and delivered in order per (run, topic); a
repeated message id is kept once; a finished or unknown run refuses messages by name; `claim_due`
returns only due runs (a passed timer, a pending message on the wait's topic) and never the same run
to two owners, threads or processes; an expired lease can be taken over; renew / release belong to
the owner; delivery is marked only by the save that follows the wait; fork / delete / sweep carry
no messages over. Payloads are signed for their run, topic and message id and checked before decode.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from amrita_sense.durable import CheckpointNotFound, CodecError, Keyring
from amrita_sense.durable.errors import RunEnded, TamperedMessage, UntrustedMessage, UntrustedSnapshot
from amrita_sense.durable.snapshots.messages import decode_payload, encode_payload
from amrita_sense.durable.stores.waiting import WAITING_METHODS, Claim, Wait, WaitingStore, WakeupStore
from support.durable_support import KEYS
from support.stores import STORES, sample_snapshots

HALTED, FINISHED = sample_snapshots()
LARGE = sample_snapshots(payload=40_000)[0]
"""Large enough to be stored as frames (`amrita_sense.durable.stores.deltas`)."""
KINDS = sorted(STORES)
ROOT = Path(__file__).resolve().parents[1]


async def settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class Stores:
    def __init__(self, kind: str, request: Any, tmp_path: Any):
        self.kind, self.request, self.tmp_path, self.count = kind, request, tmp_path, 0

    @contextlib.asynccontextmanager
    async def open(self, **options: Any) -> AsyncIterator[Any]:
        folder = self.tmp_path / f"store-{self.count}"
        folder.mkdir()
        self.count += 1
        store = STORES[self.kind](self.request, folder, options)
        try:
            yield store
        finally:
            closing = getattr(store, "close", None)
            if closing is not None:
                await settle(closing())


@pytest.fixture(params=KINDS)
def stores(request, tmp_path):
    return Stores(request.param, request, tmp_path)


async def park(store: Any, run_id: str, topic: str | None = "approval", due_at: float | None = None, **kw: Any) -> Any:
    return await settle(store.save(run_id, HALTED, wait=Wait(topic, due_at), graph="g", **kw))


async def claim(store: Any, owner: str = "w1", **kw: Any) -> list[Claim]:
    kw.setdefault("lease_seconds", 30)
    return await settle(store.claim_due(owner, **kw))


def payloads(messages: list) -> list:
    return [decode_payload(m.payload, run_id=m.run_id, topic=m.topic, message_id=m.message_id) for m in messages]


# ----- the protocol -------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_every_store_keeps_waits(stores):
    async with stores.open() as store:
        assert isinstance(store, WaitingStore)
        assert all(callable(getattr(store, name)) for name in WAITING_METHODS)
        if stores.kind != "sqlite":
            assert isinstance(store, WakeupStore)


@pytest.mark.asyncio
async def test_messages_sent_before_and_while_parked_are_kept_in_order(stores):
    async with stores.open() as store:
        await settle(store.save("r", HALTED))  # running, not waiting yet
        first = await settle(store.send("r", "approval", {"n": 1}, message_id="m1"))
        assert (first.run_id, first.topic, first.message_id) == ("r", "approval", "m1")
        assert await claim(store) == []  # not waiting: nothing is due
        await settle(store.send("r", "other", {"n": 0}, message_id="o1"))
        await park(store, "r")
        second = await settle(store.send("r", "approval", {"n": 2}, message_id="m2"))
        assert second.seq > first.seq
        kept = await settle(store.messages("r", topic="approval"))
        assert [m.message_id for m in kept] == ["m1", "m2"] and payloads(kept) == [{"n": 1}, {"n": 2}]
        assert [m.message_id for m in await settle(store.messages("r"))] == ["m1", "o1", "m2"]
        (got,) = await claim(store)
        assert got.run_id == "r" and got.owner == "w1" and got.graph == "g"
        assert got.wait == Wait("approval", None) and got.record.version == 2
        assert got.message is not None and got.message.message_id == "m1"
        # delivered only with the save that follows the wait
        assert [m.message_id for m in await settle(store.messages("r", topic="approval"))] == ["m1", "m2"]
        await park(store, "r", delivered=("m1",), expected_version=2)
        await settle(store.release("r", "w1"))
        assert [m.message_id for m in await settle(store.messages("r", topic="approval"))] == ["m2"]
        assert len(await settle(store.messages("r", pending=False))) == 3
        (again,) = await claim(store, "w2")
        assert again.message is not None and again.message.message_id == "m2" and again.record.version == 3


@pytest.mark.asyncio
async def test_a_repeated_message_id_is_kept_once(stores):
    async with stores.open() as store:
        await park(store, "r")
        one = await settle(store.send("r", "approval", "yes", message_id="same"))
        two = await settle(store.send("r", "approval", "no", message_id="same"))
        assert two == one
        kept = await settle(store.messages("r"))
        assert [m.message_id for m in kept] == ["same"] and payloads(kept) == ["yes"]
        auto = await settle(store.send("r", "approval", 3))
        assert auto.message_id and auto.message_id != "same"
        # delivering an id the store does not keep marks nothing: sent later, that message is pending
        await park(store, "r", delivered=("later",))
        await settle(store.send("r", "approval", 4, message_id="later"))
        assert "later" in [m.message_id for m in await settle(store.messages("r"))]


@pytest.mark.asyncio
async def test_unknown_and_finished_runs_refuse_messages(stores):
    async with stores.open() as store:
        with pytest.raises(CheckpointNotFound, match="ghost"):
            await settle(store.send("ghost", "t", 1))
        await settle(store.save("done", FINISHED))
        with pytest.raises(RunEnded, match="done"):
            await settle(store.send("done", "t", 1))
        await park(store, "r")
        with pytest.raises(ValueError, match="topic"):
            await settle(store.send("r", "", 1))
        with pytest.raises(CodecError, match="'r'"):
            await settle(store.send("r", "t", object()))
        with pytest.raises(CheckpointNotFound, match="ghost"):
            await settle(store.messages("ghost"))
        with pytest.raises(TypeError, match="'r'"):
            await settle(store.save("r", HALTED, wait=("t", None)))
        with pytest.raises(ValueError, match="'r'"):
            await settle(store.save("r", HALTED, wait=Wait(None, None)))


@pytest.mark.asyncio
async def test_claim_due_returns_only_due_runs(stores):
    async with stores.open() as store:
        now = time.time()
        await park(store, "timer-passed", None, now - 5)
        await park(store, "timer-later", None, now + 3600)
        await park(store, "message-pending", "approval")
        await park(store, "other-topic", "approval")
        await park(store, "no-message", "approval", now + 3600)
        await settle(store.save("running", HALTED, graph="g"))
        await settle(store.send("message-pending", "approval", 1))
        await settle(store.send("other-topic", "elsewhere", 1))
        await settle(store.send("running", "approval", 1))
        assert await settle(store.next_due()) == pytest.approx(now - 5)
        assert await settle(store.next_due(graphs=["nope"])) is None
        assert await claim(store, graphs=["nope"]) == []
        got = await claim(store, graphs=["g"], lease_seconds=100_000)
        assert sorted(c.run_id for c in got) == ["message-pending", "timer-passed"]
        timer = next(c for c in got if c.run_id == "timer-passed")
        assert timer.message is None and timer.wait.due_at == pytest.approx(now - 5)
        assert await claim(store, "w2") == []  # leased to w1
        # with a later `now`, the timer that was not due yet is
        assert [c.run_id for c in await claim(store, "w2", now=now + 3601)] == ["no-message", "timer-later"]


@pytest.mark.asyncio
async def test_claim_due_ahead_takes_the_timers_that_end_within_it(stores):
    async with stores.open() as store:
        now = time.time()
        await park(store, "held-soon", None, now + 60)
        (held,) = await claim(store, "other", now=now + 61, lease_seconds=30)  # its lease ends at now + 91
        assert held.run_id == "held-soon"
        await park(store, "due", None, now - 5)
        await park(store, "soon", None, now + 50)
        await park(store, "later", None, now + 500)
        await park(store, "timeout-soon", "approval", now + 50)  # a message may come before it
        with pytest.raises(ValueError, match="ahead"):
            await claim(store, ahead=-1)
        assert [c.run_id for c in await claim(store, ahead=0.0, lease_seconds=100_000)] == ["due"]
        got = await claim(store, ahead=100, lease_seconds=100_000)
        # the lease is checked against now, not the horizon: `held-soon` stays with its owner
        assert [(c.run_id, c.message, c.wait) for c in got] == [("soon", None, Wait(None, pytest.approx(now + 50)))]
        assert await claim(store, "w2", ahead=100) == []  # leased to w1 ahead of its time
        assert [c.run_id for c in await claim(store, "w2", ahead=600)] == ["later"]


@pytest.mark.asyncio
async def test_next_due_looks_past_a_held_lease(stores):
    async with stores.open() as store:
        now = time.time()
        await park(store, "a", None, now - 5)
        await park(store, "b", "approval", now + 100)
        assert await settle(store.next_due()) == pytest.approx(now - 5)
        (got,) = await claim(store, lease_seconds=50)
        assert got.run_id == "a"
        # a waker that holds `a` (or died holding it): the next timer to wake for is its lease's end
        assert await settle(store.next_due()) == pytest.approx(got.lease_until)
        await settle(store.release("a", "w1"))
        assert await settle(store.next_due()) == pytest.approx(now - 5)
        await settle(store.save("a", HALTED))
        assert await settle(store.next_due()) == pytest.approx(now + 100)


@pytest.mark.asyncio
async def test_claim_due_respects_the_limit(stores):
    async with stores.open() as store:
        for i in range(5):
            await park(store, f"r{i}", None, time.time() - 10 + i)
        first = await claim(store, limit=2)
        assert [c.run_id for c in first] == ["r0", "r1"]
        rest = await claim(store, "w2", limit=10)
        assert [c.run_id for c in rest] == ["r2", "r3", "r4"]


@pytest.mark.asyncio
async def test_leases_expire_and_belong_to_their_owner(stores):
    async with stores.open() as store:
        await park(store, "r", None, time.time() - 1)
        (held,) = await claim(store, "w1", lease_seconds=30)
        assert held.lease_until > time.time()
        assert await claim(store, "w2") == []
        assert await settle(store.renew("r", "w2", 30)) is False
        await settle(store.release("r", "w2"))  # not w2's: no effect
        assert await claim(store, "w2") == []
        assert await settle(store.renew("r", "w1", 60)) is True
        # the lease expires (seen from the future): another owner takes the run over
        (taken,) = await claim(store, "w2", now=time.time() + 120)
        assert taken.owner == "w2"
        assert await settle(store.renew("r", "w1", 30)) is False
        await settle(store.release("r", "w2"))
        (back,) = await claim(store, "w1")
        assert back.owner == "w1"


@pytest.mark.asyncio
@pytest.mark.parametrize("data", [HALTED, LARGE], ids=["small", "framed"])
@pytest.mark.parametrize("history", [False, True], ids=["latest", "history"])
async def test_a_save_that_releases_its_lease_frees_the_run_with_its_write(stores, data, history):
    async with stores.open() as store:
        await settle(store.save("r", data, history=history, wait=Wait(None, time.time() - 1), graph="g"))
        (held,) = await claim(store, "w1")
        version = held.record.version
        # another owner's name releases nothing
        saved = await settle(store.save("r", data, expected_version=version, history=history, release="w2"))
        assert await claim(store, "w2") == []
        # the owner's save parks the run again (due at once) and gives the lease up in the same write
        parked = await settle(
            store.save("r", data, expected_version=saved.version, history=history, wait=Wait(None, 0.0), release="w1")
        )
        (taken,) = await claim(store, "w2")
        assert (taken.owner, taken.record.version) == ("w2", parked.version)
        with pytest.raises(ValueError, match="lease owner"):
            await settle(store.save("r", data, expected_version=parked.version, release=""))


@pytest.mark.asyncio
async def test_a_parking_save_that_releases_the_lease_wakes_the_wakers(stores):
    async with stores.open() as store:
        if not isinstance(store, WakeupStore):
            pytest.skip("this store has no wake-up signal: its waker polls")
        await park(store, "r", None, time.time() - 1)
        (held,) = await claim(store, "w1")
        await settle(store.wait_for_wakeup(0))  # listening from now on
        await quiet(store)
        waiting = await wakeup_call(store, 30)
        await asyncio.sleep(0.2)
        await park(store, "r", "approval", expected_version=held.record.version, release="w1")
        assert await waiting is True


@pytest.mark.asyncio
async def test_a_save_without_a_wait_clears_it(stores):
    async with stores.open() as store:
        await park(store, "r", None, time.time() - 1)
        await settle(store.save("r", HALTED))
        assert await claim(store) == [] and await settle(store.next_due()) is None
        await park(store, "r", None, time.time() - 1)
        await settle(store.save("r", HALTED, graph=None, wait=None))
        await settle(store.save("r", HALTED, wait=Wait(None, time.time() - 1)))  # keeps the graph name
        (got,) = await claim(store, graphs=["g"])
        assert got.graph == "g"


@pytest.mark.asyncio
async def test_fork_delete_and_sweep_with_messages(stores):
    async with stores.open() as store:
        await park(store, "src", history=True)
        await settle(store.send("src", "approval", 1, message_id="m"))
        forked = await settle(store.fork("src", 1, "copy"))
        assert forked.run_id == "copy"
        assert await settle(store.messages("copy")) == []
        assert [c.run_id for c in await claim(store)] == ["src"]  # the fork does not wait
        assert await settle(store.delete("src"))
        await settle(store.save("src", HALTED))
        assert await settle(store.messages("src")) == []
    async with stores.open(run_ttl=0.05) as store:
        await park(store, "old")
        await settle(store.send("old", "approval", 1, message_id="m"))
        await asyncio.sleep(0.1)
        assert await settle(store.sweep()) == 1
        await settle(store.save("old", HALTED))
        assert await settle(store.messages("old", pending=False)) == []
        assert await claim(store) == []


# ----- races: one run, one owner ------------------------------------------------------------------


@pytest.mark.asyncio
async def test_two_threads_racing_claim_due_never_share_a_run(stores):
    if stores.kind == "postgres-async":
        pytest.skip("an async store is raced by two tasks (see the next test)")
    async with stores.open() as store:
        runs = [f"r{i:02d}" for i in range(40)]
        for run in runs:
            await park(store, run, None, time.time() - 1)
        got: dict[str, list[str]] = {"a": [], "b": []}
        start = threading.Barrier(2)

        def worker(owner: str) -> None:
            start.wait()
            while True:
                claims = store.claim_due(owner, lease_seconds=60, limit=3)
                if not claims:
                    return
                got[owner].extend(c.run_id for c in claims)

        threads = [threading.Thread(target=worker, args=(owner,)) for owner in got]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(got["a"] + got["b"]) == runs


@pytest.mark.asyncio
async def test_two_tasks_racing_claim_due_never_share_a_run(stores):
    async with stores.open() as store:
        runs = [f"r{i:02d}" for i in range(30)]
        for run in runs:
            await park(store, run, None, time.time() - 1)

        async def worker(owner: str) -> list[str]:
            mine: list[str] = []
            while claims := await claim(store, owner, lease_seconds=60, limit=2):
                mine.extend(c.run_id for c in claims)
                await asyncio.sleep(0)
            return mine

        a, b = await asyncio.gather(worker("a"), worker("b"))
        assert sorted(a + b) == runs


# ----- wake-ups -----------------------------------------------------------------------------------


async def wakeup_call(store: Any, timeout: float) -> asyncio.Future:
    """`store.wait_for_wakeup(timeout)` started: a task (async store) or a worker thread's future."""
    if inspect.iscoroutinefunction(store.wait_for_wakeup):
        return asyncio.ensure_future(store.wait_for_wakeup(timeout))
    return asyncio.get_running_loop().run_in_executor(None, store.wait_for_wakeup, timeout)


async def quiet(store: Any) -> None:
    """Wait until `wait_for_wakeup` reports nothing new (a wake-up may be reported again, once)."""
    for _ in range(4):
        if await settle(store.wait_for_wakeup(0.1)) is False:
            return
    raise AssertionError("wait_for_wakeup keeps reporting wake-ups with nothing happening")


@pytest.mark.asyncio
async def test_wait_for_wakeup_reports_a_send(stores):
    async with stores.open() as store:
        if not isinstance(store, WakeupStore):
            pytest.skip("this store has no wake-up signal: its waker polls")
        await park(store, "r")
        await settle(store.wait_for_wakeup(0))  # listening from now on; what came before is reported
        await quiet(store)
        waiting = await wakeup_call(store, 30)
        await asyncio.sleep(0.2)
        await settle(store.send("r", "approval", 1))
        assert await waiting is True
        # a wake-up that came between two calls is reported by the next one
        await settle(store.send("r", "approval", 2))
        assert await settle(store.wait_for_wakeup(10)) is True
        await quiet(store)
        # released while it waits, a run may be due: the release wakes too
        await claim(store)
        await settle(store.release("r", "w1"))
        assert await settle(store.wait_for_wakeup(10)) is True


@pytest.mark.asyncio
async def test_an_abandoned_wait_for_wakeup_takes_nothing_from_the_next(stores):
    async with stores.open() as store:
        if not isinstance(store, WakeupStore):
            pytest.skip("this store has no wake-up signal: its waker polls")
        await park(store, "r")
        await settle(store.wait_for_wakeup(0))
        abandoned = await wakeup_call(store, 0.5)
        await asyncio.sleep(0.1)
        if isinstance(abandoned, asyncio.Task):
            abandoned.cancel()  # a waker that stopped waiting (the sync stores' thread waits on)
            with contextlib.suppress(asyncio.CancelledError):
                await abandoned
        await settle(store.send("r", "approval", 1))
        assert await settle(store.wait_for_wakeup(10)) is True
        if not isinstance(abandoned, asyncio.Task):
            await abandoned


# ----- payloads -----------------------------------------------------------------------------------


def test_payloads_are_json_by_default_and_bound_when_signed():
    where = {"run_id": "r", "topic": "t", "message_id": "m"}
    plain = encode_payload({"ok": [1, "two"]}, **where)
    assert decode_payload(plain, **where) == {"ok": [1, "two"]}
    assert json.loads(plain[8:]) == {"ok": [1, "two"]}
    signed = encode_payload({"ok": 1}, keyring=KEYS, **where)
    assert decode_payload(signed, keyring=KEYS, **where) == {"ok": 1}
    for other in ({"run_id": "r2"}, {"topic": "t2"}, {"message_id": "m2"}):
        with pytest.raises(TamperedMessage, match="does not verify"):
            decode_payload(signed, keyring=KEYS, **{**where, **other})
    for i in range(len(signed)):
        changed = bytearray(signed)
        changed[i] ^= 1
        with pytest.raises((TamperedMessage, CodecError)):
            decode_payload(bytes(changed), keyring=KEYS, **where)
    with pytest.raises(TamperedMessage, match="not signed"):
        decode_payload(plain, keyring=KEYS, **where)
    assert decode_payload(plain, keyring=KEYS, allow_unsigned=True, **where) == {"ok": [1, "two"]}
    with pytest.raises(TamperedMessage, match="not one of this keyring"):
        decode_payload(signed, keyring=Keyring({"other": b"another key of 16+ bytes"}), **where)
    with pytest.raises(TamperedMessage, match="not a message envelope"):
        decode_payload(b"junk", **where)


class Boom:
    def __reduce__(self) -> tuple:
        return (exec, ("raise SystemExit('a forged pickle ran')",))


def test_pickled_payloads_fail_closed():
    where = {"run_id": "r", "topic": "t", "message_id": "m"}
    unsigned = encode_payload({"n": 1}, codec=pickle, **where)
    with pytest.raises(UntrustedMessage, match="allow_unsigned") as raised:
        decode_payload(unsigned, codec=pickle, **where)
    assert isinstance(raised.value, UntrustedSnapshot)
    assert decode_payload(unsigned, codec=pickle, allow_unsigned=True, **where) == {"n": 1}
    forged = encode_payload(Boom(), codec=pickle, **where)  # encoded, never decoded below
    with pytest.raises(UntrustedMessage):
        decode_payload(forged, codec=pickle, **where)
    with pytest.raises(TamperedMessage):
        decode_payload(forged, codec=pickle, keyring=KEYS, **where)
    signed = encode_payload({"n": 2}, codec=pickle, keyring=KEYS, **where)
    assert decode_payload(signed, codec=pickle, keyring=KEYS, **where) == {"n": 2}
    body = signed[8 + 1 + len(KEYS.current) + 32 :]
    spliced = signed[: -len(body)] + pickle.dumps(Boom())
    with pytest.raises(TamperedMessage, match="does not verify"):
        decode_payload(spliced, codec=pickle, keyring=KEYS, **where)
    with pytest.raises(CodecError, match="codec"):
        decode_payload(signed, keyring=KEYS, **where)  # a codec payload, no codec given


@pytest.mark.asyncio
async def test_a_stored_payload_copied_to_another_message_is_refused(stores):
    async with stores.open() as store:
        await park(store, "a")
        await park(store, "b")
        kept = await settle(store.send("a", "approval", {"pay": 10}, message_id="m1", codec=pickle, keyring=KEYS))
        other = await settle(store.send("b", "approval", {"pay": 1}, message_id="m1", codec=pickle, keyring=KEYS))
        assert decode_payload(kept.payload, codec=pickle, keyring=KEYS, run_id="a", topic="approval", message_id="m1")
        with pytest.raises(TamperedMessage, match="'b'"):
            decode_payload(kept.payload, codec=pickle, keyring=KEYS, run_id="b", topic="approval", message_id="m1")
        assert other.payload != kept.payload


# ----- processes ----------------------------------------------------------------------------------

CLAIMER = """
import json, sys, time
sys.path[:0] = [{src!r}]
from amrita_sense.durable import SQLiteCheckpointStore
kind, where, owner = sys.argv[1:4]
if kind == "sqlite":
    store = SQLiteCheckpointStore(where)
else:
    from amrita_sense.durable import PostgresCheckpointStore
    dsn, schema = where.split("|")
    store = PostgresCheckpointStore(dsn, schema=schema)
mine = []
sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.readline()
while True:
    claims = store.claim_due(owner, lease_seconds=60, limit=2)
    if not claims:
        break
    mine.extend(c.run_id for c in claims)
print(json.dumps(mine))
"""


@pytest.mark.asyncio
async def test_two_processes_racing_claim_due_never_share_a_run(stores):
    if stores.kind not in ("sqlite", "postgres"):
        pytest.skip("memory is one process; the async Postgres store shares the sync one's table")
    async with stores.open() as store:
        runs = [f"r{i:02d}" for i in range(40)]
        for run in runs:
            await park(store, run, None, time.time() - 1)
        where = str(store.path) if stores.kind == "sqlite" else f"{store._dsn}|{store.schema}"
        script = CLAIMER.format(src=str(ROOT / "src"))
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", script, stores.kind, where, owner],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for owner in ("p1", "p2")
        ]
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        got = []
        for proc in procs:
            out, _ = proc.communicate(timeout=120)
            assert proc.returncode == 0
            got.extend(json.loads(out.strip().splitlines()[-1]))
        assert sorted(got) == runs


def test_an_sqlite_file_of_schema_3_is_upgraded_in_place(tmp_path):
    import sqlite3

    from amrita_sense.durable import SQLiteCheckpointStore
    from amrita_sense.durable.stores.sqlite import _SCHEMA_VERSION

    path = tmp_path / "old.db"
    with SQLiteCheckpointStore(path) as store:
        store.save("r", HALTED, history=True)
    with sqlite3.connect(path) as raw:  # back to what schema 3 wrote
        raw.execute("DROP INDEX sense_checkpoints_due")
        raw.execute("DROP INDEX sense_checkpoints_ready")
        raw.execute("DROP TABLE sense_messages")
        for column in ("graph", "wait_topic", "due_at", "lease_owner", "lease_until", "ready_at"):
            raw.execute(f"ALTER TABLE sense_checkpoints DROP COLUMN {column}")
        raw.execute("PRAGMA user_version = 3")
    with SQLiteCheckpointStore(path) as store:
        assert store.load("r").record.version == 1
        store.save("r", HALTED, wait=Wait("approval", None), graph="g", expected_version=1)
        store.send("r", "approval", "yes", message_id="m")
        (got,) = store.claim_due("w", lease_seconds=10)
        assert (got.run_id, got.graph, got.record.version, got.message.message_id) == ("r", "g", 2, "m")
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == _SCHEMA_VERSION == 5


def test_a_postgres_schema_of_version_2_is_upgraded_in_place(request, postgres_dsn):
    import psycopg

    from amrita_sense.durable import PostgresCheckpointStore
    from amrita_sense.durable.stores.postgres import SCHEMA_VERSION
    from support.postgres_cluster import drop_schema_after

    schema = drop_schema_after(request, postgres_dsn)
    with PostgresCheckpointStore(postgres_dsn, schema=schema) as store:
        store.save("r", HALTED, history=True)
    with psycopg.connect(postgres_dsn, autocommit=True) as raw:  # back to what version 2 wrote
        raw.execute(f'DROP TABLE "{schema}".messages')
        for column in ("graph", "wait_topic", "due_at", "lease_owner", "lease_until", "ready_at", "sends"):
            raw.execute(f'ALTER TABLE "{schema}".checkpoints DROP COLUMN {column}')
        raw.execute(f"UPDATE \"{schema}\".meta SET value = 2 WHERE key = 'schema_version'")
    with PostgresCheckpointStore(postgres_dsn, schema=schema) as store:
        assert store.load("r").record.version == 1
        store.save("r", HALTED, wait=Wait("approval", None), graph="g", expected_version=1)
        store.send("r", "approval", "yes", message_id="m")
        (got,) = store.claim_due("w", lease_seconds=10)
        assert (got.run_id, got.graph, got.record.version, got.message.message_id) == ("r", "g", 2, "m")
    with psycopg.connect(postgres_dsn, autocommit=True) as raw:
        found = raw.execute(f"SELECT value FROM \"{schema}\".meta WHERE key = 'schema_version'").fetchone()
        assert found == (SCHEMA_VERSION,) == (4,)


@pytest.mark.asyncio
@pytest.mark.parametrize("history", [False, True], ids=["latest", "history"])
@pytest.mark.parametrize("data", [HALTED, LARGE], ids=["small", "framed"])
async def test_every_save_path_keeps_waits_and_deliveries(stores, history, data):
    async with stores.open(history_limit=2) as store:
        await settle(store.save("r", data, history=history, graph="g"))
        await settle(store.send("r", "approval", 1, message_id="m1"))
        await settle(store.send("r", "approval", 2, message_id="m2"))
        for n in (1, 2):
            parked = await settle(store.save("r", data, history=history, wait=Wait("approval", None)))
            (got,) = await claim(store)
            assert got.record.version == parked.version and got.graph == "g"
            # the claim carries the checkpoint, unless the store keeps it as frames (then `load`)
            assert got.data == data if data is HALTED and not history else got.data in (None, data)
            assert got.message is not None and got.message.message_id == f"m{n}"
            await settle(store.save("r", data, history=history, delivered=(got.message.message_id,)))
            await settle(store.release("r", "w1"))
        assert await settle(store.messages("r")) == []
        assert await claim(store) == []  # the last save did not wait
        assert (await settle(store.load("r"))).data == data


def test_a_claim_of_a_damaged_checkpoint_carries_no_bytes_and_claims_the_others(tmp_path):
    import sqlite3

    from amrita_sense.durable import SQLiteCheckpointStore

    store = SQLiteCheckpointStore(tmp_path / "runs.db")
    for run_id in ("damaged", "text", "whole"):
        store.save(run_id, HALTED, wait=Wait(None, time.time() - 1), graph="g")
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        conn.execute("UPDATE sense_checkpoints SET data = ? WHERE run_id = 'damaged'", (b"not a snapshot",))
        conn.execute("UPDATE sense_checkpoints SET data = 'text, not bytes' WHERE run_id = 'text'")
    got = {c.run_id: c.data for c in store.claim_due("w", lease_seconds=30)}
    # the waker's `load` names each damaged run
    assert got == {"damaged": None, "text": None, "whole": HALTED}


@pytest.mark.asyncio
async def test_a_save_that_parks_a_run_wakes_the_wakers(stores):
    async with stores.open() as store:
        if not isinstance(store, WakeupStore):
            pytest.skip("this store has no wake-up signal: its waker polls")
        await settle(store.wait_for_wakeup(0))  # listening from now on
        await quiet(store)
        await settle(store.save("r", HALTED))
        assert await settle(store.wait_for_wakeup(0.3)) is False  # a save that does not park wakes nobody
        waiting = await wakeup_call(store, 30)
        await asyncio.sleep(0.2)
        await park(store, "r", None, time.time() + 60)
        assert await waiting is True


def test_a_read_only_sqlite_store_reads_messages_and_claims_nothing(tmp_path):
    from amrita_sense.durable import CheckpointError, SQLiteCheckpointStore

    path = tmp_path / "runs.db"
    with SQLiteCheckpointStore(path) as store:
        store.save("r", HALTED, wait=Wait("approval", 5.0), graph="g")
        store.send("r", "approval", [1, 2], message_id="m")
    reader = SQLiteCheckpointStore(path, read_only=True)
    assert payloads(reader.messages("r")) == [[1, 2]] and reader.next_due(graphs=["g"]) == 5.0
    for write in (
        lambda: reader.claim_due("w", lease_seconds=1),
        lambda: reader.send("r", "approval", 1),
        lambda: reader.release("r", "w"),
    ):
        with pytest.raises(CheckpointError, match="read-only"):
            write()


@pytest.mark.asyncio
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_wakeups_survive_a_postgres_restart(request, postgres_dsn, asynchronous):
    """The listening connection dies with the server: the wait is a CheckpointError, the next call
    after the restart listens again and reports a wake-up (what was sent meanwhile is not known)."""
    from amrita_sense.durable import AsyncPostgresCheckpointStore, CheckpointError, PostgresCheckpointStore
    from support import postgres_cluster

    schema = postgres_cluster.drop_schema_after(request, postgres_dsn)
    kind = AsyncPostgresCheckpointStore if asynchronous else PostgresCheckpointStore
    store = kind(postgres_dsn, schema=schema, timeout=3)
    cluster = postgres_cluster.current()
    try:
        await park(store, "r")
        await settle(store.wait_for_wakeup(0))
        await quiet(store)
        cluster.stop()
        try:
            with pytest.raises(CheckpointError, match="wake-up"):
                await settle(store.wait_for_wakeup(10))
        finally:
            cluster.start()
        assert await settle(store.wait_for_wakeup(10)) is True  # listening again
        await quiet(store)
        await settle(store.send("r", "approval", 1))
        assert await settle(store.wait_for_wakeup(10)) is True
    finally:
        await settle(store.close())
