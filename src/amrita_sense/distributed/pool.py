"""The driver side: `SensePool` (the workers), `RemoteWorkflow` (a graph shipped to them), `RunHandle`.

Every run has a driver task on the pool's loop (`_drive`). It waits for a free
slot on a live worker, starts the run there and waits for its outcome; when Ray
reports the worker dead (`RayActorError`: the process was killed, crashed or
its node went away), the pool replaces the worker and the task starts the run
again on a live one: from its last checkpoint when the pool has a checkpoint
store, from the beginning with `restart_lost=True`, or not at all (the run is
lost: `WorkerDied`). A run is started at most `max_attempts` times.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import os
import threading
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any

import ray  # type: ignore[import-not-found,unused-ignore]
from ray.exceptions import RayActorError, RayTaskError  # type: ignore[import-not-found,unused-ignore]

from amrita_sense.distributed import pickling
from amrita_sense.distributed._bridge import PoolLoop, Reply, wait_async, wait_for
from amrita_sense.distributed.errors import NotPicklable, PoolClosed, RunEnded
from amrita_sense.distributed.fanout import amap_runs, map_runs
from amrita_sense.distributed.outcome import CANCELLED, ERROR, FINISHED, LOST, RunOutcome, Unshippable, default_setup
from amrita_sense.distributed.worker import BATCH, CONTINUE, FAILOVER, FRESH, SenseWorker
from amrita_sense.durable import Checkpointing, MemoryCheckpointStore, SQLiteCheckpointStore, Waker
from amrita_sense.durable.snapshots.codecs import PartialPickle
from amrita_sense.durable.snapshots.fingerprint import graph_fingerprint
from amrita_sense.durable.snapshots.signing import Keyring
from amrita_sense.logging import logger
from amrita_sense.node.abc_base import is_rendered_compose
from amrita_sense.runtime import observe as _observe

STREAM_BUFFER = 16
"""Batches of a streamed run the driver holds before it stops reading (the worker then waits)."""
CONTROL_SLOTS = 16
"""Actor concurrency kept beyond the run slots for requests (send, suspend, cancel...)."""
WAKER_STOP_SECONDS = 10.0
"""At `close`, how long the workers' wakers may take to finish the runs they are resuming (then
the workers stop anyway: those runs are left to their leases, and another waker takes them)."""
_WAKER_MANAGED = ("store", "graphs", "codec", "keyring", "owner")


class _Worker:
    """One worker slot of the pool: its current actor (replaced when it dies) and the runs it holds."""

    __slots__ = ("active", "actor", "alive", "deaths", "generation", "index", "start_error", "watcher")

    def __init__(self, index: int) -> None:
        self.index = index
        self.generation = -1
        self.actor: Any = None
        self.alive = False
        self.active: dict[str, _RunState] = {}
        self.watcher: asyncio.Future | None = None
        self.deaths = 0
        self.start_error: BaseException | None = None  # its actor failed to start (worker_init raised)

    @property
    def label(self) -> str:
        return f"worker {self.index}.{self.generation}"


class _Buffer:
    """What a streamed run produced and its caller has not read yet (bounded: the reader paces the run)."""

    def __init__(self) -> None:
        self._batches: deque[list] = deque()
        self._ready = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._closed = False

    async def put(self, batch: list) -> None:
        while len(self._batches) >= STREAM_BUFFER and not self._closed:
            self._room.clear()
            await self._room.wait()
        self._batches.append(batch)
        self._ready.set()

    def close(self) -> None:
        self._closed = True
        self._ready.set()
        self._room.set()

    async def get(self) -> list | None:
        """The next batch; None once the run ended and everything was read."""
        while not self._batches:
            if self._closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        self._room.set()
        return self._batches.popleft()


class _RunState:
    """The driver's record of one run (touched on the pool's loop only, except `future`)."""

    __slots__ = (
        "attempts",
        "buffer",
        "cancelled",
        "ended",
        "future",
        "generation",
        "mode",
        "payload",
        "placed",
        "requests",
        "resume_from",
        "run_id",
        "suspended",
        "trace",
        "waiter",
        "worker",
        "workflow",
    )

    def __init__(
        self,
        workflow: RemoteWorkflow,
        run_id: str,
        payload: bytes,
        streaming: bool,
        mode: str,
        resume_from: bytes | None,
        trace: dict[str, str] | None = None,
    ) -> None:
        self.workflow = workflow
        self.run_id = run_id
        self.payload = payload
        self.mode = mode
        self.resume_from = resume_from
        self.trace = trace  # the caller's trace context (telemetry's carrier), for the run's span on the worker
        self.future: concurrent.futures.Future[RunOutcome] = concurrent.futures.Future()
        self.attempts = 0
        self.worker: _Worker | None = None
        self.generation = -1
        self.placed = asyncio.Event()
        self.ended = asyncio.Event()
        self.cancelled = False
        self.suspended: tuple | None = None
        self.buffer = _Buffer() if streaming else None
        self.requests = asyncio.Lock()  # requests reach the worker one after the other, in the order made
        self.waiter: tuple | None = None  # (the runs, their future) while they wait for a slot


def _failed_to_start(exc: BaseException) -> bool:
    """Whether Ray's actor error says the actor's `__init__` raised (its `worker_init`), not that it died."""
    return bool(getattr(exc, "actor_init_failed", False))


def _last_line(exc: BaseException | None) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else repr(exc)


def _checked_run_id(run_id: Any) -> str:
    if run_id is None:
        return uuid.uuid4().hex
    if not isinstance(run_id, str) or not run_id or len(run_id) > 512:
        raise ValueError(f"a run id is a non-empty string of at most 512 characters, not {run_id!r:.60}")
    return run_id


def _shippable_store(store: Any) -> Any:
    """What the workers get to open the checkpoint store: a picklable store, or a factory of one."""

    if store is None:
        return None
    if isinstance(store, MemoryCheckpointStore):
        raise ValueError(
            "a MemoryCheckpointStore lives in one process; workers need a store they all reach "
            "(SQLiteCheckpointStore on a shared path, or a factory of a networked store)"
        )
    if isinstance(store, SQLiteCheckpointStore):
        return functools.partial(
            SQLiteCheckpointStore, os.path.abspath(store.path), timeout=store._timeout, synchronous=store._synchronous
        )
    if all(callable(getattr(store, name, None)) for name in ("save", "load", "list", "delete")):
        pickling.dumps_checked(store, "the checkpoint store")
        return store
    if callable(store):
        pickling.dumps_checked(store, "the checkpoint store factory")
        return store
    raise TypeError(
        f"checkpoint_store takes a CheckpointStore or a picklable factory of one, not {type(store).__name__}"
    )


def _checked_wakers(wakers: Any, options: Any, store: Any, checkpoint_options: dict) -> tuple[bytes, dict]:
    """The pool's `wakers` (pickled, for the workers) and `waker_options`, checked here as a `Waker` checks them."""

    if store is None:
        raise TypeError(
            "SensePool(wakers=...) needs a checkpoint_store: the workers' wakers resume the runs that wait "
            "in it (an SQLiteCheckpointStore on a path every worker reaches, or a factory of a networked store)"
        )
    if not isinstance(wakers, Mapping):
        raise TypeError(
            f"wakers is a mapping of graph name -> rendered graph or zero-argument factory, not {type(wakers).__name__}"
        )
    if options is not None and not isinstance(options, Mapping):
        raise TypeError(f"waker_options is a mapping of Waker options, not {type(options).__name__}")
    options = dict(options or {})
    managed = sorted(set(options) & set(_WAKER_MANAGED))
    if managed:
        raise TypeError(
            f"waker_options {managed} are the pool's: the wakers use its checkpoint store, codec and keyring, "
            "and each worker's waker has an owner name of its own"
        )
    # the same checks as on the workers, here: bad names, graphs or options fail at construction
    # (a store object is checked as is: it must keep waits; a factory's store is checked on the workers)
    Waker(
        store if callable(getattr(store, "save", None)) else MemoryCheckpointStore(),
        wakers,
        codec=checkpoint_options.get("codec"),
        keyring=checkpoint_options.get("keyring"),
        **options,
    )
    blob = pickling.dumps_checked(dict(wakers), "the wakers' graphs (factories must be importable functions)")
    pickling.dumps_checked(options, "waker_options")
    return blob, options


def _warn_if_unschedulable(workers: int, options: dict) -> None:
    """Say so when the cluster has fewer CPUs than the workers ask for (Ray would leave some pending)."""

    wanted = workers * float(options.get("num_cpus") or 0)
    have = float(ray.cluster_resources().get("CPU", 0))
    if wanted > have:
        logger.warning(
            f"SensePool: {workers} workers of {options.get('num_cpus')} CPU need {wanted:g} CPUs, the Ray cluster has "
            f"{have:g}: some workers wait until CPUs are free (pass actor_options={{'num_cpus': ...}})"
        )


def _check_checkpoint_options(options: dict) -> None:

    unknown = set(options) - {"every_nodes", "every_seconds", "at_suspend", "on_panic", "codec", "history"}
    if unknown:
        raise TypeError(f"unknown checkpoint options: {sorted(unknown)}")
    Checkpointing(MemoryCheckpointStore(), "check", **options)  # raises for bad values
    if "codec" in options:
        pickling.dumps_checked(options["codec"], "the checkpoint codec")


class SensePool:
    """A pool of Ray actors, each running many workflow runs concurrently on its own event loop.

    Args:
        workers: how many worker actors (default: the cluster's CPUs).
        runs_per_worker: runs one worker holds at a time (more wait for a free slot, in order).
        checkpoint_store: where runs keep checkpoints, so that a run whose worker dies resumes on
            another: an `SQLiteCheckpointStore` on a path every worker reaches (one machine, or a
            shared file system), any picklable `CheckpointStore`, or a picklable factory that opens
            one on each worker (a networked store across machines). None: no checkpoints.
        checkpoint_options: `Checkpointing` options (every_nodes, every_seconds, at_suspend,
            on_panic, codec, history). With a store the codec defaults to `PartialPickle()`: checkpoints
            keep the injection pools, and a run resumed on another worker gets them back as its
            nodes left them, except the objects that do not pickle (clients, connections), which
            it takes from the setup factory's fresh pools (logged once per type). `"codec": pickle`
            insists that everything pickles (else the run ends with a `CheckpointError` at its
            first checkpoint); `"codec": None` keeps the engine state only: a resumed run then gets
            the factory's fresh pools, and what the nodes wrote into them is lost.
        keyring: signs the pool's checkpoints and snapshots and checks them before a worker decodes
            one (`amrita_sense.durable.Keyring`). With a store and no keyring, the pool makes a key of
            its own and hands it to its workers, so that failover only ever decodes what its workers
            signed; to resume the pool's runs from another process, give the pool (and that process)
            the same keyring (`Keyring.from_env`).
        keep_checkpoints: keep a run's checkpoint after it finished or was cancelled (by default it
            is deleted once its outcome has reached the pool, so that a worker dying in between leaves
            the ended run to its failover, which returns the result; halted and panicked runs always
            keep theirs).
        max_attempts: how many times a run may be started (its first start included) before a
            worker's death loses it.
        restart_lost: without a checkpoint store, start a run whose worker died again from the
            beginning (its nodes then run twice: make them idempotent); by default it is lost.
        actor_options: extra Ray actor options for the workers (`num_cpus`, `resources`,
            `runtime_env`, `scheduling_strategy`...); each worker takes one CPU by default.
        name: names the pool's thread and the workers' labels.
        worker_init: a picklable callable, called with no arguments once in each worker's process
            when the worker starts, before it takes any run (its return value is ignored): set up
            what the process needs, e.g. `amrita_sense.telemetry.instrument(...)` with the
            worker's exporter. A replacement worker calls it too. When it raises, that worker does
            not start and is not replaced (the error is logged with its traceback); once no worker
            is left, the waiting runs and every later run end with status ``error`` and a
            `RuntimeError` naming it (chained to Ray's error, which holds the traceback).
        wakers: graph name -> rendered graph or zero-argument factory (a module-level function:
            it is pickled to the workers): every worker runs an `amrita_sense.durable.Waker` of
            these graphs on its own event loop, over the pool's checkpoint store, with the pool's
            codec and keyring, so the runs that wait in the store (`WAIT`, `SLEEP`, started by
            any process with `Checkpointing(store, run_id, graph=name, codec=..., keyring=...)`:
            the pool's codec and keyring) are resumed by whichever worker claims them first,
            exactly once (leases and version fencing, as between any two wakers). Needs a
            `checkpoint_store` (`TypeError` otherwise). A worker that replaces a dead one starts
            its own waker; `close` stops them (see `wakers_resumed`, and ``waker`` in `workers()`).
        waker_options: more `Waker` options for the workers' wakers (`lease_seconds`,
            `poll_interval`, `concurrency`, `migrate`, `allow_unsigned`, `restore_kwargs`,
            `policy_options`); picklable. The store, codec, keyring and owner are the pool's.

    Telemetry: when `amrita_sense.telemetry` is instrumented in the calling process, each run
    carries the caller's trace context (taken at `submit`) to its worker; a worker instrumented
    through `worker_init` makes the run's span a child of the caller's span, and a run resumed on
    another worker after a failure continues the same trace.

    Ray must be initialised (`ray.init(...)`); if it is not, the pool calls `ray.init()`, which
    starts a local instance with every CPU of this machine.
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        runs_per_worker: int = 64,
        checkpoint_store: Any = None,
        checkpoint_options: dict | None = None,
        keep_checkpoints: bool = False,
        max_attempts: int = 3,
        restart_lost: bool = False,
        actor_options: dict | None = None,
        name: str = "sense-pool",
        worker_init: Callable[[], Any] | None = None,
        keyring: Any = None,
        wakers: Mapping[str, Any] | None = None,
        waker_options: Mapping[str, Any] | None = None,
    ) -> None:
        if worker_init is not None:
            if not callable(worker_init):
                raise TypeError(f"worker_init must be a callable taking no arguments, not {type(worker_init).__name__}")
            pickling.dumps_checked(worker_init, "worker_init")
        self._worker_init = worker_init
        if not ray.is_initialized():
            ray.init()
        if workers is None:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        for label, value, low in (
            ("workers", workers, 1),
            ("runs_per_worker", runs_per_worker, 1),
            ("max_attempts", max_attempts, 1),
        ):
            if type(value) is not int or value < low:
                raise ValueError(f"{label} must be an int >= {low}, not {value!r}")
        self._checkpoint_options = dict(checkpoint_options or {})
        if checkpoint_store is not None:  # a resumed run gets its own pools back, not a fresh setup's
            self._checkpoint_options.setdefault("codec", PartialPickle())
        _check_checkpoint_options(self._checkpoint_options)
        if keyring is None and checkpoint_store is not None:
            keyring = Keyring.generate(f"{name}-{os.getpid()}")  # this pool's own: its workers get it
        if keyring is not None:
            self._checkpoint_options["keyring"] = keyring
        self.keyring = keyring
        self._store = _shippable_store(checkpoint_store)
        if callable(getattr(checkpoint_store, "save", None)):  # a store (not a factory): checked here
            Checkpointing(checkpoint_store, "check", **self._checkpoint_options)
        self._wakers: bytes | None = None
        self._waker_options: dict = {}
        if wakers is not None:
            self._wakers, self._waker_options = _checked_wakers(
                wakers, waker_options, checkpoint_store, self._checkpoint_options
            )
        elif waker_options is not None:
            raise TypeError("waker_options without wakers: pass wakers={graph name: graph or factory, ...}")
        self._keep = bool(keep_checkpoints)
        self.runs_per_worker = runs_per_worker
        self.max_attempts = max_attempts
        self.restart_lost = bool(restart_lost)
        self.name = name
        self._actor_options = {"num_cpus": 1, **(actor_options or {})}
        self._actor_options.update(max_concurrency=2 * runs_per_worker + CONTROL_SLOTS, max_restarts=0)
        _warn_if_unschedulable(workers, self._actor_options)
        self._actor_class = ray.remote(SenseWorker)
        self._closing = False  # no new runs
        self._closed = False  # the workers are stopping
        self._lock = threading.Lock()
        self._runs: dict[str, _RunState] = {}
        self._workflows: dict[tuple[int, int], RemoteWorkflow] = {}
        self._bridge = PoolLoop(name)
        self._waiting: deque[tuple[list[_RunState], asyncio.Future]] = deque()  # runs waiting for slots, in order
        self._workers = [_Worker(i) for i in range(workers)]
        wait_for(self._bridge.submit(self._start_workers()), None, self._bridge)

    # ----- workers ----------------------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        """How many runs the pool holds at once (workers x runs_per_worker)."""
        return len(self._workers) * self.runs_per_worker

    async def _start_workers(self) -> None:
        for worker in self._workers:
            self._spawn(worker)

    def _spawn(self, worker: _Worker) -> None:
        """Give `worker` a new actor (and a watcher that learns when it dies)."""
        worker.generation += 1
        label = f"{self.name} {worker.label}"
        worker.actor = self._actor_class.options(**self._actor_options).remote(
            label,
            self._store,
            self._checkpoint_options,
            self._keep,
            self._worker_init,
            self._wakers,
            self._waker_options,
        )
        worker.alive = True
        worker.watcher = asyncio.ensure_future(self._watch(worker, worker.generation))

    async def _watch(self, worker: _Worker, generation: int) -> None:
        try:
            if self._wakers is not None:  # every actor (a replacement too) serves the wakers
                await self._start_waker(worker)
            await worker.actor.watch.remote()
        except RayActorError as exc:
            await self._worker_died(worker, generation, exc)

    async def _worker_died(self, worker: _Worker, generation: int, exc: BaseException) -> None:
        """Replace `worker`'s actor if it is still the one that died (idempotent per generation)."""
        if worker.generation != generation or not worker.alive or self._closed:
            return
        worker.alive = False
        try:
            ray.kill(worker.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - it is gone already
            pass
        if _failed_to_start(exc):  # worker_init raised: a new actor would fail the same way
            worker.start_error = exc
            logger.error(f"SensePool {self.name!r}: {worker.label} failed to start and is not replaced: {exc}")
            self._dispatch()  # ends the waiting runs when no worker is left
            return
        worker.deaths += 1
        self._spawn(worker)
        self._dispatch()

    async def _start_waker(self, worker: _Worker) -> None:
        try:
            await worker.actor.start_waker.remote()
        except RayTaskError as exc:  # e.g. the store does not open there: the worker still runs runs
            logger.error(f"SensePool {self.name!r}: the waker of {worker.label} did not start: {_last_line(exc)}")

    def _no_workers_left(self) -> BaseException | None:
        """The error the runs get when every worker failed to start (None while one is live)."""
        if any(w.alive or w.start_error is None for w in self._workers):
            return None
        first = self._workers[0]
        error = RuntimeError(
            f"SensePool {self.name!r} has no worker: every worker failed to start (worker_init raised); "
            f"{first.label}: {_last_line(first.start_error)}"
        )
        error.__cause__ = first.start_error
        return error

    def workers(self, timeout: float | None = 60.0) -> list[dict]:
        """What each worker says about itself (label, pid, node, core, runs...), plus its deaths so far."""
        return wait_for(self._bridge.submit(self._worker_infos()), timeout, self._bridge)

    def wakers_resumed(self, timeout: float | None = 60.0) -> int:
        """How many runs the live workers' wakers resumed so far (a replaced worker's count is gone
        with it; each resume of a run counts: a run woken at a WAIT and then at a SLEEP counts twice)."""
        return sum((info.get("waker") or {}).get("resumed", 0) for info in self.workers(timeout) if "error" not in info)

    async def _worker_infos(self) -> list[dict]:
        infos = []
        for worker in self._workers:
            try:
                info = await worker.actor.info.remote()
            except RayActorError as exc:
                info = {"label": worker.label, "error": repr(exc)}
            infos.append({**info, "index": worker.index, "generation": worker.generation, "deaths": worker.deaths})
        return infos

    async def _acquire(self, states: list[_RunState]) -> tuple[_Worker, list[_RunState]]:
        """A live worker with room for the runs of `states` not cancelled (the least busy such worker),
        and those runs, now placed on it. Runs get slots first come, first served; `CancelledError`
        when the pool closes or every run of `states` was cancelled while waiting."""
        waiter = asyncio.get_running_loop().create_future()
        entry = (states, waiter)
        self._waiting.append(entry)
        for state in states:
            state.waiter = entry
        self._dispatch()
        try:
            return await waiter
        finally:
            for state in states:
                state.waiter = None

    def _dispatch(self) -> None:
        """Give free slots to the waiting runs, in order (a batch that does not fit yet waits at the head)."""
        while self._waiting:
            states, waiter = self._waiting[0]
            live = [state for state in states if not state.cancelled]
            if waiter.done() or self._closed or not live:
                self._waiting.popleft()
                if not waiter.done():
                    waiter.cancel()
                continue
            free = [w for w in self._workers if w.alive and len(w.active) + len(live) <= self.runs_per_worker]
            if not free:
                error = self._no_workers_left()
                if error is None:
                    return
                self._waiting.popleft()
                waiter.set_exception(error)
                continue
            self._waiting.popleft()
            worker = min(free, key=lambda w: len(w.active))
            for state in live:
                worker.active[state.run_id] = state
                state.worker, state.generation = worker, worker.generation
                state.attempts += 1
                state.placed.set()
            waiter.set_result((worker, live))

    def _release(self, worker: _Worker, states: list[_RunState]) -> None:
        for state in states:
            state.placed.clear()
            if worker.active.get(state.run_id) is state:
                del worker.active[state.run_id]
        self._dispatch()

    # ----- workflows and runs -----------------------------------------------------------------------

    def workflow(self, graph: Any, setup: Any = None) -> RemoteWorkflow:
        """The rendered `graph` made ready to run on the workers (pickled and checked once, here).

        `setup` is a picklable callable taking a run's input and returning a `RunSetup` (or a tuple of
        extra_args, a dict of extra_kwargs, or None); it runs on the worker for every run. Without
        one, the input is the run's only extra argument and the result is that object after the run.
        Raises `NotPicklable` naming the node (and its part) that cannot travel.
        """
        key = (id(graph), id(setup))
        with self._lock:
            found = self._workflows.get(key)
        if found is not None and found.graph is graph and found.setup is setup:
            return found
        made = RemoteWorkflow(self, graph, setup)
        with self._lock:
            self._workflows[key] = made
        return made

    def submit(self, graph: Any, value: Any = None, *, setup: Any = None, **options: Any) -> RunHandle:
        """`pool.workflow(graph, setup).submit(value, **options)`."""
        return self._as_workflow(graph, setup).submit(value, **options)

    def map(self, graph: Any, inputs: Iterable[Any], *, setup: Any = None, **options: Any) -> Iterator[Any]:
        """`pool.workflow(graph, setup).map(inputs, **options)`."""
        return self._as_workflow(graph, setup).map(inputs, **options)

    def amap(self, graph: Any, inputs: Iterable[Any], *, setup: Any = None, **options: Any) -> AsyncIterator[Any]:
        """`pool.workflow(graph, setup).amap(inputs, **options)`."""
        return self._as_workflow(graph, setup).amap(inputs, **options)

    def _as_workflow(self, graph: Any, setup: Any) -> RemoteWorkflow:
        if isinstance(graph, RemoteWorkflow):
            if setup is not None:
                raise TypeError("a RemoteWorkflow already has its setup factory")
            return graph
        return self.workflow(graph, setup)

    def _launch(
        self,
        workflow: RemoteWorkflow,
        values: list,
        run_ids: list,
        stream: bool,
        resume: bool,
        resume_from: bytes | None,
    ) -> list[RunHandle]:
        """Register one run per value and start them (together, on one worker, when there are several)."""
        if resume and resume_from is not None:
            raise ValueError("resume=True continues the run's checkpoint; resume_from gives a snapshot: not both")
        if resume and self._store is None:
            raise ValueError("resume=True needs a pool with a checkpoint_store")
        if resume_from is not None and not isinstance(resume_from, (bytes, bytearray)):
            raise TypeError("resume_from takes snapshot bytes (RunOutcome.snapshot, RunHandle.snapshot())")
        mode, snapshot = CONTINUE if resume else FRESH, None if resume_from is None else bytes(resume_from)
        observer = _observe.current  # the caller's thread and context: its current span is the runs' parent
        trace = None if observer is None else observer.caller_carrier()
        states = [
            _RunState(
                workflow,
                _checked_run_id(run_id),
                pickling.dumps_checked(value, "the run's input"),
                stream,
                mode,
                snapshot,
                trace,
            )
            for value, run_id in zip(values, run_ids)
        ]
        with self._lock:
            if self._closing:
                raise PoolClosed("the pool is closed")
            taken = [s.run_id for s in states if s.run_id in self._runs]  # (a batch's ids are new ones)
            if taken:
                raise ValueError(f"a run with id {taken[0]!r} is already in this pool")
            self._runs.update((s.run_id, s) for s in states)
        if len(states) == 1:
            self._bridge.call(self._begin, states[0])
        elif states:
            self._bridge.call(self._begin_batch, states)
        return [RunHandle(self, state) for state in states]

    def _begin(self, state: _RunState) -> None:
        asyncio.ensure_future(self._drive(state))

    def _begin_batch(self, states: list[_RunState]) -> None:
        asyncio.ensure_future(self._drive_batch(states))

    def _finish(self, state: _RunState, outcome: RunOutcome) -> None:
        if state.ended.is_set():
            return  # a run cancelled while it waited is finished at once, and again when its task ends
        outcome.attempts = state.attempts
        state.ended.set()
        if state.buffer is not None:
            state.buffer.close()
        with self._lock:
            self._runs.pop(state.run_id, None)
        state.future.set_result(outcome)

    async def _drive(self, state: _RunState, mode: str | None = None) -> None:
        """Run `state` to an outcome, across worker deaths; always resolves its future."""
        try:
            outcome = await self._attempts(state, state.mode if mode is None else mode)
        except asyncio.CancelledError:
            outcome = self._cancelled(state)
        except Exception as exc:  # noqa: BLE001 - a failure of the pool itself, reported on the run
            outcome = RunOutcome(state.run_id, ERROR, exception=exc)
        self._finish(state, outcome)

    def _cancelled(self, state: _RunState) -> RunOutcome:
        reason = "the pool was closed" if self._closed else "cancelled"
        return RunOutcome(state.run_id, CANCELLED, extra={"reason": reason})

    async def _attempts(self, state: _RunState, mode: str) -> RunOutcome:
        while True:
            worker, _ = await self._acquire([state])
            generation = worker.generation
            try:
                outcome = await self._run_on(worker, state, mode)
            except RayActorError as exc:
                await self._worker_died(worker, generation, exc)
                if _failed_to_start(exc):
                    state.attempts -= 1  # it never started there: it waits for another worker as it was
                    continue
                lost = self._lost(state, worker, exc)
                if lost is not None:
                    return lost
                mode = self._failover_mode(mode)
                continue
            finally:
                self._release(worker, [state])
            await self._forget_checkpoints(worker, [outcome])
            return outcome

    def _failover_mode(self, mode: str) -> str:
        """How a run whose worker died starts again: from its checkpoint, or as before (restart_lost)."""
        return FAILOVER if self._store is not None else mode

    async def _drive_batch(self, states: list[_RunState]) -> None:
        """Start `states` on one worker with one call (their outcomes come back together); a run whose
        worker dies then goes on alone (`_drive`)."""
        try:
            worker, live = await self._acquire(states)
        except asyncio.CancelledError:
            live = []
        except Exception as exc:  # noqa: BLE001 - no worker could start: reported on every run
            for state in states:
                self._finish(state, RunOutcome(state.run_id, ERROR, exception=exc))
            return
        for state in states:
            if state not in live:
                self._finish(state, self._cancelled(state))
        if not live:
            return
        generation = worker.generation
        try:
            datas = await worker.actor.run_batch.remote([self._call_args(state, state.mode) for state in live])
        except RayActorError as exc:
            self._release(worker, live)
            await self._worker_died(worker, generation, exc)
            for state in live:
                if _failed_to_start(exc):
                    state.attempts -= 1  # it never started there
                    asyncio.ensure_future(self._drive(state, state.mode))
                    continue
                lost = self._lost(state, worker, exc)
                if lost is not None:
                    self._finish(state, lost)
                else:
                    asyncio.ensure_future(self._drive(state, self._failover_mode(state.mode)))
            return
        except Exception as exc:  # noqa: BLE001 - the worker's method failed: reported on every run
            datas = [self._method_failed(worker, state, exc) for state in live]
        self._release(worker, live)
        outcomes = [
            data if isinstance(data, RunOutcome) else self._unpack(worker, state, data)
            for state, data in zip(live, datas)
        ]
        await self._forget_checkpoints(worker, outcomes)
        for state, outcome in zip(live, outcomes):
            self._finish(state, outcome)

    async def _forget_checkpoints(self, worker: _Worker, outcomes: list[RunOutcome]) -> None:
        """With the outcomes here, the checkpoints of the finished and cancelled runs among them deleted
        (by a worker: the store may only open there). A failure is noted on the outcome: the checkpoint
        stays, which costs only space."""
        ended = [outcome.run_id for outcome in outcomes if outcome.status in (FINISHED, CANCELLED)]
        if self._store is None or self._keep or not ended:
            return
        try:
            failed = await worker.actor.forget_checkpoints.remote(ended)
        except Exception as exc:  # noqa: BLE001 - e.g. the worker died just now
            failed = dict.fromkeys(ended, repr(exc))
        for outcome in outcomes:
            if outcome.run_id in failed:
                outcome.extra["cleanup_error"] = failed[outcome.run_id]

    def _call_args(self, state: _RunState, mode: str) -> tuple:
        workflow = state.workflow
        opts = {
            "mode": mode,
            "suspend": state.suspended,
            "resume_from": None if mode == FAILOVER else state.resume_from,
            "trace": state.trace,
        }
        return workflow.key, [workflow.ref], state.run_id, state.payload, opts

    async def _run_on(self, worker: _Worker, state: _RunState, mode: str) -> RunOutcome:
        args = self._call_args(state, mode)
        try:
            if state.buffer is None:
                data = await worker.actor.run.remote(*args)
            else:
                data = await self._read_stream(
                    worker.actor.run_streaming.options(
                        num_returns="streaming", _generator_backpressure_num_objects=STREAM_BUFFER
                    ).remote(*args),
                    state.buffer,
                )
        except RayTaskError as exc:
            return self._method_failed(worker, state, exc)
        return self._unpack(worker, state, data)

    def _method_failed(self, worker: _Worker, state: _RunState, exc: BaseException) -> RunOutcome:
        """The outcome when the worker's method itself failed (a BaseException from a node, a bug)."""
        cause = getattr(exc, "cause", None) or exc
        return RunOutcome(
            state.run_id, ERROR, exception=cause, traceback=str(exc), worker=f"{self.name} {worker.label}"
        )

    def _unpack(self, worker: _Worker, state: _RunState, data: bytes) -> RunOutcome:
        try:
            return pickling.loads(data)
        except Exception as exc:  # noqa: BLE001 - e.g. the result's class is not importable here
            return RunOutcome(
                state.run_id,
                ERROR,
                exception=exc,
                worker=f"{self.name} {worker.label}",
                extra={"reason": "the outcome could not be unpickled on the driver"},
            )

    @staticmethod
    async def _read_stream(generator: Any, buffer: _Buffer) -> bytes:
        async for ref in generator:
            data = await ref
            if data[:1] != BATCH:
                return data[1:]
            await buffer.put(pickling.loads(data[1:]))
        raise RuntimeError("the worker's stream ended without an outcome")

    def _lost(self, state: _RunState, worker: _Worker, exc: BaseException) -> RunOutcome | None:
        """The outcome of a run whose worker died, or None when it goes on elsewhere."""
        if state.cancelled:
            return RunOutcome(state.run_id, CANCELLED)
        if state.attempts >= self.max_attempts:
            reason = f"its worker died {state.attempts} times (max_attempts={self.max_attempts})"
        elif self._store is None and not self.restart_lost:
            reason = (
                "its worker died and the pool keeps no checkpoints (pass checkpoint_store=..., or restart_lost=True)"
            )
        else:
            return None
        return RunOutcome(
            state.run_id,
            LOST,
            exception=exc,
            worker=f"{self.name} {worker.label}",
            extra={"reason": f"run {state.run_id!r} was lost: {reason}"},
        )

    # ----- requests to a running run ----------------------------------------------------------------

    def _request(self, state: _RunState, method: str, *args: Any) -> Reply:
        return Reply(self._bridge.submit(self._ordered(state, method, *args)), self._bridge)

    async def _ordered(self, state: _RunState, method: str, *args: Any) -> Any:
        async with state.requests:
            return await self._deliver(state, method, *args)

    async def _deliver(self, state: _RunState, method: str, *args: Any) -> Any:
        """Call `method` of the run's current worker once the run is placed; again after a failover."""
        while True:
            await self._placed(state)
            worker, generation = state.worker, state.generation
            assert worker is not None  # placed runs have a worker
            try:
                return await getattr(worker.actor, method).remote(state.run_id, *args)
            except RayActorError as exc:
                await self._worker_died(worker, generation, exc)
                while state.placed.is_set() and state.generation == generation and not state.ended.is_set():
                    await asyncio.sleep(0.01)  # until the driver task moved the run on
            except RayTaskError as exc:
                raise (exc.cause if exc.cause is not None else exc) from None

    @staticmethod
    async def _placed(state: _RunState) -> None:
        """Until the run is on a worker; `RunEnded` once it has ended."""
        if not state.placed.is_set() and not state.ended.is_set():
            waits = [asyncio.ensure_future(state.placed.wait()), asyncio.ensure_future(state.ended.wait())]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()
        if state.ended.is_set():
            raise RunEnded(f"run {state.run_id!r} has ended")

    async def _cancel(self, state: _RunState) -> bool:
        if state.ended.is_set() or state.cancelled:
            return False
        state.cancelled = True
        if not state.placed.is_set():  # waiting for a slot (or between two attempts): it ends now
            self._finish(state, self._cancelled(state))
            if state.waiter is not None:
                states, waiter = state.waiter
                if all(s.cancelled for s in states):
                    waiter.cancel()  # its driver task ends now; the entry is dropped when its turn comes
            return True
        try:
            await self._deliver(state, "cancel")
        except RunEnded:
            return False
        return True

    async def _suspend(self, state: _RunState, tags: tuple, timeout: float | None) -> bool:
        async with state.requests:
            state.suspended = tags  # a failover asks the new worker again
            try:
                await self._deliver(state, "suspend", tags, timeout)
            except BaseException:
                state.suspended = None
                raise
        try:
            return await self._deliver(state, "parked")
        except RunEnded:
            return False

    async def _resume(self, state: _RunState) -> None:
        async with state.requests:
            state.suspended = None
            await self._deliver(state, "resume")

    # ----- closing ----------------------------------------------------------------------------------

    def close(self, *, wait: bool = True, timeout: float | None = None) -> None:
        """Stop the pool: wait for the runs in it to end (with `wait`), or cancel them; then stop the workers.

        After `timeout` seconds of waiting the remaining runs are cancelled. Idempotent.
        """
        if not self._bridge.thread.is_alive():
            return
        try:
            wait_for(self._bridge.submit(self._shutdown(wait, timeout)), None, self._bridge)
        finally:
            self._bridge.stop()

    async def _shutdown(self, wait: bool, timeout: float | None) -> None:
        with self._lock:
            self._closing = True
            states = list(self._runs.values())
        futures = [asyncio.wrap_future(s.future) for s in states]
        if wait and futures:
            await asyncio.wait(futures, timeout=timeout)
        with self._lock:
            self._closed = True
        for state in states:
            state.cancelled = True
        if self._wakers is not None:
            await self._stop_wakers()
        for worker in self._workers:
            if worker.watcher is not None:
                worker.watcher.cancel()
            try:
                ray.kill(worker.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
            worker.alive = False
        self._dispatch()
        if futures:
            await asyncio.wait(futures, timeout=30)
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:
            task.cancel()  # requests still in flight (their Replies raise CancelledError)
        await asyncio.gather(*others, return_exceptions=True)

    async def _stop_wakers(self) -> None:
        """Stop the workers' wakers before the workers: the runs they are resuming end or park first
        (for at most `WAKER_STOP_SECONDS`: the rest are left to their leases)."""
        calls = [
            asyncio.ensure_future(self._quietly(w.actor.stop_waker.remote(WAKER_STOP_SECONDS)))
            for w in self._workers
            if w.alive
        ]
        if calls:
            await asyncio.wait(calls, timeout=WAKER_STOP_SECONDS + 5)

    @staticmethod
    async def _quietly(call: Any) -> None:
        try:
            await call
        except Exception:  # noqa: BLE001 - a worker that died or is dying stops its waker with it
            pass

    def __enter__(self) -> SensePool:
        return self

    def __exit__(self, exc_type: Any, *exc_info: Any) -> None:
        self.close(wait=exc_type is None)

    async def __aenter__(self) -> SensePool:
        return self

    async def __aexit__(self, exc_type: Any, *exc_info: Any) -> None:
        await asyncio.get_running_loop().run_in_executor(None, functools.partial(self.close, wait=exc_type is None))

    def __repr__(self) -> str:
        state = "closed" if self._closing else f"{len(self._runs)} runs"
        return f"<SensePool {self.name!r}: {len(self._workers)} workers x {self.runs_per_worker} slots, {state}>"


class RemoteWorkflow:
    """A rendered graph and its setup factory, shipped to the pool's workers (once per worker).

    `key` identifies it on the workers: the graph's fingerprint and a digest of the setup factory.
    """

    def __init__(self, pool: SensePool, graph: Any, setup: Any) -> None:

        if not is_rendered_compose(graph):
            raise TypeError(f"a workflow ships a rendered graph (call .render()), not {type(graph).__name__}")
        if setup is not None and not callable(setup):
            raise TypeError(f"setup must be a callable taking a run's input, not {type(setup).__name__}")
        self.pool = pool
        self.graph = graph
        self.setup = setup
        self.fingerprint = graph_fingerprint(graph)
        graph_blob = pickling.dumps_graph(graph)
        _check_arrives_as_itself(graph_blob, self.fingerprint)
        setup_blob = pickling.dumps_checked(default_setup if setup is None else setup, "the setup factory")
        self.key = f"{self.fingerprint}-{hashlib.sha256(setup_blob).hexdigest()[:16]}"
        self.ref = ray.put((graph_blob, setup_blob, self.fingerprint))
        self.size = len(graph_blob)

    def submit(
        self,
        value: Any = None,
        *,
        run_id: str | None = None,
        stream: bool = False,
        resume: bool = False,
        resume_from: bytes | None = None,
    ) -> RunHandle:
        """Start a run with `value` as its input; its handle.

        Args:
            run_id: the run's id (and checkpoint key); a new random one by default.
            stream: deliver what the run sends to its stream through `handle.stream()` as it comes
                (else it is collected into `outcome.output`).
            resume: continue the run `run_id` from its checkpoint in the pool's store (a halted run
                goes on past its halt; a new run when there is none).
            resume_from: start from a snapshot (`outcome.snapshot`, `handle.snapshot()`).

        Raises `NotPicklable` (the input), `PoolClosed`, `ValueError` (a run id in use).
        """
        return self.pool._launch(self, [value], [run_id], stream, resume, resume_from)[0]

    def submit_batch(self, values: Iterable[Any]) -> list[RunHandle]:
        """Start one run per value, sent together to one worker in one call; their handles.

        For many short runs: a remote call costs about as much as a short run, and a batch pays it
        once. The batch's outcomes come back together, when its last run ends; each run is still
        its own (its own id, cancel, requests, checkpoints, failover). A batch must fit in one
        worker (`runs_per_worker`).
        """
        values = list(values)
        if len(values) > self.pool.runs_per_worker:
            raise ValueError(
                f"a batch of {len(values)} runs does not fit in one worker ({self.pool.runs_per_worker} slots)"
            )
        return self.pool._launch(self, values, [None] * len(values), False, False, None)

    def map(
        self,
        inputs: Iterable[Any],
        *,
        ordered: bool = True,
        max_in_flight: int | None = None,
        chunk_size: int = 1,
        progress: Any = False,
        outcomes: bool = False,
    ) -> Iterator[Any]:
        """Run the workflow once per input; the results as they come (see `amrita_sense.distributed.fanout`).

        `ordered`: in input order (else as they complete); `max_in_flight`: runs submitted and not yet
        taken (default: the pool's capacity); `chunk_size`: runs sent to a worker per call;
        `progress`: True for a bar on a terminal, or a callable `(done, total, failed)`; `outcomes`:
        yield every `RunOutcome` instead of results (a failed run does not raise then).
        """

        return map_runs(
            self,
            inputs,
            ordered=ordered,
            max_in_flight=max_in_flight,
            chunk_size=chunk_size,
            progress=progress,
            outcomes=outcomes,
        )

    def amap(
        self,
        inputs: Iterable[Any],
        *,
        ordered: bool = True,
        max_in_flight: int | None = None,
        chunk_size: int = 1,
        progress: Any = False,
        outcomes: bool = False,
    ) -> AsyncIterator[Any]:
        """`map` as an async iterator (for code running in an event loop)."""

        return amap_runs(
            self,
            inputs,
            ordered=ordered,
            max_in_flight=max_in_flight,
            chunk_size=chunk_size,
            progress=progress,
            outcomes=outcomes,
        )

    def __repr__(self) -> str:
        return f"<RemoteWorkflow {self.key} ({self.size} bytes)>"


def _check_arrives_as_itself(blob: bytes, fingerprint: str) -> None:
    """Unpickle the graph here once: a graph that does not come back as the same graph is refused now."""

    try:
        copy = pickling.loads(blob)
    except Exception as exc:  # noqa: BLE001
        raise NotPicklable("the graph", f"it pickles but does not unpickle: {type(exc).__name__}: {exc}") from exc
    if graph_fingerprint(copy) != fingerprint:
        raise NotPicklable(
            "the graph", "its unpickled copy has another fingerprint (a node's function changed identity)"
        )


class RunHandle:
    """One run in the pool: its outcome, its stream and requests to it.

    Synchronous code calls `result()` / `outcome()` (they block); asynchronous code awaits the
    handle (`await handle` is the result) or `aoutcome()`. Requests (`send`, `suspend`,
    `resume`, `cancel`, `snapshot`) return a `Reply`: `await` it, or `.wait()`.
    """

    __slots__ = ("_pool", "_state")

    def __init__(self, pool: SensePool, state: _RunState) -> None:
        self._pool = pool
        self._state = state

    @property
    def run_id(self) -> str:
        return self._state.run_id

    @property
    def attempts(self) -> int:
        """How many times the run has been started so far (more than once after a worker died)."""
        return self._state.attempts

    @property
    def worker(self) -> int | None:
        """The index of the worker the run is on now (None while it waits for a slot, or after it ended)."""
        state = self._state
        return state.worker.index if state.placed.is_set() and state.worker is not None else None

    def done(self) -> bool:
        return self._state.future.done()

    def outcome(self, timeout: float | None = None) -> RunOutcome:
        """Block until the run ends; its `RunOutcome` (never raises for how the run ended)."""
        return wait_for(self._state.future, timeout, self._pool._bridge)

    def result(self, timeout: float | None = None) -> Any:
        """Block until the run ends; its result, or the `RunFailed` subclass saying why there is none."""
        return self.outcome(timeout).unwrap()

    async def aoutcome(self) -> RunOutcome:
        return await wait_async(self._state.future)

    async def aresult(self) -> Any:
        return (await self.aoutcome()).unwrap()

    def __await__(self) -> Any:
        return self.aresult().__await__()

    def add_done_callback(self, callback: Any) -> None:
        """Call `callback(handle)` when the run ends (on the pool's thread: keep it short)."""
        self._state.future.add_done_callback(lambda _future: callback(self))

    def send(self, value: Any) -> Reply[None]:
        """Send `value` to the run's producer input (`object_io.send_to_producer`)."""
        payload = pickling.dumps_checked(value, "the value sent to the run")
        return self._pool._request(self._state, "send", payload)

    def send_done(self) -> Reply[None]:
        """Close the run's producer input (`object_io.send_done_to_producer`)."""
        return self._pool._request(self._state, "send_done")

    def suspend(self, *tags: str, timeout: float | None = None) -> Reply[bool]:
        """Ask the run to park at its next gate (one of `tags`, if given): True once parked, False if
        it ended first (`object_io.wait_to_suspend`). A parked run stays parked across a failover."""
        bridge = self._pool._bridge
        return Reply(bridge.submit(self._pool._suspend(self._state, tags, timeout)), bridge)

    def resume(self) -> Reply[None]:
        """Let a parked run go on (`object_io.resume`)."""
        bridge = self._pool._bridge
        return Reply(bridge.submit(self._pool._resume(self._state)), bridge)

    def cancel(self) -> Reply[bool]:
        """Cancel the run (its outcome: cancelled); True when it was still pending or running."""
        bridge = self._pool._bridge
        return Reply(bridge.submit(self._pool._cancel(self._state)), bridge)

    def snapshot(self) -> Reply[bytes]:
        """The run's snapshot now (at a gate, between nodes); for `submit(resume_from=...)`."""
        return self._pool._request(self._state, "snapshot")

    def stream(self) -> RunStream:
        """What the run sends to its stream, as it comes: `for item in ...` or `async for item in ...`."""
        if self._state.buffer is None:
            raise ValueError("submit(..., stream=True) to stream a run's output (else it is in outcome.output)")
        return RunStream(self._pool._bridge, self._state.buffer)

    def __repr__(self) -> str:
        return f"<RunHandle {self.run_id} {'done' if self.done() else 'running'}>"


class RunStream:
    """The items a streamed run sends (`yield_response` / `push_object`), in order, until the run ends.

    Iterate it once, synchronously or asynchronously. An item that could not be pickled on the
    worker raises `NotPicklable` where it would have come. After a failover, the items the
    resumed run sends again (the nodes since its checkpoint run again) come again.
    """

    def __init__(self, bridge: PoolLoop, buffer: _Buffer) -> None:
        self._bridge = bridge
        self._buffer = buffer
        self._items: deque[Any] = deque()
        self._ended = False

    def _take(self) -> Any:
        item = self._items.popleft()
        if isinstance(item, Unshippable):
            raise item.error
        return item

    def __iter__(self) -> RunStream:
        return self

    def __next__(self) -> Any:
        while not self._items:
            if self._ended:
                raise StopIteration
            self._fill(wait_for(self._bridge.submit(self._buffer.get()), None, self._bridge))
        return self._take()

    def __aiter__(self) -> RunStream:
        return self

    async def __anext__(self) -> Any:
        while not self._items:
            if self._ended:
                raise StopAsyncIteration
            self._fill(await wait_async(self._bridge.submit(self._buffer.get())))
        return self._take()

    def _fill(self, batch: list | None) -> None:
        if batch is None:
            self._ended = True
        else:
            self._items.extend(batch)


__all__ = ["RemoteWorkflow", "RunHandle", "RunStream", "SensePool"]
