"""What a store keeps for runs that wait: where each parked run waits, the messages sent to runs,
and the leases that let one waker at a time resume a run.

A store that supports waits (`WaitingStore`; every shipped backend) adds to the checkpoint protocol:

- `save(..., wait=Wait(...) | None, graph=name | None, delivered=(message ids...), release=owner |
  None)`: one statement or transaction with the checkpoint. `wait` records that the run is parked
  (None: it is not waiting any more, so every save of a resumed run clears the wait); `graph` records
  the graph name the run belongs to (None keeps the stored name); `delivered` marks those messages of
  the run delivered, in the same transaction, so a message counts as delivered exactly when the
  checkpoint after its wait is durable (a waker that dies before that save leaves it to be delivered
  again, from the same checkpoint); `release` gives up that owner's lease on the run as `release()`
  does, with the write (a waker's last save of a run, parked again or ended: no statement after it).
- `send(run_id, topic, payload, *, message_id=None, codec=None, keyring=None) -> StoredMessage`: keeps
  a message for the run (sent before its wait, or while it runs, it waits in the store). The payload is
  encoded by `codec` (None: plain JSON data) and signed with `keyring` (`durable.snapshots.messages`);
  the store never decodes it. The same `message_id` twice for one run keeps the first message only.
  `CheckpointNotFound` for a run id the store does not have, `RunEnded` for a finished run (except on
  `START_TOPIC`: a start may queue behind a finished run whose queued starts have not run yet).
- `claim_due(owner, *, lease_seconds, limit=..., graphs=None, now=None, ahead=0.0) -> list[Claim]`: the
  waiting runs that are due (their `due_at` passed, or an undelivered message on their wait's topic is
  kept) and whose lease is free or expired, each leased to `owner` by a conditional write: two wakers
  never hold the same run. With `ahead` seconds, a run parked on a timer only (SLEEP, SLEEP_UNTIL: no
  topic) whose `due_at` comes within `ahead` seconds of `now` is claimed too, after the due ones: a
  waker restores it before its time and starts it at its `due_at`. (A WAIT's timeout is never claimed
  ahead: a message may still come before it.) The lease is checked against `now` either way. A claim
  carries the claimed checkpoint's bytes where the store read them in the same statement
  (`Claim.data`).
- `renew(run_id, owner, lease_seconds) -> bool` (False: the lease is not `owner`'s any more) and
  `release(run_id, owner)` (no effect when the lease is not `owner`'s).
- `messages(run_id, *, topic=None, pending=True) -> list[StoredMessage]`: a run's messages in the order
  they were sent (only those not yet delivered, with `pending`).
- `next_due(*, graphs=None) -> float | None`: when the next timer makes a waiting run claimable: the
  earliest `due_at`, or for a run leased to a waker, the later of its `due_at` and the lease's end
  (a waker sleeps until then, at most its poll interval; a run a dead waker holds does not make the
  others spin until its lease expires).

Optional (`WakeupStore`): `wait_for_wakeup(timeout) -> bool` blocks (a coroutine on an async store)
until something may have made a run due, a `send`, a save that parks a run or the release of a
waiting run's lease, or `timeout` seconds pass: True for a wake-up, False at the timeout. No
wake-up is lost between two calls: one that came after the previous call began (the first call:
since the store listens) is reported, even when that call returned it to a caller that gave up on
it; so a wake-up may be spurious (the next call after one may return True at once; a waker calls
`claim_due` after each return either way). `MemoryCheckpointStore` wakes through a
condition variable (listening from its creation), the Postgres stores through `LISTEN
amrita_sense_wake` on a connection of their own, from the first call on (`send`, a parking save and
a release `NOTIFY` in their transaction, so a wake-up is never seen before its row);
`SQLiteCheckpointStore` has no such signal across processes: its waker polls `claim_due` / `next_due`.

`graphs` (claim_due, next_due): None for every run, else the graph names (an iterable of strings) a
waker serves; a run saved without a graph name is only found with None. `claim_due` returns the
claimable runs in the order they became due (the earlier of a passed timer and the oldest pending
message on the wait's topic), at most `limit`; a run with both a passed timer and a pending message
gets the message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from amrita_sense.durable.errors import RunEnded
from amrita_sense.durable.stores.base import CheckpointRecord

WAITING_METHODS = ("send", "claim_due", "renew", "release", "messages", "next_due")
ENDED_STATUSES = ("finished",)
"""The statuses of a run that will never wait again: `send` to it is `RunEnded`."""
START_TOPIC = "amrita_sense.start"
"""The reserved topic of queued starts (`Checkpointing(..., on_busy="enqueue")`): a message on it holds
the snapshot of a start waiting for the run id's active run to finish. `send` on this topic is also
accepted for a finished run (a start queued behind queued ones), and every finishing save of a run
with a graph name records a wait on it, so `claim_due` hands a `Waker` the oldest queued start once
the run has finished."""
INTERRUPT_TOPIC = "amrita_sense.interrupt"
"""The reserved topic of takeovers (`on_busy="interrupt"`): the message `interrupt@<version>`, marked
delivered by the takeover's save, tells the replaced run that its conflict is an interruption."""
RESERVED_TOPICS = (START_TOPIC, INTERRUPT_TOPIC)
WAKE_CHANNEL = "amrita_sense_wake"
"""The Postgres `NOTIFY` channel of wake-ups (payload: the run id)."""


@dataclass(frozen=True)
class Wait:
    """Where a parked run waits."""

    topic: str | None
    """The WAIT's topic; None for SLEEP / SLEEP_UNTIL (a timer only)."""
    due_at: float | None
    """When the timer ends or the WAIT times out (seconds since the epoch); None: no deadline."""


@dataclass(frozen=True)
class StoredMessage:
    """A message kept for a run, as the store holds it (its payload still encoded)."""

    run_id: str
    topic: str
    message_id: str
    seq: int
    """The store's sending order: a run's messages on one topic are delivered in this order."""
    sent_at: float
    payload: bytes


@dataclass(frozen=True)
class Claim:
    """A due run leased to one waker: resume it from `record`'s checkpoint with `message` (None: its
    timer is due)."""

    run_id: str
    owner: str
    lease_until: float
    graph: str | None
    wait: Wait
    record: CheckpointRecord
    message: StoredMessage | None
    data: bytes | None = None
    """The claimed checkpoint's bytes (framing checked, not yet verified or decoded) when the store
    read them with the claim, so resuming needs no second read; None: load them (a checkpoint
    stored as frames)."""


@runtime_checkable
class WaitingStore(Protocol):
    """A checkpoint store that keeps waits, messages and leases (sync methods, or coroutines)."""

    def send(
        self,
        run_id: str,
        topic: str,
        payload: Any,
        *,
        message_id: str | None = None,
        codec: Any = None,
        keyring: Any = None,
    ) -> StoredMessage: ...

    def claim_due(
        self,
        owner: str,
        *,
        lease_seconds: float,
        limit: int = 16,
        graphs: Any = None,
        now: float | None = None,
        ahead: float = 0.0,
    ) -> list[Claim]: ...

    def renew(self, run_id: str, owner: str, lease_seconds: float) -> bool: ...

    def release(self, run_id: str, owner: str) -> None: ...

    def messages(self, run_id: str, *, topic: str | None = None, pending: bool = True) -> list[StoredMessage]: ...

    def next_due(self, *, graphs: Any = None) -> float | None: ...


@runtime_checkable
class WakeupStore(Protocol):
    """A store that can tell a waker something may be due (see the module docstring)."""

    def wait_for_wakeup(self, timeout: float) -> bool: ...


# ----- the argument checks every backend shares ---------------------------------------------------


def _check_name(what: str, value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > 512:
        raise ValueError(f"a {what} is a non-empty string of at most 512 characters, not {value!r:.60}")
    return value


def _check_wait(run_id: str, wait: Any) -> Wait | None:
    if wait is None:
        return None
    if not isinstance(wait, Wait):
        raise TypeError(f"run {run_id!r}: wait is a Wait or None, not {type(wait).__name__}")
    if wait.topic is not None:
        _check_name("wait topic", wait.topic)
    due = wait.due_at
    if due is not None and (isinstance(due, bool) or not isinstance(due, (int, float)) or due != due):
        raise ValueError(f"run {run_id!r}: a wait's due_at is None or a number of seconds, not {due!r}")
    if wait.topic is None and due is None:
        raise ValueError(f"run {run_id!r}: a wait has a topic, a due_at, or both (this one would never end)")
    return wait


def _check_delivered(run_id: str, delivered: Any) -> tuple[str, ...]:
    if not delivered:
        return ()
    if isinstance(delivered, str):
        raise TypeError(f"run {run_id!r}: delivered is a sequence of message ids, not one string")
    return tuple(_check_name("message id", message_id) for message_id in delivered)


def _check_graph(graph: Any) -> str | None:
    return None if graph is None else _check_name("graph name", graph)


def _check_graphs(graphs: Any) -> frozenset[str] | None:
    if graphs is None:
        return None
    if isinstance(graphs, str):
        return frozenset((_check_name("graph name", graphs),))
    return frozenset(_check_name("graph name", graph) for graph in graphs)


def _check_lease(owner: Any, lease_seconds: Any) -> float:
    _check_name("lease owner", owner)
    if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, (int, float)) or not lease_seconds > 0:
        raise ValueError(f"lease_seconds is a positive number of seconds, not {lease_seconds!r}")
    return float(lease_seconds)


def _check_limit(limit: Any) -> int:
    if type(limit) is not int or limit < 1:
        raise ValueError(f"limit is an int >= 1, not {limit!r}")
    return limit


def _check_ahead(ahead: Any) -> float:
    if isinstance(ahead, bool) or not isinstance(ahead, (int, float)) or not ahead >= 0 or ahead == float("inf"):
        raise ValueError(f"ahead is a non-negative, finite number of seconds, not {ahead!r}")
    return float(ahead)


def _message_id(message_id: Any) -> str:
    if message_id is None:
        import uuid

        return uuid.uuid4().hex
    return _check_name("message id", message_id)


def _refuses(status: str, topic: str) -> bool:
    """True when `send` refuses a message on `topic` to a run of `status` (it has ended)."""
    return status in ENDED_STATUSES and topic != START_TOPIC


def _ended(run_id: str, status: str) -> RunEnded:
    return RunEnded(f"run {run_id!r} has ended (status {status!r}): no wait of it will read a message")
