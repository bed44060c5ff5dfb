"""Scale-out benchmarks: many short independent runs on 1 and 2 Ray workers against one local process.

    python -m bench.distributed            # the full measurement (about a minute)
    python -m bench.distributed --quick    # small sizes, a smoke run

Workloads (one run = a new interpreter over the same rendered graph, with its
pools built by the setup factory from the run's input, as a worker does):

- `cpu`: 10 distinct sync inline nodes of about 500 us of pure-Python work each
  (about 5 ms per run: CPU-bound, where a second process should double the rate);
- `short`: 10 such nodes of about 20 us each (about 0.2 ms per run: the rate is
  bound by the cost of a remote run, not by the work).

For each workload, rounds alternate five ways of doing the same runs: `local`
(one after the other in this process), `1 worker` and `2 workers`
(`RemoteWorkflow.map` over a pool started beforehand; each round's map is
timed whole, from the first submission to the last result), and the same two
with `chunk_size=16` (16 runs per remote call). The table quotes the median
runs per second over the rounds and the ratios of those medians.

CPU: the driver's and the workers' CPU time per remote run (from the processes'
own clocks, so it holds on a loaded machine), against the run's work.

Latency: one run of a one-node graph at a time, `submit(...).result()` against
the same run in this process, median over the runs; the difference is what a
remote run adds (a Ray actor call, pickling, the pool's own loop).

The two pools exist side by side, so their workers ask Ray for no CPU
(`num_cpus=0`); Ray is started with 2 CPUs when it is not running yet. The
machine's load changes everything: say how loaded it was next to the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

WORKLOADS = {"cpu": 500, "short": 20}
"""Microseconds of work per node."""
NODES = 10


def spin(loops: int) -> int:
    """`loops` rounds of pure-Python arithmetic."""
    total = 0
    for i in range(loops):
        total += i % 7
    return total


def loops_per_microsecond() -> float:
    """How many `spin` rounds take a microsecond here (the best of a few tries)."""
    best = min(_timed_spin(200_000) for _ in range(5))
    return 200_000 / (best * 1e6)


def _timed_spin(loops: int) -> float:
    started = time.thread_time()  # CPU time: the calibration holds on a loaded machine
    spin(loops)
    return time.thread_time() - started


class Work:
    """A run's input and state: how much each node works, what it computed."""

    def __init__(self, loops: int) -> None:
        self.loops = loops
        self.total = 0


def _make_steps(count: int) -> list:
    from amrita_sense import Node

    steps = []
    for index in range(count):

        def body(work: Work) -> None:
            work.total += spin(work.loops)

        body.__name__ = body.__qualname__ = f"work_{index}"
        steps.append(Node(wrap_to_async=False)(body))
    return steps


def make_graph(count: int = NODES) -> Any:
    """`count` distinct sync inline nodes (as AmritaCore's are distinct functions)."""
    from amrita_sense import NodeCompose

    return NodeCompose(*_make_steps(count)).render()


def setup(loops: int) -> Any:
    """The workflow's setup factory: a `Work` of `loops` rounds per node; the result is its total."""
    from amrita_sense.distributed import RunSetup

    return RunSetup(args=(Work(loops),), result=_total)


def _total(work: Work) -> int:
    return work.total


async def _local_run(graph: Any, loops: int) -> Any:
    from amrita_sense import WorkflowInterpreter

    run = setup(loops)
    await WorkflowInterpreter(graph, extra_args=run.args).run()
    return run.result(*run.args)


def local_rate(graph: Any, loops: int, runs: int, cpu: list | None = None) -> float:
    """Runs per second of `runs` runs one after the other in this process; appends CPU seconds per run to `cpu`."""

    async def all_runs() -> None:
        for _ in range(runs):
            await _local_run(graph, loops)

    started, cpu_started = time.perf_counter(), time.process_time()
    asyncio.run(all_runs())
    if cpu is not None:
        cpu.append((time.process_time() - cpu_started) / runs)
    return runs / (time.perf_counter() - started)


def remote_rate(workflow: Any, loops: int, runs: int, chunk: int = 1, cpu: list | None = None) -> float:
    """Runs per second of a fan-out of `runs` runs, `chunk` per call; appends (driver, workers) CPU
    seconds per run to `cpu`."""
    before = _cpu(workflow.pool)
    started = time.perf_counter()
    results = list(workflow.map([loops] * runs, chunk_size=chunk))
    elapsed = time.perf_counter() - started
    assert len(results) == runs
    if cpu is not None:
        after = _cpu(workflow.pool)
        cpu.append(((after[0] - before[0]) / runs, (after[1] - before[1]) / runs))
    return runs / elapsed


def _cpu(pool: Any) -> tuple[float, float]:
    """CPU seconds used so far by this process and by the pool's workers."""
    return time.process_time(), sum(info["cpu_seconds"] for info in pool.workers())


def latencies(graph: Any, workflow: Any, runs: int) -> tuple[float, float]:
    """Median seconds per run of `graph`, one run at a time: (in this process, on the pool)."""

    async def local_runs() -> list[float]:
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            await _local_run(graph, 0)
            times.append(time.perf_counter() - started)
        return times

    local = asyncio.run(local_runs())
    remote = []
    for _ in range(runs):
        started = time.perf_counter()
        workflow.submit(0).result(60)
        remote.append(time.perf_counter() - started)
    return statistics.median(local), statistics.median(remote)


CHUNK = 16
WAYS = [
    ("local", 0, 1),
    ("1 worker", 1, 1),
    ("2 workers", 2, 1),
    (f"1 worker, batches of {CHUNK}", 1, CHUNK),
    (f"2 workers, batches of {CHUNK}", 2, CHUNK),
]
"""(name, workers (0: this process), runs per call)."""


def measure(quick: bool, rounds: int, runs: int) -> dict:
    import ray

    from amrita_sense.distributed import SensePool

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    if __name__ != "__main__":  # imported (the smoke test): workers need this module's code by value
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    per_us = loops_per_microsecond()
    graph = make_graph()
    options = {"actor_options": {"num_cpus": 0}}
    report: dict = {"rounds": rounds, "runs": runs, "nodes": NODES, "loadavg_before": os.getloadavg()}
    with SensePool(1, name="bench-1", **options) as one, SensePool(2, name="bench-2", **options) as two:
        flows = {1: one.workflow(graph, setup), 2: two.workflow(graph, setup)}
        for flow in flows.values():
            remote_rate(flow, 1, flow.pool.capacity)  # warm: workers started, graph shipped
        for name, micros in WORKLOADS.items():
            loops = max(1, round(micros * per_us))
            count = runs if name == "cpu" else runs * 4
            rates: dict[str, list[float]] = {way: [] for way, _, _ in WAYS}
            cpu: dict[str, list] = {way: [] for way, _, _ in WAYS}
            for _ in range(rounds):
                for way, workers, chunk in WAYS:
                    if workers:
                        rates[way].append(remote_rate(flows[workers], loops, count, chunk, cpu[way]))
                    else:
                        rates[way].append(local_rate(graph, loops, count, cpu[way]))
            report[name] = {
                "work_ms_per_run": micros * NODES / 1000,
                "ways": {
                    way: {
                        "runs_per_s": statistics.median(rates[way]),
                        "all": rates[way],
                        "cpu_ms_per_run": _cpu_ms(cpu[way]),
                    }
                    for way, _, _ in WAYS
                },
            }
        single = make_graph(1)
        local, remote = latencies(single, one.workflow(single, setup), 20 if quick else 100)
        report["latency"] = {"local_s": local, "remote_s": remote, "added_s": remote - local}
    report["loadavg_after"] = os.getloadavg()
    return report


def _cpu_ms(samples: list) -> Any:
    """Median CPU milliseconds per run: one number (local) or (driver, workers)."""
    if samples and isinstance(samples[0], tuple):
        return tuple(1000 * statistics.median(s[i] for s in samples) for i in range(2))
    return 1000 * statistics.median(samples)


def print_report(report: dict) -> None:
    print(f"{report['runs']} runs per round (x4 for short), {report['rounds']} rounds, {report['nodes']} nodes per run")
    print(f"load average before {report['loadavg_before'][0]:.2f}, after {report['loadavg_after'][0]:.2f}")
    for name in WORKLOADS:
        ways = report[name]["ways"]
        local = ways["local"]["runs_per_s"]
        print(f"\n{name}: {report[name]['work_ms_per_run']:.1f} ms of work per run")
        print(f"  {'':<26} {'runs/s':>8} {'vs local':>9} {'cpu/run: driver':>16} {'workers':>9}")
        for way, _, _ in WAYS:
            rate, cpu = ways[way]["runs_per_s"], ways[way]["cpu_ms_per_run"]
            cpu_text = f"{cpu:>16.2f}ms" if not isinstance(cpu, tuple) else f"{cpu[0]:>14.2f}ms {cpu[1]:>7.2f}ms"
            print(f"  {way:<26} {rate:>8.0f} {rate / local:>8.2f}x {cpu_text}")
        plain = ways["2 workers"]["runs_per_s"] / ways["1 worker"]["runs_per_s"]
        batched = ways[WAYS[4][0]]["runs_per_s"] / ways[WAYS[3][0]]["runs_per_s"]
        print(f"  2 workers / 1 worker: {plain:.2f}x (batches of {CHUNK}: {batched:.2f}x)")
    latency = report["latency"]
    print(
        f"\nlatency per run: local {latency['local_s'] * 1e6:.0f} us, remote {latency['remote_s'] * 1e6:.0f} us, "
        f"added {latency['added_s'] * 1e6:.0f} us"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.distributed", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke run")
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds (default 5, quick 1)")
    parser.add_argument("--runs", type=int, default=None, help="runs per round of the cpu workload (default 200)")
    parser.add_argument("--json", help="write the numbers to this file")
    args = parser.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 5)
    runs = args.runs or (20 if args.quick else 200)
    report = measure(args.quick, rounds, runs)
    print_report(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
