"""`SQLiteCheckpointStore`: checkpoints in an SQLite database file (standard library, no server)."""

from __future__ import annotations

import builtins
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from amrita_sense.durable.errors import CheckpointError, CheckpointNotFound
from amrita_sense.durable.snapshots.format import made_header, read_header
from amrita_sense.durable.snapshots.messages import encode_payload
from amrita_sense.durable.stores import deltas, sqlite_reader
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

_SCHEMA_VERSION = 5
"""1: the latest checkpoint per run; 2: `forked_from`, and the history table; 3: frames (a history
row may be a delta from the one before it, `base`; one kept only as such a base is not `listed`;
the latest's `data` is empty when its frame is in the history table; `size` of the whole snapshot);
4: waits (a run's `graph`, its wait's `wait_topic` / `due_at`, both NULL when it does not wait, and
its waker's `lease_owner` / `lease_until`) and the `sense_messages` table (`seq`: the store's
sending order); 5: `ready_at` (when a waiting run became or becomes claimable: the earlier of its
timer and its oldest pending message on its wait's topic; saves and sends keep it, so a claim walks
an index instead of every waiting run and pending message)."""
_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS sense_checkpoints (
    run_id      TEXT PRIMARY KEY,
    version     INTEGER NOT NULL,
    status      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    data        BLOB NOT NULL,
    forked_from TEXT,
    size        INTEGER,
    graph       TEXT,
    wait_topic  TEXT,
    due_at      REAL,
    lease_owner TEXT,
    lease_until REAL,
    ready_at    REAL
)""",
    """
CREATE TABLE IF NOT EXISTS sense_history (
    run_id      TEXT NOT NULL,
    version     INTEGER NOT NULL,
    status      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    saved_at    REAL NOT NULL,
    data        BLOB NOT NULL,
    base        INTEGER,
    listed      INTEGER NOT NULL DEFAULT 1,
    size        INTEGER,
    PRIMARY KEY (run_id, version)
) WITHOUT ROWID""",
    """
CREATE TABLE IF NOT EXISTS sense_messages (
    seq         INTEGER PRIMARY KEY,
    run_id      TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    topic       TEXT NOT NULL,
    sent_at     REAL NOT NULL,
    payload     BLOB NOT NULL,
    delivered   INTEGER NOT NULL DEFAULT 0,
    UNIQUE (run_id, message_id)
)""",
    "CREATE INDEX IF NOT EXISTS sense_messages_pending ON sense_messages (run_id, topic, seq) WHERE delivered = 0",
    "CREATE INDEX IF NOT EXISTS sense_checkpoints_due ON sense_checkpoints (due_at) WHERE due_at IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS sense_checkpoints_ready ON sense_checkpoints (ready_at, run_id) "
    "WHERE ready_at IS NOT NULL",
)
_ADDED_COLUMNS = (
    ("sense_checkpoints", "forked_from", "TEXT"),
    ("sense_checkpoints", "size", "INTEGER"),
    ("sense_history", "base", "INTEGER"),
    ("sense_history", "listed", "INTEGER NOT NULL DEFAULT 1"),
    ("sense_history", "size", "INTEGER"),
    ("sense_checkpoints", "graph", "TEXT"),
    ("sense_checkpoints", "wait_topic", "TEXT"),
    ("sense_checkpoints", "due_at", "REAL"),
    ("sense_checkpoints", "lease_owner", "TEXT"),
    ("sense_checkpoints", "lease_until", "REAL"),
    ("sense_checkpoints", "ready_at", "REAL"),
)
"""The columns later schema versions added to a table an earlier one created."""
_RETURNING = sqlite3.sqlite_version_info >= (3, 35, 0)
"""SQLite 3.35 and later: a save without history is one statement (`RETURNING`); before, a transaction."""
_INSERT = (
    "INSERT INTO sense_checkpoints (status, fingerprint, created_at, updated_at, data, run_id, version, "
    "wait_topic, due_at, graph, ready_at) VALUES (?1, ?2, ?3, ?3, ?4, ?5, 1, ?7, ?8, ?9, ?8) ON CONFLICT (run_id) "
)
_UPDATE = (
    "status = ?1, fingerprint = ?2, updated_at = ?3, data = ?4, size = NULL, version = version + 1, "
    "wait_topic = ?7, due_at = ?8, graph = coalesce(?9, graph), ready_at = ?8"
)
"""A save's write: the run is ready at its timer (`_READY` then adds a wait's pending messages)."""
_READY_AT = (
    "ready_at = CASE WHEN wait_topic IS NULL THEN due_at ELSE nullif(min(coalesce(due_at, 9e999), coalesce(("
    "SELECT min(m.sent_at) FROM sense_messages m WHERE m.run_id = sense_checkpoints.run_id "
    "AND m.topic = sense_checkpoints.wait_topic AND m.delivered = 0), 9e999)), 9e999) END"
)
"""When the run is ready to be claimed: the earlier of its timer and its oldest pending message on
its wait's topic (NULL: it does not wait)."""
_READY = f"UPDATE sense_checkpoints SET {_READY_AT} WHERE run_id = ?"
"""`_READY_AT` of one run, in a save's transaction after its write and its delivered messages."""
_READY_FROM_VERSION_4 = (
    f"UPDATE sense_checkpoints SET {_READY_AT} "
    "WHERE ready_at IS NULL AND (due_at IS NOT NULL OR wait_topic IS NOT NULL)"
)
"""The waiting runs of a file of schema 4, made ready as a save would have."""
_NEW_VERSION = " RETURNING version, created_at, forked_from"
_SAVE_ANY = _INSERT + "DO UPDATE SET " + _UPDATE + _NEW_VERSION
_SAVE_NEW = _INSERT + "DO NOTHING" + _NEW_VERSION
_SAVE_OVER = "UPDATE sense_checkpoints SET " + _UPDATE + " WHERE run_id = ?5 AND version = ?6" + _NEW_VERSION
_SAVE_FIRST = _INSERT + "DO NOTHING"
_SAVE_NEXT = "UPDATE sense_checkpoints SET " + _UPDATE + " WHERE run_id = ?5 AND version = ?6"
"""`_SAVE_NEW` and `_SAVE_OVER` without `RETURNING` (a fifth cheaper: SQLite runs them without a
result row): for a run whose creation time and fork origin the store knows (`_origins`)."""
_SAVE_FIRST_PLAIN = (
    "INSERT INTO sense_checkpoints (status, fingerprint, created_at, updated_at, data, run_id, version) "
    "VALUES (?1, ?2, ?3, ?3, ?4, ?5, 1) ON CONFLICT (run_id) DO NOTHING"
)
_SAVE_NEXT_PLAIN = (
    "UPDATE sense_checkpoints SET status = ?1, fingerprint = ?2, updated_at = ?3, data = ?4, size = NULL, "
    "version = version + 1, wait_topic = NULL, due_at = NULL, ready_at = NULL WHERE run_id = ?5 AND version = ?6"
)
"""`_SAVE_FIRST` and `_SAVE_NEXT` of a save with no wait and no graph name (what they write then),
without the NULL parameters: `sqlite3` binds a None (and a `bytes`) only after a failed adapter
lookup that raises and clears an AttributeError, a fifth of the statement's cost."""
_ORIGINS_KEPT = 4096
_COLUMNS = "run_id, version, status, fingerprint, coalesce(size, length(data)), created_at, updated_at, forked_from"
_HISTORY_COLUMNS = (
    "h.run_id, h.version, h.status, h.fingerprint, coalesce(h.size, length(h.data)), c.created_at, h.saved_at, "
    "c.forked_from"
)
_BASED_ON = (
    "(EXISTS (SELECT 1 FROM sense_history d WHERE d.run_id = sense_history.run_id "
    "AND d.version = sense_history.version + 1 AND d.base IS NOT NULL) "
    "OR EXISTS (SELECT 1 FROM sense_checkpoints c WHERE c.run_id = sense_history.run_id "
    "AND c.version = sense_history.version AND length(c.data) = 0))"
)
"""The row is the base of the delta after it, or the frame of the latest checkpoint."""
_EXPIRED = {
    "delete": "SELECT run_id FROM sense_checkpoints WHERE updated_at < ? LIMIT ?",
    # only runs that still have a listed entry: a run kept with its latest only is not found again
    "keep_latest": "SELECT c.run_id FROM sense_checkpoints c WHERE c.updated_at < ? AND EXISTS (SELECT 1 "
    "FROM sense_history h WHERE h.run_id = c.run_id AND h.listed = 1) LIMIT ?",
}
_RUNS_WITH_UNLISTED = "SELECT DISTINCT run_id FROM sense_history WHERE listed = 0"
_DELIVERED = "UPDATE sense_messages SET delivered = 1 WHERE run_id = ? AND message_id = ?"
_RELEASE = "UPDATE sense_checkpoints SET lease_owner = NULL, lease_until = NULL WHERE run_id = ? AND lease_owner = ?"
_LEASE_FREE = "(c.lease_until IS NULL OR c.lease_until <= ?1)"
_DUE = (
    # the ready runs in the order they became ready (an index walk that stops at the limit); whether
    # each is due is checked again (a pending message of another topic never makes a run ready)
    f"SELECT c.run_id FROM sense_checkpoints c WHERE c.ready_at <= ?3 AND {_LEASE_FREE} {{graphs}} "
    "AND (c.due_at <= ?1 OR (c.wait_topic IS NULL AND c.due_at <= ?3) OR EXISTS (SELECT 1 FROM sense_messages m "
    "WHERE m.run_id = c.run_id AND m.topic = c.wait_topic AND m.delivered = 0)) "
    "ORDER BY c.ready_at, c.run_id LIMIT ?2"
)
"""The runs `claim_due` leases: a passed timer, a timer only that ends by the horizon (?3: `now` +
`ahead`) or a pending message on the wait's topic; lease free."""
_MADE_READY = (
    "UPDATE sense_checkpoints SET ready_at = min(coalesce(ready_at, ?2), ?2) WHERE run_id = ?1 AND wait_topic = ?3"
)
"""A message sent on the topic a run waits on makes it ready."""
_MESSAGE_COLUMNS = "run_id, topic, message_id, seq, sent_at, payload"
_CHAIN = (
    "SELECT version, base, data FROM sense_history WHERE run_id = ?1 AND version <= ?2 AND version >= "
    "(SELECT max(version) FROM sense_history WHERE run_id = ?1 AND base IS NULL AND version <= ?2) ORDER BY version"
)


class SQLiteCheckpointStore:
    """Checkpoints in an SQLite database file (standard library `sqlite3`, no server).

    The database runs in WAL mode, so readers never block the writer; every
    write is one `BEGIN IMMEDIATE` transaction (several processes and threads
    may write the same file: a writer waits up to `timeout` seconds for the
    lock). `synchronous="NORMAL"` (the default) survives a killed process; use
    "FULL" to survive a power loss as well. Snapshots are checked (framing and
    checksum) before they are written, so the store never holds a damaged one.
    `history_limit` / `history_max_age` bound the history kept per run;
    `run_ttl` expires a whole run that many seconds after its last save, when
    `sweep()` runs (`on_expiry`: "delete" it, or "keep_latest": drop its history).

    The store versions its schema (`PRAGMA user_version`): a file written by
    an older release is upgraded in place, one written by a newer release is
    refused. One instance may be shared by the threads of a process; after
    `os.fork()` the child opens its own connection.

    `read_only=True` opens the file for reading only (`sqlite_reader`): nothing
    is ever written (no WAL switch, no schema upgrade, no `-wal`/`-shm` files
    created, no write lock taken), a file it may only read works, and every
    write raises `CheckpointError`. The file must hold this release's schema.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 30.0,
        synchronous: str = "NORMAL",
        history_limit: int | None = None,
        history_max_age: float | None = None,
        run_ttl: float | None = None,
        on_expiry: str = "delete",
        read_only: bool = False,
    ):
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = os.fspath(path)
        self._timeout = float(timeout)
        self._synchronous = synchronous.upper()
        self.history_limit, self.history_max_age = _check_retention(history_limit, history_max_age)
        self.run_ttl, self.on_expiry = _check_expiry(run_ttl, on_expiry)
        # threads: guards the store. Reentrant on purpose, though nothing here re-enters it: a
        # KeyboardInterrupt from a signal can land right after `with self._lock:` acquired and before
        # its block (PEP 419; Python 3.14 lands there), and the thread that leaked it can still save.
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._bases = deltas.Bases()
        self._origins: dict[str, tuple[float, str | None]] = {}
        """`(created_at, forked_from)` of the runs this store created, saved or loaded lately: what a
        save's record needs besides what the save knows, so that it can skip `RETURNING`. Neither
        changes while a run exists; a run deleted elsewhere and made again is found at its next save
        (expecting a version it does not have: a conflict) unless it reached that version again."""
        self.read_only = bool(read_only)
        if self.read_only:
            sqlite_reader.check_schema(self.path, _SCHEMA_VERSION, self._timeout)
            return
        with self._lock:
            self._connection()

    def __repr__(self) -> str:
        return f"SQLiteCheckpointStore({self.path!r})"

    def __reduce__(self) -> tuple:
        options = {"timeout": self._timeout, "synchronous": self._synchronous}
        options.update(history_limit=self.history_limit, history_max_age=self.history_max_age)
        options.update(run_ttl=self.run_ttl, on_expiry=self.on_expiry, read_only=self.read_only)
        return (_reopen_sqlite, (os.path.abspath(self.path), options))

    def __enter__(self) -> SQLiteCheckpointStore:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close this process's connection (the next call opens a new one)."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None and self._pid == os.getpid():
                conn.close()

    def _connection(self) -> sqlite3.Connection:
        if self.read_only:  # every write comes here for its connection
            raise sqlite_reader.refuse_writes(self.path)
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        try:
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            _upgrade_schema(conn, self.path)
        except sqlite3.Error as exc:
            raise CheckpointError(f"cannot open the checkpoint database {self.path!r}: {exc}") from exc
        self._conn, self._pid = conn, os.getpid()
        return conn

    @contextmanager
    def _transaction(self, what: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise CheckpointError(f"{what} failed in {self.path!r}: {exc}") from exc

    def _query(self, sql: str, params: tuple, what: str) -> list[tuple]:
        if self.read_only:
            try:
                return sqlite_reader.query(self.path, sql, params, self._timeout)
            except (OSError, sqlite3.Error) as exc:
                raise CheckpointError(f"{what} failed in {self.path!r}: {exc}") from exc
        with self._lock:
            try:
                return self._connection().execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise CheckpointError(f"{what} failed in {self.path!r}: {exc}") from exc

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
        """Store `data` as the run's latest checkpoint (one transaction); with `history`, also as an
        entry of its history. Its record. A large snapshot is stored as frames (a delta from the
        run's previous one, `amrita_sense.durable.stores.deltas`); a small one without history is one
        statement. `wait`, `graph`, `delivered` and `release` (`amrita_sense.durable.stores.waiting`)
        are written by the same statement (the wait columns, the graph name) or transaction (the
        delivered messages and the released lease, one more statement each only when given)."""
        if (
            type(expected_version) is int
            and type(data) is bytes
            and not (history or delivered)
            and wait is None
            and graph is None
            and release is None
        ):
            record = self._save_plain(run_id, data, expected_version)
            if record is not None:
                return record
        _check_run_id(run_id)
        _check_expected(expected_version)
        waits = _NOT_WAITING if wait is None and graph is None else _wait_params(run_id, wait, graph)
        marked = _check_delivered(run_id, delivered) if delivered else ()
        released = None if release is None else _check_name("lease owner", release)
        header = read_header(data)
        now = time.time()
        if type(data) is not bytes:
            data = bytes(data)
        if deltas.as_frames(len(data), history, self._bases.framed(run_id)):
            return self._save_framed(run_id, data, header, now, expected_version, history, waits, marked, released)
        if not history and _RETURNING:
            return self._save_latest(run_id, data, header, now, expected_version, waits, marked, released)
        with self._transaction("saving a checkpoint") as conn:
            current, created, forked = _written_over(conn, run_id, now, expected_version)
            record = CheckpointRecord(
                run_id, current + 1, header.status, header.fingerprint, len(data), created, now, forked
            )
            self._write(conn, record, data, history, waits)
            _after_write(conn, run_id, marked, released, waits)
        return record

    def _save_plain(self, run_id: Any, data: bytes, expected_version: int) -> CheckpointRecord | None:
        """`save` of the most common kind (a checkpoint policy's save between nodes: over a known
        version, no history, wait, graph name, delivered message or released lease; the caller checked
        those), in one statement without `RETURNING`; None, having done nothing, when the save is not
        of that kind after all (a bad argument, a framed run, a run whose origin this store does not
        know): `save` then goes the general way, which raises or writes as it always did. The same
        statements, rows and record as `_save_latest` writes for such a save."""
        if type(run_id) is not str or not 0 < len(run_id) <= 512 or expected_version < 0 or not _RETURNING:
            return None
        header = made_header(data) or read_header(data)  # the snapshot just packed here needs no check
        if len(data) >= deltas.FRAMES_ALWAYS_ABOVE:
            return None
        now = time.time()
        lock = self._lock
        lock.acquire()  # not `with`: half the cost per save; released on every way out below
        try:
            if self._bases.framed(run_id):
                return None
            origin: tuple[float, str | None]
            params: tuple[Any, ...]
            if expected_version == 0:
                origin = (now, None)
                statement, params = _SAVE_FIRST_PLAIN, (header.status, header.fingerprint, now, bytearray(data), run_id)
            else:
                kept = self._origins.get(run_id)
                if kept is None:
                    return None
                origin, statement = kept, _SAVE_NEXT_PLAIN
                params = (header.status, header.fingerprint, now, bytearray(data), run_id, expected_version)
            conn = self._conn
            if conn is None or self._pid != os.getpid():
                conn = self._connection()
            try:
                written = conn.execute(statement, params).rowcount == 1
                if not written:
                    found = conn.execute("SELECT version FROM sense_checkpoints WHERE run_id = ?", (run_id,))
                    current = (found.fetchone() or (0,))[0]
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise CheckpointError(f"saving a checkpoint failed in {self.path!r}: {exc}") from exc
            if not written:
                self._origins.pop(run_id, None)
                raise _conflict(run_id, expected_version, current)
            if expected_version == 0:
                self._remember_origin(run_id, now, None)
        finally:
            lock.release()
        return _record(
            run_id, expected_version + 1, header.status, header.fingerprint, len(data), origin[0], now, origin[1]
        )

    def _save_latest(
        self,
        run_id: str,
        data: bytes,
        header: Any,
        now: float,
        expected_version: int | None,
        waits: tuple,
        marked: tuple[str, ...],
        released: str | None,
    ) -> CheckpointRecord:
        """A save without history: one conditional statement (its own transaction: the connection
        autocommits), which returns the new version, or nothing when the expected one was not there.
        With delivered messages or a released lease, the statement and their updates are one
        transaction."""
        # a bytearray binds as the same BLOB as bytes, without sqlite3's adapter lookup (see _SAVE_NEXT_PLAIN)
        blob = bytearray(data)
        params: tuple[Any, ...]
        with self._lock:
            origin = (now, None) if expected_version == 0 else self._origins.get(run_id)
            known = expected_version is not None and origin is not None
            if known and waits is _NOT_WAITING:
                if expected_version == 0:
                    statement, params = _SAVE_FIRST_PLAIN, (header.status, header.fingerprint, now, blob, run_id)
                else:
                    statement = _SAVE_NEXT_PLAIN
                    params = (header.status, header.fingerprint, now, blob, run_id, expected_version)
            else:
                params = (header.status, header.fingerprint, now, blob, run_id, expected_version or None, *waits)
                if expected_version is None:
                    statement = _SAVE_ANY
                elif expected_version == 0:
                    statement = _SAVE_FIRST if known else _SAVE_NEW
                else:
                    statement = _SAVE_NEXT if known else _SAVE_OVER
            together = marked or released or waits[0] is not None  # a wait's topic: `_READY` after the write
            try:
                conn = self._connection()
                if together:
                    conn.execute("BEGIN IMMEDIATE")
                try:
                    if known and expected_version is not None and origin is not None:
                        written = conn.execute(statement, params).rowcount == 1
                        rows = [(expected_version + 1, *origin)] if written else []
                    else:  # fetchall: the statement runs to its end, which ends (commits) its transaction
                        rows = conn.execute(statement, params).fetchall()
                    if not rows:
                        found = conn.execute("SELECT version FROM sense_checkpoints WHERE run_id = ?", (run_id,))
                        current = (found.fetchone() or (0,))[0]
                    elif together:
                        _after_write(conn, run_id, marked, released, waits)
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                if conn.in_transaction:
                    conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise CheckpointError(f"saving a checkpoint failed in {self.path!r}: {exc}") from exc
            if not rows:
                self._origins.pop(run_id, None)
                raise _conflict(run_id, expected_version or 0, current)
            version, created, forked = rows[0]
            if not known or expected_version == 0:  # else the origin it used is the one kept
                self._remember_origin(run_id, created, forked)
        return _record(run_id, version, header.status, header.fingerprint, len(data), created, now, forked)

    def _remember_origin(self, run_id: str, created: float, forked: str | None) -> None:
        origins = self._origins
        if run_id not in origins and len(origins) >= _ORIGINS_KEPT:
            origins.clear()  # the runs saving now come back at their next save
        origins[run_id] = (created, forked)

    def _save_framed(
        self,
        run_id: str,
        data: bytes,
        header: Any,
        now: float,
        expected_version: int | None,
        history: bool,
        waits: tuple,
        marked: tuple[str, ...],
        released: str | None,
    ) -> CheckpointRecord:
        """A save as a frame in the history table (listed there with `history`, else kept only as
        the base of the next); the latest row keeps the record and no data."""
        with self._lock:
            try:
                with self._transaction("saving a checkpoint") as conn:
                    current, created, forked = _written_over(conn, run_id, now, expected_version)
                    version = current + 1
                    frame, base, chain, chain_bytes = self._bases.frame(run_id, current, data)
                    conn.execute(
                        "INSERT INTO sense_history (run_id, version, status, fingerprint, saved_at, data, base, "
                        "listed, size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (run_id, version, header.status, header.fingerprint, now, frame, base, int(history), len(data)),
                    )
                    conn.execute(
                        "INSERT INTO sense_checkpoints (run_id, version, status, fingerprint, created_at, updated_at, "
                        "data, size, wait_topic, due_at, graph) VALUES (?, ?, ?, ?, ?, ?, x'', ?, ?, ?, ?) "
                        "ON CONFLICT (run_id) DO UPDATE SET version = excluded.version, status = excluded.status, "
                        "fingerprint = excluded.fingerprint, updated_at = excluded.updated_at, data = x'', "
                        "size = excluded.size, " + _WAIT_SET,
                        (run_id, version, header.status, header.fingerprint, created, now, len(data), *waits),
                    )
                    _after_write(conn, run_id, marked, released, waits)
                    if base is None:
                        self._collect_frames(conn, run_id)  # the frames before a keyframe may go
                    if history:
                        self._retain(conn, run_id, now)
            except BaseException:
                self._bases.forget(run_id)
                raise
            self._bases.keep(run_id, version, data, chain, chain_bytes)
        return CheckpointRecord(run_id, version, header.status, header.fingerprint, len(data), created, now, forked)

    def _write(
        self,
        conn: sqlite3.Connection,
        record: CheckpointRecord,
        data: bytes,
        history: bool,
        waits: tuple = (None, None, None),
    ) -> None:
        """Write `record` as its run's latest checkpoint (and as a history entry) in `conn`'s transaction,
        with its wait and graph name (`waits`: wait topic, due at, graph)."""
        r = record
        self._bases.forget(r.run_id)
        conn.execute(
            "INSERT INTO sense_checkpoints (run_id, version, status, fingerprint, created_at, updated_at, data, "
            "forked_from, wait_topic, due_at, graph) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) "
            "DO UPDATE SET version = excluded.version, status = excluded.status, fingerprint = excluded.fingerprint, "
            "updated_at = excluded.updated_at, data = excluded.data, size = NULL, " + _WAIT_SET,
            (r.run_id, r.version, r.status, r.fingerprint, r.created_at, r.updated_at, bytes(data), r.forked_from)
            + tuple(waits),
        )
        if history:
            conn.execute(
                "INSERT INTO sense_history (run_id, version, status, fingerprint, saved_at, data) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (r.run_id, r.version, r.status, r.fingerprint, r.updated_at, bytes(data)),
            )
            self._retain(conn, r.run_id, r.updated_at)

    def _retain(self, conn: sqlite3.Connection, run_id: str | None, now: float) -> int:
        """Drop the history entries the retention no longer keeps (of `run_id`, or of every run); one
        the next row is a delta over stays, unlisted, as its base (until a keyframe or `prune()` finds
        nothing needs it). The number of entries dropped."""
        which, params = ("run_id = ?", (run_id,)) if run_id is not None else ("1", ())
        dropped = 0
        for kept_only_as_base in (False, True):
            act = "UPDATE sense_history SET listed = 0" if kept_only_as_base else "DELETE FROM sense_history"
            based = "" if kept_only_as_base else "AND NOT " + _BASED_ON
            if self.history_max_age is not None:
                sql = f"{act} WHERE {which} AND listed = 1 AND saved_at < ? {based}"
                dropped += conn.execute(sql, (*params, now - self.history_max_age)).rowcount
            if self.history_limit is not None:
                sql = (
                    f"{act} WHERE {which} AND listed = 1 {based} AND version <= (SELECT h.version FROM "
                    "sense_history h WHERE h.run_id = sense_history.run_id AND h.listed = 1 "
                    "ORDER BY h.version DESC LIMIT 1 OFFSET ?)"
                )
                dropped += conn.execute(sql, (*params, self.history_limit)).rowcount
        return dropped

    def _collect_frames(self, conn: sqlite3.Connection, run_id: str | None) -> None:
        """Delete the frames nothing needs, of `run_id` or of every run that has unlisted ones."""
        runs = [run_id] if run_id is not None else [r for (r,) in conn.execute(_RUNS_WITH_UNLISTED)]
        for run in runs:
            _drop_unneeded_frames(conn, run)

    def load(self, run_id: str, *, version: int | None = None) -> Checkpoint:
        """The run's latest checkpoint, or its checkpoint `version` (the latest or a kept history
        entry); `CheckpointNotFound` when there is none."""
        _check_run_id(run_id)
        _check_version(version)
        rows = self._query(f"SELECT {_COLUMNS}, data FROM sense_checkpoints WHERE run_id = ?", (run_id,), "loading")
        if not rows:
            raise CheckpointNotFound(f"no checkpoint for run {run_id!r} in {self.path!r}")
        if version is None or rows[0][1] == version:
            record, data = CheckpointRecord(*rows[0][:8]), rows[0][8]
            with self._lock:  # a resumed run's saves need no RETURNING
                self._remember_origin(run_id, record.created_at, record.forked_from)
            if not data:  # the latest is stored as frames
                data = self._rebuild(run_id, record.version, latest=True)
            return Checkpoint(record, _checked_data(run_id, record.version, data))
        sql = (
            f"SELECT {_HISTORY_COLUMNS}, h.data, h.base FROM sense_history h JOIN sense_checkpoints c USING (run_id) "
            "WHERE h.run_id = ? AND h.version = ? AND h.listed = 1"
        )
        rows = self._query(sql, (run_id, version), "loading")
        if not rows:
            raise _version_not_kept(run_id, version, f" in {self.path!r}")
        data = rows[0][8] if rows[0][9] is None else self._rebuild(run_id, version, latest=False)
        return Checkpoint(CheckpointRecord(*rows[0][:8]), _checked_data(run_id, version, data))

    def _rebuild(self, run_id: str, version: int, latest: bool) -> bytes:
        """The snapshot of `version` from its frames: its keyframe and the deltas after it, read in
        one query (the latest's is kept as the base of the run's next save)."""
        frames = self._query(_CHAIN, (run_id, version), "loading")
        data = deltas.rebuild_frames(frames, run_id, version)
        if latest:
            with self._lock:
                self._bases.keep(run_id, version, data, *deltas.chain_of(frames))
        return data

    def history(self, run_id: str) -> list[CheckpointRecord]:
        """The run's kept history entries, oldest first; `CheckpointNotFound` for an unknown run."""
        _check_run_id(run_id)
        sql = (
            f"SELECT {_HISTORY_COLUMNS} FROM sense_history h JOIN sense_checkpoints c USING (run_id) "
            "WHERE h.run_id = ? AND h.listed = 1 ORDER BY h.version"
        )
        rows = self._query(sql, (run_id,), "reading the history")
        if not rows and not self._query("SELECT 1 FROM sense_checkpoints WHERE run_id = ?", (run_id,), "reading"):
            raise CheckpointNotFound(f"no checkpoint for run {run_id!r} in {self.path!r}")
        return [CheckpointRecord(*row) for row in rows]

    def fork(self, run_id: str, version: int, new_run_id: str) -> CheckpointRecord:
        """`new_run_id` starts (version 1, first history entry) from `run_id`'s checkpoint `version`."""
        _check_run_id(run_id)
        _check_run_id(new_run_id)
        if _check_version(version) is None:
            raise ValueError("fork needs the version of the checkpoint to start from")
        source = self.load(run_id, version=version)
        now = time.time()
        with self._transaction("forking a run") as conn:
            row = conn.execute("SELECT version FROM sense_checkpoints WHERE run_id = ?", (new_run_id,)).fetchone()
            if row is not None:
                raise _fork_conflict(new_run_id, row[0])
            found = conn.execute("SELECT graph FROM sense_checkpoints WHERE run_id = ?", (run_id,)).fetchone()
            s = source.record
            record = CheckpointRecord(
                new_run_id, 1, s.status, s.fingerprint, s.size, now, now, _forked_from(run_id, version)
            )
            # the new run does not wait, has no messages and no lease; it belongs to the same graph
            self._write(conn, record, source.data, True, (None, None, found[0] if found else None))
            self._remember_origin(new_run_id, now, record.forked_from)
        return record

    def prune(self, run_id: str | None = None) -> int:
        """Apply the retention now, to `run_id` or to every run; the number of history entries removed."""
        if run_id is not None:
            _check_run_id(run_id)
        with self._transaction("pruning the history") as conn:
            removed = self._retain(conn, run_id, time.time())
            self._collect_frames(conn, run_id)  # every frame nothing needs goes
            return removed

    def sweep(self, *, batch_size: int = SWEEP_BATCH) -> int:
        """Expire the runs whose last save is `run_ttl` seconds old or older, `batch_size` runs per
        transaction; the number of runs expired. Each batch is found by a read (saves go on meanwhile:
        there is no index on the save time, which would cost every save more than a sweep saves) and
        expired in a short transaction that skips a run saved since."""
        _check_batch(batch_size)
        if self.run_ttl is None:
            return 0
        cutoff, expired = time.time() - self.run_ttl, 0
        while True:
            runs = [run for (run,) in self._query(_EXPIRED[self.on_expiry], (cutoff, batch_size), "expiring runs")]
            with self._transaction("expiring runs") as conn:
                expired += sum(self._expire(conn, run, cutoff) for run in runs)
            if len(runs) < batch_size:
                return expired

    def _expire(self, conn: sqlite3.Connection, run_id: str, cutoff: float) -> bool:
        """Expire `run_id` unless it was saved since the sweep found it; whether it was expired."""
        sql = "SELECT 1 FROM sense_checkpoints WHERE run_id = ? AND updated_at < ?"
        if conn.execute(sql, (run_id, cutoff)).fetchone() is None:
            return False
        if self.on_expiry == "delete":
            conn.execute("DELETE FROM sense_checkpoints WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM sense_history WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM sense_messages WHERE run_id = ?", (run_id,))
            self._bases.forget(run_id)
            self._origins.pop(run_id, None)
            return True
        conn.execute("UPDATE sense_history SET listed = 0 WHERE run_id = ?", (run_id,))
        _drop_unneeded_frames(conn, run_id)  # the latest's own frames stay when it is stored as frames
        return True

    def list(self, *, status: str | None = None) -> list[CheckpointRecord]:
        """Every run's latest checkpoint record, by run id (only those with `status`, when given)."""
        if status is None:
            rows = self._query(f"SELECT {_COLUMNS} FROM sense_checkpoints ORDER BY run_id", (), "listing")
        else:
            sql = f"SELECT {_COLUMNS} FROM sense_checkpoints WHERE status = ? ORDER BY run_id"
            rows = self._query(sql, (status,), "listing")
        return [CheckpointRecord(*row) for row in rows]

    def list_page(
        self, *, status: str | None = None, sort: str = "updated", order: str = "desc", offset: int = 0, limit: int = 50
    ) -> CheckpointPage:
        """One page of the run list, sorted and cut in SQL; only the record columns of the page's rows
        are read (`amrita_sense.durable.stores.paging`)."""
        check_page(status, sort, order, offset, limit)
        where, params = ("WHERE status = ?", (status,)) if status is not None else ("", ())
        sql = f"SELECT {_COLUMNS} FROM sense_checkpoints {where} ORDER BY {order_by(sort, order)} LIMIT ? OFFSET ?"
        rows = self._query(sql, (*params, limit, offset), "listing a page")
        total = self._query(f"SELECT count(*) FROM sense_checkpoints {where}", params, "counting the runs")[0][0]
        return CheckpointPage([CheckpointRecord(*row) for row in rows], total)

    def delete(self, run_id: str, *, expected_version: int | None = None) -> bool:
        """Forget the run and its history; False when it was not stored."""
        _check_run_id(run_id)
        _check_expected(expected_version)
        with self._transaction("deleting a checkpoint") as conn:
            row = conn.execute("SELECT version FROM sense_checkpoints WHERE run_id = ?", (run_id,)).fetchone()
            current = row[0] if row is not None else 0
            if expected_version is not None and expected_version != current:
                raise _conflict(run_id, expected_version, current)
            conn.execute("DELETE FROM sense_checkpoints WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM sense_history WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM sense_messages WHERE run_id = ?", (run_id,))
            self._bases.forget(run_id)
            self._origins.pop(run_id, None)
        return row is not None

    # ----- waits, messages, leases (amrita_sense.durable.stores.waiting) ------------------------------

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
        """Keep a message for the run (one transaction; `amrita_sense.durable.stores.waiting`): the
        first one of a `message_id` is kept, and returned again for a repeated id."""
        _check_run_id(run_id)
        _check_name("topic", topic)
        message_id = _message_id(message_id)
        encoded = encode_payload(
            payload, codec=codec, keyring=keyring, run_id=run_id, topic=topic, message_id=message_id
        )
        now = time.time()
        with self._transaction("sending a message") as conn:
            row = conn.execute("SELECT status FROM sense_checkpoints WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                raise CheckpointNotFound(f"no checkpoint for run {run_id!r} in {self.path!r}: a message cannot be sent")
            if _refuses(row[0], topic):
                raise _ended(run_id, row[0])
            sql = f"SELECT {_MESSAGE_COLUMNS} FROM sense_messages WHERE run_id = ? AND message_id = ?"
            kept = conn.execute(sql, (run_id, message_id)).fetchone()
            if kept is not None:
                return StoredMessage(*kept)
            cursor = conn.execute(
                "INSERT INTO sense_messages (run_id, message_id, topic, sent_at, payload) VALUES (?, ?, ?, ?, ?)",
                (run_id, message_id, topic, now, encoded),
            )
            seq = cursor.lastrowid
            conn.execute(_MADE_READY, (run_id, now, topic))
        assert seq is not None
        return StoredMessage(run_id, topic, message_id, seq, now, encoded)

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
        """Lease the due waiting runs to `owner`, in one write transaction (`BEGIN IMMEDIATE`: a claim
        by another thread or process waits for it and then sees the leases)."""
        lease = _check_lease(owner, lease_seconds)
        _check_limit(limit)
        names = _check_graphs(graphs)
        ahead = _check_ahead(ahead)
        if names is not None and not names:
            return []
        graph_params = tuple(sorted(names or ()))
        numbered = ", ".join(f"?{4 + i}" for i in range(len(graph_params)))
        where = f"AND c.graph IN ({numbered})" if names is not None else ""
        sql = _DUE.format(graphs=where)
        claims = []
        with self._transaction("claiming due runs") as conn:
            now = time.time() if now is None else float(now)
            until = now + lease
            due = conn.execute(sql, (now, limit, now + ahead, *graph_params)).fetchall()
            for (run_id,) in due:
                row = conn.execute(
                    f"SELECT {_COLUMNS}, graph, wait_topic, due_at, data FROM sense_checkpoints WHERE run_id = ?",
                    (run_id,),
                ).fetchone()
                record, (graph, topic, due_at, data) = CheckpointRecord(*row[:8]), row[8:]
                message = None
                if topic is not None:
                    found = conn.execute(
                        f"SELECT {_MESSAGE_COLUMNS} FROM sense_messages WHERE run_id = ? AND topic = ? AND "
                        "delivered = 0 ORDER BY seq LIMIT 1",
                        (run_id, topic),
                    ).fetchone()
                    message = StoredMessage(*found) if found is not None else None
                conn.execute(
                    "UPDATE sense_checkpoints SET lease_owner = ?, lease_until = ? WHERE run_id = ?",
                    (owner, until, run_id),
                )
                claimed = _claimed_data(data)
                claims.append(Claim(run_id, owner, until, graph, Wait(topic, due_at), record, message, claimed))
        with self._lock:  # as `load` does: the claimed runs' saves need no RETURNING
            for claim in claims:
                if claim.data is not None:
                    self._remember_origin(claim.run_id, claim.record.created_at, claim.record.forked_from)
        return claims

    def renew(self, run_id: str, owner: str, lease_seconds: float) -> bool:
        """Extend `owner`'s lease on the run by `lease_seconds` from now; False when it is not `owner`'s."""
        lease = _check_lease(owner, lease_seconds)
        _check_run_id(run_id)
        with self._transaction("renewing a lease") as conn:
            sql = "UPDATE sense_checkpoints SET lease_until = ? WHERE run_id = ? AND lease_owner = ?"
            return conn.execute(sql, (time.time() + lease, run_id, owner)).rowcount == 1

    def release(self, run_id: str, owner: str) -> None:
        """Give up `owner`'s lease on the run (no effect when it is not `owner`'s)."""
        _check_run_id(run_id)
        _check_name("lease owner", owner)
        with self._transaction("releasing a lease") as conn:
            conn.execute(_RELEASE, (run_id, owner))

    def messages(self, run_id: str, *, topic: str | None = None, pending: bool = True) -> builtins.list[StoredMessage]:
        """The run's messages in sending order (on `topic`; only the undelivered ones with `pending`)."""
        _check_run_id(run_id)
        where, params = "run_id = ?", [run_id]
        if topic is not None:
            where += " AND topic = ?"
            params.append(_check_name("topic", topic))
        if pending:
            where += " AND delivered = 0"
        sql = f"SELECT {_MESSAGE_COLUMNS} FROM sense_messages WHERE {where} ORDER BY seq"
        rows = self._query(sql, tuple(params), "reading messages")
        if not rows and not self._query("SELECT 1 FROM sense_checkpoints WHERE run_id = ?", (run_id,), "reading"):
            raise CheckpointNotFound(f"no checkpoint for run {run_id!r} in {self.path!r}")
        return [StoredMessage(*row) for row in rows]

    def next_due(self, *, graphs: Any = None) -> float | None:
        """When the next timer makes a waiting run (of `graphs`) claimable (its `due_at`, or the end of a
        lease held on it when later); None when no wait has a deadline."""
        names = _check_graphs(graphs)
        params: tuple[str, ...] = ()
        where = ""
        if names is not None:
            params = tuple(sorted(names))
            where = f"AND graph IN ({', '.join('?' * len(params))})"
        # only the timers up to the first one no lease holds (those after it cannot be earlier)
        sql = (
            "SELECT min(max(due_at, coalesce(lease_until, due_at))) FROM sense_checkpoints WHERE due_at <= "
            "coalesce((SELECT due_at FROM sense_checkpoints WHERE due_at IS NOT NULL AND lease_until IS NULL "
            f"{where} ORDER BY due_at LIMIT 1), 9e999) {where}"
        )
        return self._query(sql, params * 2, "finding the next due run")[0][0]


_WAIT_SET = (
    "wait_topic = excluded.wait_topic, due_at = excluded.due_at, graph = coalesce(excluded.graph, graph), "
    "ready_at = excluded.due_at"
)


_NOT_WAITING = (None, None, None)


def _wait_params(run_id: str, wait: Any, graph: Any) -> tuple:
    """`(wait topic, due at, graph)` for the save statements."""
    if wait is None:
        return _NOT_WAITING if graph is None else (None, None, _check_graph(graph))
    _check_wait(run_id, wait)
    return (wait.topic, None if wait.due_at is None else float(wait.due_at), _check_graph(graph))


def _after_write(
    conn: sqlite3.Connection, run_id: str, marked: tuple[str, ...], released: str | None, waits: tuple = _NOT_WAITING
) -> None:
    """In a save's transaction, after its write: mark the delivered messages, release the lease, and
    set when a waiting run is ready (`_READY`, once its delivered messages are marked)."""
    if len(marked) == 1:
        conn.execute(_DELIVERED, (run_id, marked[0]))
    elif marked:
        conn.executemany(_DELIVERED, [(run_id, message_id) for message_id in marked])
    if released is not None:
        conn.execute(_RELEASE, (run_id, released))
    if waits[0] is not None or waits[1] is not None:
        conn.execute(_READY, (run_id,))


def _reopen_sqlite(path: str, options: dict) -> SQLiteCheckpointStore:
    return SQLiteCheckpointStore(path, **options)


def _upgrade_schema(conn: sqlite3.Connection, path: str) -> None:
    """Create the tables, or bring an older release's file to `_SCHEMA_VERSION` (one transaction)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = conn.execute("PRAGMA user_version").fetchone()[0]
        if found > _SCHEMA_VERSION:
            raise CheckpointError(
                f"the checkpoint database {path!r} has schema version {found}; this release knows "
                f"versions up to {_SCHEMA_VERSION} (upgrade amrita-sense-turbo to read it)"
            )
        if found < _SCHEMA_VERSION:
            _add_columns(conn)
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute(_READY_FROM_VERSION_4)
            conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _add_columns(conn: sqlite3.Connection) -> None:
    """Add to the tables an older release's file has the columns later versions added."""
    for table, column, kind in _ADDED_COLUMNS:
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if columns and column not in columns:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


def _drop_unneeded_frames(conn: sqlite3.Connection, run_id: str) -> None:
    """Delete the run's history rows that are neither listed nor on the way from a keyframe to a
    listed entry or to the latest checkpoint (when that is stored as frames)."""
    rows = conn.execute(
        "SELECT version, base IS NULL, listed FROM sense_history WHERE run_id = ? ORDER BY version", (run_id,)
    ).fetchall()
    if all(listed for _, _, listed in rows):
        return
    latest = conn.execute("SELECT version, length(data) = 0 FROM sense_checkpoints WHERE run_id = ?", (run_id,))
    tips = [version for version, _, listed in rows if listed]
    tips += [version for version, framed in latest.fetchall() if framed]
    keyframe = {version: bool(full) for version, full, _ in rows}
    needed: set[int] = set()
    for tip in tips:
        version = tip
        while version in keyframe and version not in needed:
            needed.add(version)
            if keyframe[version]:
                break
            version -= 1
    unneeded = [(run_id, version) for version in keyframe if version not in needed]
    conn.executemany("DELETE FROM sense_history WHERE run_id = ? AND version = ?", unneeded)


def _written_over(conn: sqlite3.Connection, run_id: str, now: float, expected: int | None) -> tuple:
    """`(version, created_at, forked_from)` of the run a save writes over (0, `now`, None: a new
    run); `CheckpointConflict` when it is not at `expected`."""
    sql = "SELECT version, created_at, forked_from FROM sense_checkpoints WHERE run_id = ?"
    row = conn.execute(sql, (run_id,)).fetchone()
    current, created, forked = row if row is not None else (0, now, None)
    if expected is not None and expected != current:
        raise _conflict(run_id, expected, current)
    return current, created, forked
