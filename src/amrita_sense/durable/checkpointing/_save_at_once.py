"""A checkpoint policy's save written at once, in one call: the hot part of `Checkpointing.save`.

Most saves have nothing besides their data (no takeover, fence, save cut short before, history,
observer or writer; with a graph name, a run between its nodes that is not a waker's and holds no
message to acknowledge: its graph name is all its save adds, `Checkpointing._wait_marks`) and go to
a store whose `save` is no coroutine function, signed by this
package's `Keyring` (or by none): `save_at_once` takes the snapshot (signed as it is packed), hands
it to the store and, when the store returned the record, acknowledges it, as `Checkpointing.save`
does such a save, without its Python calls. For any other save it returns `NOT_AT_ONCE`, having done
nothing, and `save` goes its general way. A conflict (`CheckpointConflict`) and a backend's error
(made into `CheckpointError`, `Checkpointing._save_failed`) propagate to `save`, which handles them
as before; so does a codec's error, as `Checkpointing._snapshot` makes it.

One source for both builds: Cython compiles it with `_save_at_once.pxd` into
`amrita_sense.durable.checkpointing._save_at_once`; the pure build runs it as
`amrita_sense.durable.checkpointing.pure_save_at_once`. `policy` takes the one of the build the core
loaded from (`amrita_sense.IMPLEMENTATION`), and the snapshot part of that build (`capture`).
"""

from __future__ import annotations

from typing import Any

try:
    import cython
except ModuleNotFoundError:  # a pure build without Cython installed
    from amrita_sense.core import cython_shim as cython  # type: ignore[no-redef,unused-ignore]

if not cython.compiled and __name__.rpartition(".")[2] == "_save_at_once":
    # imported as Python under the compiled module's name: the extension is not built here
    raise ImportError(
        "the compiled save path is not built here; the pure build is amrita_sense.durable.checkpointing.pure_save_at_once"
    )

from amrita_sense.durable.errors import CheckpointError, CodecError
from amrita_sense.durable.snapshots import capture as _capture
from amrita_sense.durable.snapshots.signing import _DOMAIN, Keyring
from amrita_sense.durable.stores.base import CheckpointRecord
from amrita_sense.runtime import observe as _observe
from amrita_sense.runtime.workflow import WorkflowInterpreter

NOT_AT_ONCE: Any = type("NotAtOnce", (), {"__repr__": lambda self: "NOT_AT_ONCE", "__slots__": ()})()
"""What `save_at_once` returns for a save it does not write (nothing done: `save` writes it)."""
_SNAPSHOT = WorkflowInterpreter.snapshot


def save_at_once(policy: Any, interp: Any) -> Any:
    """`policy.save(interp)` of a save written at once (see the module docstring), up to its
    `on_saved`: what the store's `save` returned (the record, acknowledged; or what `_stored`
    finishes), or `NOT_AT_ONCE`."""
    if (
        policy._writer is not None
        or policy._taking_over is not None
        or policy._fence is not None
        or policy._unacknowledged is not None
        or policy.history
        or policy._store_awaits
        or _observe.current is not None
    ):
        return NOT_AT_ONCE
    graph = policy.graph
    if graph is not None and (policy._watchdog or policy._delivered or not interp.is_running):
        return NOT_AT_ONCE  # its save records a wait, delivered messages or a lease (`_wait_marks`)
    version = policy.version
    keyring = policy.keyring
    seal = None
    if keyring is not None:
        if type(keyring) is not Keyring or keyring.encrypt:
            return NOT_AT_ONCE  # `_signed` signs the snapshot after it is taken
        seal = seal_for(keyring, policy.run_id, 0 if version is None else version + 1)
    codec = policy.codec
    try:
        if seal is None and type(interp).snapshot is not _SNAPSHOT:
            data = interp.snapshot(codec)  # a subclass's own (`_snapshot` calls it so)
        else:  # `take_snapshot(interp, codec, seal)`: no trace to carry (no observer)
            data = _capture._plain_snapshot(interp, codec, seal)
            if data is None:
                data = _capture.take_snapshot(interp, codec, seal)
    except CodecError as exc:
        raise policy._codec_failed(exc) from exc
    policy._unacknowledged = (version, data)
    try:  # `_store_now`, or `_store` with the marks of a run between its nodes: not waiting, nothing delivered
        if graph is None:
            record = policy.store.save(policy.run_id, data, expected_version=version)
        else:
            record = policy.store.save(
                policy.run_id, data, expected_version=version, wait=None, delivered=(), graph=graph
            )
    except CheckpointError:
        raise
    except Exception as exc:  # a backend's own error: report it as a checkpoint failure
        raise policy._save_failed(exc) from exc
    if type(record) is CheckpointRecord:  # `_acknowledge` without marks or an observer
        if version is not None:
            policy.version = record.version
        policy._unacknowledged = None
        policy.last = record
    return record


def seal_for(keyring: Any, run_id: str, version: Any) -> Any:
    """`keyring.mac_for(run_id, version)` of a non-encrypting `Keyring`: its current key's HMAC and
    the context it signs for (`_HmacSha256.context`, inline)."""
    signer = keyring._macs[keyring.current]
    if type(version) is not int:
        return signer, signer.context(run_id, version)
    last = signer.last_run
    if last[0] != run_id:
        last = signer.last_run = (run_id, b"".join((_DOMAIN, run_id.encode("utf-8", "surrogatepass"), b"\0")))
    return signer, b"".join((last[1], str(version).encode("ascii"), signer.after_version))
