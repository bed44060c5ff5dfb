"""The exceptions of durable runs: one base class, one branch per way things go wrong.

    DurableError
    |-- SnapshotUnavailable      the run is inside a node: no consistent state to take now
    |-- SnapshotFormatError      the bytes are not a snapshot this version can read
    |   |-- TruncatedSnapshot        shorter than its header says
    |   |-- CorruptSnapshot          checksum mismatch, bad compression, bad document
    |   |   `-- TamperedSnapshot / TamperedMessage   a signature that does not verify
    |   |-- ForeignSnapshot          not a snapshot at all (wrong magic)
    |   `-- UnsupportedSnapshotVersion   written by a newer format version
    |-- GraphMismatch            the snapshot was taken on a different graph
    |-- RestoreError             a readable snapshot cannot be applied here
    |-- CodecError               the user's codec failed to encode or decode user state
    `-- CheckpointError          the checkpoint store failed
        |-- CheckpointNotFound       no checkpoint under that run id (also a LookupError)
        |-- CheckpointConflict       another writer saved the run first
        |   |-- RunBusy                  a start found the run id active (on_busy="reject")
        |   `-- RunInterrupted           a start took the run id over (on_busy="interrupt")
        |-- RunEnded                 a message was sent to a run that has ended
        `-- LeaseLost                a waker's lease on a run expired or was taken over
    WaitError                    a run cannot wait (no durable policy, no graph name, unknown graph)
    WaitTimeout                  raised inside a run whose WAIT timed out (also a TimeoutError)

`RestoredPanic` is not an error of this module: it stands in for a panic whose
exception class cannot be rebuilt in the restoring process (see `get_exception()`).
"""

from __future__ import annotations


class DurableError(Exception):
    """Base class of every snapshot, restore and checkpoint-store error."""


class SnapshotUnavailable(DurableError):
    """`snapshot()` was called while a node (or an injected call) is running."""


class SnapshotFormatError(DurableError):
    """The data is not a snapshot that this version can read."""


class TruncatedSnapshot(SnapshotFormatError):
    """The data ends before the end its header announces."""


class CorruptSnapshot(SnapshotFormatError):
    """The checksum, the compression or the engine document is wrong."""


class TamperedSnapshot(CorruptSnapshot):
    """A snapshot checked against a keyring is not signed by one of its keys for what it is used as
    (another run, another version, changed bytes, a key the keyring does not hold, no signature)."""


class UntrustedSnapshot(DurableError):
    """An unsigned (or unverified) snapshot was to be decoded by a codec that can run code while it
    loads (pickle): pass the keyring it was signed with, or `allow_unsigned=True` for data you trust."""


class TamperedMessage(CorruptSnapshot):
    """A message payload is not an envelope this version reads, or, checked against a keyring, is not
    signed by one of its keys for its run, topic and message id (`durable.snapshots.messages`)."""


class UntrustedMessage(UntrustedSnapshot):
    """An unsigned (or unverified) message payload was to be decoded by a codec that can run code while
    it loads: pass the keyring it was signed with, or `allow_unsigned=True` for messages you trust."""


class EncryptedSnapshot(SnapshotFormatError):
    """The snapshot is encrypted: only the keyring that wrote it (`Keyring(..., encrypt=True)`) reads it."""


class ForeignSnapshot(SnapshotFormatError):
    """The data does not start with the snapshot magic: it is something else."""


class UnsupportedSnapshotVersion(SnapshotFormatError):
    """The snapshot was written in a format version newer than this reader knows."""

    def __init__(self, version: int, supported: int) -> None:
        super().__init__(f"snapshot format version {version} is newer than the supported version {supported}")
        self.version = version
        self.supported = supported


class GraphMismatch(DurableError):
    """The graph given to `restore` is not the graph the snapshot was taken on.

    `address` and `row` name the first slot that differs (None when only the
    sub-graph or alias set differs as a whole); `detail` says how.
    """

    def __init__(self, detail: str, *, row: int | None, address: list[int] | None, expected: str, actual: str):
        super().__init__(detail)
        self.detail = detail
        self.row = row
        self.address = address
        self.expected = expected
        self.actual = actual


class RestoreError(DurableError):
    """A well-formed snapshot cannot be applied (codec missing, node state in use, unknown type...)."""


class CodecError(DurableError):
    """The codec given for user state (injection pools, panic copies) failed to encode or decode."""


class CheckpointError(DurableError):
    """The checkpoint store could not save, load, list or delete."""


class CheckpointNotFound(CheckpointError, LookupError):
    """No checkpoint is stored under the run id."""


class CheckpointConflict(CheckpointError):
    """A save expected a version of the run that another writer has replaced."""


class RunBusy(CheckpointConflict):
    """A start request (`Checkpointing(..., on_busy="reject")`, the default) found a run under its run id
    that has not finished: nothing ran and nothing was written. `run_id` and `status` name it."""

    def __init__(self, message: str, *, run_id: str, status: str) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.status = status


class RunInterrupted(CheckpointConflict):
    """Raised from the `run()` of a run whose run id another start took over
    (`Checkpointing(..., on_busy="interrupt")`): the run stopped at its next save and wrote nothing
    after the takeover. `run_id` names it, `version` is the version it found replaced."""

    def __init__(self, message: str, *, run_id: str, version: int) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.version = version


class RunEnded(CheckpointError):
    """`send` named a run that has finished: no wait of it will ever read the message."""


class LeaseLost(CheckpointError):
    """A waker no longer holds the lease on a run it was resuming (it expired, another waker took it)."""


class WaitError(DurableError):
    """A run cannot wait here: WAIT / SLEEP outside a checkpointed run started with a graph name, or a
    waker asked to resume a run of a graph it was not given (or one that changed)."""


class WaitTimeout(DurableError, TimeoutError):
    """Raised inside a run, by its WAIT, when the wait's `timeout` passed with no message: Try/CATCH and
    node policies handle it as any other exception of a node."""


class RestoredPanic(Exception):
    """The panic of a restored run whose exception cannot be rebuilt as its own class.

    Raised by nothing; `get_exception()` returns it. `type_name` is the
    original class (`module.QualName`), `args` its arguments when they were
    plain data, `str()` its message, `traceback_text` the original traceback.
    """

    def __init__(self, type_name: str, message: str, args: tuple = (), traceback_text: str = "") -> None:
        super().__init__(*args)
        self.type_name = type_name
        self.message = message
        self.traceback_text = traceback_text

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"RestoredPanic({self.type_name}: {self.message!r})"

    def __reduce__(self) -> tuple:
        return type(self), (self.type_name, self.message, self.args, self.traceback_text)
