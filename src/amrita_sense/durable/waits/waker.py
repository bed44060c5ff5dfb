"""The waker: a service that resumes the runs that wait, when they are due, exactly once.

It serves beside the application's own work, or runs one round when the application says so::

    waker = Waker(store, graphs={"approval": build_graph}, codec=pickle, keyring=keys)
    async with waker:             # serves in the background (or: await waker.serve())
        ...                       # the application's own work
    # or one round, from code that schedules it itself:
    resumed = await waker.run_once()

A round (`run_once`) claims the due runs of the waker's graphs (`store.claim_due`: a run whose
timer passed or that has a message on its wait's topic, leased to this waker by a conditional
write, its checkpoint read in the same statement), and resumes each: it restores the run from the
claimed checkpoint
(`Checkpointing(store, run_id, graph=name, expected_version=<claimed version>, ...).resume(graph)`),
hands it the decoded message, and runs it until it waits again or ends; then it releases the
lease. While a run runs, a task renews its lease every third of `lease_seconds`; when a renewal
fails (the lease expired and maybe another waker took the run) the run stops at its next step
boundary and saves nothing more (`LeaseLost`, logged). The claimed version fences every save: a
waker that lost its lease can never write over a newer checkpoint (`CheckpointConflict`).

A run a waker resumes records, with each save between its nodes, a timer due at once: held by the
lease, it is claimable only once the lease expired, so when the waker dies mid-run (SIGKILL, a lost
machine) another waker takes the run from its last checkpoint after `lease_seconds`.

Exactly once: a message is marked delivered in the same transaction as the first checkpoint after
its wait. A waker that dies before that save leaves the run to another waker (after the lease
expires), which resumes it from the same checkpoint and delivers the message again: the nodes
after the wait run again (at least once, as after any crash), the message is delivered once.

Queued starts (`Checkpointing(..., on_busy="enqueue")`): a finished run with a start queued behind
it is due as well (its finishing save records a wait on the reserved topic `START_TOPIC`). The
waker claims it, takes the run id over from the finished checkpoint (the claimed version fences it)
and runs the queued start from its snapshot, the message marked delivered by the new run's first
save: each queued start runs once, in the order they were queued. A run whose run id a start took
over (`on_busy="interrupt"`) stops at its next save with `RunInterrupted`: the waker logs it and
releases the lease.

Refusals (logged; the run stays as it is, its lease released, nothing is lost): a run of a graph
the waker was not given, a run whose graph changed (its fingerprint; with `migrate=True` the run is
moved onto the new graph, as `restore(..., migrate=True)` does), a payload that does not decode or
verify. Errors of one run never stop the waker; `failures` keeps the latest ones.

A store's blocking methods (SQLite, the threaded Postgres store) run in a worker thread
(`asyncio.to_thread`); an async store's are awaited. `serve` keeps up to `concurrency` runs in
flight, claiming again as each one ends; with nothing due it sleeps until the store's `next_due`, at
most `poll_interval`, until one of its runs ends, or until the store signals a wake-up
(`wait_for_wakeup`, when it has one: the memory store, Postgres `LISTEN/NOTIFY`).

Timers claimed ahead (`lookahead`, `serve` only): when the next timer ends within `lookahead`
seconds, `serve` claims the runs parked on a timer only (SLEEP, SLEEP_UNTIL) that end by then
(`claim_due(..., ahead=lookahead)`), restores each at once and starts it at its `due_at`, never
before. A burst of timers that end together (a thousand runs asleep until nine o'clock) then starts
on time instead of draining at the rate runs are claimed and restored. Such a run holds its lease
while it waits for its time (`lookahead` is at most a third of `lease_seconds`); up to
`4 * concurrency` runs wait so, beside the `concurrency` in flight, and on `stop()` they are released
unstarted. A WAIT's timeout is never claimed ahead: a message may still come before it.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable, Collection, Mapping
from typing import Any

from amrita_sense.durable.checkpointing.busy import QUEUED_VERSION, BusyOutcome, queued_snapshot
from amrita_sense.durable.checkpointing.policy import Checkpointing
from amrita_sense.durable.errors import CheckpointError, GraphMismatch, LeaseLost, RunInterrupted, WaitError
from amrita_sense.durable.snapshots.messages import decode_payload
from amrita_sense.durable.stores.base import Checkpoint
from amrita_sense.durable.stores.waiting import START_TOPIC, WAITING_METHODS
from amrita_sense.durable.waits.graph import Message
from amrita_sense.logging import logger
from amrita_sense.node.abc_base import is_rendered_compose
from amrita_sense.runtime.workflow import WorkflowInterpreter

_FAILURES_KEPT = 100
_MIN_PAUSE = 0.02
DEFAULT_CONCURRENCY = 64
"""Runs a waker resumes at once by default: a resumed run mostly awaits its nodes (a model, a
service, a person's answer), so a waker with few places would sit idle while runs are due."""
DEFAULT_LOOKAHEAD = 1.0
"""Seconds before a timer ends that a serving waker claims and restores its run by default."""
HELD_PER_PLACE = 4
"""Runs claimed ahead of their timers a waker holds at most, per place of `concurrency`: a held run
costs its restored state only, and a burst of timers that end together needs many places at once."""


def _positive(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value != value:
        raise ValueError(f"{what} is a positive number of seconds, not {value!r}")
    return float(value)


def _lookahead(value: Any, lease_seconds: float) -> float:
    if value is None:
        return min(DEFAULT_LOOKAHEAD, lease_seconds / 3)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= lease_seconds / 3:
        raise ValueError(
            f"lookahead is a number of seconds from 0 to a third of lease_seconds ({lease_seconds / 3:g}), "
            f"not {value!r}: a run claimed ahead must still hold its lease when it starts"
        )
    return float(value)


def _takes_keyword(method: Callable[..., Any], name: str) -> bool:
    try:
        return name in inspect.signature(method).parameters
    except (TypeError, ValueError):  # no signature to read: call it as the protocol's minimum
        return False


class Waker:
    """Resumes the waiting runs of the graphs it is given, when they are due (see the module).

    Args:
        store: a store that keeps waits (`WaitingStore`: every shipped backend).
        graphs: graph name -> the rendered graph, or a zero-argument callable that builds it (called
            once, on first use). The names are those runs were started with
            (`Checkpointing(..., graph=name)`).
        codec: decodes the runs' injection pools and message payloads (`pickle`, ...); None: the runs
            keep no pools and payloads are plain JSON data.
        keyring: checks (and signs) the runs' checkpoints and checks message payloads
            (`amrita_sense.durable.Keyring`).
        allow_unsigned: decode unsigned checkpoints / payloads with a codec that can run code.
        migrate: move a run parked on an older version of its graph onto the given one (else it is
            refused with `WaitError`).
        lease_seconds: how long a claim holds a run; renewed while the run runs.
        poll_interval: the longest `serve` sleeps between two rounds.
        concurrency: the most runs this waker resumes at once (`serve`), or claims in one round
            (`run_once`).
        lookahead: seconds before a timer ends that `serve` claims and restores its run, to start it
            at its time (see the module); 0 claims runs only once they are due. At most a third of
            `lease_seconds`; None: `DEFAULT_LOOKAHEAD` or that third, the smaller. Off with a store
            whose `claim_due` takes no `ahead`.
        owner: this waker's name in the leases (default: host, pid and a random part).
        restore_kwargs: more arguments of `WorkflowInterpreter.restore` for every run
            (`extra_args`, `object_io`, `middleware`, ...; a callable `(run_id, graph_name) -> dict`
            makes them per run).
        policy_options: more arguments of the `Checkpointing` policy a resumed run saves with
            (`every_nodes`, `durability`, `history`, `on_saved`, ...; the store, run id, codec,
            keyring, graph name and expected version are the waker's).
    """

    def __init__(
        self,
        store: Any,
        graphs: Mapping[str, Any],
        *,
        codec: Any = None,
        keyring: Any = None,
        allow_unsigned: bool = False,
        migrate: bool = False,
        lease_seconds: float = 30.0,
        poll_interval: float = 1.0,
        concurrency: int = DEFAULT_CONCURRENCY,
        lookahead: float | None = None,
        owner: str | None = None,
        restore_kwargs: Any = None,
        policy_options: Mapping[str, Any] | None = None,
    ) -> None:
        missing = [name for name in WAITING_METHODS if not callable(getattr(store, name, None))]
        if missing:
            raise TypeError(
                f"Waker needs a store that keeps waits (WaitingStore); {type(store).__name__} lacks {missing}"
            )
        if not isinstance(graphs, Mapping) or not graphs:
            raise TypeError("graphs is a non-empty mapping of graph name -> rendered graph or zero-argument factory")
        for name, graph in graphs.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"a graph name is a non-empty string, not {name!r}")
            if not is_rendered_compose(graph) and not callable(graph):
                raise TypeError(
                    f"graphs[{name!r}] is a rendered graph or a zero-argument factory, not {type(graph).__name__}"
                )
        if codec is not None and not all(callable(getattr(codec, n, None)) for n in ("dumps", "loads")):
            raise TypeError("codec must have dumps() and loads() (for example the pickle module)")
        if type(concurrency) is not int or concurrency < 1:
            raise ValueError(f"concurrency is an int >= 1, not {concurrency!r}")
        if owner is not None and (not isinstance(owner, str) or not owner):
            raise ValueError(f"owner is None or a non-empty string, not {owner!r}")
        if restore_kwargs is not None and not (isinstance(restore_kwargs, Mapping) or callable(restore_kwargs)):
            raise TypeError("restore_kwargs is a mapping or a callable (run_id, graph_name) -> mapping")
        managed = {"store", "run_id", "codec", "keyring", "allow_unsigned", "graph", "expected_version"}
        if policy_options is not None and (not isinstance(policy_options, Mapping) or managed & set(policy_options)):
            raise TypeError(f"policy_options is a mapping of Checkpointing options other than {sorted(managed)}")
        self.policy_options = dict(policy_options or {})
        self.store = store
        self.codec = codec
        self.keyring = keyring
        self.allow_unsigned = bool(allow_unsigned)
        self.migrate = bool(migrate)
        self.lease_seconds = _positive(lease_seconds, "lease_seconds")
        self.poll_interval = _positive(poll_interval, "poll_interval")
        self.concurrency = concurrency
        self.lookahead = _lookahead(lookahead, self.lease_seconds)
        if not _takes_keyword(store.claim_due, "ahead"):
            self.lookahead = 0.0  # a store of the protocol's minimum: claims once due only
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.restore_kwargs = restore_kwargs
        self.failures: deque[tuple[str, BaseException]] = deque(maxlen=_FAILURES_KEPT)
        """The latest errors of runs this waker resumed or refused: (run id, error)."""
        self.resumed = 0
        """How many times this waker resumed a run (`serve` and `run_once`; refused runs not counted)."""
        self._saves_release = _takes_keyword(store.save, "release")
        """The store's `save` gives up a lease with its write: a run's last save releases it."""
        self._signals = callable(getattr(store, "wait_for_wakeup", None))
        """The store signals wake-ups (`WakeupStore`): a send, a parking save, a released lease."""
        self._sources = dict(graphs)
        self._built: dict[str, Any] = {}
        self._held: set[str] = set()
        """The runs claimed ahead of their timers that have not started yet."""
        self._stop = asyncio.Event()
        self._serving: asyncio.Task | None = None

    def __repr__(self) -> str:
        return f"Waker({type(self.store).__name__}, graphs={sorted(self._sources)}, owner={self.owner!r})"

    @property
    def graph_names(self) -> list[str]:
        """The names of the graphs this waker resumes runs of."""
        return list(self._sources)

    # ----- serving ------------------------------------------------------------------------------

    async def run_once(self) -> int:
        """One round: claim the due runs of this waker's graphs and resume each until it waits again
        or ends; how many were resumed (refused ones not counted)."""
        claims = await self._claim(self.concurrency)
        if not claims:
            return 0
        results = await asyncio.gather(*(self._resume(claim) for claim in claims))
        return sum(results)

    async def serve(self) -> None:
        """Resume due runs until `stop()`, up to `concurrency` at once: whenever a run ends (waits
        again, ends or fails) its place is claimed again, so a burst of due runs flows through
        without waiting for the slowest of a round. With nothing due, sleep until the store's
        `next_due` (`lookahead` before it, to claim timers ahead), a wake-up from the store (one that
        has none: a run of this waker ending), or `poll_interval`, whichever is first. On `stop()`, the
        runs in flight run until they wait or end; the runs held for their timers are released."""
        self._stop.clear()
        running: set[asyncio.Future] = set()
        try:
            while not self._stop.is_set():
                running.difference_update([task for task in running if task.done()])
                free = self.concurrency - (len(running) - len(self._held))
                if free <= 0:
                    await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                    continue
                try:
                    pause = await self._round(free, running)
                    if pause is None:
                        continue  # more may be due
                except Exception as exc:  # the store went away for a moment: retry at the next poll
                    logger.error(f"waker {self.owner}: a round failed: {exc!r}")
                    self.failures.append(("", exc))
                    pause = self.poll_interval
                # a store that signals wake-ups signals the run that ends parked too: only a polled
                # store looks again when one of its runs ends
                await self._sleep(pause, () if self._signals else running)
        except BaseException:  # cancelled: so are the runs in flight
            for task in running:
                task.cancel()
            raise
        finally:
            await asyncio.gather(*running, return_exceptions=True)  # `_resume` itself never raises

    async def _round(self, free: int, running: set[asyncio.Future]) -> float | None:
        """Claim the due runs (up to `free`) and those whose timers end within `lookahead`, starting
        each: None to claim again at once, else how long to sleep."""
        claims = await self._claim(free)
        running.update(self._start(claim) for claim in claims)
        if len(claims) == free:
            return None
        due = await self._call(self.store.next_due, graphs=self.graph_names)  # every run due now taken
        if self._ends_within_lookahead(due):
            early = await self._claim(HELD_PER_PLACE * self.concurrency - len(self._held), self.lookahead)
            running.update(self._start(claim) for claim in early)
            if early:
                return None  # what ends next, now that these are held
        return self._pause(due, ahead=bool(self.lookahead) and not self._held_full())

    async def _claim(self, limit: int, ahead: float = 0.0) -> list[Any]:
        options = {"ahead": ahead} if ahead else {}
        return await self._call(
            self.store.claim_due,
            self.owner,
            lease_seconds=self.lease_seconds,
            limit=limit,
            graphs=self.graph_names,
            **options,
        )

    def _held_full(self) -> bool:
        return len(self._held) >= HELD_PER_PLACE * self.concurrency

    def _ends_within_lookahead(self, due: float | None) -> bool:
        """The next timer ends within `lookahead` (and this waker may hold more runs ahead)."""
        return (
            bool(self.lookahead) and due is not None and due - time.time() <= self.lookahead and not self._held_full()
        )

    def _start(self, claim: Any) -> asyncio.Future:
        """The task that resumes a claimed run: at once, or at its timer's end when claimed ahead."""
        due = claim.wait.due_at
        if claim.wait.topic is None and claim.message is None and due is not None and due > time.time():
            self._held.add(claim.run_id)
            return asyncio.ensure_future(self._resume(claim, start_at=due))
        return asyncio.ensure_future(self._resume(claim))

    def stop(self) -> None:
        """Make `serve` return (the runs it is resuming run until they wait or end first; the runs it
        holds for their timers are released unstarted)."""
        self._stop.set()

    async def __aenter__(self) -> Waker:
        self._serving = asyncio.get_running_loop().create_task(self.serve())
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self.stop()
        task, self._serving = self._serving, None
        if task is not None:
            await task

    def _pause(self, due: float | None, *, ahead: bool) -> float:
        """How long to sleep before the next round: until the next timer ends (`lookahead` before it,
        with `ahead`: a timer that ends sooner than that is one that cannot be claimed ahead, a WAIT's
        timeout or a run another waker holds), at most `poll_interval`."""
        if due is None:
            return self.poll_interval
        wake = due - time.time()
        if ahead and wake > self.lookahead:
            wake -= self.lookahead
        # a due time already passed belongs to a run another waker holds (or one just released):
        # look again soon, without spinning
        return min(self.poll_interval, max(_MIN_PAUSE, wake))

    async def _sleep(self, seconds: float, running: Collection[asyncio.Future] = ()) -> None:
        """Up to `seconds`, until `stop()`, a wake-up from the store or one of `running` ending."""
        if seconds <= 0 or self._stop.is_set() or any(task.done() for task in running):
            return
        stopped = asyncio.ensure_future(self._stop.wait())
        waits: set[asyncio.Future] = {stopped}
        if self._signals:
            waits.add(asyncio.ensure_future(self._call(self.store.wait_for_wakeup, seconds)))
        try:
            await asyncio.wait(waits | set(running), timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                if not waiting.done():
                    waiting.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    # ----- one run ------------------------------------------------------------------------------

    async def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A store method: awaited when it is a coroutine function, else run in a worker thread."""
        if inspect.iscoroutinefunction(method):
            return await method(*args, **kwargs)
        result = await asyncio.to_thread(method, *args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    def _graph(self, name: str | None, run_id: str) -> Any:
        if name not in self._sources:
            raise WaitError(f"run {run_id!r} belongs to graph {name!r}, which this waker was not given")
        assert name is not None
        graph = self._built.get(name)
        if graph is None:
            source = self._sources[name]
            graph = source if is_rendered_compose(source) else source()
            if not is_rendered_compose(graph):
                raise WaitError(f"the factory of graph {name!r} returned {type(graph).__name__}, not a rendered graph")
            self._built[name] = graph
        return graph

    def _restore_kwargs(self, run_id: str, name: str) -> dict[str, Any]:
        given = self.restore_kwargs
        if given is None:
            return {}
        return dict(given(run_id, name) if callable(given) else given)

    async def _resume(self, claim: Any, start_at: float | None = None) -> bool:
        """Resume one claimed run (claimed ahead: restored now, started at `start_at`); True when it
        ran. Never raises (errors are logged and kept)."""
        run_id = claim.run_id
        ran = released = False
        try:
            ran, released = await self._resume_claimed(claim, start_at)
        except RunInterrupted as exc:  # a start took the run id over: the run stopped, as it should
            logger.info(f"waker {self.owner}: {exc}")
            ran = True
        except Exception as exc:
            logger.error(f"waker {self.owner}: run {run_id!r}: {type(exc).__name__}: {exc}")
            self.failures.append((run_id, exc))
        finally:
            self._held.discard(run_id)
            if not released:  # else the run's last save gave the lease up with its write
                await self._release(run_id)
        self.resumed += ran
        return ran

    async def _until(self, start_at: float) -> bool:
        """Wait until `start_at` (seconds since the epoch, by this machine's clock): False when the
        waker is stopped first."""
        while (left := start_at - time.time()) > 0:  # the loop's clock is monotonic: check the epoch's
            try:
                await asyncio.wait_for(self._stop.wait(), left)
            except asyncio.TimeoutError:
                continue
            return False
        return True

    async def _release(self, run_id: str) -> None:
        try:
            await self._call(self.store.release, run_id, self.owner)
        except Exception as exc:  # the lease expires on its own
            logger.warning(f"waker {self.owner}: releasing run {run_id!r} failed: {exc!r}")

    async def _resume_claimed(self, claim: Any, start_at: float | None = None) -> tuple[bool, bool]:
        """Resume one claimed run: (whether it ran, whether its last save released the lease)."""
        if claim.wait.topic == START_TOPIC:  # a finished run: only a queued start makes it due
            if claim.message is None:
                return False, False
            return await self._start_queued(claim)
        run_id, name = claim.run_id, claim.graph
        graph = self._graph(name, run_id)
        message = self._message(claim)  # before anything runs: a bad payload refuses the run
        policy = self._policy(run_id, name, claim.record.version)
        kwargs = self._restore_kwargs(run_id, name)
        if self.migrate:
            kwargs.setdefault("migrate", True)
        latest = None if claim.data is None else Checkpoint(claim.record, claim.data)
        try:
            interp = await policy.resume(graph, latest=latest, **kwargs)
        except GraphMismatch as exc:
            raise WaitError(
                f"run {run_id!r} was parked on another version of graph {name!r} ({exc.detail}): "
                f"resume it with a waker given that version, or pass migrate=True"
            ) from exc
        if policy.last is None or policy.last.version != claim.record.version:
            raise LeaseLost(f"run {run_id!r} was saved again after this waker claimed it: another waker has it")
        if message is not None:
            policy.deliver(message)
        if start_at is not None:
            if not await self._until(start_at):
                return False, False  # stopped before its time: released unstarted
            self._held.discard(run_id)
        return await self._run_claimed(run_id, interp, policy)

    def _policy(self, run_id: str, name: str | None, version: int) -> Checkpointing:
        return Checkpointing(
            self.store,
            run_id,
            codec=self.codec,
            keyring=self.keyring,
            allow_unsigned=self.allow_unsigned,
            graph=name,
            expected_version=version,
            **self.policy_options,
        )

    async def _start_queued(self, claim: Any) -> tuple[bool, bool]:
        """Start the run's oldest queued start (`on_busy="enqueue"`) over its finished checkpoint: its
        first save, over the claimed version, takes the run id and marks the queued start delivered."""
        run_id, stored = claim.run_id, claim.message
        payload = decode_payload(  # plain JSON, checked against the keyring before it is read
            stored.payload, keyring=self.keyring, run_id=run_id, topic=stored.topic, message_id=stored.message_id
        )
        data = queued_snapshot(payload, run_id)
        name = payload.get("graph")  # the queued start's graph (the finished run's may differ)
        name = name if isinstance(name, str) else claim.graph
        graph = self._graph(name, run_id)
        kwargs = self._restore_kwargs(run_id, name)
        if self.migrate:
            kwargs.setdefault("migrate", True)
        kwargs.setdefault("codec", self.codec)
        kwargs.setdefault("keyring", None if self.keyring is None else self.keyring.bound_to(run_id, QUEUED_VERSION))
        kwargs.setdefault("allow_unsigned", self.allow_unsigned)
        try:
            interp = WorkflowInterpreter.restore(graph, data, **kwargs)
        except GraphMismatch as exc:
            raise WaitError(
                f"the start queued for run {run_id!r} was made on another version of graph {name!r} "
                f"({exc.detail}): start it with a waker given that version, or pass migrate=True"
            ) from exc
        policy = self._policy(run_id, name, claim.record.version)
        policy.outcome = BusyOutcome(run_id, "enqueue", "started", claim.record.status)
        policy._delivered.append(stored.message_id)
        interp.checkpointing = policy
        await interp.object_io.send_to_producer(policy.outcome)
        return await self._run_claimed(run_id, interp, policy)

    async def _run_claimed(self, run_id: str, interp: Any, policy: Checkpointing) -> tuple[bool, bool]:
        """Run a claimed run under its lease (renewed meanwhile) until it waits again or ends:
        (True, whether its last save released the lease)."""
        policy._watchdog = True  # dies mid-run: another waker takes the run once the lease expired
        if self._saves_release:
            policy._lease_owner = self.owner
        renewer = asyncio.ensure_future(self._renew(run_id, interp, policy))
        try:
            await interp.run()
        except CheckpointError:
            raise
        except Exception as exc:  # the run's own panic (saved with on_panic): it ran, and ended so
            logger.warning(f"waker {self.owner}: run {run_id!r} panicked: {type(exc).__name__}: {exc}")
            self.failures.append((run_id, exc))
        finally:
            renewer.cancel()
            await asyncio.gather(renewer, return_exceptions=True)
        return True, policy._lease_released

    def _message(self, claim: Any) -> Message | None:
        stored = claim.message
        if stored is None:
            return None
        payload = decode_payload(
            stored.payload,
            codec=self.codec,
            keyring=self.keyring,
            allow_unsigned=self.allow_unsigned,
            run_id=stored.run_id,
            topic=stored.topic,
            message_id=stored.message_id,
        )
        return Message(stored.topic, payload, stored.message_id, stored.sent_at)

    async def _renew(self, run_id: str, interp: Any, policy: Checkpointing) -> None:
        """Renew the lease while the run runs; when it is lost, fence the policy (no more saves) and
        stop the run at its next step boundary."""
        every = self.lease_seconds / 3
        while True:
            await asyncio.sleep(every)
            try:
                held = await self._call(self.store.renew, run_id, self.owner, self.lease_seconds)
            except Exception as exc:  # the store is away: try again, the lease may still hold
                logger.warning(f"waker {self.owner}: renewing the lease of run {run_id!r} failed: {exc!r}")
                continue
            if not held and policy._lease_released:  # the run's last save gave it up: its turn is over
                return
            if not held:
                lost = LeaseLost(f"waker {self.owner} lost its lease on run {run_id!r}: the run stops unsaved")
                logger.error(str(lost))
                policy._fence = lost
                interp._pending_stop = True
                return


__all__ = ["Waker"]
