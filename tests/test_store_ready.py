"""When a waiting run is ready: every store claims what the memory store claims, and a send that races a
parking save is never lost.

The SQLite and Postgres stores keep, per waiting run, when it became (or becomes) claimable (`ready_at`:
the earlier of its timer and its oldest pending message on its wait's topic), so that a claim walks an
index in that order instead of reading every waiting run and pending message. The memory store computes
the same from scratch at every claim: it is the judge of the random sequences below. The upgrade from
the schema before `ready_at` makes the runs already waiting ready as a save would have.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from typing import Any

import pytest

from amrita_sense.durable import MemoryCheckpointStore, SQLiteCheckpointStore
from amrita_sense.durable.stores.waiting import Wait
from support.stores import STORES, sample_snapshots
from test_store_waiting import Stores, claim, settle

HALTED = sample_snapshots()[0]
INDEXED = sorted(kind for kind in STORES if kind != "memory")
TOPICS = (None, "a", "b")


@pytest.fixture(params=INDEXED)
def stores(request, tmp_path):
    return Stores(request.param, request, tmp_path)


class _Twins:
    """The store under test and a memory store, driven alike; what each claims is compared."""

    def __init__(self, store: Any) -> None:
        self.store, self.judge = store, MemoryCheckpointStore()
        self.versions: dict[str, int] = {}
        self.claimed: dict[str, tuple[str, str | None]] = {}  # run -> (owner, message id it was handed)

    async def both(self, method: str, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        got = await settle(getattr(self.store, method)(*args, **kwargs))
        return got, await settle(getattr(self.judge, method)(*args, **kwargs))

    async def park(self, run_id: str, wait: Wait | None, delivered: tuple[str, ...] = (), release: Any = None) -> None:
        expected = self.versions.get(run_id, 0)
        options = {"wait": wait, "graph": "g", "expected_version": expected, "delivered": delivered}
        if release is not None:
            options["release"] = release
        record, _ = await self.both("save", run_id, HALTED, **options)
        self.versions[run_id] = record.version

    async def claim(self, now: float, limit: int, ahead: float = 0.0) -> None:
        owner = f"w{len(self.claimed)}"
        got, judged = await self.both("claim_due", owner, lease_seconds=10_000, limit=limit, now=now, ahead=ahead)

        def seen(claims: list) -> list[tuple[str, str | None]]:
            return sorted((c.run_id, None if c.message is None else c.message.message_id) for c in claims)

        assert seen(got) == seen(judged)
        for run_id, message_id in seen(got):
            self.claimed[run_id] = (owner, message_id)


async def _random_rounds(store: Any, seed: int) -> None:
    rng = random.Random(seed)
    twins = _Twins(store)
    runs = [f"r{n}" for n in range(12)]
    base = time.time()
    for run_id in runs:
        await twins.park(run_id, None)
    for step in range(140):
        run_id = rng.choice(runs)
        action = rng.random()
        if run_id in twins.claimed and action < 0.5:  # the waker resumes it: delivered, parked again or running
            owner, message_id = twins.claimed.pop(run_id)
            topic = rng.choice(TOPICS)
            due = rng.choice((None, base - rng.uniform(1, 100), base + rng.uniform(1000, 2000)))
            wait = None if topic is None and due is None else Wait(topic, due)
            await twins.park(run_id, wait, (message_id,) if message_id else (), release=owner)
        elif run_id not in twins.claimed and action < 0.3:  # its own process parks it
            topic = rng.choice(TOPICS)
            due = rng.choice((None, base - rng.uniform(1, 100), base + rng.uniform(1000, 2000)))
            await twins.park(run_id, None if topic is None and due is None else Wait(topic, due))
        elif action < 0.7:
            await twins.both("send", run_id, rng.choice(("a", "b")), step, message_id=f"m{step}")
        else:  # claim now, or once every timer has passed; a limit that sometimes cuts the ready runs;
            # sometimes ahead of the timers that end within the next 1,500 s
            now = time.time() + 1 if rng.random() < 0.8 else base + 5000
            ahead = rng.choice((0.0, 0.0, 1500.0))
            await twins.claim(now, rng.choice((2, 50)) if now > base + 4000 or ahead else 50, ahead)
    await twins.claim(base + 5000, 50)


@pytest.mark.asyncio
@pytest.mark.parametrize("seed", range(4))
async def test_claims_match_the_memory_store_over_random_waits_and_sends(stores, seed):
    async with stores.open() as store:
        await _random_rounds(store, seed)


@pytest.mark.asyncio
async def test_a_claim_takes_ready_runs_in_the_order_they_became_ready(stores):
    async with stores.open() as store:
        now = time.time()
        await settle(store.save("late-timer", HALTED, wait=Wait(None, now - 5), graph="g"))
        await settle(store.save("early-timer", HALTED, wait=Wait(None, now - 50), graph="g"))
        await settle(store.save("message", HALTED, wait=Wait("a", now + 3600), graph="g"))
        await settle(store.send("message", "b", 1))  # another topic: not ready
        assert [c.run_id for c in await claim(store, limit=5)] == ["early-timer", "late-timer"]
        await settle(store.send("message", "a", 2))
        (got,) = await claim(store, "w2")
        assert got.run_id == "message" and got.message is not None and got.message.topic == "a"


@pytest.mark.asyncio
async def test_a_saved_wait_on_a_topic_finds_the_messages_sent_before_it(stores):
    async with stores.open() as store:
        await settle(store.save("r", HALTED, graph="g"))
        await settle(store.send("r", "a", 1, message_id="m1"))
        await settle(store.send("r", "a", 2, message_id="m2"))
        await settle(store.save("r", HALTED, wait=Wait("a", None), expected_version=1))
        (first,) = await claim(store)
        assert first.message.message_id == "m1"
        # the save after the wait marks m1 delivered and parks again: m2 is still pending, m1 is not
        again = await settle(store.save("r", HALTED, wait=Wait("a", None), expected_version=2, delivered=("m1",)))
        await settle(store.release("r", "w1"))
        (second,) = await claim(store)
        assert (second.message.message_id, second.record.version) == ("m2", again.version)
        await settle(store.save("r", HALTED, wait=Wait("a", None), expected_version=3, delivered=("m2",)))
        await settle(store.release("r", "w1"))
        assert await claim(store) == []


def test_a_send_that_commits_while_a_parking_save_waits_for_the_row_is_not_lost(request, postgres_dsn):
    """The save's statement took its snapshot before the send committed (it waits for the run's row,
    which the send holds): the message is not in its snapshot, and the send found the run not waiting
    on the topic yet. The run is ready all the same."""
    import psycopg

    from amrita_sense.durable import PostgresCheckpointStore
    from support.postgres_cluster import drop_schema_after

    schema = drop_schema_after(request, postgres_dsn)
    with PostgresCheckpointStore(postgres_dsn, schema=schema) as store:
        store.save("r", HALTED, graph="g")
        store.save("other", HALTED, graph="g")
        for run_id, topic in (("r", "a"), ("other", "b")):  # "other": a message of another topic
            with psycopg.connect(postgres_dsn) as sender:  # the store's send, held open at its commit
                operation = store._send_op(run_id, topic, "yes", "m", None, None)
                statement, params = next(operation.steps)
                sender.execute(statement, params)
                saving = threading.Thread(target=store.save, args=(run_id, HALTED), kwargs={"wait": Wait("a", None)})
                saving.start()
                _wait_until_blocked(postgres_dsn, schema)
                sender.commit()
                saving.join(30)
                assert not saving.is_alive()
        (got,) = store.claim_due("w", lease_seconds=30)
        assert (got.run_id, got.message.message_id) == ("r", "m")
        assert store.claim_due("w2", lease_seconds=30) == []  # "other" waits on "a": not due


def _wait_until_blocked(dsn: str, schema: str) -> None:
    import psycopg

    deadline = time.monotonic() + 30
    with psycopg.connect(dsn, autocommit=True) as watcher:
        while time.monotonic() < deadline:
            waiting = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
                (f'%"{schema}".checkpoints%',),
            ).fetchone()[0]
            if waiting:
                return
            time.sleep(0.01)
    raise AssertionError("the save never waited for the row")


def _park_three(store: Any) -> None:
    """A passed timer, a later one and a wait with a message: what an upgraded store must find ready."""
    now = time.time()
    for run_id, wait in (("timer", Wait(None, now - 5)), ("later", Wait(None, now + 3600)), ("topic", Wait("a", None))):
        store.save(run_id, HALTED, wait=wait, graph="g")
    store.send("topic", "a", 1, message_id="m")


def _ready_after_upgrade(store: Any) -> list[str]:
    with store:
        return sorted(c.run_id for c in store.claim_due("w", lease_seconds=30))


def test_an_sqlite_file_of_schema_4_gets_its_waiting_runs_ready(tmp_path):
    path = tmp_path / "old.db"
    with SQLiteCheckpointStore(path) as store:
        _park_three(store)
    with sqlite3.connect(path) as raw:  # back to what schema 4 wrote
        raw.execute("DROP INDEX sense_checkpoints_ready")
        raw.execute("ALTER TABLE sense_checkpoints DROP COLUMN ready_at")
        raw.execute("PRAGMA user_version = 4")
    assert _ready_after_upgrade(SQLiteCheckpointStore(path)) == ["timer", "topic"]


def test_a_postgres_schema_of_version_3_gets_its_waiting_runs_ready(request, postgres_dsn):
    import psycopg

    from amrita_sense.durable import PostgresCheckpointStore
    from support.postgres_cluster import drop_schema_after

    schema = drop_schema_after(request, postgres_dsn)
    with PostgresCheckpointStore(postgres_dsn, schema=schema) as store:
        _park_three(store)
    with psycopg.connect(postgres_dsn, autocommit=True) as raw:  # back to what version 3 wrote
        raw.execute(f'ALTER TABLE "{schema}".checkpoints DROP COLUMN ready_at, DROP COLUMN sends')
        raw.execute(f"UPDATE \"{schema}\".meta SET value = 3 WHERE key = 'schema_version'")
    assert _ready_after_upgrade(PostgresCheckpointStore(postgres_dsn, schema=schema)) == ["timer", "topic"]
