"""Durable-run benchmarks: snapshot and restore against graph size and stack depth, checkpoint cost per node.

    python -m bench.durable            # full sizes
    python -m bench.durable --quick    # small sizes, a smoke run

Rows:
- `snapshot` / `restore` of a halted run, graph of N distinct sync nodes (the
  graph's outline cached, as for every snapshot after the first);
- `outline`: computing a graph's fingerprint and outline the first time, per row;
- `snapshot_depth` / `restore_depth`: a 100-node graph with a return stack of D entries;
- `sign / save` / `verify / load`: a keyring signing / checking a snapshot holding N KB of user data;
- `run_off` / `run_memory` / `run_sqlite` / `run_sqlite_every_100`: a run of N
  nodes without checkpoints, with one after every node into a memory store, into
  an SQLite file (WAL, synchronous=NORMAL), and into SQLite every 100 nodes, per
  node; `sqlite cost / node` is the difference to `run_off`.

Every number is the best of several timed runs (this is a shared machine); read
them as orders of magnitude and ratios within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Any

from amrita_sense import SUSPEND, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.bench.scenarios import Plan, expect, format_seconds, measure_best
from amrita_sense.durable import Checkpointing, Keyring, MemoryCheckpointStore, SQLiteCheckpointStore
from amrita_sense.durable.snapshots.fingerprint import _build_outline
from amrita_sense.node.core import program_of
from amrita_sense.types import PointerVector


def distinct_nodes(count: int, tally: list) -> list:
    """`count` sync inline nodes, each its own function (as AmritaCore's are)."""
    nodes = []
    for index in range(count):

        def body() -> None:
            tally[0] += 1

        body.__name__ = body.__qualname__ = f"step_{index}"
        nodes.append(Node(wrap_to_async=False)(body))
    return nodes


def halted(count: int, depth: int = 0) -> tuple[Any, WorkflowInterpreter]:
    """A graph of `count` nodes and an interpreter halted after its first, with `depth` return addresses."""
    nodes = distinct_nodes(count, [0])
    graph = NodeCompose(nodes[0], SUSPEND, *nodes[1:]).render()
    interp = WorkflowInterpreter(graph)
    asyncio.run(interp.run())
    for index in range(depth):
        interp._ret_addr_stack.push(PointerVector([index % count]))
    interp._ret_addr_stack.resize(max(1024, depth))
    return graph, interp


def plan_snapshot(count: int, depth: int = 0) -> Plan:
    _, interp = halted(count, depth)
    interp.snapshot()  # warm the outline cache
    reps = 200
    return Plan(ops=reps, timed=lambda: [interp.snapshot() for _ in range(reps)])


def plan_restore(count: int, depth: int = 0) -> Plan:
    graph, interp = halted(count, depth)
    data = interp.snapshot()
    reps = 100
    made: list = []

    def timed() -> None:
        made[:] = [WorkflowInterpreter.restore(graph, data) for _ in range(reps)]

    def check() -> None:
        expect("restored return stack", len(made[-1]._ret_addr_stack), depth)

    return Plan(ops=reps, timed=timed, check=check)


def plan_outline(count: int) -> Plan:
    graph, _ = halted(count)
    prog = program_of(graph)
    return Plan(ops=prog.nrows, timed=lambda: _build_outline(prog))


def plan_sign(kilobytes: int, verify: bool = False) -> Plan:
    """Signing (or checking) one snapshot that holds `kilobytes` KB of user data (the pools pickled)."""
    graph = NodeCompose(*distinct_nodes(3, [0]), SUSPEND).render()
    interp = WorkflowInterpreter(graph, extra_args=(b"x" * (kilobytes * 1024),))
    asyncio.run(interp.run())
    keyring = Keyring.generate("bench").bound_to("run", 1)
    data = interp.snapshot(pickle)
    signed = keyring.sign_own(data)
    reps = 500
    act = (lambda: keyring.verify(signed)) if verify else (lambda: keyring.sign_own(data))

    def timed() -> None:
        for _ in range(reps):  # each result dropped, as a save drops it once written
            act()

    return Plan(ops=reps, timed=timed)


def plan_run(count: int, store_kind: str | None, every: int = 1) -> Plan:
    tally = [0]
    graph = NodeCompose(*distinct_nodes(count, tally)).render()
    folder = tempfile.mkdtemp(prefix="sense-bench-")
    state: dict = {"runs": 0}

    def prepare() -> None:
        tally[0] = 0
        interp = WorkflowInterpreter(graph)
        if store_kind == "memory":
            interp.checkpointing = Checkpointing(MemoryCheckpointStore(), "run", every_nodes=every)
        elif store_kind == "sqlite":
            state["runs"] += 1
            store = SQLiteCheckpointStore(Path(folder) / f"runs-{state['runs']}.db")
            interp.checkpointing = Checkpointing(store, "run", every_nodes=every)
        state["interp"] = interp

    async def timed() -> None:
        await state["interp"].run()

    def check() -> None:
        expect("nodes run", tally[0], count)

    return Plan(ops=count, timed=timed, prepare=prepare, check=check)


def rows(quick: bool) -> list[tuple[str, int, Plan]]:
    sizes = [100, 1000] if quick else [100, 1000, 10_000]
    depths = [0, 100] if quick else [0, 10, 100, 1000]
    chain = 200 if quick else 2000
    found = []
    for size in sizes:
        found += [("snapshot", size, plan_snapshot(size)), ("restore", size, plan_restore(size))]
        found.append(("outline / row", size, plan_outline(size)))
    for depth in depths:
        found += [
            ("snapshot_depth", depth, plan_snapshot(100, depth)),
            ("restore_depth", depth, plan_restore(100, depth)),
        ]
    for kilobytes in (0, 1, 10, 100):
        found += [
            ("sign / save", kilobytes, plan_sign(kilobytes)),
            ("verify / load", kilobytes, plan_sign(kilobytes, True)),
        ]
    for name, kind, every in (
        ("run_off", None, 1),
        ("run_memory", "memory", 1),
        ("run_sqlite", "sqlite", 1),
        ("run_sqlite_every_100", "sqlite", 100),
    ):
        found.append((name + " / node", chain, plan_run(chain, kind, every)))
    return found


async def measure_all(plans: list[tuple[str, int, Plan]], quick: bool) -> list[dict]:
    results = []
    for name, size, plan in plans:
        value, runs = await measure_best(plan, budget=0.2 if quick else 1.0, max_runs=5 if quick else 15)
        results.append({"scenario": name, "size": size, "seconds": value, "runs": runs})
        print(f"{name:<28} {size:>6}  {format_seconds(value):>10}  ({runs} runs)", flush=True)
    by_name = {r["scenario"]: r["seconds"] for r in results}
    cost = by_name["run_sqlite / node"] - by_name["run_off / node"]
    print(f"{'sqlite cost / node':<28} {'':>6}  {format_seconds(cost):>10}")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.durable", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke run")
    parser.add_argument("--json", help="write the numbers to this file")
    args = parser.parse_args(argv)
    results = asyncio.run(measure_all(rows(args.quick), args.quick))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
