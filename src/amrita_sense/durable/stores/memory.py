"""`MemoryCheckpointStore`: checkpoints in a dictionary, for one process (tests, examples)."""

from __future__ import annotations

import builtins
import threading
import time
from dataclasses import replace
from typing import Any

from amrita_sense.durable.errors import CheckpointNotFound
from amrita_sense.durable.snapshots.format import read_header
from amrita_sense.durable.snapshots.messages import encode_payload
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
    _conflict,
    _fork_conflict,
    _forked_from,
    _version_not_kept,
)
from amrita_sense.durable.stores.paging import CheckpointPage, check_page, page_of
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


class MemoryCheckpointStore:
    """Checkpoints in a dictionary: the same protocol and rules as `SQLiteCheckpointStore`, one process only.

    It keeps waits, messages and leases too (`amrita_sense.durable.stores.waiting`), and wakes a waker
    of the same process at once (`wait_for_wakeup`)."""

    def __init__(
        self,
        *,
        history_limit: int | None = None,
        history_max_age: float | None = None,
        run_ttl: float | None = None,
        on_expiry: str = "delete",
    ) -> None:
        self.history_limit, self.history_max_age = _check_retention(history_limit, history_max_age)
        self.run_ttl, self.on_expiry = _check_expiry(run_ttl, on_expiry)
        self._runs: dict[str, Checkpoint] = {}
        self._history: dict[str, list[Checkpoint]] = {}
        # threads: guards the store. Reentrant on purpose, though nothing here re-enters it: a
        # KeyboardInterrupt from a signal can land right after `with self._lock:` acquired and before
        # its block (PEP 419; Python 3.14 lands there), and the thread that leaked it can still save.
        self._lock = threading.RLock()
        self._wakeups = threading.Condition(self._lock)
        self._wakeup_count = self._wakeup_seen = 0
        self._waits: dict[str, Wait] = {}
        self._graphs: dict[str, str] = {}
        self._leases: dict[str, tuple[str, float]] = {}
        self._messages: dict[str, list[StoredMessage]] = {}
        self._delivered: set[tuple[str, str]] = set()
        self._seq = 0

    def __repr__(self) -> str:
        return f"MemoryCheckpointStore({len(self._runs)} runs)"

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
        """Store `data` as the run's latest checkpoint, with its wait, graph name, delivered message
        ids and released lease (`amrita_sense.durable.stores.waiting`) in the same step."""
        _check_run_id(run_id)
        _check_expected(expected_version)
        _check_wait(run_id, wait)
        _check_graph(graph)
        delivered = _check_delivered(run_id, delivered)
        if release is not None:
            _check_name("lease owner", release)
        header = read_header(data)
        now = time.time()
        with self._lock:
            previous = self._runs.get(run_id)
            current = previous.record.version if previous is not None else 0
            if expected_version is not None and expected_version != current:
                raise _conflict(run_id, expected_version, current)
            created, forked = (previous.record.created_at, previous.record.forked_from) if previous else (now, None)
            record = CheckpointRecord(
                run_id, current + 1, header.status, header.fingerprint, len(data), created, now, forked
            )
            self._write(Checkpoint(record, bytes(data)), history)
            if wait is None:
                self._waits.pop(run_id, None)
            else:
                self._waits[run_id] = wait
                self._wake()
            if graph is not None:
                self._graphs[run_id] = graph
            if delivered:  # only messages the store keeps (as an UPDATE of the other stores)
                kept = {m.message_id for m in self._messages.get(run_id, ())}
                self._delivered.update((run_id, message_id) for message_id in delivered if message_id in kept)
            if release is not None:
                self._release(run_id, release)
        return record

    def _write(self, checkpoint: Checkpoint, history: bool) -> None:
        run_id = checkpoint.record.run_id
        self._runs[run_id] = checkpoint
        if history:
            self._history.setdefault(run_id, []).append(checkpoint)
            self._apply_retention(run_id, checkpoint.record.updated_at)

    def _apply_retention(self, run_id: str, now: float) -> int:
        entries = self._history.get(run_id, [])
        kept = entries
        if self.history_max_age is not None:
            kept = [e for e in kept if e.record.updated_at >= now - self.history_max_age]
        if self.history_limit is not None:
            kept = kept[-self.history_limit :]
        if entries:
            self._history[run_id] = kept
        return len(entries) - len(kept)

    def load(self, run_id: str, *, version: int | None = None) -> Checkpoint:
        _check_run_id(run_id)
        _check_version(version)
        with self._lock:
            found = self._runs.get(run_id)
            if found is None:
                raise CheckpointNotFound(f"no checkpoint for run {run_id!r}")
            if version is None or found.record.version == version:
                return found
            entry = next((e for e in self._history.get(run_id, ()) if e.record.version == version), None)
        if entry is None:
            raise _version_not_kept(run_id, version)
        return Checkpoint(replace(entry.record, created_at=found.record.created_at), entry.data)

    def history(self, run_id: str) -> list[CheckpointRecord]:
        _check_run_id(run_id)
        with self._lock:
            if run_id not in self._runs:
                raise CheckpointNotFound(f"no checkpoint for run {run_id!r}")
            return [entry.record for entry in self._history.get(run_id, ())]

    def fork(self, run_id: str, version: int, new_run_id: str) -> CheckpointRecord:
        _check_run_id(new_run_id)
        if _check_version(version) is None:
            raise ValueError("fork needs the version of the checkpoint to start from")
        source = self.load(run_id, version=version)
        now = time.time()
        record = replace(
            source.record,
            run_id=new_run_id,
            version=1,
            created_at=now,
            updated_at=now,
            forked_from=_forked_from(run_id, version),
        )
        with self._lock:
            if new_run_id in self._runs:
                raise _fork_conflict(new_run_id, self._runs[new_run_id].record.version)
            self._write(Checkpoint(record, source.data), history=True)
            if run_id in self._graphs:
                self._graphs[new_run_id] = self._graphs[run_id]
        return record

    def prune(self, run_id: str | None = None) -> int:
        now = time.time()
        with self._lock:
            runs = [_check_run_id(run_id)] if run_id is not None else list(self._history)
            return sum(self._apply_retention(run, now) for run in runs)

    def sweep(self, *, batch_size: int = SWEEP_BATCH) -> int:
        """Expire the runs whose last save is `run_ttl` seconds old or older (see `SQLiteCheckpointStore.sweep`)."""
        _check_batch(batch_size)
        if self.run_ttl is None:
            return 0
        cutoff, expired = time.time() - self.run_ttl, 0
        while True:
            with self._lock:
                runs = [run for run, c in self._runs.items() if c.record.updated_at < cutoff and self._expires(run)]
                for run in runs[:batch_size]:
                    self._history.pop(run, None)
                    if self.on_expiry == "delete":
                        del self._runs[run]
                        self._forget(run)
            expired += min(len(runs), batch_size)
            if len(runs) <= batch_size:
                return expired

    def _expires(self, run_id: str) -> bool:
        return self.on_expiry == "delete" or bool(self._history.get(run_id))

    def list(self, *, status: str | None = None) -> list[CheckpointRecord]:
        with self._lock:
            records = [c.record for _, c in sorted(self._runs.items())]
        return [r for r in records if status is None or r.status == status]

    def list_page(
        self, *, status: str | None = None, sort: str = "updated", order: str = "desc", offset: int = 0, limit: int = 50
    ) -> CheckpointPage:
        """One sorted page of `list(status=status)` (`amrita_sense.durable.stores.paging`)."""
        check_page(status, sort, order, offset, limit)
        return page_of(self.list(status=status), sort, order, offset, limit)

    def delete(self, run_id: str, *, expected_version: int | None = None) -> bool:
        _check_run_id(run_id)
        _check_expected(expected_version)
        with self._lock:
            previous = self._runs.get(run_id)
            current = previous.record.version if previous is not None else 0
            if expected_version is not None and expected_version != current:
                raise _conflict(run_id, expected_version, current)
            self._history.pop(run_id, None)
            self._forget(run_id)
            return self._runs.pop(run_id, None) is not None

    def _forget(self, run_id: str) -> None:
        """Drop what the store keeps for a deleted run besides its checkpoints."""
        self._waits.pop(run_id, None)
        self._graphs.pop(run_id, None)
        self._leases.pop(run_id, None)
        for message in self._messages.pop(run_id, ()):
            self._delivered.discard((run_id, message.message_id))

    # ----- waits, messages, leases (amrita_sense.durable.stores.waiting) ------------------------------

    def _wake(self) -> None:
        self._wakeup_count += 1
        self._wakeups.notify_all()

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
        """Keep a message for the run (`amrita_sense.durable.stores.waiting`); the first one of a
        `message_id` is kept and returned again for a repeated id."""
        _check_run_id(run_id)
        _check_name("topic", topic)
        message_id = _message_id(message_id)
        with self._lock:
            self._check_open(run_id, topic)
            found = next((m for m in self._messages.get(run_id, ()) if m.message_id == message_id), None)
            if found is not None:
                return found
        encoded = encode_payload(
            payload, codec=codec, keyring=keyring, run_id=run_id, topic=topic, message_id=message_id
        )
        with self._lock:
            self._check_open(run_id, topic)  # it may have ended while the payload was encoded
            kept = self._messages.setdefault(run_id, [])
            found = next((m for m in kept if m.message_id == message_id), None)
            if found is not None:
                return found
            self._seq += 1
            message = StoredMessage(run_id, topic, message_id, self._seq, time.time(), encoded)
            kept.append(message)
            self._wake()
        return message

    def _check_open(self, run_id: str, topic: str) -> None:
        found = self._runs.get(run_id)
        if found is None:
            raise CheckpointNotFound(f"no checkpoint for run {run_id!r}: a message cannot be sent to it")
        if _refuses(found.record.status, topic):
            raise _ended(run_id, found.record.status)

    def _pending(self, run_id: str, topic: str | None) -> builtins.list[StoredMessage]:
        return [
            m
            for m in self._messages.get(run_id, ())
            if (topic is None or m.topic == topic) and (run_id, m.message_id) not in self._delivered
        ]

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
        """Lease the due waiting runs to `owner` (`amrita_sense.durable.stores.waiting`)."""
        lease = _check_lease(owner, lease_seconds)
        _check_limit(limit)
        names = _check_graphs(graphs)
        horizon = _check_ahead(ahead)
        with self._lock:
            now = time.time() if now is None else float(now)
            horizon += now
            due: list[tuple[float, str, StoredMessage | None]] = []
            for run_id, wait in self._waits.items():
                if names is not None and self._graphs.get(run_id) not in names:
                    continue
                held = self._leases.get(run_id)
                if held is not None and held[1] > now:
                    continue
                pending = self._pending(run_id, wait.topic)[:1] if wait.topic is not None else []
                message = pending[0] if pending else None
                # a timer only (no message can make it due sooner) is taken `ahead` of its time
                timer = wait.due_at is not None and wait.due_at <= (now if wait.topic is not None else horizon)
                if message is None and not timer:
                    continue
                since = min(
                    message.sent_at if message is not None else horizon,
                    wait.due_at if timer and wait.due_at is not None else horizon,
                )
                due.append((since, run_id, message))
            due.sort(key=lambda item: (item[0], item[1]))
            claims = []
            for _, run_id, message in due[:limit]:
                self._leases[run_id] = (owner, now + lease)
                claims.append(
                    Claim(
                        run_id,
                        owner,
                        now + lease,
                        self._graphs.get(run_id),
                        self._waits[run_id],
                        self._runs[run_id].record,
                        message,
                        self._runs[run_id].data,
                    )
                )
        return claims

    def renew(self, run_id: str, owner: str, lease_seconds: float) -> bool:
        """Extend `owner`'s lease on the run by `lease_seconds` from now; False when it is not `owner`'s."""
        lease = _check_lease(owner, lease_seconds)
        _check_run_id(run_id)
        with self._lock:
            held = self._leases.get(run_id)
            if held is None or held[0] != owner:
                return False
            self._leases[run_id] = (owner, time.time() + lease)
            return True

    def release(self, run_id: str, owner: str) -> None:
        """Give up `owner`'s lease on the run (no effect when it is not `owner`'s)."""
        _check_run_id(run_id)
        _check_name("lease owner", owner)
        with self._lock:
            self._release(run_id, owner)

    def _release(self, run_id: str, owner: str) -> None:
        held = self._leases.get(run_id)
        if held is not None and held[0] == owner:
            del self._leases[run_id]
            if run_id in self._waits:
                self._wake()

    def messages(self, run_id: str, *, topic: str | None = None, pending: bool = True) -> builtins.list[StoredMessage]:
        """The run's messages in sending order (on `topic`; only the undelivered ones with `pending`)."""
        _check_run_id(run_id)
        if topic is not None:
            _check_name("topic", topic)
        with self._lock:
            if run_id not in self._runs:
                raise CheckpointNotFound(f"no checkpoint for run {run_id!r}")
            if pending:
                return self._pending(run_id, topic)
            return [m for m in self._messages.get(run_id, ()) if topic is None or m.topic == topic]

    def next_due(self, *, graphs: Any = None) -> float | None:
        """When the next timer makes a waiting run (of `graphs`) claimable (its `due_at`, or the end of a
        lease held on it when later); None when no wait has a deadline."""
        names = _check_graphs(graphs)
        with self._lock:
            times = [
                max(wait.due_at, self._leases.get(run_id, ("", wait.due_at))[1])
                for run_id, wait in self._waits.items()
                if wait.due_at is not None and (names is None or self._graphs.get(run_id) in names)
            ]
        return min(times) if times else None

    def wait_for_wakeup(self, timeout: float) -> bool:
        """Block until a `send` or a save that parks a run (or a released lease of a waiting run), or
        `timeout` seconds: True for a wake-up, False at the timeout. A call reports the wake-ups since
        the previous call began (the first: since the store was made), so none is lost to a call its
        caller gave up on; after a wake-up, the next call may return True at once."""
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise ValueError(f"timeout is a non-negative number of seconds, not {timeout!r}")
        with self._wakeups:
            # from the count when the previous call began: a wake-up that call took and its caller
            # never saw (it gave up waiting) is reported again, at the price of a spurious wake-up
            seen, self._wakeup_seen = self._wakeup_seen, self._wakeup_count
            return self._wakeups.wait_for(lambda: self._wakeup_count != seen, timeout)
