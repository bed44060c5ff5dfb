"""Checkpoint-store benchmarks: saves per second and save latency of a small checkpoint.

    python -m bench.stores                     # SQLite, and Postgres on a throwaway local cluster
    python -m bench.stores --dsn postgresql://...   # Postgres on your server instead
    python -m bench.stores --quick             # fewer saves, a smoke run

Each row: C connections (threads, each on its own run id, each save expecting the version it saved
before, as `Checkpointing` does) saving the same small checkpoint (a halted run of a 3-node graph,
about 250 bytes) N times. Postgres: one `PostgresCheckpointStore(max_size=C)` shared by the threads;
SQLite: one store (one connection) per thread on one file (WAL, synchronous=NORMAL). `history` rows
also append every save to the run's history. Printed: saves per second (all threads), p50 and p99 of
one save's latency. The history / latest-only ratio compares the p50s of interleaved rounds.

The throwaway cluster keeps `fsync` and `synchronous_commit` on: every save waits for its commit to
reach the disk, as on a production server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from amrita_sense import SUSPEND, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import SQLiteCheckpointStore

TESTS = Path(__file__).resolve().parents[1] / "tests"


def small_checkpoint() -> bytes:
    @Node(wrap_to_async=False)
    def step() -> None:
        pass

    interp = WorkflowInterpreter(NodeCompose(step, SUSPEND, step).render())
    asyncio.run(interp.run())
    return interp.snapshot()


def timed_saves(store: Any, run_id: str, data: bytes, saves: int, history: bool, start: threading.Barrier) -> list:
    """`saves` conditional saves of `data` into `run_id`; each one's latency in seconds."""
    latencies = []
    version = 0
    options = {"history": True} if history else {}
    start.wait()
    for _ in range(saves):
        began = time.perf_counter()
        version = store.save(run_id, data, expected_version=version, **options).version
        latencies.append(time.perf_counter() - began)
    return latencies


def run_row(stores: list[Any], data: bytes, saves: int, history: bool, label: str) -> dict:
    """The threads of one row, one per store in `stores` (several entries may be one shared store)."""
    start = threading.Barrier(len(stores) + 1)
    results: list[list] = [[] for _ in stores]
    stamp = f"{label}-{time.monotonic_ns()}"

    def work(index: int) -> None:
        results[index] = timed_saves(stores[index], f"{stamp}-{index}", data, saves, history, start)

    threads = [threading.Thread(target=work, args=(index,)) for index in range(len(stores))]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    latencies = sorted(value for found in results for value in found)
    return {
        "saves_per_second": len(latencies) / elapsed,
        "p50": statistics.median(latencies),
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "saves": len(latencies),
    }


def sqlite_stores(folder: str, connections: int) -> list[Any]:
    path = Path(folder) / f"saves-{time.monotonic_ns()}.db"
    return [SQLiteCheckpointStore(path) for _ in range(connections)]


def postgres_stores(dsn: str, connections: int) -> list[Any]:
    from amrita_sense.durable import PostgresCheckpointStore  # the [postgres] extra: only when measured

    schema = f"bench_{time.monotonic_ns()}"
    shared = PostgresCheckpointStore(dsn, min_size=connections, max_size=connections, schema=schema)
    return [shared] * connections


@contextmanager
def postgres(dsn: str | None) -> Iterator[str | None]:
    """The DSN to measure: the one given, else a throwaway local cluster's (the tests' own, see
    tests/support/postgres_cluster.py); None when there is no server to start."""
    if dsn is not None:
        yield dsn
        return
    sys.path.insert(0, str(TESTS))
    from support.postgres_cluster import PostgresCluster, find_bindir  # the tests' helper, not the package

    bindir = find_bindir()
    if bindir is None:
        print("postgres rows skipped: no PostgreSQL server binaries (initdb, pg_ctl)", flush=True)
        yield None
        return
    cluster = PostgresCluster(bindir)
    try:
        cluster.init()
        cluster.start()
        yield cluster.dsn
    finally:
        cluster.remove()


def measure(backends: dict[str, Callable[[int], list[Any]]], saves: int, rounds: int) -> list[dict]:
    data = small_checkpoint()
    rows = []
    for name, opener in backends.items():
        for connections in (1, 4):
            samples: dict[bool, list[dict]] = {False: [], True: []}
            for _ in range(rounds):  # interleaved: latest-only, history, latest-only, ...
                for history in (False, True):
                    stores = opener(connections)
                    samples[history].append(run_row(stores, data, saves, history, name))
                    for store in {id(s): s for s in stores}.values():
                        store.close()
            for history, found in samples.items():
                row = {
                    "store": name,
                    "connections": connections,
                    "history": history,
                    **{key: statistics.median(r[key] for r in found) for key in ("saves_per_second", "p50", "p99")},
                }
                rows.append(row)
                print(
                    f"{name:<9} {connections} conn  {'history' if history else 'latest ':<8} "
                    f"{row['saves_per_second']:>9,.0f} saves/s  p50 {row['p50'] * 1e3:7.3f} ms  "
                    f"p99 {row['p99'] * 1e3:7.3f} ms",
                    flush=True,
                )
            latest, kept = (next(r for r in rows[-2:] if r["history"] is h) for h in (False, True))
            print(f"{name:<9} {connections} conn  history / latest-only p50: {kept['p50'] / latest['p50']:.2f}x")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stores", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer saves, a smoke run")
    parser.add_argument("--dsn", help="a Postgres server to measure (default: a throwaway local cluster)")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args(argv)
    saves, rounds = (50, 1) if args.quick else (1000, 3)
    folder = tempfile.mkdtemp(prefix="sense-bench-stores-")
    with postgres(args.dsn) as dsn:
        backends: dict[str, Callable[[int], list[Any]]] = {"sqlite": lambda c: sqlite_stores(folder, c)}
        if dsn is not None:
            backends["postgres"] = lambda c: postgres_stores(dsn, c)
        rows = measure(backends, saves, rounds)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
