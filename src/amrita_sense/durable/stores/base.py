"""The store protocol, its records, and the argument checks every backend shares.

`CheckpointStore` is the protocol the engine uses (`save` / `load` / `list` /
`delete`); a backend implements these four methods, synchronously or as
coroutines (the checkpointer awaits what they return when it is awaitable), and
nothing in the engine changes. Three backends ship: `SQLiteCheckpointStore`,
the embedded default, `MemoryCheckpointStore`, for one process, and (extra
`[postgres]`) `PostgresCheckpointStore` / `AsyncPostgresCheckpointStore`.

A store keeps the latest checkpoint of each run with a version number that
grows by one per save. `save(..., expected_version=n)` saves only if the stored
version is still `n` (0: the run id must be new) and raises
`CheckpointConflict` otherwise, so two processes can never both believe they
own a run: the one that lost finds out at its next save.

History (`HistoryStore`, every shipped store): `save(..., history=True)` also
appends the checkpoint to the run's history, which `history(run_id)` lists
oldest first and `load(run_id, version=V)` reads; `fork(run_id, V, new_id)`
starts a new run from an entry and leaves the source untouched. Retention
(`history_limit` entries per run, `history_max_age` seconds) is applied at each
history save and by `prune()`; it never touches a run's latest checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from amrita_sense.durable.errors import (
    CheckpointConflict,
    CheckpointNotFound,
    CorruptSnapshot,
    SnapshotFormatError,
)
from amrita_sense.durable.snapshots.format import read_header


@dataclass(frozen=True)
class CheckpointRecord:
    """What a store knows about one checkpoint of a run (the snapshot's status and graph fingerprint)."""

    run_id: str
    version: int
    status: str
    fingerprint: str
    size: int
    created_at: float
    """When the run's first checkpoint was saved (seconds since the epoch)."""
    updated_at: float
    """When this checkpoint was saved."""
    forked_from: str | None = None
    """`"<run id>@<version>"` of the history entry this run was forked from (`fork`), else None."""


def _record(
    run_id: str,
    version: int,
    status: str,
    fingerprint: str,
    size: int,
    created_at: float,
    updated_at: float,
    forked_from: str | None = None,
) -> CheckpointRecord:
    """`CheckpointRecord(...)`, its fields written straight into the new object's own `__dict__`: what
    a store's save returns (the frozen dataclass's `__init__` sets each field with its own
    `object.__setattr__` call, twice the cost; assigning a whole new `__dict__` makes and drops one
    more dict). The same object, its fields in the same order: equal, same hash, repr and pickle
    (tests/test_store_conformance.py)."""
    record = _new_object(CheckpointRecord)
    fields = record.__dict__  # reading it is allowed on a frozen dataclass; only setting attributes is not
    fields["run_id"] = run_id
    fields["version"] = version
    fields["status"] = status
    fields["fingerprint"] = fingerprint
    fields["size"] = size
    fields["created_at"] = created_at
    fields["updated_at"] = updated_at
    fields["forked_from"] = forked_from
    return record


_new_object = object.__new__


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint: its record and the snapshot bytes."""

    record: CheckpointRecord
    data: bytes


@runtime_checkable
class CheckpointStore(Protocol):
    """The four operations the engine needs from a checkpoint backend (sync or async)."""

    def save(self, run_id: str, data: bytes, *, expected_version: int | None = None) -> CheckpointRecord:
        """Store `data` as the run's latest checkpoint; with `expected_version`, only over that version."""
        ...

    def load(self, run_id: str) -> Checkpoint:
        """The run's latest checkpoint; `CheckpointNotFound` when there is none."""
        ...

    def list(self, *, status: str | None = None) -> list[CheckpointRecord]:
        """The latest checkpoint record of every run (only those with `status`, when given)."""
        ...

    def delete(self, run_id: str, *, expected_version: int | None = None) -> bool:
        """Forget the run (and its history); False when it was not stored. `CheckpointConflict` on a
        version mismatch."""
        ...


@runtime_checkable
class HistoryStore(CheckpointStore, Protocol):
    """A store that can keep every checkpoint of a run (`Checkpointing(..., history=True)` needs one)."""

    def save(
        self, run_id: str, data: bytes, *, expected_version: int | None = None, history: bool = False
    ) -> CheckpointRecord:
        """As `CheckpointStore.save`; with `history`, the checkpoint is also appended to the run's history."""
        ...

    def load(self, run_id: str, *, version: int | None = None) -> Checkpoint:
        """The latest checkpoint, or the one of `version` (the latest or a kept history entry)."""
        ...

    def history(self, run_id: str) -> list[CheckpointRecord]:
        """The run's kept history entries, oldest first ([] when it has none)."""
        ...

    def fork(self, run_id: str, version: int, new_run_id: str) -> CheckpointRecord:
        """Start `new_run_id` (version 1, first history entry) from `run_id`'s checkpoint `version`."""
        ...

    def prune(self, run_id: str | None = None) -> int:
        """Apply the retention now (to one run or every run); the number of entries removed."""
        ...


HISTORY_METHODS = ("history", "fork", "prune")

# Run expiry (every shipped store): `run_ttl` seconds after a run's last save it expires; `sweep()`
# deletes it (`on_expiry="delete"`) or drops its history and keeps its latest checkpoint
# (`"keep_latest"`), `SWEEP_BATCH` runs per transaction, and returns how many runs it expired.


def _check_run_id(run_id: Any) -> str:
    if not isinstance(run_id, str) or not run_id or len(run_id) > 512:
        raise ValueError(f"a run id is a non-empty string of at most 512 characters, not {run_id!r:.60}")
    return run_id


def _check_expected(expected: Any) -> int | None:
    if expected is not None and (type(expected) is not int or expected < 0):
        raise ValueError(f"expected_version is None or a non-negative int, not {expected!r}")
    return expected


def _check_version(version: Any) -> int | None:
    if version is not None and (type(version) is not int or version < 1):
        raise ValueError(f"version is None or a positive int, not {version!r}")
    return version


def _check_retention(history_limit: Any, history_max_age: Any) -> tuple[int | None, float | None]:
    if history_limit is not None and (type(history_limit) is not int or history_limit < 1):
        raise ValueError(f"history_limit is None or an int >= 1 (entries kept per run), not {history_limit!r}")
    if history_max_age is not None and (
        isinstance(history_max_age, bool) or not isinstance(history_max_age, (int, float)) or not history_max_age > 0
    ):
        raise ValueError(f"history_max_age is None or a positive number of seconds, not {history_max_age!r}")
    return history_limit, None if history_max_age is None else float(history_max_age)


EXPIRY_ACTIONS = ("delete", "keep_latest")
SWEEP_BATCH = 200
"""How many expired runs one transaction of `sweep()` handles (a save waits at most for one batch)."""


def _check_expiry(run_ttl: Any, on_expiry: Any) -> tuple[float | None, str]:
    """The run-level time to live (seconds since a run's last save) and what expiry does."""
    if run_ttl is not None and (isinstance(run_ttl, bool) or not isinstance(run_ttl, (int, float)) or not run_ttl > 0):
        raise ValueError(f"run_ttl is None or a positive number of seconds, not {run_ttl!r}")
    if on_expiry not in EXPIRY_ACTIONS:
        raise ValueError(f"on_expiry is 'delete' or 'keep_latest', not {on_expiry!r}")
    return None if run_ttl is None else float(run_ttl), on_expiry


def _check_batch(batch_size: Any) -> int:
    if type(batch_size) is not int or batch_size < 1:
        raise ValueError(f"batch_size is an int >= 1, not {batch_size!r}")
    return batch_size


def _conflict(run_id: str, expected: int, current: int) -> CheckpointConflict:
    found = f"version {current}" if current else "no checkpoint"
    return CheckpointConflict(f"run {run_id!r}: expected version {expected}, the store has {found}")


def _fork_conflict(new_run_id: str, current: int) -> CheckpointConflict:
    return CheckpointConflict(f"cannot fork into run {new_run_id!r}: the store has version {current} of it")


def _version_not_kept(run_id: str, version: int, where: str = "") -> CheckpointNotFound:
    return CheckpointNotFound(f"run {run_id!r} has no kept checkpoint of version {version}{where}")


def _forked_from(run_id: str, version: int) -> str:
    return f"{run_id}@{version}"


def _claimed_data(data: Any) -> bytes | None:
    """A claimed row's checkpoint bytes (`Claim.data`) when they are whole and framed as a snapshot;
    None when the row holds frames, or damaged bytes: the waker's `load` then rebuilds them, or
    raises `CorruptSnapshot` for that run alone (a claim of several runs never fails for one)."""
    if not data:
        return None
    try:
        data = bytes(data)  # a text value in an SQLite BLOB column raises TypeError here
        read_header(data)
    except (TypeError, SnapshotFormatError):
        return None
    return data


def _checked_data(run_id: str, version: int, data: Any, where: str = "") -> bytes:
    """The stored bytes of a checkpoint, or `CorruptSnapshot` naming the run when they are not one."""
    try:
        read_header(bytes(data))
    except (TypeError, SnapshotFormatError) as exc:
        raise CorruptSnapshot(
            f"the stored checkpoint of run {run_id!r}, version {version}{where}, is damaged: {exc}"
        ) from exc
    return bytes(data)
