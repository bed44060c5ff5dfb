"""The second message: what a start request does when its run id is already in use (`on_busy`).

A *start request* is a run started under a run id with a new policy,
`interp.checkpointing = Checkpointing(store, run_id, ..., on_busy=...)` then `await interp.run()`
(`expected_version=0`, the default). With `on_busy` given, before any node runs, the policy reads
the store (without it, the default, a start reads nothing: a run id the store holds makes its first
save fail with `CheckpointConflict`, after its first node, as before):

- no run under the id: the run starts (outcome ``"started"``);
- a run that has not finished (running, waiting, suspended, halted, panicked, or a finished run whose
  queued starts have not run yet): the id is *active*, and `on_busy` decides:

  - ``"reject"``: `RunBusy`, naming the run and its status; nothing ran,
    nothing was written;
  - ``"enqueue"``: the start's first snapshot (its pools through the codec, as any checkpoint) is
    kept in the store as a message on the reserved topic `START_TOPIC` (the message and the
    snapshot signed, and the snapshot encrypted as checkpoints are, with the policy's keyring); `run()` returns at once with the run queued (``policy.outcome.outcome == "enqueued"``).
    A `Waker` given the policy's graph name starts it once the active run has finished (its status
    ``"finished"``): it takes the run id over from the finished checkpoint and runs the queued start
    from its snapshot; its first save marks the queued start delivered, so it starts exactly once.
    Queued starts run one after the other, in the order they were queued (the finishing save of a run
    with a graph name makes them due: a run without one leaves them for the next that has one);
  - ``"interrupt"``: the start takes the run id over at once: it sends the marker message
    ``interrupt@<version>`` (`INTERRUPT_TOPIC`) and writes its first checkpoint over the version it
    found, marking the marker delivered in the same save. The old run's next save then fails
    (`CheckpointConflict`: the version moved on), and its policy, finding the delivered marker for
    the version it expected, raises `RunInterrupted` from its `run()`: it stops there and writes
    nothing more. The old run notices at its next save: after its current node with
    ``durability="sync"`` and ``every_nodes=1``; with ``"async"``, at the next save it writes; with
    ``"exit"``, at its next park or its end (its nodes until then run, their results are not saved).
    A finished run whose queued starts have not run has nothing running to interrupt: the start
    takes the run id over without the marker (outcome ``"started"``), the queued starts run after it.

- a finished run with nothing queued: the run id is free: the start writes over the finished
  checkpoint (outcome ``"started"``, history kept when the store keeps it).

The stream says which happened: when the store held a run under the id, the start's
`object_io` receives a `BusyOutcome` in its reverse channel before its first node
(`drain_producer_input()` reads it), and the policy's `outcome` attribute holds it after the check
(for every start: `previous_status` None when the id was new). A queued start the waker starts gets
``BusyOutcome(run_id, "enqueue", "started", "finished")`` in its own stream.
"""

from __future__ import annotations

import base64
import inspect
from dataclasses import dataclass
from typing import Any

from amrita_sense.durable.errors import CheckpointConflict, CheckpointError, CheckpointNotFound, RunBusy, RunEnded
from amrita_sense.durable.stores.waiting import ENDED_STATUSES, INTERRUPT_TOPIC, START_TOPIC, WAITING_METHODS

ON_BUSY = ("reject", "enqueue", "interrupt")
OUTCOMES = ("started", "enqueued", "interrupted")
_TRIES = 32
"""How many times a start reads the store again when the run id changed under it (a save, a delete)."""
_QUEUED_FORMAT = 1
QUEUED_VERSION = -1
"""The version a queued start's snapshot is signed (and, with `Keyring(encrypt=True)`, encrypted)
for: no checkpoint has it, so a queued snapshot is never valid as a checkpoint, nor the other way."""


@dataclass(frozen=True)
class BusyOutcome:
    """What a start request did (`Checkpointing(..., on_busy=...)`): sent into the run's `object_io`
    reverse channel before its first node, and kept as the policy's `outcome`."""

    run_id: str
    on_busy: str
    """The policy's `on_busy` ("reject" for the default)."""
    outcome: str
    """One of `OUTCOMES`: "started" (the run runs now), "enqueued" (it runs after the active run) or
    "interrupted" (it took the run id over from an active run, which stops at its next save)."""
    previous_status: str | None
    """The status of the run the start found under the run id (None: there was none)."""


async def _settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def interrupt_marker(version: int) -> str:
    """The message id of the marker a takeover of `version` sends on `INTERRUPT_TOPIC`."""
    return f"interrupt@{version}"


def keeps_waits(store: Any) -> bool:
    """True when `store` keeps waits and messages (`WaitingStore`)."""
    return all(callable(getattr(store, name, None)) for name in WAITING_METHODS)


async def _queued(store: Any, run_id: str) -> int:
    """How many queued starts of the run have not started yet (0 for a store without messages)."""
    if not keeps_waits(store):
        return 0
    try:
        return len(await _settle(store.messages(run_id, topic=START_TOPIC, pending=True)))
    except CheckpointNotFound:
        return 0


def queued_payload(snapshot: bytes, graph: str | None) -> dict[str, Any]:
    """The JSON payload of a queued start: its snapshot (base64) and graph name."""
    return {"format": _QUEUED_FORMAT, "graph": graph, "snapshot": base64.b64encode(snapshot).decode("ascii")}


def queued_snapshot(payload: Any, run_id: str) -> bytes:
    """The snapshot of a queued start's decoded payload; `CheckpointError` naming the run when it is not one."""
    try:
        if payload.get("format") != _QUEUED_FORMAT:
            raise ValueError(f"format {payload.get('format')!r}")
        return base64.b64decode(payload["snapshot"], validate=True)
    except Exception as exc:
        raise CheckpointError(f"the queued start of run {run_id!r} is not one this version reads: {exc}") from exc


async def start_request(policy: Any, interp: Any) -> BusyOutcome:
    """Check the run id before the run's first node and do what `policy.on_busy` says (module
    docstring); the outcome (also pushed into `interp.object_io` when a run was found)."""
    store, run_id = policy.store, policy.run_id
    on_busy = policy.on_busy
    conflict: CheckpointConflict | None = None
    for _ in range(_TRIES):
        try:
            record = (await _settle(store.load(run_id))).record
        except CheckpointNotFound:
            return BusyOutcome(run_id, on_busy, "started", None)
        status = record.status
        queued = await _queued(store, run_id) if status in ENDED_STATUSES else 0
        if status in ENDED_STATUSES and not queued:
            outcome = BusyOutcome(run_id, on_busy, "started", status)
        elif on_busy == "reject":
            waiting = f", {queued} queued start(s) not run yet" if queued else ""
            raise RunBusy(
                f"run {run_id!r} is busy (status {status!r}{waiting}): nothing ran, nothing was written; "
                f"start it again once it has finished, or with on_busy='enqueue' (run after it) or "
                f"on_busy='interrupt' (take the run id over)",
                run_id=run_id,
                status=status,
            )
        elif on_busy == "enqueue":
            snapshot = policy._snapshot(interp)
            if policy.keyring is not None:
                snapshot = policy.keyring.bound_to(run_id, QUEUED_VERSION).sign_own(snapshot)
            try:
                await _settle(
                    store.send(
                        run_id,
                        START_TOPIC,
                        queued_payload(snapshot, policy.graph),
                        keyring=policy.keyring,
                    )
                )
            except CheckpointNotFound:
                continue  # deleted meanwhile: read again
            outcome = BusyOutcome(run_id, on_busy, "enqueued", status)
            await interp.object_io.send_to_producer(outcome)
            return outcome
        elif status in ENDED_STATUSES:  # finished, with queued starts: nothing runs to interrupt
            outcome = BusyOutcome(run_id, on_busy, "started", status)
        else:
            outcome = BusyOutcome(run_id, on_busy, "interrupted", status)
        try:
            await _take_over(policy, interp, record.version, marked=outcome.outcome == "interrupted")
        except (CheckpointConflict, CheckpointNotFound, RunEnded) as exc:  # the run moved on: read again
            conflict = exc if isinstance(exc, CheckpointConflict) else conflict
            policy.version, policy._unacknowledged, policy.last = 0, None, None
            continue
        await interp.object_io.send_to_producer(outcome)
        return outcome
    raise CheckpointConflict(
        f"run {run_id!r} kept changing while a start tried to take it over ({_TRIES} tries): nothing ran"
    ) from conflict


async def _take_over(policy: Any, interp: Any, version: int, *, marked: bool) -> None:
    """Write the start's first checkpoint over `version` (with the interrupt marker, delivered in
    the same save, when `marked`)."""
    policy.version = version
    delivered: tuple[str, ...] = ()
    if marked and keeps_waits(policy.store):
        marker = interrupt_marker(version)
        await _settle(policy.store.send(policy.run_id, INTERRUPT_TOPIC, {"over": version}, message_id=marker))
        delivered = (marker,)
    policy._taking_over = delivered
    try:
        await policy.save(interp)
    finally:
        policy._taking_over = None


__all__ = [
    "ON_BUSY",
    "OUTCOMES",
    "QUEUED_VERSION",
    "BusyOutcome",
    "interrupt_marker",
    "queued_payload",
    "queued_snapshot",
]
