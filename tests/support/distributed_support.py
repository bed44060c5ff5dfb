"""Workflows and setup factories of the scale-out tests (imported by the Ray workers too).

The session's Ray instance puts this directory on the workers' PYTHONPATH, so
these functions travel by reference, as a user's module would. Every run's
state lives in a `Job` built by the setup factory on the worker and injected by
type; with the pools' codec (pickle) a checkpoint carries it, so a run resumed
on another worker ends with exactly the state an uninterrupted run has.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from typing import Any

from amrita_sense import SUSPEND, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import SLEEP, WAIT, Message

STEPS = 6


class Job:
    """One run's input and everything its nodes did."""

    def __init__(
        self, value: int, steps: int = STEPS, delay: float = 0.0, sink: str | None = None, hold: str | None = None
    ) -> None:
        self.value = value
        self.steps = steps
        self.delay = delay
        self.sink = sink
        self.hold = hold
        """A file path: the run waits before its step `HELD_AT` until the file exists (a test kills a
        worker while its runs are held there, whatever order a loaded machine ran them in)."""
        self.trace: list[str] = []

    def record(self, entry: str) -> None:
        self.trace.append(entry)
        if self.sink is not None:  # one write per line: a killed process never leaves half a line
            fd = os.open(self.sink, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, f"{self.value} {entry}\n".encode())
            finally:
                os.close(fd)


def job_setup(spec: Any) -> Any:
    """The setup factory: `spec` is an int (the value) or a dict of `Job` arguments."""
    from amrita_sense.distributed import RunSetup

    job = Job(**spec) if isinstance(spec, dict) else Job(spec)
    return RunSetup(args=(job,), result=lambda job: (job.value, list(job.trace)))


def dying_close_setup(spec: dict) -> Any:
    """`job_setup` whose `close` kills its worker's process (SIGKILL) the first time: after the run
    ended, before its outcome leaves the worker (a file beside the sink says it was done)."""
    made = job_setup(spec)
    marker = spec["sink"] + ".killed"

    def close() -> None:
        if not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)

    made.close = close
    return made


def client_job_setup(spec: Any) -> Any:
    """`job_setup` plus an injected object that does not pickle (as a network client does not)."""
    import threading

    made = job_setup(spec)
    made.kwargs = {"client": threading.Lock()}
    made.result = lambda job, **_: (job.value, list(job.trace))
    return made


def expected(value: int, steps: int = STEPS) -> tuple:
    """The result of an uninterrupted run of `counting` for `value`."""
    return value, [f"step{i}:{value * (i + 1)}" for i in range(steps)]


@Node(wrap_to_async=False)
def more(job: Job) -> bool:
    return len(job.trace) < job.steps


HELD_AT = 2
"""The step a `Job` with `hold` waits before: two steps done and checkpointed, the rest to go."""


@Node()
async def step(job: Job) -> None:
    if job.delay:
        await asyncio.sleep(job.delay)
    i = len(job.trace)
    while i == HELD_AT and job.hold is not None and not os.path.exists(job.hold):
        await asyncio.sleep(0.01)
    job.record(f"step{i}:{job.value * (i + 1)}")


def _counting() -> Any:
    from amrita_sense.instructions import NATIVE_WHILE

    return NATIVE_WHILE(more).ACTION(step).extract().render()


counting = _counting()
"""`steps` steps, each recording `step<i>:<value * (i + 1)>` (async nodes, optionally sleeping)."""


# ----- streaming, input, gates ------------------------------------------------------------------------


@Node()
async def echo(pc: WorkflowInterpreter, job: Job) -> None:
    """Answer every message sent to the run until its input is closed; then stream `done`."""
    stream = pc.object_io
    async for message in stream.get_producer_input_generator():
        job.record(f"got {message}")
        await stream.yield_response(f"echo {message}")
    await stream.yield_response("done")


chat = NodeCompose(echo).render()


@Node(tag="gate:first")
async def first(job: Job) -> None:
    job.record("first")


@Node(tag="gate:second")
async def second(job: Job) -> None:
    job.record("second")


@Node()
async def wait_go(pc: WorkflowInterpreter, job: Job) -> None:
    """Wait for one message on the run's input."""
    async for message in pc.object_io.get_producer_input_generator():
        job.record(f"got {message}")
        return


gated = (wait_go >> first >> second).render()
halting = (first >> SUSPEND >> second).render()


@Node()
async def talk(pc: WorkflowInterpreter, job: Job) -> None:
    for i in range(job.steps):
        if job.delay:
            await asyncio.sleep(job.delay)
        await pc.object_io.yield_response(f"{job.value}:{i}")
        job.record(f"said {i}")


talking = NodeCompose(talk).render()


@Node()
async def forever(pc: WorkflowInterpreter, job: Job) -> None:
    job.record("waiting")
    await pc.object_io.yield_response("waiting")
    await asyncio.sleep(3600)


sleeper = NodeCompose(forever).render()


# ----- failures ------------------------------------------------------------------------------------------


class Refusal(ValueError):
    pass


@Node()
async def refuse(job: Job) -> None:
    if job.value < 0:
        raise Refusal(f"negative: {job.value}")
    job.record("accepted")


refusing = NodeCompose(refuse).render()


class LockedError(Exception):
    """An exception that cannot be pickled (it holds a lock)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()


@Node()
async def raise_locked(job: Job) -> None:
    raise LockedError(f"locked {job.value}")


locked = NodeCompose(raise_locked).render()


def failing_setup(spec: Any) -> Any:
    raise RuntimeError(f"no resources for {spec!r}")


def unpicklable_result_setup(spec: Any) -> Any:
    from amrita_sense.distributed import RunSetup

    return RunSetup(args=(Job(spec),), result=lambda job: threading.Lock())


def closing_setup(spec: dict) -> Any:
    """A setup whose `close` records `closed` (in the job's sink file) after the run."""
    from amrita_sense.distributed import RunSetup

    job = Job(**spec)
    return RunSetup(args=(job,), result=lambda job: (job.value, list(job.trace)), close=lambda: job.record("closed"))


def lock_setup(spec: Any) -> Any:
    """Pools holding a lock: they never travel, but a checkpoint codec cannot store them."""
    from amrita_sense.distributed import RunSetup

    return RunSetup(args=(Job(spec), threading.Lock()), result=lambda job, lock: (job.value, job.trace))


def unpicklable_graph() -> Any:
    """A graph whose second node's function closes over a lock (made in a function: it travels by value)."""
    guard = threading.Lock()

    @Node()
    async def guarded(job: Job) -> None:
        with guard:
            job.record("guarded")

    return (step >> guarded).render()


def cpu_work(n: int) -> int:
    """About n microseconds of pure-Python work."""
    total = 0
    for i in range(n * 6):
        total += i * i % 7
    return total


def now() -> float:
    return time.monotonic()


# ----- graph "parked": a run that waits for a message, then sleeps (the pool's wakers resume it) -----


@Node()
async def park_start(job: Job) -> None:
    job.record(f"start {os.getpid()}")


@Node()
async def park_take(job: Job, message: Message) -> None:
    job.record(f"message {message.payload} {os.getpid()}")


@Node()
async def park_end(job: Job) -> None:
    job.record(f"end {os.getpid()}")


def parked_graph() -> Any:
    """Graph "parked": starts, waits for a message on "go", takes it, sleeps 0.2 s, ends (a module-level
    factory: the pool pickles it to its workers by reference)."""
    return NodeCompose(park_start, WAIT("go"), park_take, SLEEP(0.2), park_end).render()
