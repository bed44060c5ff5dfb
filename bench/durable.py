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

With `--waits` (issue 46), instead, the stores' side of waiting runs, on SQLite and on Postgres (a
throwaway local cluster, or `--dsn`):
- `wake / <store>`: a message sent to a parked run until a claimer has leased it (the claimer polls
  `claim_due` every 50 ms on SQLite, wakes on `LISTEN/NOTIFY` on Postgres), per wake-up;
- `resume / <store> / <C> claimers`: N parked runs whose timers passed, resumed by C threads that
  claim them (`claim_due`, 8 at a time), save each one's next checkpoint (fenced by the claimed
  version, the wait cleared) and release it, per run (runs per second = 1 / that).

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
import threading
import time
from pathlib import Path
from typing import Any

from amrita_sense import SUSPEND, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.bench.scenarios import Plan, expect, format_seconds, measure_best
from amrita_sense.durable import Checkpointing, Keyring, MemoryCheckpointStore, SQLiteCheckpointStore
from amrita_sense.durable.snapshots.fingerprint import _build_outline
from amrita_sense.durable.stores.waiting import Wait
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


WAKE_POLL = 0.05
"""How often the SQLite claimer of `wake / sqlite` polls (a waker's bounded poll interval)."""


def _parked(store: Any, data: bytes, run_ids: list[str], wait: Wait) -> None:
    for run_id in run_ids:
        store.save(run_id, data, wait=wait, graph="bench")


def plan_wakeup(opener: Any) -> Plan:
    """One message to a parked run, until a claimer (already waiting) has leased the run."""
    data = halted(3)[1].snapshot()
    state: dict = {"n": 0}

    def claimer(store: Any, ready: threading.Event, claimed: threading.Event) -> None:
        wakeup = getattr(store, "wait_for_wakeup", None)
        if wakeup is not None:
            wakeup(0)  # listening from now on
        ready.set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if wakeup is not None:
                wakeup(1.0)
            else:
                time.sleep(WAKE_POLL)
            if store.claim_due("bench-claimer", lease_seconds=30):
                claimed.set()
                return

    def prepare() -> None:
        state["n"] += 1
        store = state.get("store") or opener()
        state["store"], state["run"] = store, f"wake-{state['n']}"
        _parked(store, data, [state["run"]], Wait("go", None))
        ready, state["claimed"] = threading.Event(), threading.Event()
        state["thread"] = threading.Thread(target=claimer, args=(store, ready, state["claimed"]), daemon=True)
        state["thread"].start()
        ready.wait(30)

    def timed() -> None:
        state["store"].send(state["run"], "go", {"ok": True})
        state["claimed"].wait(30)

    def check() -> None:
        state["thread"].join(30)
        expect("run claimed after its message", state["claimed"].is_set(), True)

    def close() -> None:
        closing = getattr(state.get("store"), "close", None)
        if closing is not None:
            closing()

    return Plan(ops=1, timed=timed, prepare=prepare, check=check, close=close)


def plan_resume(opener: Any, runs: int, claimers: int) -> Plan:
    """`runs` parked runs whose timers passed, resumed by `claimers` threads (claim, save, release)."""
    data = halted(3)[1].snapshot()
    state: dict = {"n": 0}

    def prepare() -> None:
        state["n"] += 1
        store = state.get("store") or opener()
        state["store"], state["resumed"] = store, []
        ids = [f"resume-{state['n']}-{i}" for i in range(runs)]
        _parked(store, data, ids, Wait(None, time.time() - 1))

    def work(owner: str) -> None:
        store, resumed = state["store"], state["resumed"]
        while claims := store.claim_due(owner, lease_seconds=30, limit=8, graphs=("bench",)):
            for claim in claims:
                store.save(claim.run_id, data, expected_version=claim.record.version)  # not waiting any more
                store.release(claim.run_id, owner)
                resumed.append(claim.run_id)

    def timed() -> None:
        threads = [threading.Thread(target=work, args=(f"claimer-{i}",)) for i in range(claimers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def check() -> None:
        expect("runs resumed once each", sorted(state["resumed"]), sorted(set(state["resumed"])))
        expect("runs resumed", len(state["resumed"]), runs)

    def close() -> None:
        closing = getattr(state.get("store"), "close", None)
        if closing is not None:
            closing()

    return Plan(ops=runs, timed=timed, prepare=prepare, check=check, close=close)


def waits_rows(quick: bool, dsn: str | None) -> list[tuple[str, int, Plan]]:
    """The `--waits` rows: SQLite, and Postgres when `dsn` is given."""
    folder = tempfile.mkdtemp(prefix="sense-bench-waits-")
    openers: dict[str, Any] = {}
    counter = [0]

    def sqlite() -> Any:
        counter[0] += 1
        return SQLiteCheckpointStore(Path(folder) / f"waits-{counter[0]}.db")

    openers["sqlite"] = sqlite
    if dsn is not None:
        from amrita_sense.durable import PostgresCheckpointStore  # the [postgres] extra: only when measured

        def postgres() -> Any:
            return PostgresCheckpointStore(dsn, schema=f"bench_waits_{time.monotonic_ns()}", max_size=4)

        openers["postgres"] = postgres
    runs = 50 if quick else 500
    found = []
    for name, opener in openers.items():
        found.append((f"wake / {name}", 1, plan_wakeup(opener)))
        for claimers in (1, 2):
            found.append((f"resume / {name} / {claimers} claimers", runs, plan_resume(opener, runs, claimers)))
    return found


async def measure_waits(plans: list[tuple[str, int, Plan]], quick: bool) -> list[dict]:
    results = []
    for name, size, plan in plans:
        try:
            value, runs = await measure_best(plan, budget=0.5 if quick else 3.0, max_runs=3 if quick else 15)
        finally:
            if plan.close is not None:
                plan.close()
        results.append({"scenario": name, "size": size, "seconds": value, "runs": runs})
        per_second = f"{1 / value:,.0f} runs/s" if name.startswith("resume") else ""
        print(f"{name:<32} {size:>6}  {format_seconds(value):>10}  {per_second:>14}  ({runs} runs)", flush=True)
    return results


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
    parser.add_argument("--waits", action="store_true", help="the rows of waiting runs (wake-ups, resumed runs)")
    parser.add_argument("--dsn", help="with --waits: a Postgres server (default: a throwaway local cluster)")
    args = parser.parse_args(argv)
    if args.waits:
        from bench.stores import postgres

        with postgres(args.dsn) as dsn:
            results = asyncio.run(measure_waits(waits_rows(args.quick, dsn), args.quick))
    else:
        results = asyncio.run(measure_all(rows(args.quick), args.quick))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
