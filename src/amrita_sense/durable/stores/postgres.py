"""Checkpoints in PostgreSQL: `PostgresCheckpointStore` (threads) and `AsyncPostgresCheckpointStore` (asyncio).

They need the `[postgres]` extra (psycopg 3 and psycopg-pool); `amrita_sense.durable` imports this
module on first use of either name, so the rest of the package never needs psycopg.

    store = PostgresCheckpointStore("host=db dbname=app user=app", history_limit=50)
    interp.checkpointing = Checkpointing(store, "chat-42", history=True)

Both keep the protocol of the other stores (`amrita_sense.durable.stores`) with the same rules, the
same checks and equal records: versions that grow by one per save, `expected_version` as a fence,
history on request with retention, `load(version=)`, `fork`, `prune`.

Tables, in `schema` (created on first use under a transaction-scoped advisory lock, so processes
starting together do not race; a `meta` row carries the schema version, and a schema newer than
this code knows is refused)::

    checkpoints   the latest checkpoint of each run, one row per run id, rewritten by each save (with
                  the run's graph name, its wait and the lease of the waker resuming it)
    history       the entries saved with history=True, by (run id, version); retention prunes it
    messages      the messages sent to runs (`send`), by (run id, message id), numbered by `seq`
    meta          ("schema_version", SCHEMA_VERSION)

Snapshots are `bytea`, timestamps double precision seconds since the epoch (the client's clock, as
the SQLite store's REAL), run ids sort bytewise (`COLLATE "C"`).

A save is ONE conditional statement, history entry and retention included: an upsert for an unconditional save, `INSERT ... ON CONFLICT DO NOTHING` for a
new run (expected version 0), `UPDATE ... WHERE version = expected` over a version. Postgres takes
the row lock and, at READ COMMITTED, re-checks the condition against the newest row, so of two
writers expecting the same version exactly one writes and the other finds no row: a
`CheckpointConflict`, and nothing written.

Waiting runs (`amrita_sense.durable.stores.waiting`): `claim_due` leases due runs in one statement
that locks them `FOR UPDATE SKIP LOCKED` (wakers never wait for each other, nor for a save); `send`,
a save that parks a run no waker holds, and the release of a waiting run's lease `NOTIFY
amrita_sense_wake` in their transaction (payload: the schema and the run id), and `wait_for_wakeup`
listens on a connection of its own, outside the pool (behind PgBouncer in transaction pooling mode
LISTEN is not reliable: a waker there relies on its poll interval, as on SQLite). A save is one
statement whether it waits or not: its wait, the messages it marks delivered and its wake-up are in
it (with history or as frames, one transaction).

Connections come from a psycopg pool (`min_size` .. `max_size`) that checks each connection before
lending it, unless it came back from an operation less than `FRESH` seconds ago and nothing arrived
on it since (a store saving steadily makes one round trip per save, not two; `check=None` in `pool_kwargs` never checks, a
check of your own replaces this one), so connections a server restart killed are replaced; while the server is down an
operation fails with `CheckpointError` within `timeout` seconds, and an operation started after it
is back reconnects. Each connection keeps one cursor for the store's small operations (saves,
lease renewals and releases: their rows are a record or a flag); the others make a cursor of their
own, closed after them. A failure in flight (the server dies between a write and its acknowledgement)
is a `CheckpointError` whose write may or may not have landed: `Checkpointing` finds out at its
next save (the data is there, one version up) and goes on.

Every operation is one transaction (a single statement in autocommit, or BEGIN ... COMMIT); the
store sets no session state, holds no lock across transactions and, unless `prepare=True`,
prepares nothing on the server: it works behind PgBouncer in transaction pooling mode. A store pickles as its constructor arguments (a worker that unpickles
it opens its own pool), and a process forked from one opens its own pool too.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import math
import os
import re
import select
import threading
import time
import zlib
from collections.abc import Callable, Generator
from dataclasses import dataclass
from time import monotonic
from typing import Any

from amrita_sense.durable.errors import CheckpointError, CheckpointNotFound
from amrita_sense.durable.snapshots.format import read_header
from amrita_sense.durable.snapshots.messages import encode_payload
from amrita_sense.durable.stores import deltas
from amrita_sense.durable.stores.base import (
    SWEEP_BATCH,
    Checkpoint,
    CheckpointRecord,
    _check_batch,
    _check_expected,
    _check_expiry,
    _check_retention,
    _check_run_id,
    _check_version,
    _checked_data,
    _claimed_data,
    _conflict,
    _fork_conflict,
    _forked_from,
    _record,
    _version_not_kept,
)
from amrita_sense.durable.stores.paging import CheckpointPage, check_page, order_by
from amrita_sense.durable.stores.waiting import (
    ENDED_STATUSES,
    START_TOPIC,
    WAKE_CHANNEL,
    Claim,
    StoredMessage,
    Wait,
    _check_ahead,
    _check_delivered,
    _check_graph,
    _check_graphs,
    _check_lease,
    _check_limit,
    _check_name,
    _check_wait,
    _ended,
    _message_id,
    _refuses,
)

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
    from psycopg_pool import AsyncConnectionPool, ConnectionPool
except ImportError as exc:  # the extra is not installed: constructing a store says how to get it
    _PSYCOPG_MISSING: ImportError | None = exc
else:
    _PSYCOPG_MISSING = None
    _TUPLES_OK = psycopg.pq.ExecStatus.TUPLES_OK

    class _StoreConnection(psycopg.Connection):
        """A connection of the sync store's pool: keeps a cursor for its small operations
        (`_kept_cursor`) and when it came back from its last operation (`_PostgresStore._fresh`)."""

        __slots__ = ("_back_at", "_kept")

    class _AsyncStoreConnection(psycopg.AsyncConnection):
        """A connection of the async store's pool: keeps a cursor for its small operations
        (`_kept_cursor`) and when it came back from its last operation (`_PostgresStore._fresh`)."""

        __slots__ = ("_back_at", "_kept")


__all__ = ["SCHEMA_VERSION", "AsyncPostgresCheckpointStore", "PostgresCheckpointStore"]

SCHEMA_VERSION = 4
"""The version of the tables this code writes (the `meta` row); a newer one is refused. 2: frames
(a history row may be a delta from the one before it, `base`; a row kept only as such a base is
not `listed`; the latest's `data` is empty when its frame is in the history table); 3: waits (a
run's `graph`, its wait's `wait_topic` / `due_at`, its waker's `lease_owner` / `lease_until`) and
the `messages` table (`seq`: the store's sending order); 4: `ready_at` (when a waiting run became
or becomes claimable, kept by saves and sends, so a claim walks an index instead of every waiting
run and pending message) and `sends` (a count `send` moves, see `_READY_AT`). Version 3 code must
not write a version 4 schema: its sends would not make a run ready."""

FRESH = 1.0
"""A connection back from an operation less than this many seconds ago is lent without a check."""
_FIRST_TIMERS_READ = 32
"""How many of the first timers `next_due` reads before it reads them all."""
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_OWN_POOL_OPTIONS = ("conninfo", "open", "connection_class")
_SECRET_PARAMETERS = ("password", "sslpassword")

# ----- the statements (`{s}` is the quoted schema name) ------------------------------------------

_RECORD = "run_id, version, status, fingerprint, size, created_at, updated_at, forked_from"
"""The columns of a `CheckpointRecord`, in its field order."""

_CREATE = (
    "CREATE SCHEMA IF NOT EXISTS {s}",
    "CREATE TABLE IF NOT EXISTS {s}.meta (key text PRIMARY KEY, value bigint NOT NULL)",
    """CREATE TABLE IF NOT EXISTS {s}.checkpoints (
        run_id      text COLLATE "C" PRIMARY KEY,
        version     bigint NOT NULL,
        status      text NOT NULL,
        fingerprint text NOT NULL,
        size        integer NOT NULL,
        created_at  double precision NOT NULL,
        updated_at  double precision NOT NULL,
        forked_from text,
        data        bytea NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS {s}.history (
        run_id      text COLLATE "C" NOT NULL,
        version     bigint NOT NULL,
        status      text NOT NULL,
        fingerprint text NOT NULL,
        size        integer NOT NULL,
        saved_at    double precision NOT NULL,
        data        bytea NOT NULL,
        PRIMARY KEY (run_id, version)
    )""",
    "CREATE INDEX IF NOT EXISTS history_saved_at ON {s}.history (saved_at)",
    "ALTER TABLE {s}.history ADD COLUMN IF NOT EXISTS base bigint",
    "ALTER TABLE {s}.history ADD COLUMN IF NOT EXISTS listed boolean NOT NULL DEFAULT true",
    "ALTER TABLE {s}.checkpoints ADD COLUMN IF NOT EXISTS graph text, ADD COLUMN IF NOT EXISTS wait_topic text, "
    "ADD COLUMN IF NOT EXISTS due_at double precision, ADD COLUMN IF NOT EXISTS lease_owner text, "
    "ADD COLUMN IF NOT EXISTS lease_until double precision",
    """CREATE TABLE IF NOT EXISTS {s}.messages (
        seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        run_id      text COLLATE "C" NOT NULL,
        message_id  text NOT NULL,
        topic       text NOT NULL,
        sent_at     double precision NOT NULL,
        payload     bytea NOT NULL,
        delivered   boolean NOT NULL DEFAULT false,
        UNIQUE (run_id, message_id)
    )""",
    "CREATE INDEX IF NOT EXISTS messages_pending ON {s}.messages (run_id, topic, seq) WHERE NOT delivered",
    "CREATE INDEX IF NOT EXISTS checkpoints_due ON {s}.checkpoints (due_at) WHERE due_at IS NOT NULL",
    "ALTER TABLE {s}.checkpoints ADD COLUMN IF NOT EXISTS ready_at double precision, "
    "ADD COLUMN IF NOT EXISTS sends bigint NOT NULL DEFAULT 0",
    # version 3's waiting runs: when each became (or becomes) claimable
    "UPDATE {s}.checkpoints c SET ready_at = least(c.due_at, (SELECT min(m.sent_at) FROM {s}.messages m "
    "WHERE m.run_id = c.run_id AND m.topic = c.wait_topic AND NOT m.delivered)) "
    "WHERE c.ready_at IS NULL AND (c.due_at IS NOT NULL OR c.wait_topic IS NOT NULL)",
    "CREATE INDEX IF NOT EXISTS checkpoints_ready ON {s}.checkpoints (ready_at, run_id) WHERE ready_at IS NOT NULL",
)
_SWEEP_INDEX = "CREATE INDEX IF NOT EXISTS checkpoints_updated_at ON {s}.checkpoints (updated_at)"
"""What a store that expires runs (`run_ttl`) sweeps by; only such a store makes it. Every save moves
`updated_at`: with this index no save is a HOT update (each writes one more index entry and its WAL),
which costs a fsynced server about 30 us more per save of a small run."""
_RELATION_EXISTS = "SELECT to_regclass(%(relation)s) IS NOT NULL"
_META_VERSION = "SELECT value FROM {s}.meta WHERE key = 'schema_version'"
_LOCK_SCHEMA = "SELECT pg_advisory_xact_lock(%(key)s::bigint)"
_SET_VERSION = (
    "INSERT INTO {s}.meta (key, value) VALUES ('schema_version', %(version)s) "
    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
)

_INSERT_LATEST = (
    "INSERT INTO {s}.checkpoints AS c (run_id, version, status, fingerprint, size, created_at, updated_at, data, "
    "wait_topic, due_at, graph, ready_at) VALUES (%(run_id)s, 1, %(status)s, %(fingerprint)s, %(size)s, %(now)s, "
    "%(now)s, %(data)s, %(wait_topic)s, %(due_at)s, %(graph)s, %(due_at)s) "
)
_READY_AT = (
    # a run waiting on a topic is ready at its oldest pending message there (not one this save marks
    # delivered) when that is before its timer; and at once when a `send` committed after this
    # statement's snapshot was taken (the run's `sends` on the locked row moved: its message is not
    # seen here, and a send that came first found the run not waiting on the topic yet; the claim
    # checks whether the run is due)
    "CASE WHEN %(wait_topic)s::text IS NULL THEN %(due_at)s::double precision ELSE least(%(due_at)s::double precision, "
    "(SELECT min(m.sent_at) FROM {s}.messages m WHERE m.run_id = %(run_id)s AND m.topic = %(wait_topic)s::text "
    "AND NOT m.delivered AND m.message_id <> ALL(coalesce(%(delivered)s::text[], '{{}}'))), "
    "CASE WHEN c.sends IS DISTINCT FROM (SELECT k.sends FROM {s}.checkpoints k WHERE k.run_id = %(run_id)s) "
    "THEN %(now)s END) END"
)
_WAIT_SET = (
    "wait_topic = %(wait_topic)s, due_at = %(due_at)s, graph = coalesce(%(graph)s, c.graph), ready_at = " + _READY_AT
)
"""Every save writes the run's wait (NULLs: not waiting), when it is ready to be claimed (`ready_at`:
the earlier of its timer and its oldest pending message on the wait's topic, `send` lowers it),
and keeps its graph name unless given one."""
_WRITES = {
    # expected_version None: a new run gets version 1, an existing one the next version
    "any": _INSERT_LATEST + "ON CONFLICT (run_id) DO UPDATE SET version = c.version + 1, status = EXCLUDED.status, "
    "fingerprint = EXCLUDED.fingerprint, size = EXCLUDED.size, updated_at = EXCLUDED.updated_at, data = EXCLUDED.data, "
    + _WAIT_SET,
    # expected_version 0: only a new run id (a concurrent inserter waits for the first, then finds its row)
    "new": _INSERT_LATEST + "ON CONFLICT (run_id) DO NOTHING",
    # expected_version n: only over version n (no row when the run is missing or has moved on)
    "over": "UPDATE {s}.checkpoints AS c SET version = c.version + 1, status = %(status)s, "
    "fingerprint = %(fingerprint)s, size = %(size)s, updated_at = %(now)s, data = %(data)s, "
    + _WAIT_SET
    + " WHERE c.run_id = %(run_id)s AND c.version = %(expected)s",
}
_RELEASE_SET = (
    ", lease_owner = CASE WHEN c.lease_owner = %(release)s THEN NULL ELSE c.lease_owner END, "
    "lease_until = CASE WHEN c.lease_owner = %(release)s THEN NULL ELSE c.lease_until END"
)
"""A save that gives up its waker's lease (`release=`) clears it in the same write (a new row has none)."""
_ENTRY = (
    # a history entry from the rows of `{rows}` (an entry left by a run id's earlier life is replaced)
    "INSERT INTO {s}.history (run_id, version, status, fingerprint, size, saved_at, data) "
    "SELECT run_id, version, status, fingerprint, size, updated_at, data FROM {rows} "
    "ON CONFLICT (run_id, version) DO UPDATE SET status = EXCLUDED.status, fingerprint = EXCLUDED.fingerprint, "
    "size = EXCLUDED.size, saved_at = EXCLUDED.saved_at, data = EXCLUDED.data, base = NULL, listed = true"
)
_SAVED = "RETURNING version, created_at, forked_from"
_SAVED_WAITING = (
    # a save with its wait and its delivered messages, one statement (one round trip, one transaction):
    # the messages are marked only when the checkpoint was written; the wakers are woken (at commit)
    # only when the run parks with no live lease (a waker holding the run releases it, which wakes them)
    "WITH saved AS ({write} RETURNING version, created_at, forked_from, lease_until), "
    "marked AS (UPDATE {s}.messages SET delivered = true WHERE run_id = %(run_id)s "
    "AND message_id = ANY(%(delivered)s::text[]) AND EXISTS (SELECT 1 FROM saved)) "
    "SELECT version, created_at, forked_from, CASE WHEN %(parks)s AND (lease_until IS NULL OR lease_until <= %(now)s) "
    "THEN pg_notify(%(channel)s, %(wake)s)::text END FROM saved"
)
_SAVED_WITH_HISTORY = (
    "WITH saved AS ({write} RETURNING run_id, version, status, fingerprint, size, created_at, updated_at, "
    "forked_from, data), "
    "entry AS ({entry}) "
    "SELECT version, created_at, forked_from FROM saved"
)
_SAVED_WITH_HISTORY_PRUNED = (
    # the DELETE sees the entries as they were before this statement (not the one it adds): of those
    # it keeps the newest `limit` - 1, and only when the write happened. Two unconditional saves of
    # one run at the same moment may leave one entry too many, until its next history save.
    "WITH saved AS ({write} RETURNING run_id, version, status, fingerprint, size, created_at, updated_at, "
    "forked_from, data), "
    "entry AS ({entry}), "
    "ranked AS (SELECT version, saved_at, row_number() OVER (ORDER BY version DESC) AS newer, "
    "(EXISTS (SELECT 1 FROM {s}.history d WHERE d.run_id = %(run_id)s AND d.version = history.version + 1 "
    "AND d.base IS NOT NULL) OR EXISTS (SELECT 1 FROM {s}.checkpoints c WHERE c.run_id = %(run_id)s "
    "AND c.version = history.version AND length(c.data) = 0)) AS based_on "
    "FROM {s}.history WHERE run_id = %(run_id)s AND listed), "
    "dropped AS (SELECT version, based_on FROM ranked WHERE version < (SELECT version FROM saved) "
    "AND (newer >= %(limit)s OR saved_at < %(cutoff)s)), "
    # a dropped entry a delta is made over stays as that delta's base (unlisted); the others go
    "gone AS (DELETE FROM {s}.history h USING dropped r WHERE h.run_id = %(run_id)s AND h.version = r.version "
    "AND NOT r.based_on), "
    "hidden AS (UPDATE {s}.history h SET listed = false FROM dropped r WHERE h.run_id = %(run_id)s "
    "AND h.version = r.version AND r.based_on) "
    "SELECT version, created_at, forked_from FROM saved"
)
_CURRENT_VERSION = "SELECT version FROM {s}.checkpoints WHERE run_id = %(run_id)s"
_LOCK_RUN = _CURRENT_VERSION + " FOR UPDATE"

# retention: of one run's entries (or every run's), drop those past the newest `limit` and those
# saved before `cutoff` (a NULL bound drops nothing)
_PRUNE = (
    # a dropped entry the next row is a delta over stays as that delta's base (unlisted); the others go
    "WITH ranked AS (SELECT run_id, version, saved_at, "
    "row_number() OVER (PARTITION BY run_id ORDER BY version DESC) AS newer, "
    "(EXISTS (SELECT 1 FROM {s}.history d WHERE d.run_id = history.run_id AND d.version = history.version + 1 "
    "AND d.base IS NOT NULL) OR EXISTS (SELECT 1 FROM {s}.checkpoints c WHERE c.run_id = history.run_id "
    "AND c.version = history.version AND length(c.data) = 0)) AS based_on FROM {s}.history WHERE listed {where}), "
    "dropped AS (SELECT run_id, version, based_on FROM ranked "
    "WHERE newer > %(limit)s OR saved_at < %(cutoff)s), "
    "gone AS (DELETE FROM {s}.history h USING dropped r WHERE h.run_id = r.run_id AND h.version = r.version "
    "AND NOT r.based_on RETURNING 1), "
    "hidden AS (UPDATE {s}.history h SET listed = false FROM dropped r WHERE h.run_id = r.run_id "
    "AND h.version = r.version AND r.based_on RETURNING 1) "
    "SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM hidden)"
)
# the frames nothing needs: unlisted, and not between a listed entry (or the latest, when stored as
# frames) and the keyframe it is rebuilt from
_DROP_UNNEEDED = (
    "WITH tips AS MATERIALIZED (SELECT run_id, version FROM {s}.history WHERE listed {where} "
    "UNION ALL SELECT run_id, version FROM {s}.checkpoints WHERE length(data) = 0 {where}), "
    "ranges AS MATERIALIZED (SELECT t.run_id, t.version AS high, (SELECT max(k.version) FROM {s}.history k "
    "WHERE k.run_id = t.run_id AND k.base IS NULL AND k.version <= t.version) AS low FROM tips t) "
    "DELETE FROM {s}.history h WHERE NOT h.listed {where_h} AND NOT EXISTS (SELECT 1 FROM ranges r "
    "WHERE r.run_id = h.run_id AND h.version BETWEEN r.low AND r.high)"
)
# expiry: a batch of runs whose last save is older than `cutoff`; rows a save holds are skipped (it
# is not expired: it is saving), so a sweep never waits for a save
_EXPIRE_DELETE = (
    "WITH doomed AS (SELECT run_id FROM {s}.checkpoints WHERE updated_at < %(cutoff)s "
    "ORDER BY updated_at LIMIT %(batch)s FOR UPDATE SKIP LOCKED), "
    "entries AS (DELETE FROM {s}.history h USING doomed d WHERE h.run_id = d.run_id), "
    "kept AS (DELETE FROM {s}.messages m USING doomed d WHERE m.run_id = d.run_id), "
    "gone AS (DELETE FROM {s}.checkpoints c USING doomed d WHERE c.run_id = d.run_id RETURNING c.run_id) "
    "SELECT run_id FROM gone"
)
_EXPIRE_HISTORY = (
    "WITH doomed AS (SELECT c.run_id FROM {s}.checkpoints c WHERE c.updated_at < %(cutoff)s AND EXISTS "
    "(SELECT 1 FROM {s}.history h WHERE h.run_id = c.run_id AND h.listed) "
    "ORDER BY c.updated_at LIMIT %(batch)s FOR UPDATE SKIP LOCKED), "
    "hidden AS (UPDATE {s}.history h SET listed = false FROM doomed d WHERE h.run_id = d.run_id) "
    "SELECT run_id FROM doomed"
)
_CHAIN = (
    "SELECT version, base, data FROM {s}.history WHERE run_id = %(run_id)s AND version <= %(version)s "
    "AND version >= (SELECT max(version) FROM {s}.history WHERE run_id = %(run_id)s AND base IS NULL "
    "AND version <= %(version)s) ORDER BY version"
)
_CLAIM_RUN = (
    # a new run's row, version 0, for the transaction that saves its first checkpoint (a concurrent
    # first save waits for it, then finds the row): the row lock below then fences both alike
    "INSERT INTO {s}.checkpoints (run_id, version, status, fingerprint, size, created_at, updated_at, data) "
    "VALUES (%(run_id)s, 0, %(status)s, %(fingerprint)s, %(size)s, %(now)s, %(now)s, ''::bytea) "
    "ON CONFLICT (run_id) DO NOTHING"
)
_LOCK_RECORD = "SELECT version, created_at, forked_from FROM {s}.checkpoints WHERE run_id = %(run_id)s FOR UPDATE"
_PUT_FRAME = (
    "INSERT INTO {s}.history (run_id, version, status, fingerprint, size, saved_at, data, base, listed) "
    "VALUES (%(run_id)s, %(version)s, %(status)s, %(fingerprint)s, %(size)s, %(now)s, %(frame)s, %(base)s, "
    "%(listed)s) ON CONFLICT (run_id, version) DO UPDATE SET status = EXCLUDED.status, "
    "fingerprint = EXCLUDED.fingerprint, size = EXCLUDED.size, saved_at = EXCLUDED.saved_at, data = EXCLUDED.data, "
    "base = EXCLUDED.base, listed = EXCLUDED.listed"
)
_PUT_FRAMED_LATEST = (
    "INSERT INTO {s}.checkpoints AS c (run_id, version, status, fingerprint, size, created_at, updated_at, data, "
    "wait_topic, due_at, graph, ready_at) VALUES (%(run_id)s, %(version)s, %(status)s, %(fingerprint)s, %(size)s, "
    "%(now)s, %(now)s, ''::bytea, %(wait_topic)s, %(due_at)s, %(graph)s, %(due_at)s) "
    "ON CONFLICT (run_id) DO UPDATE SET version = EXCLUDED.version, status = EXCLUDED.status, "
    "fingerprint = EXCLUDED.fingerprint, size = EXCLUDED.size, updated_at = EXCLUDED.updated_at, data = ''::bytea, "
    + _WAIT_SET
)

_LOAD_LATEST = f"SELECT {_RECORD}, data, NULL::bigint FROM {{s}}.checkpoints WHERE run_id = %(run_id)s"
_LOAD_VERSION = (
    f"SELECT {_RECORD}, data, NULL::bigint FROM {{s}}.checkpoints WHERE run_id = %(run_id)s "
    "AND version = %(version)s "
    "UNION ALL "
    "SELECT h.run_id, h.version, h.status, h.fingerprint, h.size, c.created_at, h.saved_at, c.forked_from, h.data, "
    "h.base FROM {s}.history h JOIN {s}.checkpoints c ON c.run_id = h.run_id "
    "WHERE h.run_id = %(run_id)s AND h.version = %(version)s AND c.version <> %(version)s AND h.listed"
)
_RUN_EXISTS = "SELECT EXISTS (SELECT 1 FROM {s}.checkpoints WHERE run_id = %(run_id)s)"
_HISTORY = (
    "SELECT c.run_id, h.version, h.status, h.fingerprint, h.size, c.created_at, h.saved_at, c.forked_from "
    "FROM {s}.checkpoints c LEFT JOIN {s}.history h ON h.run_id = c.run_id AND h.listed "
    "WHERE c.run_id = %(run_id)s ORDER BY h.version"
)
_LIST = f"SELECT {_RECORD} FROM {{s}}.checkpoints ORDER BY run_id"
_LIST_STATUS = f"SELECT {_RECORD} FROM {{s}}.checkpoints WHERE status = %(status)s ORDER BY run_id"
_DELETE = (
    "WITH entries AS (DELETE FROM {s}.history WHERE run_id = %(run_id)s), "
    "kept AS (DELETE FROM {s}.messages WHERE run_id = %(run_id)s) "
    "DELETE FROM {s}.checkpoints WHERE run_id = %(run_id)s"
)
# the entry (the latest or a history entry) becomes the new run's latest and first history entry, in
# one statement; the row tells apart an entry not kept (no row) and a taken run id (made = 0)
_FORK = (
    "WITH source AS (SELECT %(status)s::text AS status, %(fingerprint)s::text AS fingerprint, "
    "%(size)s::integer AS size, %(data)s::bytea AS data), "
    # the new run does not wait and has no messages or lease; it belongs to the source's graph
    "made AS (INSERT INTO {s}.checkpoints (run_id, version, status, fingerprint, size, created_at, updated_at, "
    "forked_from, data, graph) SELECT %(new_run_id)s, 1, status, fingerprint, size, %(now)s, %(now)s, "
    "%(forked_from)s, data, (SELECT graph FROM {s}.checkpoints WHERE run_id = %(run_id)s) FROM source "
    "ON CONFLICT (run_id) DO NOTHING "
    "RETURNING run_id, version, status, fingerprint, size, updated_at, data), "
    "entry AS ({entry}) "
    "SELECT s.status, s.fingerprint, s.size, s.data, (SELECT count(*) FROM made), "
    "(SELECT version FROM {s}.checkpoints WHERE run_id = %(new_run_id)s) FROM source s"
)

# waits, messages, leases
_MESSAGE = "run_id, topic, message_id, seq, sent_at, payload"
_LEASE_FREE = "(c.lease_until IS NULL OR c.lease_until <= %(now)s)"
_IN_GRAPHS = "AND (%(graphs)s::text[] IS NULL OR c.graph = ANY(%(graphs)s::text[]))"
_CLAIM = (
    # the due runs (a passed timer; a pending message on the wait's topic) whose lease is free, in the
    # order they became ready (`ready_at`, an index walk that stops at `limit`), locked with SKIP LOCKED
    # (a run another waker is claiming is skipped, never waited for), then leased; the lease condition
    # is checked again on the locked row
    "WITH picked AS (SELECT c.run_id, c.ready_at AS first, c.wait_topic AS topic FROM {s}.checkpoints c "
    # (a scalar subquery per row, which the planner cannot turn into a hash of every pending message)
    # (a timer only, no topic, is taken when it ends by the horizon: `now` + `ahead`)
    f"WHERE c.ready_at <= %(horizon)s AND {_LEASE_FREE} {_IN_GRAPHS} AND (c.due_at <= %(now)s OR "
    "(c.wait_topic IS NULL AND c.due_at <= %(horizon)s) OR (SELECT m.seq "
    "FROM {s}.messages m WHERE m.run_id = c.run_id AND m.topic = c.wait_topic AND NOT m.delivered LIMIT 1) "
    "IS NOT NULL) "
    "ORDER BY c.ready_at, c.run_id LIMIT %(limit)s FOR UPDATE OF c SKIP LOCKED) "
    # with each run's oldest pending message on its wait's topic (the one a resume delivers)
    "UPDATE {s}.checkpoints c SET lease_owner = %(owner)s, lease_until = %(until)s FROM picked p "
    "LEFT JOIN LATERAL (SELECT m.message_id, m.seq, m.sent_at, m.payload FROM {s}.messages m "
    "WHERE m.run_id = p.run_id AND m.topic = p.topic AND NOT m.delivered ORDER BY m.seq LIMIT 1) f ON true "
    f"WHERE c.run_id = p.run_id RETURNING {', '.join('c.' + n for n in _RECORD.split(', '))}, c.graph, "
    "c.wait_topic, c.due_at, p.first, c.data, f.message_id, f.seq, f.sent_at, f.payload"
)
_SENDABLE = "NOT ({status} = ANY(%(ended)s::text[]) AND %(topic)s::text <> %(start)s::text)"
"""The run takes the message: it has not ended (a queued start is taken by a finished run too)."""
_SEND = (
    # one statement: the run's row lock (and a new row version, which a save that started before this
    # send commits sees: `_READY_AT`), the message unless the run ended or the id was sent before (the
    # lock taken first, so a run's messages are numbered in the order they commit), the run ready when
    # it waits on the topic, and the wake-up
    "WITH locked AS (UPDATE {s}.checkpoints c SET sends = c.sends + 1, ready_at = CASE WHEN c.wait_topic = "
    f"%(topic)s AND {_SENDABLE.format(status='c.status')} AND NOT EXISTS (SELECT 1 FROM {{s}}.messages k "
    "WHERE k.run_id = %(run_id)s AND k.message_id = %(message_id)s) THEN least(c.ready_at, %(now)s) "
    "ELSE c.ready_at END WHERE c.run_id = %(run_id)s RETURNING c.status), "
    "put AS (INSERT INTO {s}.messages (run_id, message_id, topic, sent_at, payload) SELECT %(run_id)s, "
    f"%(message_id)s, %(topic)s, %(now)s, %(payload)s FROM locked WHERE {_SENDABLE.format(status='locked.status')} "
    "ON CONFLICT (run_id, message_id) DO NOTHING RETURNING seq) "
    "SELECT l.status, p.seq, CASE WHEN p.seq IS NOT NULL THEN pg_notify(%(channel)s, %(wake)s)::text END "
    "FROM locked l LEFT JOIN put p ON true"
)
_KEPT_MESSAGE = f"SELECT {_MESSAGE} FROM {{s}}.messages WHERE run_id = %(run_id)s AND message_id = %(message_id)s"
_NOTIFY = "SELECT pg_notify(%(channel)s, %(wake)s)"
_MARK_DELIVERED = (
    "UPDATE {s}.messages SET delivered = true WHERE run_id = %(run_id)s AND message_id = ANY(%(delivered)s::text[])"
)
_RENEW = (
    "UPDATE {s}.checkpoints SET lease_until = %(until)s WHERE run_id = %(run_id)s AND lease_owner = %(owner)s "
    "RETURNING 1"
)
_RELEASE = (
    # a run released while it waits may be due already: wake the wakers
    "WITH freed AS (UPDATE {s}.checkpoints SET lease_owner = NULL, lease_until = NULL WHERE run_id = %(run_id)s "
    "AND lease_owner = %(owner)s RETURNING run_id, wait_topic IS NOT NULL OR due_at IS NOT NULL AS waiting) "
    "SELECT pg_notify(%(channel)s, %(wake)s) FROM freed WHERE waiting"
)
_MESSAGES = (
    f"SELECT {_MESSAGE} FROM {{s}}.messages WHERE run_id = %(run_id)s "
    "AND (%(topic)s::text IS NULL OR topic = %(topic)s::text) AND (NOT %(pending)s OR NOT delivered) ORDER BY seq"
)
_FIRST_TIMERS = (
    # the first timers in due order, whatever their lease or graph (no filter: the index walk is the
    # plan even before the table has statistics)
    "SELECT due_at, lease_until, graph FROM {s}.checkpoints WHERE due_at IS NOT NULL ORDER BY due_at LIMIT %(limit)s"
)
_NEXT_DUE = (
    "SELECT min(greatest(due_at, lease_until)) FROM {s}.checkpoints c WHERE due_at IS NOT NULL "
    "AND (%(graphs)s::text[] IS NULL OR c.graph = ANY(%(graphs)s::text[]))"
)


def _statements(schema: str) -> dict[str, Any]:
    """Every statement of a store on `schema` (a checked identifier), the schema name filled in."""
    s = f'"{schema}"'
    out: dict[str, Any] = {"create": tuple(sql.format(s=s) for sql in _CREATE)}
    for name, sql in (
        ("meta_version", _META_VERSION),
        ("set_version", _SET_VERSION),
        ("current_version", _CURRENT_VERSION),
        ("lock_run", _LOCK_RUN),
        ("load_latest", _LOAD_LATEST),
        ("load_version", _LOAD_VERSION),
        ("run_exists", _RUN_EXISTS),
        ("history", _HISTORY),
        ("list", _LIST),
        ("list_status", _LIST_STATUS),
        ("delete", _DELETE),
        ("sweep_index", _SWEEP_INDEX),
    ):
        out[name] = sql.format(s=s)
    out["fork"] = _FORK.format(s=s, entry=_ENTRY.format(s=s, rows="made"))
    for mode, write in _WRITES.items():
        # a save that does not wait (nothing else besides it): no wait's ready time to find
        out[f"save_{mode}"] = f"{write.replace(_READY_AT, 'NULL').format(s=s)} {_SAVED}"
        out[f"save_{mode}_waiting"] = _SAVED_WAITING.format(write=write.format(s=s), s=s)
        releasing = write.replace(_WAIT_SET, _WAIT_SET + _RELEASE_SET)
        out[f"save_{mode}_waiting_releasing"] = _SAVED_WAITING.format(write=releasing.format(s=s), s=s)
        entry = _ENTRY.format(s=s, rows="saved")
        out[f"save_{mode}_history"] = _SAVED_WITH_HISTORY.format(write=write.format(s=s), entry=entry)
        pruned = _SAVED_WITH_HISTORY_PRUNED.format(s=s, write=write.format(s=s), entry=entry)
        out[f"save_{mode}_history_pruned"] = pruned
    out["prune_run"] = _PRUNE.format(s=s, where="AND run_id = %(run_id)s")
    out["prune_all"] = _PRUNE.format(s=s, where="")
    out["drop_unneeded_run"] = _DROP_UNNEEDED.format(
        s=s, where="AND run_id = %(run_id)s", where_h="AND h.run_id = %(run_id)s"
    )
    out["drop_unneeded_all"] = _DROP_UNNEEDED.format(s=s, where="", where_h="")
    runs, runs_h = "AND run_id = ANY(%(runs)s)", "AND h.run_id = ANY(%(runs)s)"
    out["drop_unneeded_runs"] = _DROP_UNNEEDED.format(s=s, where=runs, where_h=runs_h)
    out["expire_delete"] = _EXPIRE_DELETE.format(s=s)
    out["expire_keep_latest"] = _EXPIRE_HISTORY.format(s=s)
    for name, sql in (("chain", _CHAIN), ("lock_record", _LOCK_RECORD), ("put_frame", _PUT_FRAME)):
        out[name] = sql.format(s=s)
    out["put_framed_latest"] = _PUT_FRAMED_LATEST.format(s=s)
    out["claim_run"] = _CLAIM_RUN.format(s=s)
    for name, sql in (
        ("claim", _CLAIM),
        ("send", _SEND),
        ("kept_message", _KEPT_MESSAGE),
        ("mark_delivered", _MARK_DELIVERED),
        ("renew", _RENEW),
        ("release", _RELEASE),
        ("messages", _MESSAGES),
        ("next_due", _NEXT_DUE),
        ("first_timers", _FIRST_TIMERS),
    ):
        out[name] = sql.format(s=s)
    return out


# ----- operations: the statements to run and what their rows mean, for either driver -------------

Statement = tuple[str, dict[str, Any]]
Steps = Generator[Statement, list[tuple[Any, ...]], Any]
"""An operation's logic: it yields the statements one by one, receives each one's rows, returns the result."""


@dataclass(frozen=True)
class _AfterSave:
    """What a save writes besides its checkpoint, in the same statement or transaction."""

    parks: bool
    """The run parks (a wait): the wakers are woken at commit."""
    marked: tuple[str, ...]
    """The ids of the messages it marks delivered."""
    released: str | None
    """The lease owner whose lease it gives up."""

    @property
    def any(self) -> bool:
        return self.parks or bool(self.marked) or self.released is not None


@dataclass
class _Operation:
    what: str
    """What is being done, for the error message ("saving the checkpoint of run 'r'")."""
    steps: Steps
    atomic: bool
    """Run the statements in one transaction (else each commits on its own: at most one of them writes)."""
    done: Callable[[bool], None] | None = None
    """Told whether the operation committed (the store keeps a saved frame's base only then)."""
    small: bool = False
    """Its rows are small (a record, a flag): it runs on the connection's kept cursor (`_kept_cursor`)."""


class _PostgresStore:
    """The configuration and the operations shared by the sync and the async store (no I/O here)."""

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 4,
        schema: str = "amrita_sense",
        history_limit: int | None = None,
        history_max_age: float | None = None,
        run_ttl: float | None = None,
        on_expiry: str = "delete",
        prepare: bool = False,
        timeout: float = 30.0,
        **pool_kwargs: Any,
    ) -> None:
        if _PSYCOPG_MISSING is not None:
            raise ImportError(
                f"{type(self).__name__} needs psycopg 3 and psycopg-pool: pip install amrita-sense-turbo[postgres] "
                f"({_PSYCOPG_MISSING})"
            ) from _PSYCOPG_MISSING
        self._params = _parse_dsn(dsn)
        self._dsn = dsn
        _check_pool_size(min_size, max_size)
        if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
            raise ValueError(f"schema is an identifier (letters, digits, _; at most 63), not {schema!r:.80}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout is a positive number of seconds, not {timeout!r}")
        refused = sorted(set(pool_kwargs) & set(_OWN_POOL_OPTIONS))
        if refused:
            raise TypeError(f"the store sets {', '.join(refused)} of its pool itself")
        self.history_limit, self.history_max_age = _check_retention(history_limit, history_max_age)
        self.run_ttl, self.on_expiry = _check_expiry(run_ttl, on_expiry)
        self.min_size, self.max_size, self.schema = min_size, max_size, schema
        self.prepare, self.timeout = bool(prepare), float(timeout)
        self._pool_kwargs = dict(pool_kwargs)
        self._sql = _statements(schema)
        self._where = f" in schema {schema!r} of {_safe_conninfo(self._params)!r}"
        self._bases = deltas.Bases()
        self._bases_lock = threading.Lock()  # threads: guards `_bases`
        self._start()

    def _start(self) -> None:
        """Set up the driver's state (no connection yet: the pool opens on first use)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({_safe_conninfo(self._params)!r}, schema={self.schema!r})"

    def __reduce__(self) -> tuple:
        """Pickle as the constructor's arguments: the unpickled store opens a pool of its own."""
        options = {"min_size": self.min_size, "max_size": self.max_size, "schema": self.schema}
        options.update(history_limit=self.history_limit, history_max_age=self.history_max_age)
        options.update(run_ttl=self.run_ttl, on_expiry=self.on_expiry)
        options.update(prepare=self.prepare, timeout=self.timeout, **self._pool_kwargs)
        return (_reopen, (type(self), self._dsn, options))

    def _pool_options(self, check: Any, connection_class: type) -> dict[str, Any]:
        """The keyword arguments of the pool (the caller's `pool_kwargs` override the defaults)."""
        connection = dict(self._pool_kwargs.get("kwargs") or {})
        if "connect_timeout" not in self._params and "connect_timeout" not in connection:
            connection["connect_timeout"] = max(2, math.ceil(self.timeout))  # libpq's smallest is 2
        # autocommit: a single statement is its own transaction (no BEGIN/COMMIT round trips) and a
        # connection is never left idle in a transaction; None: no server-side prepared statements
        connection.update(autocommit=True, prepare_threshold=5 if self.prepare else None)
        options: dict[str, Any] = {
            "min_size": self.min_size,
            "max_size": self.max_size,
            "timeout": self.timeout,
            # the pool gives up reconnecting after `timeout`; the next operation then starts afresh
            # at once instead of waiting for a background attempt's ever longer backoff
            "reconnect_timeout": self.timeout,
            "check": check,
            "name": f"amrita_sense.{self.schema}",
        }
        options.update(self._pool_kwargs)
        options.update(kwargs=connection, open=False, connection_class=connection_class)
        return options

    def _used(self, conn: Any) -> None:
        """`conn` comes back from an operation (a broken one is not fresh: the pool drops it)."""
        conn._back_at = monotonic()

    def _fresh(self, conn: Any) -> bool:
        """Back from an operation less than `FRESH` seconds ago, and nothing arrived on it since: a
        server that went away (a restart, a terminated backend) has sent its goodbye or closed the
        socket, which makes it readable (one poll, no round trip)."""
        if conn.broken or monotonic() - getattr(conn, "_back_at", -FRESH) >= FRESH:
            return False
        try:
            readable, _, _ = select.select([conn.fileno()], [], [], 0)
        except (OSError, ValueError, psycopg.Error):
            return False
        return not readable

    def _failure(self, what: str, exc: BaseException) -> CheckpointError:
        return CheckpointError(f"{what} failed{self._where}: {exc}")

    # ----- the operations ----------------------------------------------------------------------

    def _schema_op(self, what: str) -> _Operation:
        return _Operation(f"{what} (preparing the schema)", self._schema_steps(), atomic=True)

    def _schema_steps(self) -> Steps:
        """Nothing when the tables are there at this version (no DDL: a role without CREATE works);
        else create them under the advisory lock and look again (another process may have gone first)."""
        if (yield _RELATION_EXISTS, {"relation": f'"{self.schema}".meta'})[0][0]:
            found = self._schema_version((yield self._sql["meta_version"], {}))
            if found == SCHEMA_VERSION and not (yield from self._sweep_index_missing()):
                return None
        key = zlib.crc32(f"amrita_sense.durable.postgres:{self.schema}".encode())  # the old module path: a fixed key
        yield _LOCK_SCHEMA, {"key": key}
        for statement in self._sql["create"]:
            yield statement, {}
        if self.run_ttl is not None:
            yield self._sql["sweep_index"], {}
        found = self._schema_version((yield self._sql["meta_version"], {}))
        if found < SCHEMA_VERSION:
            yield self._sql["set_version"], {"version": SCHEMA_VERSION}
        return None

    def _sweep_index_missing(self) -> Steps:
        """This store expires runs and their index is not there yet (`_SWEEP_INDEX`)."""
        if self.run_ttl is None:
            return False
        return not (yield _RELATION_EXISTS, {"relation": f'"{self.schema}".checkpoints_updated_at'})[0][0]

    def _schema_version(self, rows: list[tuple[Any, ...]]) -> int:
        found = rows[0][0] if rows else 0
        if found > SCHEMA_VERSION:
            raise CheckpointError(
                f"the checkpoint tables{self._where} have schema version {found}; this release knows versions "
                f"up to {SCHEMA_VERSION} (upgrade amrita-sense-turbo to read it)"
            )
        return found

    def _save_op(
        self,
        run_id: str,
        data: bytes,
        expected_version: int | None,
        history: bool,
        wait: Wait | None = None,
        graph: str | None = None,
        delivered: Any = (),
        release: str | None = None,
    ) -> _Operation:
        _check_run_id(run_id)
        _check_expected(expected_version)
        if wait is not None:
            _check_wait(run_id, wait)
        marked = _check_delivered(run_id, delivered) if delivered else ()
        released = None if release is None else _check_name("lease owner", release)
        header = read_header(data)
        now = time.time()
        params: dict[str, Any] = {
            "run_id": run_id,
            "status": header.status,
            "fingerprint": header.fingerprint,
            "size": len(data),
            "now": now,
            "data": bytes(data),
            "expected": expected_version,
            "wait_topic": None if wait is None else wait.topic,
            "due_at": None if wait is None or wait.due_at is None else float(wait.due_at),
            "graph": _check_graph(graph),
            "delivered": list(marked) if marked else None,
        }
        with self._bases_lock:
            framed = deltas.as_frames(len(data), history, self._bases.framed(run_id))
        after = _AfterSave(wait is not None, marked, released)
        if framed:
            return self._framed_save_op(params, header, history, after)
        statement = "save_" + ("any" if expected_version is None else "new" if expected_version == 0 else "over")
        if history:
            statement += "_history"
            if self._retains():
                statement += "_pruned"
                params.update(self._retention(run_id, now))
        if after.any and not history:
            params.update(parks=after.parks, delivered=list(marked), **self._wake_params(run_id))
            if released is not None:
                statement += "_waiting_releasing" if expected_version != 0 else "_waiting"
                params["release"] = released
            else:
                statement += "_waiting"
            steps = self._save_steps(self._sql[statement], params)
            return _Operation(f"saving the checkpoint of run {run_id!r}", steps, atomic=False, small=True)
        steps = self._save_steps(self._sql[statement], params)
        if after.any:
            # the checkpoint, its delivered messages, the released lease and the wake-up of a parked
            # run: one transaction
            steps = self._waiting_save_steps(steps, run_id, after)
            return _Operation(f"saving the checkpoint of run {run_id!r}", steps, atomic=True, small=True)
        return _Operation(f"saving the checkpoint of run {run_id!r}", steps, atomic=False, small=True)

    def _waiting_save_steps(self, save: Steps, run_id: str, after: _AfterSave) -> Steps:
        record = yield from save
        yield from self._after_save_steps(run_id, after)
        return record

    def _after_save_steps(self, run_id: str, after: _AfterSave) -> Steps:
        if after.marked:
            yield self._sql["mark_delivered"], {"run_id": run_id, "delivered": list(after.marked)}
        if after.released is not None:  # a waiting run's release wakes the wakers itself
            yield self._sql["release"], {"run_id": run_id, "owner": after.released, **self._wake_params(run_id)}
        if after.parks:
            yield _NOTIFY, self._wake_params(run_id)

    def _wake_params(self, run_id: str) -> dict[str, Any]:
        return {"channel": WAKE_CHANNEL, "wake": f"{self.schema} {run_id}"}

    def _framed_save_op(self, params: dict[str, Any], header: Any, history: bool, after: _AfterSave) -> _Operation:
        """A save as a frame in the history table (listed with `history`, else kept only as the base of
        the next); the latest row keeps the record and no data. One transaction."""
        run_id = params["run_id"]
        kept: dict[str, Any] = {}

        def done(committed: bool) -> None:
            with self._bases_lock:
                if committed and kept:
                    self._bases.keep(run_id, kept["version"], params["data"], kept["chain"], kept["chain_bytes"])
                else:
                    self._bases.forget(run_id)

        steps = self._framed_save_steps(params, history, kept, after)
        return _Operation(f"saving the checkpoint of run {run_id!r}", steps, atomic=True, done=done, small=True)

    def _framed_save_steps(
        self, params: dict[str, Any], history: bool, kept: dict[str, Any], after: _AfterSave
    ) -> Steps:
        run_id, now = params["run_id"], params["now"]
        yield self._sql["claim_run"], params
        current, created, forked = (yield self._sql["lock_record"], {"run_id": run_id})[0]
        expected = params["expected"]
        if expected is not None and expected != current:
            raise _conflict(run_id, expected, current)
        with self._bases_lock:
            frame, base, chain, chain_bytes = self._bases.frame(run_id, current, params["data"])
        version = current + 1
        frame_params = dict(params, version=version, frame=frame, base=base, listed=history)
        yield self._sql["put_frame"], frame_params
        yield self._sql["put_framed_latest"], frame_params
        if base is None:  # the frames before a keyframe may go
            yield self._sql["drop_unneeded_run"], {"run_id": run_id}
        if history and self._retains():  # unlisted bases wait for the next keyframe or `prune()`
            yield self._sql["prune_run"], self._retention(run_id, now)
        yield from self._after_save_steps(run_id, after)
        kept.update(version=version, chain=chain, chain_bytes=chain_bytes)
        return CheckpointRecord(
            run_id, version, params["status"], params["fingerprint"], params["size"], created, now, forked
        )

    def _save_steps(self, statement: str, params: dict[str, Any]) -> Steps:
        rows = yield statement, params
        run_id = params["run_id"]
        if not rows:  # the condition did not hold: nothing was written
            current = yield self._sql["current_version"], {"run_id": run_id}
            raise _conflict(run_id, params["expected"], current[0][0] if current else 0)
        version, created_at, forked_from = rows[0][:3]
        return _record(
            run_id,
            version,
            params["status"],
            params["fingerprint"],
            params["size"],
            created_at,
            params["now"],
            forked_from,
        )

    def _retains(self) -> bool:
        return self.history_limit is not None or self.history_max_age is not None

    def _retention(self, run_id: str | None, now: float) -> dict[str, Any]:
        cutoff = None if self.history_max_age is None else now - self.history_max_age
        return {"run_id": run_id, "limit": self.history_limit, "cutoff": cutoff}

    def _load_op(self, run_id: str, version: int | None) -> _Operation:
        _check_run_id(run_id)
        _check_version(version)
        return _Operation(f"loading the checkpoint of run {run_id!r}", self._load_steps(run_id, version), atomic=False)

    def _load_steps(self, run_id: str, version: int | None) -> Steps:
        if version is None:
            rows = yield self._sql["load_latest"], {"run_id": run_id}
        else:
            rows = yield self._sql["load_version"], {"run_id": run_id, "version": version}
        if not rows:
            if version is None or not (yield self._sql["run_exists"], {"run_id": run_id})[0][0]:
                raise CheckpointNotFound(f"no checkpoint for run {run_id!r}{self._where}")
            raise _version_not_kept(run_id, version, self._where)
        row = rows[0]
        record, data, base = CheckpointRecord(*row[:8]), row[8], row[9]
        if not data or base is not None:  # stored as frames
            frames = yield self._sql["chain"], {"run_id": run_id, "version": record.version}
            data = self._rebuild(run_id, record.version, frames, latest=version is None or not row[9])
        return Checkpoint(record, _checked_data(run_id, record.version, data, self._where))

    def _rebuild(self, run_id: str, version: int, frames: list[tuple[Any, ...]], latest: bool) -> bytes:
        """The snapshot of `version` from its keyframe and the deltas after it (the latest's is kept
        as the base of the run's next save)."""
        data = deltas.rebuild_frames(frames, run_id, version)
        if latest:
            with self._bases_lock:
                self._bases.keep(run_id, version, data, *deltas.chain_of(frames))
        return data

    def _history_op(self, run_id: str) -> _Operation:
        _check_run_id(run_id)
        return _Operation(f"reading the history of run {run_id!r}", self._history_steps(run_id), atomic=False)

    def _history_steps(self, run_id: str) -> Steps:
        rows = yield self._sql["history"], {"run_id": run_id}
        if not rows:
            raise CheckpointNotFound(f"no checkpoint for run {run_id!r}{self._where}")
        return [CheckpointRecord(*row) for row in rows if row[1] is not None]  # version NULL: no entry

    def _fork_op(self, run_id: str, version: int, new_run_id: str) -> _Operation:
        _check_run_id(run_id)
        _check_run_id(new_run_id)
        if _check_version(version) is None:
            raise ValueError("fork needs the version of the checkpoint to start from")
        params = {
            "run_id": run_id,
            "version": version,
            "new_run_id": new_run_id,
            "now": time.time(),
            "forked_from": _forked_from(run_id, version),
        }
        what = f"forking run {run_id!r} at version {version} into {new_run_id!r}"
        return _Operation(what, self._fork_steps(params), atomic=True)

    def _fork_steps(self, params: dict[str, Any]) -> Steps:
        run_id, version, new_run_id = params["run_id"], params["version"], params["new_run_id"]
        source = yield from self._load_steps(run_id, version)  # checked, and whole when stored as frames
        record = source.record
        params = dict(params, status=record.status, fingerprint=record.fingerprint, size=record.size)
        rows = yield self._sql["fork"], dict(params, data=source.data)
        status, fingerprint, size, _, made, current = rows[0]
        if not made:
            # `current` is None only when the run id was taken by a writer this statement waited for
            raise _fork_conflict(new_run_id, current or 1)
        now = params["now"]
        return CheckpointRecord(new_run_id, 1, status, fingerprint, size, now, now, params["forked_from"])

    def _prune_op(self, run_id: str | None) -> _Operation:
        if run_id is not None:
            _check_run_id(run_id)
        what = "pruning the history" if run_id is None else f"pruning the history of run {run_id!r}"
        return _Operation(what, self._prune_steps(run_id), atomic=True)

    def _prune_steps(self, run_id: str | None) -> Steps:
        """Unlist what the retention no longer keeps, then drop every frame nothing needs."""
        removed = 0
        if self._retains():
            rows = yield self._sql["prune_all" if run_id is None else "prune_run"], self._retention(run_id, time.time())
            removed = rows[0][0]
        yield self._sql["drop_unneeded_all" if run_id is None else "drop_unneeded_run"], {"run_id": run_id}
        return removed

    def _expire_op(self, cutoff: float, batch_size: int) -> _Operation:
        """One batch of `sweep()`: the runs it expired."""
        return _Operation("expiring runs", self._expire_steps(cutoff, batch_size), atomic=True)

    def _expire_steps(self, cutoff: float, batch_size: int) -> Steps:
        rows = yield self._sql[f"expire_{self.on_expiry}"], {"cutoff": cutoff, "batch": batch_size}
        runs = [row[0] for row in rows]
        if runs and self.on_expiry == "keep_latest":  # the latest's own frames stay when stored as frames
            yield self._sql["drop_unneeded_runs"], {"runs": runs}
        with self._bases_lock:
            for run in runs if self.on_expiry == "delete" else ():
                self._bases.forget(run)
        return len(runs)

    def _sweep_batches(self, batch_size: int) -> tuple[float, int] | None:
        """`(cutoff, batch size)` of a sweep, or None when runs do not expire."""
        _check_batch(batch_size)
        return None if self.run_ttl is None else (time.time() - self.run_ttl, batch_size)

    def _list_op(self, status: str | None) -> _Operation:
        return _Operation("listing the checkpoints", self._list_steps(status), atomic=False)

    def _list_steps(self, status: str | None) -> Steps:
        if status is None:
            rows = yield self._sql["list"], {}
        else:
            rows = yield self._sql["list_status"], {"status": status}
        return [CheckpointRecord(*row) for row in rows]

    def _list_page_op(self, status: str | None, sort: str, order: str, offset: int, limit: int) -> _Operation:
        check_page(status, sort, order, offset, limit)
        steps = self._list_page_steps(status, order_by(sort, order), offset, limit)
        return _Operation("listing a page of the checkpoints", steps, atomic=False)

    def _list_page_steps(self, status: str | None, ordering: str, offset: int, limit: int) -> Steps:
        """The page's record columns (never `data`), sorted and cut by the server, then the count."""
        where = "WHERE status = %(status)s" if status is not None else ""
        params = {"status": status, "offset": offset, "limit": limit}
        table = f'"{self.schema}".checkpoints'
        sql = f"SELECT {_RECORD} FROM {table} {where} ORDER BY {ordering} LIMIT %(limit)s OFFSET %(offset)s"
        rows = yield sql, params
        total = (yield f"SELECT count(*) FROM {table} {where}", params)[0][0]
        return CheckpointPage([CheckpointRecord(*row) for row in rows], total)

    def _delete_op(self, run_id: str, expected_version: int | None) -> _Operation:
        _check_run_id(run_id)
        _check_expected(expected_version)
        steps = self._delete_steps(run_id, expected_version)
        return _Operation(f"deleting the checkpoints of run {run_id!r}", steps, atomic=True)

    def _delete_steps(self, run_id: str, expected: int | None) -> Steps:
        # the row lock first: a save waiting on it cannot add a history entry the delete would miss
        rows = yield self._sql["lock_run"], {"run_id": run_id}
        current = rows[0][0] if rows else 0
        if expected is not None and expected != current:
            raise _conflict(run_id, expected, current)
        if not rows:
            return False
        yield self._sql["delete"], {"run_id": run_id}
        with self._bases_lock:
            self._bases.forget(run_id)
        return True

    # ----- waits, messages, leases (amrita_sense.durable.stores.waiting) --------------------------

    def _send_op(
        self, run_id: str, topic: str, payload: Any, message_id: str | None, codec: Any, keyring: Any
    ) -> _Operation:
        _check_run_id(run_id)
        _check_name("topic", topic)
        message_id = _message_id(message_id)
        encoded = encode_payload(
            payload, codec=codec, keyring=keyring, run_id=run_id, topic=topic, message_id=message_id
        )
        params = {"run_id": run_id, "topic": topic, "message_id": message_id, "now": time.time(), "payload": encoded}
        params.update(ended=list(ENDED_STATUSES), start=START_TOPIC, **self._wake_params(run_id))
        return _Operation(f"sending a message to run {run_id!r}", self._send_steps(params), atomic=False)

    def _send_steps(self, params: dict[str, Any]) -> Steps:
        run_id = params["run_id"]
        rows = yield self._sql["send"], params
        if not rows:
            raise CheckpointNotFound(f"no checkpoint for run {run_id!r}{self._where}: a message cannot be sent")
        status, seq = rows[0][:2]
        if _refuses(status, params["topic"]):
            raise _ended(run_id, status)
        if seq is None:  # the same message id was sent before: that message stays
            return StoredMessage(*(yield self._sql["kept_message"], params)[0])
        return StoredMessage(run_id, params["topic"], params["message_id"], seq, params["now"], params["payload"])

    def _claim_op(
        self, owner: str, lease_seconds: float, limit: int, graphs: Any, now: float | None, ahead: float
    ) -> _Operation:
        lease = _check_lease(owner, lease_seconds)
        _check_limit(limit)
        names = _check_graphs(graphs)
        steps = self._claim_steps(owner, lease, limit, names, now, _check_ahead(ahead))
        return _Operation("claiming due runs", steps, atomic=False)  # one statement

    def _claim_steps(self, owner: str, lease: float, limit: int, names: Any, now: float | None, ahead: float) -> Steps:
        if names is not None and not names:
            return []
        at = time.time() if now is None else float(now)
        params = {"now": at, "horizon": at + ahead, "until": at + lease, "owner": owner, "limit": limit}
        params["graphs"] = None if names is None else sorted(names)
        rows = yield self._sql["claim"], params
        return [
            Claim(
                row[0],
                owner,
                at + lease,
                row[8],
                Wait(row[9], row[10]),
                CheckpointRecord(*row[:8]),
                None if row[13] is None else StoredMessage(row[0], row[9], *row[13:17]),
                _claimed_data(row[12]),
            )
            for row in sorted(rows, key=lambda row: (row[11], row[0]))
        ]

    def _renew_op(self, run_id: str, owner: str, lease_seconds: float) -> _Operation:
        lease = _check_lease(owner, lease_seconds)
        _check_run_id(run_id)
        params = {"run_id": run_id, "owner": owner, "until": time.time() + lease}
        steps = self._renew_steps(params)
        return _Operation(f"renewing the lease on run {run_id!r}", steps, atomic=False, small=True)

    def _renew_steps(self, params: dict[str, Any]) -> Steps:
        return bool((yield self._sql["renew"], params))

    def _release_op(self, run_id: str, owner: str) -> _Operation:
        _check_run_id(run_id)
        _check_name("lease owner", owner)
        params = {"run_id": run_id, "owner": owner, **self._wake_params(run_id)}
        steps = self._release_steps(params)
        return _Operation(f"releasing the lease on run {run_id!r}", steps, atomic=False, small=True)

    def _release_steps(self, params: dict[str, Any]) -> Steps:
        yield self._sql["release"], params
        return None

    def _messages_op(self, run_id: str, topic: str | None, pending: bool) -> _Operation:
        _check_run_id(run_id)
        if topic is not None:
            _check_name("topic", topic)
        params = {"run_id": run_id, "topic": topic, "pending": bool(pending)}
        return _Operation(f"reading the messages of run {run_id!r}", self._messages_steps(params), atomic=False)

    def _messages_steps(self, params: dict[str, Any]) -> Steps:
        rows = yield self._sql["messages"], params
        if not rows and not (yield self._sql["run_exists"], {"run_id": params["run_id"]})[0][0]:
            raise CheckpointNotFound(f"no checkpoint for run {params['run_id']!r}{self._where}")
        return [StoredMessage(*row) for row in rows]

    def _next_due_op(self, graphs: Any) -> _Operation:
        names = _check_graphs(graphs)
        params = {"graphs": None if names is None else sorted(names)}
        return _Operation("finding the next due run", self._next_due_steps(params), atomic=False, small=True)

    def _next_due_steps(self, params: dict[str, Any]) -> Steps:
        rows = yield self._sql["first_timers"], {"limit": _FIRST_TIMERS_READ}
        graphs = params["graphs"]
        ours = [(due, lease) for due, lease, graph in rows if graphs is None or graph in graphs]
        # exact when a timer of ours no lease holds is among them: the timers after it are not earlier
        if any(lease is None for _, lease in ours) or len(rows) < _FIRST_TIMERS_READ:
            return min((due if lease is None else max(due, lease) for due, lease in ours), default=None)
        return (yield self._sql["next_due"], params)[0][0]  # held or other graphs' timers first: all of them

    def _wakeup_timeout(self, timeout: Any) -> float:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise ValueError(f"timeout is a non-negative number of seconds, not {timeout!r}")
        return float(timeout)

    def _ours(self, payload: str) -> bool:
        """A wake-up of this store's schema (stores on other schemas share the channel)."""
        return payload.partition(" ")[0] == self.schema


def _parse_dsn(dsn: Any) -> dict[str, Any]:
    if not isinstance(dsn, str):
        raise TypeError(f"dsn is a libpq connection string or a postgresql:// URI, not {type(dsn).__name__}")
    try:
        return conninfo_to_dict(dsn)
    except psycopg.Error:
        # not the parser's message: it quotes the string, which may hold a password
        raise ValueError("dsn is not a valid libpq connection string or postgresql:// URI") from None


def _safe_conninfo(params: dict[str, Any]) -> str:
    """The connection string without its secrets (for messages and `repr`)."""
    return make_conninfo("", **{k: v for k, v in params.items() if k not in _SECRET_PARAMETERS})


def _check_pool_size(min_size: Any, max_size: Any) -> None:
    for name, value in (("min_size", min_size), ("max_size", max_size)):
        if type(value) is not int or value < 0:
            raise ValueError(f"{name} is a non-negative int, not {value!r}")
    if max_size < max(min_size, 1):
        raise ValueError(f"max_size ({max_size}) must be at least 1 and at least min_size ({min_size})")


def _reopen(cls: type, dsn: str, options: dict[str, Any]) -> Any:
    return cls(dsn, **options)


def _kept_cursor(conn: Any) -> Any:
    """The binary cursor `conn` keeps for the operations whose rows are small (a save's record, a
    lease's flag): made once per connection, as a new cursor costs about as much client time as the
    statement itself; it holds its last small result until the next operation on the connection."""
    try:
        return conn._kept
    except AttributeError:
        conn._kept = conn.cursor(binary=True)
        return conn._kept


def _has_rows(cursor: Any) -> bool:
    """The statement just run returned rows (a SELECT or a RETURNING; read from the result's status,
    not `description`, which builds a column object per column)."""
    result = cursor.pgresult
    return result is not None and result.status == _TUPLES_OK


def _drive(cursor: Any, steps: Steps) -> Any:
    """Run an operation's statements on `cursor` (sync); its result."""
    try:
        statement = next(steps)
        while True:
            cursor.execute(*statement)
            statement = steps.send(cursor.fetchall() if _has_rows(cursor) else [])
    except StopIteration as done:
        return done.value
    finally:
        steps.close()


async def _drive_async(cursor: Any, steps: Steps) -> Any:
    """Run an operation's statements on `cursor` (async); its result."""
    try:
        statement = next(steps)
        while True:
            await cursor.execute(*statement)
            statement = steps.send(await cursor.fetchall() if _has_rows(cursor) else [])
    except StopIteration as done:
        return done.value
    finally:
        steps.close()


def _drive_on(conn: Any, cursor: Any, operation: _Operation) -> Any:
    """Run `operation` on `cursor` of `conn`, in a transaction when it is atomic (sync)."""
    if not operation.atomic:
        return _drive(cursor, operation.steps)
    with conn.transaction():
        return _drive(cursor, operation.steps)


async def _drive_on_async(conn: Any, cursor: Any, operation: _Operation) -> Any:
    """Run `operation` on `cursor` of `conn`, in a transaction when it is atomic (async)."""
    if not operation.atomic:
        return await _drive_async(cursor, operation.steps)
    async with conn.transaction():
        return await _drive_async(cursor, operation.steps)


# ----- the sync store ----------------------------------------------------------------------------


class PostgresCheckpointStore(_PostgresStore):
    """Checkpoints in PostgreSQL, for threads (psycopg 3, `psycopg_pool.ConnectionPool`).

    Args:
        dsn: a libpq connection string or a postgresql:// URI (its password never shows in `repr`
            or in messages).
        min_size, max_size: connections the pool keeps open / may open.
        schema: where the tables live (created on first use); two stores on different schemas of
            one database see nothing of each other.
        history_limit, history_max_age: retention of the history (entries per run, seconds), applied
            at each history save and by `prune()`; the latest checkpoint is never dropped.
        prepare: let psycopg prepare frequent statements on the server (not behind PgBouncer in
            transaction mode).
        timeout: how long an operation waits for a connection (and the pool keeps reconnecting)
            before it fails with `CheckpointError`.
        pool_kwargs: more `ConnectionPool` arguments (`max_lifetime`, `kwargs` for the connections...).

    The pool opens on first use (or by `open()`); one store may be shared by the threads of a
    process; after `os.fork()` the child opens its own pool. Every psycopg or pool error is raised
    as a `CheckpointError` saying what failed, for which run.
    """

    def _start(self) -> None:
        self._lock = threading.Lock()
        self._lock_pid = os.getpid()
        # threads: guards the wake-up count and the listening thread
        self._wake = threading.Condition(threading.Lock())
        self._wake_count = self._wake_seen = 0
        self._listen_error: BaseException | None = None
        self._listen_thread: threading.Thread | None = None
        self._listen_stop = threading.Event()
        self._listen_conn: Any = None
        self._listen_pid = 0
        self._pool: ConnectionPool | None = None
        self._pid = 0
        self._ready = False

    def __enter__(self) -> PostgresCheckpointStore:
        return self.open()

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def open(self) -> PostgresCheckpointStore:
        """Open the pool and create the tables now (else the first operation does); the store."""
        self._ready_pool("opening the store")
        return self

    def close(self) -> None:
        """Close this process's pool (the next operation opens a new one)."""
        with self._process_lock():
            pool, self._pool, self._ready = self._pool, None, False
            if pool is not None and self._pid == os.getpid():
                pool.close()
        self._close_listener()

    def _process_lock(self) -> threading.Lock:
        if self._lock_pid != os.getpid():  # forked: the parent's lock may have been held at that moment
            self._lock, self._lock_pid = threading.Lock(), os.getpid()
        return self._lock

    def _ready_pool(self, what: str) -> ConnectionPool:
        pool = self._pool
        if pool is not None and self._ready and self._pid == os.getpid():
            return pool
        with self._process_lock():
            if self._pool is None or self._pid != os.getpid():
                # a forked child never touches its parent's pool: its sockets are the parent's
                self._pool, self._ready = None, False
                self._pool, self._pid = self._open_pool(what), os.getpid()
            if not self._ready:
                self._execute(self._pool, self._schema_op(what))
                self._ready = True
            return self._pool

    def _open_pool(self, what: str) -> ConnectionPool:
        """A new pool, open, with its first `min_size` connections (a first operation that found none
        ready would make it open one more)."""
        pool: ConnectionPool = ConnectionPool(
            self._dsn, **self._pool_options(self._check_unless_fresh, _StoreConnection)
        )
        try:
            pool.open(wait=True, timeout=self.timeout)
        except psycopg.Error as exc:  # PoolTimeout: the pool closed itself; the next call starts afresh
            raise self._failure(what, exc) from exc
        return pool

    def _run(self, operation: _Operation) -> Any:
        committed = False
        try:
            result = self._execute(self._ready_pool(operation.what), operation)
            committed = True
            return result
        finally:
            if operation.done is not None:
                operation.done(committed)

    def _check_unless_fresh(self, conn: Any) -> None:
        if not self._fresh(conn):
            ConnectionPool.check_connection(conn)

    def _execute(self, pool: ConnectionPool, operation: _Operation) -> Any:
        try:
            # getconn / putconn, not `pool.connection()`, whose `with conn` commits: a connection
            # here autocommits, and an atomic operation's transaction ends itself; putconn rolls
            # back or drops a connection an error left in a transaction or broken
            conn = pool.getconn()
            try:
                if operation.small:
                    return _drive_on(conn, _kept_cursor(conn), operation)
                with conn.cursor(binary=True) as cursor:
                    return _drive_on(conn, cursor, operation)
            finally:
                self._used(conn)
                pool.putconn(conn)
        except psycopg.Error as exc:
            raise self._failure(operation.what, exc) from exc

    def save(
        self,
        run_id: str,
        data: bytes,
        *,
        expected_version: int | None = None,
        history: bool = False,
        wait: Wait | None = None,
        graph: str | None = None,
        delivered: tuple[str, ...] = (),
        release: str | None = None,
    ) -> CheckpointRecord:
        """Store `data` as the run's latest checkpoint (one conditional statement); with `history`,
        also as an entry of its history (the retention applied in the same statement). Its record.
        `wait`, `graph` and `release` (the lease) are written by the same statement; `delivered` marks
        those messages in the same transaction, and a save that parks the run (`wait`) `NOTIFY`s the
        wakers in it too (`amrita_sense.durable.stores.waiting`)."""
        return self._run(self._save_op(run_id, data, expected_version, history, wait, graph, delivered, release))

    def load(self, run_id: str, *, version: int | None = None) -> Checkpoint:
        """The run's latest checkpoint, or its checkpoint `version` (the latest or a kept history
        entry); `CheckpointNotFound` when there is none, `CorruptSnapshot` when the row is damaged."""
        return self._run(self._load_op(run_id, version))

    def history(self, run_id: str) -> list[CheckpointRecord]:
        """The run's kept history entries, oldest first; `CheckpointNotFound` for an unknown run."""
        return self._run(self._history_op(run_id))

    def fork(self, run_id: str, version: int, new_run_id: str) -> CheckpointRecord:
        """`new_run_id` starts (version 1, first history entry) from `run_id`'s checkpoint `version`."""
        return self._run(self._fork_op(run_id, version, new_run_id))

    def prune(self, run_id: str | None = None) -> int:
        """Apply the retention now, to `run_id` or to every run; the number of history entries removed."""
        return self._run(self._prune_op(run_id))

    def sweep(self, *, batch_size: int = SWEEP_BATCH) -> int:
        """Expire the runs whose last save is `run_ttl` seconds old or older, `batch_size` runs per
        transaction (rows a save holds are skipped, never waited for); the number of runs expired."""
        plan = self._sweep_batches(batch_size)
        if plan is None:
            return 0
        expired = 0
        while True:
            done = self._run(self._expire_op(*plan))
            expired += done
            if done < batch_size:
                return expired

    def delete(self, run_id: str, *, expected_version: int | None = None) -> bool:
        """Forget the run and its history; False when it was not stored."""
        return self._run(self._delete_op(run_id, expected_version))

    def list(self, *, status: str | None = None) -> list[CheckpointRecord]:
        """Every run's latest checkpoint record, by run id (only those with `status`, when given)."""
        return self._run(self._list_op(status))

    def list_page(
        self, *, status: str | None = None, sort: str = "updated", order: str = "desc", offset: int = 0, limit: int = 50
    ) -> CheckpointPage:
        """One page of the run list, sorted and cut by the server; only the record columns of the
        page's rows are read (`amrita_sense.durable.stores.paging`)."""
        return self._run(self._list_page_op(status, sort, order, offset, limit))

    # ----- waits, messages, leases (amrita_sense.durable.stores.waiting) --------------------------

    def send(
        self,
        run_id: str,
        topic: str,
        payload: Any,
        *,
        message_id: str | None = None,
        codec: Any = None,
        keyring: Any = None,
    ) -> StoredMessage:
        """Keep a message for the run (one transaction, under the run's row lock, with a `NOTIFY` of the
        wakers); the first one of a `message_id` is kept, and returned again for a repeated id."""
        return self._run(self._send_op(run_id, topic, payload, message_id, codec, keyring))

    def claim_due(
        self,
        owner: str,
        *,
        lease_seconds: float,
        limit: int = 16,
        graphs: Any = None,
        now: float | None = None,
        ahead: float = 0.0,
    ) -> builtins.list[Claim]:
        """Lease the due waiting runs to `owner` (one statement; rows locked by another claim or a save
        are skipped, `FOR UPDATE SKIP LOCKED`), with each run's first pending message on its topic; with
        `ahead`, the timer-only runs that end within `ahead` seconds too."""
        return self._run(self._claim_op(owner, lease_seconds, limit, graphs, now, ahead))

    def renew(self, run_id: str, owner: str, lease_seconds: float) -> bool:
        """Extend `owner`'s lease on the run by `lease_seconds` from now; False when it is not `owner`'s."""
        return self._run(self._renew_op(run_id, owner, lease_seconds))

    def release(self, run_id: str, owner: str) -> None:
        """Give up `owner`'s lease on the run (no effect when it is not `owner`'s)."""
        self._run(self._release_op(run_id, owner))

    def messages(self, run_id: str, *, topic: str | None = None, pending: bool = True) -> builtins.list[StoredMessage]:
        """The run's messages in sending order (on `topic`; only the undelivered ones with `pending`)."""
        return self._run(self._messages_op(run_id, topic, pending))

    def next_due(self, *, graphs: Any = None) -> float | None:
        """When the next timer makes a waiting run (of `graphs`) claimable (its `due_at`, or the end of a
        lease held on it when later); None when no wait has a deadline."""
        return self._run(self._next_due_op(graphs))

    def wait_for_wakeup(self, timeout: float) -> bool:
        """Block until a wake-up of this store's schema or `timeout` seconds: True for a wake-up, False at
        the timeout. A thread of the store listens (`LISTEN amrita_sense_wake`, on a connection of its
        own, from the first call on); a call reports the wake-ups that came since the previous call
        began, so one that came between two calls is not lost, and a call its caller gave up on (a
        thread left waiting) takes nothing from the next (the price: after a wake-up, the next call
        may return True at once)."""
        seconds = self._wakeup_timeout(timeout)
        self._listening()
        with self._wake:
            # from the count when the previous call began: a wake-up that call took and its caller
            # never saw (it gave up waiting) is reported again, at the price of a spurious wake-up
            seen, self._wake_seen = self._wake_seen, self._wake_count
            self._wake.wait_for(lambda: self._wake_count != seen or self._listen_error is not None, seconds)
            error, self._listen_error = self._listen_error, None
            if error is not None:
                raise self._failure("waiting for a wake-up", error) from error
            return self._wake_count != seen

    def _listening(self) -> None:
        """Start the listening thread unless it runs (its connection opened here: a failure raises)."""
        with self._wake:
            if self._listen_pid != os.getpid():  # forked: the parent's thread and socket are not ours
                self._listen_thread, self._listen_conn, self._listen_pid = None, None, os.getpid()
            if self._listen_thread is not None and self._listen_thread.is_alive():
                return
            again = self._listen_thread is not None  # the last one died: its connection failed
            connection = dict(self._pool_kwargs.get("kwargs") or {})
            if "connect_timeout" not in self._params and "connect_timeout" not in connection:
                connection["connect_timeout"] = max(2, math.ceil(self.timeout))
            try:
                conn = psycopg.Connection.connect(self._dsn, **{**connection, "autocommit": True})
                conn.execute(f'LISTEN "{WAKE_CHANNEL}"')
            except psycopg.Error as exc:
                raise self._failure("listening for wake-ups", exc) from exc
            stop = threading.Event()
            thread = threading.Thread(
                target=self._listen, args=(conn, stop), name=f"amrita_sense.wake.{self.schema}", daemon=True
            )
            self._listen_conn, self._listen_stop, self._listen_thread = conn, stop, thread
            if again:  # its error was reported; what was sent while nobody listened is not known: wake
                self._listen_error = None
                self._wake_count += 1
            thread.start()

    def _listen(self, conn: Any, stop: threading.Event) -> None:
        """The listening thread: count this schema's wake-ups until `stop` (or the connection fails)."""
        try:
            while not stop.is_set():
                for notice in conn.notifies(timeout=0.5):
                    if self._ours(notice.payload):
                        with self._wake:
                            self._wake_count += 1
                            self._wake.notify_all()
        except psycopg.Error as exc:
            if not stop.is_set():
                with self._wake:
                    self._listen_error = exc
                    self._wake.notify_all()
        finally:
            with contextlib.suppress(psycopg.Error):
                conn.close()

    def _close_listener(self) -> None:
        with self._wake:
            thread, self._listen_thread, self._listen_conn = self._listen_thread, None, None
            if thread is not None and self._listen_pid == os.getpid():
                self._listen_stop.set()
            else:
                thread = None
        if thread is not None and thread is not threading.current_thread():
            thread.join(2.0)


# ----- the async store ---------------------------------------------------------------------------


@dataclass
class _LoopPool:
    """The pool an async store uses in one event loop (a pool belongs to the loop it was opened in)."""

    pool: AsyncConnectionPool
    lock: asyncio.Lock
    ready: bool = False


class AsyncPostgresCheckpointStore(_PostgresStore):
    """Checkpoints in PostgreSQL, for asyncio: `PostgresCheckpointStore`'s arguments and rules, with
    coroutine methods, on `psycopg_pool.AsyncConnectionPool`.

    The pool opens on first use (or by `await store.open()`, or `async with store:`). A pool
    belongs to the event loop it was opened in: used from another loop (a second `asyncio.run`),
    the store opens another pool there; `close()` closes the current loop's pool and forgets those
    of loops that are closed. Close the store before its loop ends (`async with`, or `await
    store.close()`): psycopg's async pool swallows the cancellation of a connection attempt in
    flight, and a loop left with one cannot finish `asyncio.run`.
    """

    def _start(self) -> None:
        self._pools: dict[asyncio.AbstractEventLoop, _LoopPool] = {}
        self._listeners: dict[asyncio.AbstractEventLoop, Any] = {}
        self._listen_locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        self._listen_lost: set[asyncio.AbstractEventLoop] = set()  # listening connections that failed
        self._pid = os.getpid()

    async def __aenter__(self) -> AsyncPostgresCheckpointStore:
        return await self.open()

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    async def open(self) -> AsyncPostgresCheckpointStore:
        """Open this loop's pool and create the tables now (else the first operation does); the store."""
        await self._ready_pool("opening the store")
        return self

    async def close(self) -> None:
        """Close the current loop's pool (the next operation opens a new one)."""
        self._forget_other_process()
        loop = asyncio.get_running_loop()
        entry = self._pools.pop(loop, None)
        listener = self._listeners.pop(loop, None)
        self._listen_locks.pop(loop, None)
        self._forget_closed_loops()
        if entry is not None:
            await entry.pool.close()
        if listener is not None:
            await listener.close()

    def _forget_other_process(self) -> None:
        if self._pid != os.getpid():  # forked: the parent's pools and their sockets are not ours
            self._pools, self._pid = {}, os.getpid()
            self._listeners, self._listen_locks = {}, {}

    def _forget_closed_loops(self) -> None:
        self._pools = {loop: entry for loop, entry in self._pools.items() if not loop.is_closed()}
        self._listeners = {loop: conn for loop, conn in self._listeners.items() if not loop.is_closed()}
        self._listen_locks = {loop: lock for loop, lock in self._listen_locks.items() if not loop.is_closed()}
        self._listen_lost = {loop for loop in self._listen_lost if not loop.is_closed()}

    async def _ready_pool(self, what: str) -> AsyncConnectionPool:
        self._forget_other_process()
        loop = asyncio.get_running_loop()
        entry = self._pools.get(loop)
        if entry is not None and entry.ready:
            return entry.pool
        if entry is None:
            self._forget_closed_loops()
            entry = self._pools[loop] = _LoopPool(self._new_pool(), asyncio.Lock())
        async with entry.lock:  # one coroutine opens the pool and the schema, the others wait for it
            if not entry.ready:
                await self._open_pool(loop, entry, what)
                await self._execute(entry.pool, self._schema_op(what))
                entry.ready = True
        return entry.pool

    async def _open_pool(self, loop: asyncio.AbstractEventLoop, entry: _LoopPool, what: str) -> None:
        """Open the pool and wait for its first `min_size` connections: a first operation that found
        none ready would make the pool grow by one more, still connecting when a short-lived loop ends."""
        try:
            await entry.pool.open(wait=True, timeout=self.timeout)
        except psycopg.Error as exc:  # PoolTimeout (the pool closed itself): the next call starts afresh
            if self._pools.get(loop) is entry:
                del self._pools[loop]
            raise self._failure(what, exc) from exc

    def _new_pool(self) -> AsyncConnectionPool:
        pool: AsyncConnectionPool = AsyncConnectionPool(
            self._dsn, **self._pool_options(self._check_unless_fresh, _AsyncStoreConnection)
        )
        return pool

    async def _run(self, operation: _Operation) -> Any:
        committed = False
        try:
            result = await self._execute(await self._ready_pool(operation.what), operation)
            committed = True
            return result
        finally:
            if operation.done is not None:
                operation.done(committed)

    async def _check_unless_fresh(self, conn: Any) -> None:
        if not self._fresh(conn):
            await AsyncConnectionPool.check_connection(conn)

    async def _execute(self, pool: AsyncConnectionPool, operation: _Operation) -> Any:
        try:
            conn = await pool.getconn()  # not `pool.connection()`: see the sync store's `_execute`
            try:
                if operation.small:
                    return await _drive_on_async(conn, _kept_cursor(conn), operation)
                async with conn.cursor(binary=True) as cursor:
                    return await _drive_on_async(conn, cursor, operation)
            finally:
                self._used(conn)
                await pool.putconn(conn)
        except psycopg.Error as exc:
            raise self._failure(operation.what, exc) from exc

    async def save(
        self,
        run_id: str,
        data: bytes,
        *,
        expected_version: int | None = None,
        history: bool = False,
        wait: Wait | None = None,
        graph: str | None = None,
        delivered: tuple[str, ...] = (),
        release: str | None = None,
    ) -> CheckpointRecord:
        """As `PostgresCheckpointStore.save`."""
        return await self._run(self._save_op(run_id, data, expected_version, history, wait, graph, delivered, release))

    async def load(self, run_id: str, *, version: int | None = None) -> Checkpoint:
        """As `PostgresCheckpointStore.load`."""
        return await self._run(self._load_op(run_id, version))

    async def history(self, run_id: str) -> list[CheckpointRecord]:
        """As `PostgresCheckpointStore.history`."""
        return await self._run(self._history_op(run_id))

    async def fork(self, run_id: str, version: int, new_run_id: str) -> CheckpointRecord:
        """As `PostgresCheckpointStore.fork`."""
        return await self._run(self._fork_op(run_id, version, new_run_id))

    async def prune(self, run_id: str | None = None) -> int:
        """As `PostgresCheckpointStore.prune`."""
        return await self._run(self._prune_op(run_id))

    async def sweep(self, *, batch_size: int = SWEEP_BATCH) -> int:
        """As `PostgresCheckpointStore.sweep`."""
        plan = self._sweep_batches(batch_size)
        if plan is None:
            return 0
        expired = 0
        while True:
            done = await self._run(self._expire_op(*plan))
            expired += done
            if done < batch_size:
                return expired

    async def delete(self, run_id: str, *, expected_version: int | None = None) -> bool:
        """As `PostgresCheckpointStore.delete`."""
        return await self._run(self._delete_op(run_id, expected_version))

    async def list(self, *, status: str | None = None) -> list[CheckpointRecord]:
        """As `PostgresCheckpointStore.list`."""
        return await self._run(self._list_op(status))

    async def list_page(
        self, *, status: str | None = None, sort: str = "updated", order: str = "desc", offset: int = 0, limit: int = 50
    ) -> CheckpointPage:
        """As `PostgresCheckpointStore.list_page`."""
        return await self._run(self._list_page_op(status, sort, order, offset, limit))

    # ----- waits, messages, leases (amrita_sense.durable.stores.waiting) --------------------------

    async def send(
        self,
        run_id: str,
        topic: str,
        payload: Any,
        *,
        message_id: str | None = None,
        codec: Any = None,
        keyring: Any = None,
    ) -> StoredMessage:
        """As `PostgresCheckpointStore.send`."""
        return await self._run(self._send_op(run_id, topic, payload, message_id, codec, keyring))

    async def claim_due(
        self,
        owner: str,
        *,
        lease_seconds: float,
        limit: int = 16,
        graphs: Any = None,
        now: float | None = None,
        ahead: float = 0.0,
    ) -> builtins.list[Claim]:
        """As `PostgresCheckpointStore.claim_due`."""
        return await self._run(self._claim_op(owner, lease_seconds, limit, graphs, now, ahead))

    async def renew(self, run_id: str, owner: str, lease_seconds: float) -> bool:
        """As `PostgresCheckpointStore.renew`."""
        return await self._run(self._renew_op(run_id, owner, lease_seconds))

    async def release(self, run_id: str, owner: str) -> None:
        """As `PostgresCheckpointStore.release`."""
        await self._run(self._release_op(run_id, owner))

    async def messages(
        self, run_id: str, *, topic: str | None = None, pending: bool = True
    ) -> builtins.list[StoredMessage]:
        """As `PostgresCheckpointStore.messages`."""
        return await self._run(self._messages_op(run_id, topic, pending))

    async def next_due(self, *, graphs: Any = None) -> float | None:
        """As `PostgresCheckpointStore.next_due`."""
        return await self._run(self._next_due_op(graphs))

    async def wait_for_wakeup(self, timeout: float) -> bool:
        """As `PostgresCheckpointStore.wait_for_wakeup`, listening on a connection of its own per event
        loop (opened at the first call): the wake-ups that came since the previous call returned are
        read first; a call cancelled while it waits takes nothing from the next."""
        deadline = monotonic() + self._wakeup_timeout(timeout)
        self._forget_other_process()
        loop = asyncio.get_running_loop()
        lock = self._listen_locks.setdefault(loop, asyncio.Lock())
        async with lock:
            try:
                conn = self._listeners.get(loop)
                if conn is None or conn.closed:
                    conn = self._listeners[loop] = await self._listen()
                    if loop in self._listen_lost:  # what was sent while nobody listened is not known
                        self._listen_lost.discard(loop)
                        return True
                while True:
                    left = deadline - monotonic()
                    async for notice in conn.notifies(timeout=max(left, 0.0), stop_after=1):
                        if self._ours(notice.payload):
                            return True
                    if deadline - monotonic() <= 0:
                        return False
            except psycopg.Error as exc:
                dropped = self._listeners.pop(loop, None)
                if dropped is not None:
                    self._listen_lost.add(loop)
                    with contextlib.suppress(psycopg.Error):
                        await dropped.close()
                raise self._failure("waiting for a wake-up", exc) from exc

    async def _listen(self) -> Any:
        connection = dict(self._pool_kwargs.get("kwargs") or {})
        if "connect_timeout" not in self._params and "connect_timeout" not in connection:
            connection["connect_timeout"] = max(2, math.ceil(self.timeout))
        conn = await psycopg.AsyncConnection.connect(self._dsn, **{**connection, "autocommit": True})
        await conn.execute(f'LISTEN "{WAKE_CHANNEL}"')
        return conn
