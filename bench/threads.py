"""N event loops in N threads over one shared graph: runs per second and the speed-up over one thread.

    python -m bench.threads                       # 1, 2, 4 and 8 threads
    python -m bench.threads --threads 1 8 --runs 4000 --loop uvloop

Each thread makes its own event loop and runs `--runs` interpreters over one graph rendered before the
threads start (inline nodes, an `async def` node, IF / ELSE, a WHILE loop), `--concurrent` of them in
flight at once. The row for N threads is the best of `--repeat` rounds of N x runs interpreters.

With the GIL (every build this project ships today) the speed-up stays near 1: the threads take turns.
On a free-threaded interpreter with the GIL off (3.14t, `PYTHON_GIL=0`) and as many cores as threads it
is the figure that says how far the runtime scales; this project's machine has neither, so the hosted
CI's free-threaded job prints it (.github/workflows/ci.yml). Nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from amrita_sense import IF, WHILE, Node, NodeCompose, WorkflowInterpreter

inline = Node(wrap_to_async=False)


class Ctx:
    __slots__ = ("left", "total")

    def __init__(self, seed: int) -> None:
        self.left = 3 + seed % 4
        self.total = 0


@inline
def start(ctx: Ctx) -> None:
    ctx.total += sum(range(40))


@Node()
async def fetch(ctx: Ctx) -> None:
    await asyncio.sleep(0)
    ctx.total += 1


@inline
def is_even(ctx: Ctx) -> bool:
    return ctx.total % 2 == 0


@inline
def even(ctx: Ctx) -> None:
    ctx.total += 2


@inline
def odd(ctx: Ctx) -> None:
    ctx.total += 3


@inline
def more(ctx: Ctx) -> bool:
    return ctx.left > 0


@inline
def step(ctx: Ctx) -> None:
    ctx.left -= 1
    ctx.total += sum(range(20))


def shared_graph() -> Any:
    return NodeCompose(start, fetch, IF(is_even, even).ELSE(odd), WHILE(more).ACTION(step)).render()


async def runs_on_this_loop(graph: Any, runs: int, concurrent: int) -> int:
    total = 0
    for at in range(0, runs, concurrent):
        ctxs = [Ctx(seed) for seed in range(at, min(at + concurrent, runs))]
        await asyncio.gather(*(WorkflowInterpreter(graph, extra_kwargs={"ctx": ctx}).run() for ctx in ctxs))
        total += sum(ctx.total for ctx in ctxs)
    return total


def one_round(graph: Any, threads: int, runs: int, concurrent: int, new_loop: Callable[[], Any]) -> float:
    """Seconds for `threads` threads to run `runs` interpreters each, from a common start."""
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []
    spans: list[tuple[float, float]] = []  # each thread's own start and end: no other thread's turn counted

    def worker() -> None:
        loop = new_loop()
        try:
            barrier.wait()
            began = time.perf_counter()
            loop.run_until_complete(runs_on_this_loop(graph, runs, concurrent))
            spans.append((began, time.perf_counter()))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)
        finally:
            loop.close()

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    if errors:
        raise errors[0]
    return max(end for _, end in spans) - min(start for start, _ in spans)


def loop_factory(name: str) -> Callable[[], Any]:
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def gil_state() -> str:
    is_enabled = getattr(sys, "_is_gil_enabled", None)
    if is_enabled is None:
        return "GIL (not a free-threaded interpreter)"
    return "GIL on" if is_enabled() else "GIL off"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--runs", type=int, default=2000, help="interpreters per thread per round")
    parser.add_argument("--concurrent", type=int, default=25, help="runs in flight on one loop")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.threads) or args.runs < 1 or args.concurrent < 1 or args.repeat < 1:
        parser.error("--threads, --runs, --concurrent and --repeat take positive numbers")

    import amrita_sense

    graph = shared_graph()
    new_loop = loop_factory(args.loop)
    print(f"{amrita_sense.IMPLEMENTATION} core, Python {sys.version.split()[0]}, {gil_state()}, {args.loop}")
    print(f"{'threads':>7} {'runs/s':>10} {'speed-up':>9}")
    base = None
    for threads in args.threads:
        best = min(one_round(graph, threads, args.runs, args.concurrent, new_loop) for _ in range(args.repeat))
        rate = threads * args.runs / best
        base = base or rate / threads  # one thread's rate (the first row's, per thread)
        print(f"{threads:>7} {rate:>10,.0f} {rate / base:>8.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
