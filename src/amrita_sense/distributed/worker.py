"""The worker: a Ray actor whose one event loop runs many interpreters concurrently.

The pool makes this class a Ray actor (`ray.remote(SenseWorker).options(...)`,
an async actor: every method is a coroutine on the actor's event loop, up to
`max_concurrency` at a time). Everything a run owns lives here: the graph
(shipped once per worker, see `_workflow`), the injection pools and the stream
(built by the workflow's setup factory, on this process), the interpreter, the
task that runs it.

Requests about a run (send, suspend, cancel...) may reach the worker before the
run itself does (Ray orders calls from one caller, but a retried or slow call
can be overtaken): they wait up to `ARRIVAL_TIMEOUT` seconds for it.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import socket
import time
import traceback
from collections import OrderedDict
from typing import Any

from amrita_sense import core as _core
from amrita_sense.distributed import pickling
from amrita_sense.distributed.errors import NotPicklable, RunEnded
from amrita_sense.distributed.outcome import (
    CANCELLED,
    ERROR,
    FINISHED,
    HALTED,
    LOST,
    PANICKED,
    RunOutcome,
    RunSetup,
    Unshippable,
    as_setup,
)
from amrita_sense.durable import Checkpointing, CheckpointNotFound, Waker
from amrita_sense.durable.errors import DurableError, RestoredPanic
from amrita_sense.durable.snapshots.codecs import PartialPickle
from amrita_sense.durable.snapshots.fingerprint import graph_fingerprint
from amrita_sense.durable.snapshots.panic import type_name
from amrita_sense.exceptions import StreamStateError
from amrita_sense.runtime import observe as _observe
from amrita_sense.runtime.workflow import WorkflowInterpreter
from amrita_sense.streaming import SuspendObjectStream

ARRIVAL_TIMEOUT = 30.0
"""Seconds a request waits for its run to reach this worker."""
OUTPUT_LIMIT = 256
"""Items a streamed run may have produced that the caller has not taken yet (then its stream waits)."""
ENDED_KEPT = 4096
"""How many ended run ids a worker remembers (requests for them fail at once with `RunEnded`)."""
WORKFLOWS_KEPT = 128
"""How many workflows a worker keeps unpickled (the least recently used one is fetched again when needed)."""

BATCH, OUTCOME = b"B", b"O"
"""The first byte of what `run_streaming` yields."""

FRESH, FAILOVER, CONTINUE = "fresh", "failover", "continue"
"""How a run starts: from the beginning; after its worker died (from its checkpoint, not re-running
an ended run); on request (`submit(resume=True)`: from its checkpoint, a halted run goes on)."""
_ENDED_STATUSES = {FAILOVER: ("finished", "halted", "panicked"), CONTINUE: ("finished",)}


async def _settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class _Run:
    """One run on this worker."""

    task: asyncio.Future[RunOutcome]
    """Set by `SenseWorker._start` right after the run is made: builds, runs and concludes it."""
    __slots__ = (
        "cancelled",
        "interp",
        "opts",
        "outputs",
        "parking",
        "policy",
        "pump",
        "room",
        "run_id",
        "setup",
        "started",
        "stream",
        "streaming",
        "task",
        "wake",
    )

    def __init__(self, run_id: str, opts: dict, streaming: bool) -> None:
        self.run_id = run_id
        self.opts = opts
        self.streaming = streaming
        self.cancelled = False
        self.interp: Any = None
        self.setup = RunSetup()  # the factory's, once it ran
        self.stream: Any = None
        self.policy: Any = None
        self.pump: asyncio.Task | None = None
        self.parking: asyncio.Future | None = None
        self.outputs: list[Any] = []
        self.wake = asyncio.Event()
        self.room = asyncio.Event()
        self.room.set()
        self.started = asyncio.Event()

    async def next_batch(self) -> list[Any] | None:
        """What the run streamed since the last call (waits for something); None once the stream ended."""
        await self.started.wait()
        while not self.outputs:
            if self.pump is None or self.pump.done():
                return None
            self.wake.clear()
            await self.wake.wait()
        batch, self.outputs = self.outputs, []
        self.room.set()
        return batch


class SenseWorker:
    """A pool worker (a Ray async actor). Built by `SensePool`; its methods are the pool's protocol."""

    def __init__(
        self,
        label: str,
        store: Any = None,
        checkpoint_options: dict | None = None,
        keep_checkpoints: bool = False,
        worker_init: Any = None,
        wakers: bytes | None = None,
        waker_options: dict | None = None,
    ) -> None:
        if worker_init is not None:  # the pool's `worker_init`: once in this process, before any run
            try:
                worker_init()
            except Exception as exc:
                raise RuntimeError(
                    f"worker_init failed on {label} (pid {os.getpid()}): {type(exc).__name__}: {exc}"
                ) from exc
        self._label = label
        self._store_spec = store
        self._store: Any = None
        self._checkpoint_options = dict(checkpoint_options or {})
        self._codec = self._checkpoint_options.get("codec")
        self._keyring = self._checkpoint_options.get("keyring")
        self._keep = keep_checkpoints
        self._workflows: OrderedDict[str, tuple[Any, Any]] = OrderedDict()
        self._loading: dict[str, asyncio.Future] = {}
        self._runs: dict[str, _Run] = {}
        self._arrivals: dict[str, asyncio.Event] = {}
        self._ended: OrderedDict[str, str] = OrderedDict()
        self._early_cancel: set[str] = set()
        self._wakers = wakers  # the pool's `wakers`, pickled: a `Waker` serves them once `start_waker` ran
        self._waker_options = dict(waker_options or {})
        self._waker: Any = None
        self._serving: asyncio.Future | None = None

    # ----- about this worker ------------------------------------------------------------------

    async def info(self) -> dict:
        """Where this worker runs: its label, process id, node, core, how many runs and workflows it holds,
        and the CPU time its process has used."""
        import ray  # type: ignore[import-not-found,unused-ignore]

        context = ray.get_runtime_context()
        return {
            "label": self._label,
            "pid": os.getpid(),
            "node_id": context.get_node_id(),
            "address": ray.util.get_node_ip_address(),
            "core": _core.IMPLEMENTATION,
            "runs": len(self._runs),
            "workflows": len(self._workflows),
            "cpu_seconds": time.process_time(),
            "waker": self._waker_info(),
        }

    async def watch(self) -> None:
        """Never returns: the pool keeps one call in flight to learn at once when this worker dies."""
        await asyncio.Event().wait()

    def _where(self) -> str:
        return f"{self._label} (pid {os.getpid()})"

    # ----- the waker: resumes the store's waiting runs (the pool's `wakers`) ---------------------------

    async def start_waker(self) -> str | None:
        """Start this worker's `Waker` on its event loop (once; the pool calls it when the worker
        starts): it serves the pool's `wakers` over the pool's checkpoint store, with the pool's codec
        and keyring. Its owner name in the leases, or None when the pool has no wakers."""
        if self._wakers is None:
            return None
        if self._waker is None:
            self._waker = Waker(
                self._checkpoint_store(),
                pickling.loads(self._wakers),
                codec=self._codec,
                keyring=self._keyring,
                owner=f"{self._label} ({socket.gethostname()}:{os.getpid()})",
                **self._waker_options,
            )
            self._serving = asyncio.ensure_future(self._waker.serve())
        return self._waker.owner

    async def stop_waker(self, timeout: float | None = None) -> bool:
        """Stop the waker: it takes no more runs; the runs it is resuming go on until they wait again
        or end, for at most `timeout` seconds (then they are left to their leases). True when it stopped."""
        waker, serving = self._waker, self._serving
        if waker is None or serving is None:
            return True
        waker.stop()
        done, _ = await asyncio.wait({serving}, timeout=timeout)
        return bool(done)

    def _waker_info(self) -> dict | None:
        waker = self._waker
        if waker is None:
            return None
        serving = self._serving
        return {
            "owner": waker.owner,
            "graphs": waker.graph_names,
            "resumed": waker.resumed,
            "failures": [(run_id, f"{type(exc).__name__}: {exc}") for run_id, exc in list(waker.failures)[-10:]],
            "serving": serving is not None and not serving.done(),
        }

    # ----- the graph, shipped once ----------------------------------------------------------------

    async def _workflow(self, key: str, box: list) -> tuple[Any, Any]:
        """The (graph, setup factory) registered under `key`, fetched from the object store on first use."""
        found = self._workflows.get(key)
        if found is not None:
            self._workflows.move_to_end(key)
            return found
        loading = self._loading.get(key)
        if loading is None:
            loading = self._loading[key] = asyncio.ensure_future(self._load_workflow(key, box[0]))
        try:
            return await asyncio.shield(loading)
        finally:
            if loading.done():
                self._loading.pop(key, None)

    async def _load_workflow(self, key: str, ref: Any) -> tuple[Any, Any]:

        graph_blob, setup_blob, fingerprint = await ref
        graph = pickling.loads(graph_blob)
        if graph_fingerprint(graph) != fingerprint:
            raise RuntimeError(
                f"the graph arrived with fingerprint {graph_fingerprint(graph)}, not {fingerprint}: "
                "its nodes' functions are not the same here (another version of their module?)"
            )
        found = self._workflows[key] = (graph, pickling.loads(setup_blob))
        while len(self._workflows) > WORKFLOWS_KEPT:
            self._workflows.popitem(last=False)
        return found

    def forget(self, key: str) -> bool:
        """Drop a registered workflow (a later run fetches it again)."""
        return self._workflows.pop(key, None) is not None

    def _checkpoint_store(self) -> Any:
        if self._store is None and self._store_spec is not None:
            spec = self._store_spec
            self._store = spec if callable(getattr(spec, "save", None)) else spec()
        return self._store

    # ----- running ------------------------------------------------------------------------------

    async def run(self, key: str, box: list, run_id: str, payload: bytes, opts: dict) -> bytes:
        """Run to the end; the pickled `RunOutcome` (what the run streamed is in its `output`)."""
        run = await self._start(key, box, run_id, payload, opts, streaming=False)
        return _pack(await run.task)

    async def run_batch(self, items: list[tuple[str, list, str, bytes, dict]]) -> list[bytes]:
        """Several runs at once (each item: `run`'s arguments); their pickled outcomes, in order, once all ended."""
        runs = [await self._start(*item, streaming=False) for item in items]
        return [_pack(outcome) for outcome in await asyncio.gather(*(run.task for run in runs))]

    async def run_streaming(self, key: str, box: list, run_id: str, payload: bytes, opts: dict):
        """A Ray streaming generator: `BATCH` + a pickled list of items, as the run streams them, then
        `OUTCOME` + the pickled outcome. Closing the generator early cancels the run."""
        run = await self._start(key, box, run_id, payload, opts, streaming=True)
        try:
            while (batch := await run.next_batch()) is not None:
                yield _pack_batch(batch)
            yield OUTCOME + _pack(await run.task)
        finally:
            if not run.task.done():
                run.cancelled = True
                run.task.cancel()

    async def _start(self, key: str, box: list, run_id: str, payload: bytes, opts: dict, streaming: bool) -> _Run:
        """Register the run and start its task, which builds it, runs it and ends with its outcome."""
        run = _Run(run_id, opts, streaming)
        self._runs[run_id] = run
        self._ended.pop(run_id, None)
        arrival = self._arrivals.pop(run_id, None)
        if arrival is not None:
            arrival.set()
        if run_id in self._early_cancel:
            self._early_cancel.discard(run_id)
            run.cancelled = True
        run.task = asyncio.ensure_future(self._lifecycle(run, key, box, payload))
        return run

    async def _lifecycle(self, run: _Run, key: str, box: list, payload: bytes) -> RunOutcome:
        try:
            try:
                if run.cancelled:
                    raise asyncio.CancelledError
                await self._prepare(run, key, box, payload)
            except asyncio.CancelledError:
                if not run.cancelled:
                    raise
                outcome = self._outcome(run, CANCELLED, None)
            except Exception as exc:  # noqa: BLE001 - the setup or the restore failed: reported in the outcome
                outcome = self._failed_start(run, exc)
            else:
                run.started.set()
                return await self._execute(run)
            run.started.set()
            await self._close_setup(run, outcome)
            return outcome
        finally:
            self._retire(run)

    def _failed_start(self, run: _Run, exc: BaseException) -> RunOutcome:
        """The outcome of a run that could not start: an error, or a lost run when a failover could not restore it."""

        status = LOST if run.opts.get("mode") == FAILOVER and isinstance(exc, DurableError) else ERROR
        outcome = self._outcome(run, status, exc)
        if status == LOST:
            outcome.extra["reason"] = (
                f"run {run.run_id!r}: its worker died and its checkpoint could not be restored: {exc}"
            )
        return outcome

    async def _prepare(self, run: _Run, key: str, box: list, payload: bytes) -> None:

        graph, factory = await self._workflow(key, box)
        run.setup = as_setup(await _settle(factory(pickling.loads(payload))))
        run.stream = run.setup.object_io if run.setup.object_io is not None else SuspendObjectStream()
        run.interp = await self._interpreter(run, graph)
        run.pump = _start_pump(run)
        tags = run.opts.get("suspend")
        if tags is not None:  # it was parked (or asked to park) on the worker that died: it parks here too
            run.parking = asyncio.ensure_future(run.stream.wait_to_suspend(*tags))
            await asyncio.sleep(0)  # the request is made before the run takes its first step

    async def _interpreter(self, run: _Run, graph: Any) -> Any:
        """A fresh interpreter, or one restored from a snapshot or from the run's checkpoint."""

        setup, opts = run.setup, run.opts
        pools: dict[str, Any] = {}
        codec = self._codec
        if codec is None:  # a codec restores the snapshot's pools; else the factory's are used
            pools = {"extra_args": setup.args, "extra_kwargs": setup.kwargs or {}}
        elif isinstance(codec, PartialPickle):  # what did not pickle comes from the factory's pools
            codec = codec.with_fresh(setup.args, setup.kwargs)
        store = self._checkpoint_store()
        policy = None if store is None else Checkpointing(store, run.run_id, **self._checkpoint_options)
        run.policy = policy
        if opts.get("resume_from") is not None:
            interp = WorkflowInterpreter.restore(
                graph, opts["resume_from"], codec=codec, object_io=run.stream, keyring=self._keyring, **pools
            )
        elif policy is not None and opts.get("mode", FRESH) != FRESH:
            try:
                interp = await policy.resume(graph, object_io=run.stream, codec=codec, **pools)
            except CheckpointNotFound:
                interp = None  # it died before its first save: nothing of it ran
            else:
                status = policy.last.status if policy.last is not None else ""
                if status in _ENDED_STATUSES[opts["mode"]]:
                    opts["ended"] = status
                _carry_caller_trace(interp, opts)  # (the checkpoint's own trace, when it has one, stays)
                return interp
        else:
            interp = None
        if interp is None:
            interp = WorkflowInterpreter(graph, run.stream, extra_args=setup.args, extra_kwargs=setup.kwargs or {})
        _carry_caller_trace(interp, opts)  # before the first save: the checkpoint carries the trace too
        if policy is not None:
            interp.checkpointing = policy
            await policy.save(interp)  # the run's first checkpoint: a failover resumes or restarts from here
        return interp

    async def _execute(self, run: _Run) -> RunOutcome:
        interp = run.interp
        exc: BaseException | None = None
        try:
            ended = run.opts.get("ended")
            if ended is None:
                await interp.run()
            status = _status_of(interp, ended)
        except asyncio.CancelledError:
            if not run.cancelled:
                raise
            status = CANCELLED
        except Exception as error:  # noqa: BLE001 - the workflow's panic: reported in the outcome
            status, exc = PANICKED, error
        return await self._conclude(run, status, exc)

    async def _conclude(self, run: _Run, status: str, exc: BaseException | None) -> RunOutcome:
        """Collect the stream, compute the result, keep the state to resume, release the setup."""
        await run.stream.set_queue_done()
        if run.pump is not None:
            await asyncio.gather(run.pump, return_exceptions=True)
        outcome = self._outcome(run, status, exc)
        if not run.streaming:
            outcome.output = run.outputs
        setup = run.setup
        if outcome.ok and setup.result is not None:
            try:
                outcome.result = await _settle(setup.result(*run.interp._ava_args_v[1:], **run.interp._ava_kwargs_v))
            except Exception as error:  # noqa: BLE001
                outcome.status, outcome.exception = ERROR, error
                outcome.traceback = _format(error)
        if status in (HALTED, PANICKED):
            outcome.snapshot = _snapshot_or_none(run.interp, self._codec, self._keyring)
        await self._close_setup(
            run, outcome
        )  # its checkpoint stays until the pool has the outcome (`forget_checkpoints`)
        return outcome

    @staticmethod
    async def _close_setup(run: _Run, outcome: RunOutcome) -> None:
        close = run.setup.close
        if close is not None:
            try:
                await _settle(close())
            except Exception as error:  # noqa: BLE001 - the run's own outcome stands
                outcome.extra["close_error"] = repr(error)

    def _outcome(self, run: _Run, status: str, exc: BaseException | None) -> RunOutcome:
        outcome = RunOutcome(run.run_id, status, exception=exc, worker=self._where())
        if exc is not None:
            outcome.traceback = _format(exc)
            if status == PANICKED:
                outcome.sense_traceback = run.interp._make_traceback()
        return outcome

    async def forget_checkpoints(self, run_ids: list[str]) -> dict[str, str]:
        """Delete the checkpoints of ended runs whose outcomes the pool has received (it asks for the
        finished and cancelled ones, unless it keeps checkpoints); what failed, by run id. Only then: a
        worker that dies after its run ended, before the outcome reached the pool, leaves the ended
        checkpoint, and the run's failover returns its result instead of running it again."""
        store = self._checkpoint_store()
        failed: dict[str, str] = {}
        for run_id in run_ids if store is not None and not self._keep else ():
            try:
                await _settle(store.delete(run_id))
            except Exception as error:  # noqa: BLE001 - the run is over; a stale checkpoint is only space
                failed[run_id] = repr(error)
        return failed

    def _retire(self, run: _Run) -> None:
        if self._runs.get(run.run_id) is run:
            del self._runs[run.run_id]
        self._ended[run.run_id] = "ended"
        while len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)

    # ----- requests about a run ---------------------------------------------------------------------

    async def _find(self, run_id: str) -> _Run:
        """The run, once it has started here; `RunEnded` when it ended or never arrives."""
        run = self._runs.get(run_id)
        if run is None and run_id not in self._ended:
            arrival = self._arrivals.setdefault(run_id, asyncio.Event())
            try:
                await asyncio.wait_for(arrival.wait(), ARRIVAL_TIMEOUT)
            except asyncio.TimeoutError:
                pass
            finally:
                if self._arrivals.get(run_id) is arrival and not arrival.is_set():
                    del self._arrivals[run_id]
            run = self._runs.get(run_id)
        if run is None:
            raise RunEnded(f"run {run_id!r} is not running on {self._where()}")
        await run.started.wait()  # set once the run is built, or failed to build
        if run.task.done() or run.interp is None:
            raise RunEnded(f"run {run_id!r} has ended")
        return run

    async def send(self, run_id: str, payload: bytes) -> None:
        """Send a value to the run's producer input (`send_to_producer`)."""
        run = await self._find(run_id)
        await run.stream.send_to_producer(pickling.loads(payload))

    async def send_done(self, run_id: str) -> None:
        """Close the run's producer input (`send_done_to_producer`)."""
        run = await self._find(run_id)
        await run.stream.send_done_to_producer()

    async def suspend(self, run_id: str, tags: tuple, timeout: float | None) -> None:
        """Ask the run to park at its next gate (`wait_to_suspend(*tags)`); returns once asked (see `parked`)."""
        run = await self._find(run_id)
        if run.parking is None or run.parking.done():
            run.parking = asyncio.ensure_future(run.stream.wait_to_suspend(*tags, timeout=timeout))
            await asyncio.sleep(0)  # the request is made now, before any later request is handled

    async def parked(self, run_id: str) -> bool:
        """True once the run parked for the request `suspend` made, False when it ended first."""
        run = await self._find(run_id)
        parking = run.parking
        if parking is None:
            return False
        await asyncio.wait({parking, run.task}, return_when=asyncio.FIRST_COMPLETED)
        if parking.done():
            parking.result()
            return True
        return False

    async def resume(self, run_id: str) -> None:
        """Let a parked run go on (and withdraw a request to park that no gate took yet)."""
        run = await self._find(run_id)
        parking, run.parking = run.parking, None
        if parking is not None and not parking.done():
            parking.cancel()
            await asyncio.gather(parking, return_exceptions=True)
        run.stream.resume()

    async def snapshot(self, run_id: str) -> bytes:
        """The run's snapshot now (`interp.snapshot(codec)`; at a gate or between nodes)."""
        run = await self._find(run_id)
        return run.interp.snapshot(self._codec, keyring=self._keyring)

    async def cancel(self, run_id: str) -> bool:
        """Cancel the run (its outcome says cancelled); False when it is not here or already ended."""
        run = self._runs.get(run_id)
        if run is None:
            if run_id not in self._ended:
                self._early_cancel.add(run_id)
            return False
        if run.cancelled or run.task.done():
            return False
        run.cancelled = True
        run.task.cancel()
        return True


def _carry_caller_trace(interp: Any, opts: dict) -> None:
    """Make the run's span a child of the caller's span (the pool took its trace context at submit),
    unless `interp` already continues a trace: a restored snapshot's, which is the caller's trace."""
    observer = _observe.current
    carrier = opts.get("trace")
    if observer is not None and carrier:
        observer.carry_trace(interp, carrier, replace=False)


def _status_of(interp: Any, ended: str | None) -> str:
    if ended == "panicked":
        raise interp.get_exception()
    return HALTED if interp._flag_bits & _core.FLAG_HLT else FINISHED


def _start_pump(run: _Run) -> asyncio.Task | None:
    """A task moving what the run sends to its stream into `run.outputs`; None when a callback takes it."""

    try:
        reader = run.stream.get_response_generator()
    except StreamStateError:
        return None  # the setup's stream hands its output to its own callback, on the worker

    async def pump() -> None:
        async for item in reader:
            run.outputs.append(item)
            run.wake.set()
            if run.streaming and len(run.outputs) >= OUTPUT_LIMIT:
                run.room.clear()
                await run.room.wait()
        run.wake.set()

    return asyncio.ensure_future(pump())


def _format(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def _snapshot_or_none(interp: Any, codec: Any, keyring: Any) -> bytes | None:

    try:
        return interp.snapshot(codec, keyring=keyring)
    except DurableError:
        return None


def _pack(outcome: RunOutcome) -> bytes:
    """The outcome pickled; what cannot travel is replaced by a stand-in and named in the outcome."""
    if outcome.exception is not None and not _travels(outcome.exception):
        outcome.exception = _stand_in(outcome.exception, outcome.traceback)
    try:
        return pickling.dumps(outcome)
    except Exception:  # noqa: BLE001 - find the part that does not travel
        pass
    if not _travels(outcome.result):
        outcome.status, outcome.exception = ERROR, NotPicklable("the run's result", _why(outcome.result))
        outcome.result = None
    if outcome.output is not None and not _travels(outcome.output):
        bad = next(item for item in outcome.output if not _travels(item))
        outcome.status, outcome.exception = ERROR, NotPicklable("an item the run streamed", _why(bad))
        outcome.output = None
    outcome.extra = {k: v for k, v in outcome.extra.items() if _travels(v)}
    return pickling.dumps(outcome)


def _pack_batch(batch: list[Any]) -> bytes:
    try:
        return BATCH + pickling.dumps(batch)
    except Exception:  # noqa: BLE001
        items = [
            item if _travels(item) else Unshippable(NotPicklable("an item the run streamed", _why(item)))
            for item in batch
        ]
        return BATCH + pickling.dumps(items)


def _travels(value: Any) -> bool:
    """Whether `value` survives a pickle round trip (an exception class may pickle but not unpickle)."""
    try:
        pickling.loads(pickling.dumps(value))
    except Exception:  # noqa: BLE001
        return False
    return True


def _why(value: Any) -> str:
    try:
        pickling.loads(pickling.dumps(value))
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    return "unknown"


def _stand_in(exc: BaseException, text: str) -> BaseException:
    """A `RestoredPanic` for an exception that cannot be pickled (or unpickled) as itself."""

    args = tuple(a for a in exc.args if isinstance(a, (str, int, float, bool, type(None))))
    return RestoredPanic(type_name(type(exc)), str(exc), args, text)


__all__ = ["ARRIVAL_TIMEOUT", "OUTPUT_LIMIT", "SenseWorker"]
