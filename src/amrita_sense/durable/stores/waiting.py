"""What a store keeps for runs that wait: where each parked run waits, the messages sent to runs,
and the leases that let one waker at a time resume a run.

A store that supports waits (`WaitingStore`; every shipped backend) adds to the checkpoint protocol:

- `save(..., wait=Wait(...) | None, graph=name | None, delivered=(message ids...))`: one statement or
  transaction with the checkpoint. `wait` records that the run is parked (None: it is not waiting any
  more, so every save of a resumed run clears the wait); `graph` records the graph name the run
  belongs to (None keeps the stored name); `delivered` marks those messages of the run delivered, in
  the same transaction, so a message counts as delivered exactly when the checkpoint after its wait is
  durable (a waker that dies before that save leaves it to be delivered again, from the same
  checkpoint).
- `send(run_id, topic, payload, *, message_id=None, codec=None, keyring=None) -> StoredMessage`: keeps
  a message for the run (sent before its wait, or while it runs, it waits in the store). The payload is
  encoded by `codec` (None: plain JSON data) and signed with `keyring` (`durable.snapshots.messages`);
  the store never decodes it. The same `message_id` twice for one run keeps the first message only.
  `CheckpointNotFound` for a run id the store does not have, `RunEnded` for a finished run.
- `claim_due(owner, *, lease_seconds, limit=..., graphs=None, now=None) -> list[Claim]`: the waiting
  runs that are due (their `due_at` passed, or an undelivered message on their wait's topic is kept)
  and whose lease is free or expired, each leased to `owner` by a conditional write: two wakers never
  hold the same run.
- `renew(run_id, owner, lease_seconds) -> bool` (False: the lease is not `owner`'s any more) and
  `release(run_id, owner)` (no effect when the lease is not `owner`'s).
- `messages(run_id, *, topic=None, pending=True) -> list[StoredMessage]`: a run's messages in the order
  they were sent (only those not yet delivered, with `pending`).
- `next_due(*, graphs=None) -> float | None`: the earliest `due_at` of a waiting run (a waker sleeps
  until then, at most its poll interval).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from amrita_sense.durable.stores.base import CheckpointRecord

WAITING_METHODS = ("send", "claim_due", "renew", "release", "messages", "next_due")


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
        self, owner: str, *, lease_seconds: float, limit: int = 16, graphs: Any = None, now: float | None = None
    ) -> list[Claim]: ...

    def renew(self, run_id: str, owner: str, lease_seconds: float) -> bool: ...

    def release(self, run_id: str, owner: str) -> None: ...

    def messages(self, run_id: str, *, topic: str | None = None, pending: bool = True) -> list[StoredMessage]: ...

    def next_due(self, *, graphs: Any = None) -> float | None: ...
