"""Durable runs: snapshot a run, resume it in another process, keep checkpoints in SQLite.

    data = interp.snapshot()                          # bytes, at a suspend point / between nodes / idle
    again = WorkflowInterpreter.restore(graph, data, extra_args=(...))   # another process is fine
    await again.run()                                 # continues where `interp` stood

    store = SQLiteCheckpointStore("runs.db")
    interp.checkpointing = Checkpointing(store, "chat-42", every_nodes=1, codec=pickle)
    await interp.run()                                # saves after every node, at suspends, at the end
    ...                                               # (the process may die here)
    interp = await Checkpointing(store, "chat-42", codec=pickle).resume(graph)
    await interp.run()

What a snapshot holds (format in `amrita_sense.durable.snapshots.format`, document in
`amrita_sense.durable.snapshots.capture`): the engine state only (pointer, return and
context stacks, flags, pending stop, panic record, pass-through exception
classes, sub-interpreters of a FUN_BLOCK / BATCH_RUN step in flight, return
addresses nodes keep), the graph's fingerprint and outline. It is plain data
(JSON, zlib, CRC-32): reading one runs nothing. User objects (the injection
pools, the panic exception itself) are stored only through a codec the caller
passes, and decoded only by a codec the restoring caller passes.

Stores: `SQLiteCheckpointStore`, `MemoryCheckpointStore`, `PostgresCheckpointStore` /
`AsyncPostgresCheckpointStore` (extra `[postgres]`); each can keep a run's history
(`Checkpointing(..., history=True)`, `store.history`, `store.load(run_id, version=V)`,
`store.fork`). Runs that wait: `WAIT` / `SLEEP` / `SLEEP_UNTIL` park a run started with
`Checkpointing(..., graph=name)`; `store.send` keeps a message for it; a `Waker` resumes it when it
is due (`amrita_sense.durable.waits`). A start under a run id still in use is rejected (`RunBusy`),
queued or takes the id over (`Checkpointing(..., on_busy=...)`, `amrita_sense.durable.checkpointing.busy`). A parked run moves onto an edited graph with `restore(..., migrate=True)`
(`plan_migration` is its dry run, see `amrita_sense.durable.snapshots.migrate`).

The package is laid out in rooms, in the order a save flows through them; each imports only the
rooms before it: `errors`; `snapshots` (capture, the byte format, restore, fingerprints and
migration, codecs); `stores` (the protocol and one module per backend); `checkpointing` (when a
run saves); `waits` (waits in the graph, the waker). This module is the front door: import from here.

Not in a snapshot: the stream (`object_io`) and what is queued in it, open
workflow-scoped dependencies (a restored run opens them again), state your
nodes keep in closures or globals, forks you made yourself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from amrita_sense.durable.checkpointing.busy import BusyOutcome
from amrita_sense.durable.checkpointing.policy import Checkpointing
from amrita_sense.durable.errors import (
    CheckpointConflict,
    CheckpointError,
    CheckpointNotFound,
    CodecError,
    CorruptSnapshot,
    DurableError,
    EncryptedSnapshot,
    ForeignSnapshot,
    GraphMismatch,
    LeaseLost,
    RestoredPanic,
    RestoreError,
    RunBusy,
    RunEnded,
    RunInterrupted,
    SnapshotFormatError,
    SnapshotUnavailable,
    TamperedMessage,
    TamperedSnapshot,
    TruncatedSnapshot,
    UnsupportedSnapshotVersion,
    UntrustedMessage,
    UntrustedSnapshot,
    WaitError,
    WaitTimeout,
)
from amrita_sense.durable.snapshots.codecs import Fresh, PartialPickle
from amrita_sense.durable.snapshots.fingerprint import graph_fingerprint
from amrita_sense.durable.snapshots.format import FORMAT_VERSION, STATUSES, decode
from amrita_sense.durable.snapshots.migrate import MigrationPlan
from amrita_sense.durable.snapshots.panic import restored_traceback
from amrita_sense.durable.snapshots.restore import check_state, plan_migration
from amrita_sense.durable.snapshots.signing import Keyring
from amrita_sense.durable.stores import (
    Checkpoint,
    CheckpointRecord,
    CheckpointStore,
    HistoryStore,
    MemoryCheckpointStore,
    SQLiteCheckpointStore,
)
from amrita_sense.durable.stores.waiting import Claim, StoredMessage, Wait, WaitingStore
from amrita_sense.durable.waits import SLEEP, SLEEP_UNTIL, WAIT, Message, Waker

_POSTGRES_NAMES = ("AsyncPostgresCheckpointStore", "PostgresCheckpointStore")


def __getattr__(name: str) -> Any:
    """The Postgres stores, imported on first use (they need the `[postgres]` extra: psycopg)."""
    if name in _POSTGRES_NAMES:
        from amrita_sense.durable.stores import postgres

        return getattr(postgres, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class SnapshotInfo:
    """What a snapshot says about its run, read without a graph and without running anything."""

    version: int
    status: str
    """One of `STATUSES`: ready, running, suspended, halted, panicked, finished, waiting."""
    fingerprint: str
    position: str
    """idle, between, gate, step or nested (see `amrita_sense.durable.snapshots.capture`)."""
    parked: str | None
    """The suspend tag the run (or a sub-interpreter) is parked at, if any."""
    pointer: list[int]
    return_depth: int
    panic: str | None
    """`module:QualName: message` of the panic, if any."""
    codec: str | None
    size: int


def inspect_snapshot(data: Any) -> SnapshotInfo:
    """Check `data` (framing, checksum, every field) and describe it; a `SnapshotFormatError` if unreadable."""

    decoded = decode(data)
    state = check_state(decoded.document.get("interp"), "interp", len(decoded.blobs))
    panic = state["panic"]
    return SnapshotInfo(
        version=decoded.header.version,
        status=decoded.header.status,
        fingerprint=decoded.header.fingerprint,
        position=state["position"],
        parked=_parked_tag(state),
        pointer=list(state["ptr"]),
        return_depth=len(state["ret"]["items"]),
        panic=None if panic is None else f"{panic['type']}: {panic['message']}",
        codec=decoded.document.get("codec") if isinstance(decoded.document.get("codec"), str) else None,
        size=len(data),
    )


def _parked_tag(state: dict) -> str | None:
    """The gate tag the run, or the first parked sub-interpreter of its step, is parked at."""
    if state["parked"] is not None:
        return state["parked"]
    for item in (state["children"] or {}).get("items", ()):
        tag = _parked_tag(item["state"])
        if tag is not None:
            return tag
    return None


__all__ = [
    "FORMAT_VERSION",
    "SLEEP",
    "SLEEP_UNTIL",
    "STATUSES",
    "WAIT",
    "AsyncPostgresCheckpointStore",
    "BusyOutcome",
    "Checkpoint",
    "CheckpointConflict",
    "CheckpointError",
    "CheckpointNotFound",
    "CheckpointRecord",
    "CheckpointStore",
    "Claim",
    "Checkpointing",
    "CodecError",
    "CorruptSnapshot",
    "DurableError",
    "EncryptedSnapshot",
    "ForeignSnapshot",
    "Fresh",
    "GraphMismatch",
    "HistoryStore",
    "Keyring",
    "LeaseLost",
    "Message",
    "MemoryCheckpointStore",
    "MigrationPlan",
    "RestoreError",
    "RestoredPanic",
    "RunBusy",
    "RunEnded",
    "RunInterrupted",
    "PartialPickle",
    "PostgresCheckpointStore",
    "SQLiteCheckpointStore",
    "SnapshotFormatError",
    "SnapshotInfo",
    "SnapshotUnavailable",
    "StoredMessage",
    "TamperedMessage",
    "TamperedSnapshot",
    "TruncatedSnapshot",
    "UnsupportedSnapshotVersion",
    "UntrustedMessage",
    "UntrustedSnapshot",
    "Wait",
    "WaitError",
    "WaitTimeout",
    "Waker",
    "WaitingStore",
    "graph_fingerprint",
    "inspect_snapshot",
    "plan_migration",
    "restored_traceback",
]
