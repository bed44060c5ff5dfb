"""The thread model: several threads, each with its own event loop, running interpreters over one graph.

    python examples/threads_many_loops.py

A rendered graph is read-only and can be shared by every thread (its node table is compiled
once, on first use, under a lock). An interpreter is not shared: each run gets its own, on the
loop of the thread that runs it, and one loop may run many of them concurrently. Process-wide
pieces (the stores, a `SuspendObjectStream`, the event registry, telemetry) guard themselves.

Four threads each run 50 requests on their own loop (`asyncio.run` in each thread), 10 at a
time, mixing inline sync nodes, `async def` nodes, worker-thread nodes, an IF/ELSE, a WHILE
and a Try/CATCH; every trace must equal the same request run alone.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from amrita_sense import IF, WHILE, Node, NodeCompose, Try, WorkflowInterpreter

THREADS = 4
REQUESTS_PER_THREAD = 50
CONCURRENT = 10


@dataclass
class Job:
    number: int
    left: int = 0
    trace: list[str] = field(default_factory=list)


@Node(wrap_to_async=False)  # inline, on the loop's own thread
def start(job: Job) -> None:
    job.left = job.number % 3
    job.trace.append("start")


@Node(wrap_to_async=False)
def more(job: Job) -> bool:
    return job.left > 0


@Node()
async def fetch(job: Job) -> None:  # a coroutine: other interpreters on this loop run while it waits
    await asyncio.sleep(0.001)
    job.left -= 1
    job.trace.append("fetch")


@Node()
def crunch(job: Job) -> None:  # a default sync node: runs on the package's worker threads
    job.trace.append("crunch")


@Node(wrap_to_async=False)
def is_even(job: Job) -> bool:
    return job.number % 2 == 0


@Node(wrap_to_async=False)
def even(job: Job) -> None:
    job.trace.append("even")


@Node(wrap_to_async=False)
def odd(job: Job) -> None:
    job.trace.append("odd")


@Node(wrap_to_async=False)
def risky(job: Job) -> None:
    if job.number % 5 == 0:
        raise ValueError(job.number)
    job.trace.append("ok")


@Node(wrap_to_async=False)
def recover(job: Job, exc_val: ValueError) -> None:
    job.trace.append(f"caught {exc_val}")


# One graph for every thread.
GRAPH = NodeCompose(
    start,
    WHILE(more).ACTION(fetch),
    crunch,
    IF(is_even, even).ELSE(odd),
    Try(risky).CATCH(ValueError, recover),
).render()


async def run_one(number: int) -> list[str]:
    job = Job(number)
    await WorkflowInterpreter(GRAPH, extra_args=(job,)).run()  # a new interpreter per request
    return job.trace


async def serve(numbers: list[int]) -> dict[int, list[str]]:
    """One thread's loop: its requests, `CONCURRENT` at a time."""
    limit = asyncio.Semaphore(CONCURRENT)

    async def guarded(number: int) -> list[str]:
        async with limit:
            return await run_one(number)

    traces = await asyncio.gather(*(guarded(number) for number in numbers))
    return dict(zip(numbers, traces))


async def run_alone(count: int) -> dict[int, list[str]]:
    return {number: await run_one(number) for number in range(count)}


def main() -> None:
    results: dict[str, dict[int, list[str]]] = {}
    errors: list[BaseException] = []

    def thread_main(name: str, numbers: list[int]) -> None:
        try:
            results[name] = asyncio.run(serve(numbers))  # each thread: its own event loop
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=thread_main, args=(f"loop-{i}", list(range(i, THREADS * REQUESTS_PER_THREAD, THREADS))))
        for i in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]

    serial = asyncio.run(run_alone(THREADS * REQUESTS_PER_THREAD))  # the same requests, one at a time
    mismatches = 0
    for name, traces in sorted(results.items()):
        wrong = sum(trace != serial[number] for number, trace in traces.items())
        mismatches += wrong
        print(f"{name}: {len(traces)} requests, {wrong} traces differ from the serial run")
    print(f"e.g. request 10: {' > '.join(serial[10])}")
    print(f"{THREADS} threads x {REQUESTS_PER_THREAD} requests over one graph: {mismatches} mismatches")
    if mismatches:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
