"""Automatic checkpoints: a policy, and the run loop that follows it.

`interp.checkpointing = Checkpointing(store, run_id, ...)` makes `run()` save
the interpreter's snapshot into `store` under `run_id`:

- after every `every_nodes` main-loop nodes and/or every `every_seconds` seconds;
- at every suspend point, just before the run parks there (`at_suspend`): the
  between-node gate, a main-loop node's own gate, a gate of a FUN_BLOCK /
  BATCH_RUN sub-interpreter;
- when a node with a policy begins a backoff before its next attempt;
- when the run ends: finished, halted (SUSPEND), reset (RESET) or, with
  `on_panic`, panicked.

A run with a policy uses this module's loop, which runs each step through the
interpreter's general path (as a middleware does); without one, `run()` is the
core's step loop, untouched: checkpointing costs nothing when it is off.

How long a step waits for its save is the policy's `durability`, named as LangGraph names its
modes:

- ``"sync"`` (the default): every save is written before the run goes on. A crash loses nothing
  saved: the restored run continues from the last checkpoint.
- ``"async"``: the snapshot is taken where the policy says, and written while the next nodes run
  (`amrita_sense.durable.checkpointing.writer`): in order, one write in flight, a newer snapshot
  replacing one still waiting. Saves before a park (a suspend gate, a backoff) and at the end are
  waited for (they too replace a snapshot still waiting), so `run()` returns, and a run parks, only
  with its last save durable. A crash loses
  the saves not yet written: the restored run continues from an earlier checkpoint (never a torn
  or out-of-order one), and the nodes since then run again.
- ``"exit"``: no saves between nodes; only at suspend gates (`at_suspend`), when the run ends and
  (with `on_panic`) when it fails. A crash in the middle of a run loses the whole run since its
  last park: the restored run starts again from that checkpoint (or there is none to restore).

At-least-once: a checkpoint is taken after a node, never inside one. When the
process dies, the restored run continues from the last checkpoint, so the node
that was running (and, with `every_nodes` > 1, the nodes since the checkpoint)
runs again. Make such nodes idempotent, or checkpoint every node.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Callable
from types import FunctionType, MethodType
from typing import TYPE_CHECKING, Any, NoReturn

from amrita_sense import core as _core
from amrita_sense.durable.checkpointing import busy
from amrita_sense.durable.checkpointing.writer import SaveWriter
from amrita_sense.durable.errors import (
    CheckpointConflict,
    CheckpointError,
    CodecError,
    RunInterrupted,
    SnapshotUnavailable,
)
from amrita_sense.durable.snapshots.capture import take_snapshot
from amrita_sense.durable.snapshots.format import read_header, unsigned
from amrita_sense.durable.snapshots.signing import Keyring
from amrita_sense.durable.stores import HISTORY_METHODS, Checkpoint, CheckpointRecord
from amrita_sense.durable.stores.waiting import ENDED_STATUSES, INTERRUPT_TOPIC, START_TOPIC, WAITING_METHODS, Wait
from amrita_sense.exceptions import InterruptNotice
from amrita_sense.runtime import observe as _observe
from amrita_sense.runtime.steps import StepHooks, drain
from amrita_sense.runtime.workflow import WorkflowInterpreter

# a save written at once, of the build the core loaded from (`_save_at_once`)
if TYPE_CHECKING or _core.IMPLEMENTATION == "cython":
    from amrita_sense.durable.checkpointing import _save_at_once as _at_once
else:
    from amrita_sense.durable.checkpointing import pure_save_at_once as _at_once
NOT_AT_ONCE = _at_once.NOT_AT_ONCE
_save_at_once = _at_once.save_at_once

_CHECK_CLOCK_EVERY = 64
DURABILITY_MODES = ("sync", "async", "exit")


def _awaits(save: Any) -> bool:
    """`inspect.iscoroutinefunction(save)`, kept per function for a store's own `save` method (a policy
    is made per run, over one store class as a rule)."""
    func = getattr(save, "__func__", None) if type(save) is MethodType else None
    if type(func) is not FunctionType:
        return inspect.iscoroutinefunction(save)
    found = _AWAITS.get(func)
    if found is None:
        if len(_AWAITS) >= 256:
            _AWAITS.clear()
        found = _AWAITS[func] = inspect.iscoroutinefunction(save)
    return found


_AWAITS: dict[Any, bool] = {}
"""Whether a store class's `save` function is a coroutine function, per function seen."""


async def _settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class Parked(InterruptNotice):
    """Raised by a WAIT / SLEEP (`amrita_sense.durable.waits`) to park a checkpointed run: the run
    ends keeping its state with the pointer on the main-loop step that waits (no halt: the next run
    starts at that step again), and the policy saves it with its wait. Not an
    `InterruptKeepContext`: the blocks it passes through (Try, loops) leave the pointer on their
    own step, as for a reset, and the policy's hooks, not the interpreter, end the run."""


class Checkpointing:
    """When and where a run saves its checkpoints (set it as `interp.checkpointing`).

    Args:
        store: a `CheckpointStore` (sync or async methods).
        run_id: the key of this run in the store.
        every_nodes: save after every that many main-loop nodes (None: not by count).
        every_seconds: save when that many seconds passed since the last save (None: not by time).
        at_suspend: save when the run is about to park at a suspend gate.
        on_panic: save when the run ends with an exception.
        codec: stores the injection pools (and panic exceptions) with each snapshot (`pickle`, or
            an object with `dumps`/`loads`); None keeps only the engine state.
        on_saved: called with the `CheckpointRecord` after every save.
        expected_version: the store version this policy writes over: 0 (the default) for a new
            run id, the loaded version when resuming (`resume` sets it); None saves unconditionally.
        history: keep every checkpoint in the run's history as well (the store must keep one:
            `HistoryStore`), so that `resume(graph, version=V)` can go back to any of them and
            `store.fork` can start a new run from one.
        durability: "sync", "async" or "exit": when a step waits for its save (module docstring).
        keyring: signs every save for this run and version (`amrita_sense.durable.Keyring`) and checks
            what `resume` reads before anything is decoded.
        allow_unsigned: let `resume` decode an unsigned checkpoint with a codec that can run code
            (pickle): only for a store nobody but you can write (see the security page of the docs).
        graph: the name of the graph the run belongs to, recorded with every save: a run that waits
            (WAIT / SLEEP, `amrita_sense.durable.waits`) needs it, so that a `Waker` given that name
            can resume it. The store must keep waits (`WaitingStore`; TypeError otherwise).
        on_busy: what a start (this policy with `expected_version=0`, its first `run()`) does when
            the store holds a run under `run_id` that has not finished, checked before any node runs
            (`amrita_sense.durable.checkpointing.busy`): "reject" (`RunBusy`, nothing runs),
            "enqueue" (the start is kept in the store and `run()` returns at once; a `Waker` given
            `graph` starts it once the active run has finished; needs `graph`), or "interrupt" (the
            start takes the run id over; the old run raises `RunInterrupted` at its next save).
            None (the default) checks nothing before the run (a start costs no read of the store):
            a run id the store holds makes the start's first save fail with `CheckpointConflict`,
            after its first node. With `on_busy` given, a finished run's id is free. The outcome is
            kept as `outcome` (a `BusyOutcome`) and, when a run was found, sent into the run's
            `object_io` reverse channel before its first node.

    Attributes:
        outcome: the `BusyOutcome` of the start check (None before it, or for a policy that resumes).
    """

    def __init__(
        self,
        store: Any,
        run_id: str,
        *,
        every_nodes: int | None = 1,
        every_seconds: float | None = None,
        at_suspend: bool = True,
        on_panic: bool = True,
        codec: Any = None,
        on_saved: Callable[[CheckpointRecord], Any] | None = None,
        expected_version: int | None = 0,
        history: bool = False,
        durability: str = "sync",
        keyring: Any = None,
        allow_unsigned: bool = False,
        graph: str | None = None,
        on_busy: str | None = None,
    ) -> None:
        if not (  # a CheckpointStore (a policy is made per run: the checks spelled out, no generator)
            callable(getattr(store, "save", None))
            and callable(getattr(store, "load", None))
            and callable(getattr(store, "list", None))
            and callable(getattr(store, "delete", None))
        ):
            raise TypeError(f"store must implement save/load/list/delete (CheckpointStore), not {type(store).__name__}")
        if not isinstance(run_id, str) or not run_id:
            raise ValueError("run_id must be a non-empty string")
        if every_nodes is not None and (type(every_nodes) is not int or every_nodes < 1):
            raise ValueError("every_nodes must be None or an int >= 1")
        if every_seconds is not None and not every_seconds > 0:
            raise ValueError("every_seconds must be None or a positive number of seconds")
        if codec is not None and not (
            callable(getattr(codec, "dumps", None)) and callable(getattr(codec, "loads", None))
        ):
            raise TypeError("codec must have dumps() and loads() (for example the pickle module)")
        if durability not in DURABILITY_MODES:
            raise ValueError(f"durability is one of {', '.join(map(repr, DURABILITY_MODES))}, not {durability!r}")
        if history and not all(callable(getattr(store, name, None)) for name in HISTORY_METHODS):
            raise TypeError(
                f"history=True needs a store that keeps history (history/fork/prune, save(..., history=True)); "
                f"{type(store).__name__} does not"
            )
        if graph is not None:
            if not isinstance(graph, str) or not graph:
                raise ValueError(f"graph must be None or a non-empty string (the graph's name), not {graph!r}")
            if not all(callable(getattr(store, name, None)) for name in WAITING_METHODS):
                raise TypeError(
                    f"graph={graph!r} needs a store that keeps waits (WaitingStore: {', '.join(WAITING_METHODS)}); "
                    f"{type(store).__name__} does not"
                )
        if on_busy is not None and on_busy not in busy.ON_BUSY:
            raise ValueError(f"on_busy is None or one of {', '.join(map(repr, busy.ON_BUSY))}, not {on_busy!r}")
        if on_busy == "enqueue" and graph is None:
            raise ValueError(
                f"run {run_id!r}: on_busy='enqueue' needs graph=NAME (a Waker given NAME starts the queued run)"
            )
        self.store = store
        self.run_id = run_id
        self.on_busy = on_busy
        self.outcome: busy.BusyOutcome | None = None
        self._taking_over: tuple[str, ...] | None = None
        """The interrupt marker a takeover's save marks delivered (`busy`), while it saves."""
        self.graph = graph
        self.every_nodes = every_nodes
        self.every_seconds = every_seconds
        self.at_suspend = at_suspend
        self.on_panic = on_panic
        self.codec = codec
        self.on_saved = on_saved
        self.version = expected_version
        self.history = bool(history)
        self.durability = durability
        self.keyring = keyring
        self.allow_unsigned = bool(allow_unsigned)
        self.last: CheckpointRecord | None = None
        self._writer = SaveWriter(self._write_submitted) if durability == "async" else None
        self._store_awaits = _awaits(store.save)
        self._unacknowledged: tuple[int | None, bytes] | None = None
        """The save in flight (the version it expected, its data), kept when something cut it short."""
        self._inbox: list[Any] = []
        """Messages a waker handed over for the run's WAITs (`amrita_sense.durable.Message`)."""
        self._delivered: list[str] = []
        """Ids of the messages a WAIT consumed, not yet marked delivered by a durable save."""
        self._watchdog = False
        """Set by a `Waker` resuming the run under a lease: saves between nodes record a timer due
        at once, so that when the waker dies mid-run and its lease expires, another waker claims
        the run and resumes it from its last checkpoint."""
        self._fence: BaseException | None = None
        """Set (a `LeaseLost`) when the waker resuming the run lost its lease: every save raises it."""
        self._wait_step_ends = False
        """Set by a wait that ends as a whole main-loop step of the resumed run: no save after that
        step (`amrita_sense.durable.waits.graph._resumed`)."""
        self._lease_owner: str | None = None
        """Set by a `Waker` whose store's `save` takes `release=`: the save that ends the run's turn
        (it parks again, finishes or stops) gives up that owner's lease with its write."""
        self._lease_released = False
        """True once a save gave up the waker's lease (`_lease_owner`): the waker releases nothing more."""

    def __repr__(self) -> str:
        return (
            f"Checkpointing({self.store!r}, {self.run_id!r}, every_nodes={self.every_nodes}, "
            f"durability={self.durability!r}, version={self.version})"
        )

    async def save(self, interp: Any) -> CheckpointRecord:
        """Snapshot `interp` and store it now (over `version` when set), after the saves still being
        written (`async`: the one in flight; one still waiting is superseded by this one); the new
        record."""
        try:  # most saves: written at once, in one call (`_save_at_once`)
            record = _save_at_once(self, interp)
        except CheckpointConflict as exc:
            await self._interrupted(exc)
        if record is NOT_AT_ONCE or type(record) is not CheckpointRecord or self.on_saved is not None:
            return await self._saved(record, interp)
        return record

    async def _saved(self, record: Any, interp: Any) -> CheckpointRecord:
        """`save` after `_save_at_once` returned `record`: the general save when it wrote nothing
        (`NOT_AT_ONCE`), else the record finished (`_stored`, acknowledged) and given to `on_saved`."""
        if record is NOT_AT_ONCE:
            return await self._save(interp)
        if type(record) is not CheckpointRecord:
            try:
                record = await self._stored(record)
            except CheckpointConflict as exc:
                await self._interrupted(exc)
            self._acknowledge(record, interp, 0.0, None)
        if self.on_saved is not None:
            await _settle(self.on_saved(record))
        return record

    async def _interrupted(self, conflict: CheckpointConflict) -> NoReturn:
        """Raise what a conflict of a save with no save cut short before it means: `RunInterrupted`
        when a start took the run id over (`_interruption`), else the conflict itself."""
        interrupted = await self._interruption()  # no save was cut short: none to find and follow
        if interrupted is None:
            raise conflict
        raise interrupted from conflict

    async def _save(self, interp: Any) -> CheckpointRecord:
        """`save` of a save `_save_at_once` does not write."""
        if self._writer is not None:
            await self._writer.flush(superseded=True)
        started = time.perf_counter() if _observe.current is not None else 0.0
        mac = self._mac()
        data = self._snapshot(interp, mac)
        marks = None if self.graph is None and self._taking_over is None else self._wait_marks(interp, data)
        if marks is not None or not self._writes_at_once():
            return await self._write(data, interp, started, marks=marks, signed=mac is not None)
        # `_write` of most saves (nothing besides the data, nothing cut short before, a synchronous
        # store), without its coroutine
        stored = data if mac is not None or self.keyring is None else self._signed(data)
        self._unacknowledged = (self.version, stored)
        try:
            record = self._store_now(stored)
            if type(record) is not CheckpointRecord:
                record = await self._stored(record)
        except CheckpointConflict as exc:
            interrupted = await self._interruption()  # no save was cut short: none to find and follow
            if interrupted is None:
                raise
            raise interrupted from exc
        self._acknowledge(record, interp, started, None)
        if self.on_saved is not None:
            await _settle(self.on_saved(record))
        return record

    def _writes_at_once(self) -> bool:
        """A save is written as `save` writes most (no fence, no save cut short before it, no history,
        a store whose `save` is no coroutine function)."""
        return self._fence is None and self._unacknowledged is None and not (self.history or self._store_awaits)

    async def _save_soon(self, interp: Any) -> None:
        """A save between nodes: written now (`sync`), or handed to the writer (`async`)."""
        if self._writer is None:
            await self.save(interp)
            return
        started = time.perf_counter() if _observe.current is not None else 0.0
        data = self._snapshot(interp)
        self._writer.submit((data, interp, started, self._wait_marks(interp, data)))

    async def flush(self) -> None:
        """Wait until every save taken is written (`async`; at once in the other modes); raises the
        `CheckpointError` of a save that failed."""
        if self._writer is not None:
            await self._writer.flush()

    async def _write_submitted(self, item: tuple[bytes, Any, float, Any]) -> None:
        data, interp, started, marks = item
        await self._write(data, interp, started, offload=not self._store_awaits, marks=marks)

    def _wait_marks(self, interp: Any, data: bytes) -> tuple[Any, tuple[str, ...], str | None] | None:
        """What a save of a run with a graph name records besides its data, taken with the
        snapshot: the wait it is parked at (None: not waiting; a finished run waits for its queued
        starts on `START_TOPIC`), the ids of the messages consumed and not yet acknowledged by a
        durable save, and the lease owner it releases (a waker's save that ends the run's turn).
        None for a policy without a graph (but for a takeover's interrupt marker)."""
        taking = self._taking_over or ()
        if self.graph is None:
            return (None, taking, None) if taking else None
        wait = getattr(interp, "_durable_wait", None)
        if interp.is_running:  # saved between nodes of a resumed run: it is not parked any more
            wait = (None, time.time()) if self._watchdog else None
            release = None
        else:
            release = self._lease_owner
            if wait is None and read_header(data).status in ENDED_STATUSES:
                wait = (START_TOPIC, None)  # a start queued behind this run (on_busy="enqueue") runs now
        return (None if wait is None else Wait(wait[0], wait[1]), (*self._delivered, *taking), release)

    async def _write(
        self,
        data: bytes,
        interp: Any,
        started: float,
        offload: bool = False,
        marks: Any = None,
        signed: bool = False,
    ) -> CheckpointRecord:
        """Store `data` over `version` (a save cut short before it was acknowledged is found and
        followed); the new record, reported to the observer and `on_saved`. `signed`: `data` is
        signed already, for the version after `version` (`_mac`)."""
        if self._fence is not None:
            raise self._fence
        cut = self._unacknowledged
        stored = data if signed else self._signed(data)
        self._unacknowledged = (self.version, stored)
        try:
            if offload or marks is not None or self.history or self._store_awaits:
                record = await self._store(stored, offload, marks)
            else:  # most saves: `_store` without its coroutine
                record = self._store_now(stored)
                if type(record) is not CheckpointRecord:
                    record = await self._stored(record)
        except CheckpointConflict as exc:
            if cut is None or not await self._landed(cut):
                interrupted = await self._interruption()
                if interrupted is None:
                    raise
                raise interrupted from exc
            if signed:
                data = unsigned(data)
            record = await self._store(self._signed(data), offload, marks)  # signed for the version after it
        self._acknowledge(record, interp, started, marks)
        if self.on_saved is not None:
            await _settle(self.on_saved(record))
        return record

    def _acknowledge(self, record: CheckpointRecord, interp: Any, started: float, marks: Any) -> None:
        """The store acknowledged the save `record` names: the messages and the lease its `marks`
        named are done with, the policy follows its version, the observer hears of it."""
        if marks is not None:
            if marks[1]:
                acknowledged = set(marks[1])
                self._delivered = [mid for mid in self._delivered if mid not in acknowledged]
            if marks[2] is not None:
                self._lease_released = True
        if self.version is not None:
            self.version = record.version
        self._unacknowledged = None
        self.last = record
        observer = _observe.current
        if observer is not None:
            observer.checkpoint_saved(interp, record, time.perf_counter() - started)

    def _snapshot(self, interp: Any, mac: Any = None) -> bytes:
        """`interp`'s snapshot; with `mac`, packed signed (`_mac`)."""
        try:
            return interp.snapshot(self.codec) if mac is None else take_snapshot(interp, self.codec, mac)
        except CodecError as exc:
            raise self._codec_failed(exc) from exc

    def _codec_failed(self, exc: CodecError) -> CheckpointError:
        """The codec could not encode the run's objects: a checkpoint failure, never the run's own panic."""
        return CheckpointError(
            f"the checkpoint of run {self.run_id!r} cannot be taken: {exc} (a codec must encode every "
            f"injected object; with codec=None a resumed run gets the pools the resuming code passes)"
        )

    def _mac(self) -> Any:
        """What a snapshot taken now for a save written at once is signed with as it is packed (the
        bytes `_signed` makes of the unsigned one), or None: no keyring, one that encrypts, or not
        this package's `Keyring` (then `_signed` signs)."""
        keyring = self.keyring
        if type(keyring) is not Keyring:
            return None
        return keyring.mac_for(self.run_id, 0 if self.version is None else self.version + 1)  # `_signing_version`

    def _signing_version(self) -> int:
        """The version a save written now is signed for (unknown when saves are unconditional: 0)."""
        return 0 if self.version is None else self.version + 1

    def _signed(self, data: bytes) -> bytes:
        """`data` signed for this run at the version it is about to be saved as (`_signing_version`)."""
        if self.keyring is None:
            return data
        version = self._signing_version()
        if type(self.keyring) is Keyring:  # the same bytes, without a bound keyring made per save
            return self.keyring.sign_for(self.run_id, version, data)
        return self.keyring.bound_to(self.run_id, version).sign_own(data)

    def _reading_keyring(self, record: CheckpointRecord) -> Any:
        """The keyring that checks `record`'s data: bound to its run and version (and to the entry
        it was forked from; to version 0 as well when this policy saves unconditionally)."""
        if self.keyring is None:
            return None
        also = [] if self.version is not None else [(record.run_id, 0)]
        if record.forked_from and record.version == 1:
            source, _, version = record.forked_from.rpartition("@")
            also.append((source, int(version)))
        return self.keyring.bound_to(record.run_id, record.version, *also)

    async def _store(self, data: bytes, offload: bool = False, marks: Any = None) -> CheckpointRecord:
        """One save into the store (with `offload`, a blocking store's call runs in a worker thread);
        `marks` (`_wait_marks`) adds the wait, the graph name, the delivered messages and the
        released lease."""
        save = self.store.save
        try:
            if not offload and marks is None and not self.history:  # most saves: no dict of arguments
                saved = save(self.run_id, data, expected_version=self.version)
            else:
                arguments: dict[str, Any] = {"expected_version": self.version}
                if self.history:
                    arguments["history"] = True
                if marks is not None:
                    arguments["wait"], arguments["delivered"], release = marks
                    arguments["graph"] = self.graph
                    if release is not None:
                        arguments["release"] = release
                if offload:
                    call = functools.partial(save, self.run_id, data, **arguments)
                    saved = await asyncio.get_running_loop().run_in_executor(None, call)
                else:
                    saved = save(self.run_id, data, **arguments)
            if type(saved) is CheckpointRecord:
                return saved
            return await saved if self._store_awaits or inspect.isawaitable(saved) else saved
        except CheckpointError:
            raise
        except Exception as exc:  # a backend's own error: report it as a checkpoint failure
            raise self._save_failed(exc) from exc

    def _save_failed(self, exc: Exception) -> CheckpointError:
        """A backend's own error in a save, reported as a checkpoint failure."""
        return CheckpointError(f"saving the checkpoint of run {self.run_id!r} failed: {exc!r}")

    def _store_now(self, data: bytes) -> Any:
        """`_store(data)` of a save with nothing besides its data (no offload, marks or history) into a
        store whose `save` is no coroutine function: the record, or what the store's `save` returned
        when that is not a record (`_stored` finishes it)."""
        try:
            return self.store.save(self.run_id, data, expected_version=self.version)
        except CheckpointError:
            raise
        except Exception as exc:  # a backend's own error: report it as a checkpoint failure
            raise self._save_failed(exc) from exc

    async def _stored(self, saved: Any) -> CheckpointRecord:
        """The record a store's `save` returned as `saved` (`_store_now`): awaited when it is awaitable."""
        try:
            return await saved if inspect.isawaitable(saved) else saved
        except CheckpointError:
            raise
        except Exception as exc:  # a backend's own error: report it as a checkpoint failure
            raise self._save_failed(exc) from exc

    async def _interruption(self) -> RunInterrupted | None:
        """After a conflict: `RunInterrupted` when a start took the run id over at the version this
        policy expected (its marker is delivered, `busy`), else None (another writer: the conflict)."""
        version = self.version
        if version is None or self._taking_over is not None or not busy.keeps_waits(self.store):
            return None
        marker = busy.interrupt_marker(version)
        try:
            kept = await _settle(self.store.messages(self.run_id, topic=INTERRUPT_TOPIC, pending=False))
            pending = await _settle(self.store.messages(self.run_id, topic=INTERRUPT_TOPIC, pending=True))
        except Exception:  # the store is away: the conflict stands
            return None
        if not any(m.message_id == marker for m in kept) or any(m.message_id == marker for m in pending):
            return None
        return RunInterrupted(
            f"run {self.run_id!r} was interrupted: a start took its run id over at version {version} "
            f"(on_busy='interrupt'); this run stopped at its next save and wrote nothing after the takeover",
            run_id=self.run_id,
            version=version,
        )

    async def _landed(self, cut: tuple[int | None, bytes]) -> bool:
        """True when the save that `cut` names reached the store although nothing acknowledged it
        (a KeyboardInterrupt between the store's write and `save`'s return): the store's latest
        checkpoint is that data, one version past the one it expected; `version` then follows it."""
        expected, data = cut
        try:
            latest = await _settle(self.store.load(self.run_id))
        except CheckpointError:
            return False
        if expected is None or latest.record.version != expected + 1 or latest.data != data:
            return False
        self.version = latest.record.version
        return True

    async def resume(
        self,
        graph: Any,
        interpreter: Any = None,
        *,
        version: int | None = None,
        latest: Checkpoint | None = None,
        **restore_kwargs: Any,
    ) -> Any:
        """Restore the run's latest checkpoint on `graph`; the interpreter, with this policy attached.

        With `version`, restore that checkpoint instead (time travel: the latest or any entry the
        store's history kept); the run goes on from there and its next saves still write over the
        latest version, so the history stays one line and keeps what came after `version` too.
        `restore_kwargs` go to `WorkflowInterpreter.restore` (the codec defaults to this policy's).
        Further saves expect the loaded version, so a second process resuming the same run makes
        one of them fail with `CheckpointConflict` at its next save.
        `latest`: the run's latest checkpoint, when the caller has just read it from the store (a
        `Waker`'s claim carries it), so it is not read again; it is checked as a loaded one is.
        """
        if interpreter is None:
            interpreter = WorkflowInterpreter
        if latest is None:
            latest = await _settle(self.store.load(self.run_id))
        elif latest.record.run_id != self.run_id:
            raise ValueError(f"latest is a checkpoint of run {latest.record.run_id!r}, not of {self.run_id!r}")
        checkpoint = latest
        if version is not None and version != latest.record.version:
            checkpoint = await _settle(self.store.load(self.run_id, version=version))
        restore_kwargs.setdefault("codec", self.codec)
        restore_kwargs.setdefault("keyring", self._reading_keyring(checkpoint.record))
        restore_kwargs.setdefault("allow_unsigned", self.allow_unsigned)
        interp = interpreter.restore(graph, checkpoint.data, **restore_kwargs)
        self.version = latest.record.version if self.version is not None else None
        self.last = checkpoint.record
        self._unacknowledged = None
        interp.checkpointing = self
        return interp

    def deliver(self, message: Any) -> None:
        """Hand `message` (an `amrita_sense.durable.Message`) to the run's WAIT on its topic: the
        WAIT consumes it when the run reaches it, and the next save marks it delivered. A `Waker`
        calls this; so can code that resumes a waiting run itself."""
        self._inbox.append(message)

    # ----- hooks the interpreter calls ----------------------------------------------------------

    async def before_gate(self, top: Any, gated: Any, tag: str | None) -> None:
        """`gated` (the top interpreter or one of its sub-interpreters) is at a gate: save if it will
        park (and wait for it, in every mode: a parked run's state is durable)."""
        if not self.at_suspend or not top.is_running:
            return
        would_park = getattr(gated.object_io, "_would_park", None)
        if would_park is not None and not would_park(tag):
            return
        try:
            await self.save(top)
        except SnapshotUnavailable:
            pass  # a gate inside a sub-call is not a point a run can be restored at

    async def at_backoff(self, top: Any) -> None:
        """A node with a policy of `top`'s run begins a backoff: save, so that a restored run makes
        the remaining attempts (unless the node runs where no run can be restored, in a sub-call).
        Not in `exit` durability, which saves only at suspend gates and at the end."""
        if self.durability == "exit":
            return
        try:
            await self.save(top)
        except SnapshotUnavailable:
            pass

    async def run(self, interp: Any) -> None:
        """`interp.run()` with checkpoints (see the module docstring): the general step loop with
        this policy's hooks. A start request (`expected_version=0`, first run) checks the run id
        first (`on_busy`); an enqueued start returns here without running."""
        if self.on_busy is not None and self.version == 0 and self.last is None and self.outcome is None:
            self.outcome = await busy.start_request(self, interp)
            if self.outcome.outcome == "enqueued":
                return
        await drain(interp, _CheckpointSteps(self))

    def _count_end(self, interp: Any, outcome: BaseException | None) -> None:
        """The step that ended the run counts as completed (`step_key`), unless it parked at a
        wait (the resumed run executes that step again) or the run finished."""
        if isinstance(outcome, InterruptNotice) and not isinstance(outcome, Parked):
            interp._durable_steps += 1

    def _saves_after(self, outcome: BaseException | None) -> bool:
        if outcome is None or isinstance(outcome, InterruptNotice):
            return True
        return self.on_panic and isinstance(outcome, Exception) and not isinstance(outcome, CheckpointError)

    def _due(self, since_save: int, last_save: float) -> bool:
        if self.durability == "exit":
            return False
        if self.every_nodes is not None and since_save >= self.every_nodes:
            return True
        return self.every_seconds is not None and time.monotonic() - last_save >= self.every_seconds


class _CheckpointSteps(StepHooks):
    """One checkpointed run's hooks: save after steps as the policy says, hand the event loop a
    turn every `_yield_interval` seconds (the loop never does between inline nodes otherwise),
    save when the run ends; a `CheckpointError` always propagates (it is never a panic)."""

    __slots__ = ("last_save", "last_yield", "policy", "since_save", "steps")

    def __init__(self, policy: Checkpointing):
        self.policy = policy
        self.since_save = self.steps = 0
        self.last_save = self.last_yield = time.monotonic()

    async def after_step(self, interp: Any) -> None:
        interp._durable_steps += 1
        self.since_save += 1
        self.steps += 1
        policy = self.policy
        if policy._wait_step_ends:  # the resumed wait's step: its effect goes with the next save
            policy._wait_step_ends = False
        elif (
            # `_due` of a policy saving every n nodes, without the call when they are done
            (policy.every_nodes is not None and self.since_save >= policy.every_nodes and policy.durability != "exit")
            or policy._due(self.since_save, self.last_save)
        ):
            if policy._writer is None:  # `save`, its coroutine made only when the save is not written at once
                try:
                    record = _save_at_once(policy, interp)
                except CheckpointConflict as exc:
                    await policy._interrupted(exc)
                if record is NOT_AT_ONCE or type(record) is not CheckpointRecord or policy.on_saved is not None:
                    await policy._saved(record, interp)
            else:
                await policy._save_soon(interp)
            self.since_save, self.last_save = 0, time.monotonic()
        if self.steps % _CHECK_CLOCK_EVERY == 0 and time.monotonic() - self.last_yield >= interp._yield_interval:
            await asyncio.sleep(0)
            self.last_yield = time.monotonic()

    def absorbs(self, interp: Any, exc: BaseException) -> bool:
        if isinstance(exc, Parked):
            return True  # a WAIT / SLEEP parked the run: no halt, the next run starts at that step
        return not isinstance(exc, CheckpointError) and interp._absorbs(exc)

    async def after_run(self, interp: Any, outcome: BaseException | None) -> None:
        self.policy._wait_step_ends = False  # a wait that was the run's last step: the end saves it
        self.policy._count_end(interp, outcome)
        if self.policy._saves_after(outcome):
            await self.policy.save(interp)
        else:
            await self.policy.flush()
