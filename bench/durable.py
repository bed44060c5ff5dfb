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
  version, the wait cleared) and release it, per run (runs per second = 1 / that);
- the waker rows, with real worker processes (`python -m amrita_sense worker`, the graphs of
  tests/support/waits_chaos.py, codec=pickle and a keyring; SQLite wakers poll every 50 ms, Postgres
  ones wake on `LISTEN/NOTIFY` and their timers):
  - `waker wake / <store>`: a message sent to a run parked at its WAIT until the run's next node
    runs, one waker, one message at a time: p50 / p99;
  - `waker resume / <store> / <W> wakers`: N runs due at one time T (a SLEEP_UNTIL, their message
    already sent), W waker processes: runs per second from T until the last run took its message
    (each run is resumed twice: for its timer, restore + a node + the parking save; for its message,
    restore + deliver + two nodes + the final save);
  - `waker lateness / <store>`: the fault test's load without kills (N runs, timers of 0.1-3 s, one
    or two messages at random times, two wakers): how late each timer's run resumed (woke - due),
    p50 / p99 (the issue's targets: p99 under 1 s on SQLite, under 200 ms on Postgres);
- `chain10 checkpointed / node` and `... graph= / node`: a checkpointed 10-node chain (memory store)
  without and with `Checkpointing(graph=...)`, measured interleaved: a graph without waits runs no
  extra code (the core's loop knows nothing of waits), so the two are the same within noise.

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
from amrita_sense.bench.scenarios import Plan, expect, format_seconds, measure, measure_best
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


# ----- the waker rows: real CLI worker processes (`python -m amrita_sense worker`) --------------------

SUPPORT = Path(__file__).resolve().parents[1] / "tests" / "support"
"""Where `waits_chaos` (the graphs, the run starter and the state reader these rows share with the
fault test) lives."""


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class WakerScenario:
    """Runs of `waits_chaos` graphs on one store, served by `wakers` CLI worker processes (no kills).

    `target` is `(the worker's --store options, the helper processes' DATABASE, the store opened here)`.
    """

    def __init__(self, target: tuple[list[str], str, Any], wakers: int, until: float | None = None) -> None:
        import base64
        import os
        import secrets

        import amrita_sense

        self.options, self.database, self.store = target
        self.wakers = wakers
        self.folder = Path(tempfile.mkdtemp(prefix="sense-bench-wakers-"))
        self.keys = f"bench:{base64.b64encode(secrets.token_bytes(32)).decode()}"
        runtime = str(Path(amrita_sense.__file__).resolve().parents[1])
        self.env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([runtime, str(SUPPORT)]),
            CHAOS_KEYS=self.keys,
            CHAOS_UNTIL=repr(time.time() + 3600 if until is None else until),
        )
        self.keyring = Keyring.from_env("CHAOS_KEYS", {"CHAOS_KEYS": self.keys})
        self.processes: list[Any] = []
        self.serving_at: float | None = None

    def helper(self, *args: str) -> None:
        import subprocess

        command = [sys.executable, str(SUPPORT / "waits_chaos.py"), *args]
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"waits_chaos {args[0]} failed: {done.stderr[-2000:]}")

    def start_runs(self, spec: list[list[str]]) -> None:
        self.spec = spec
        (self.folder / "spec.json").write_text(json.dumps(spec))
        self.helper("start", self.database, "asyncio", str(self.folder / "spec.json"))

    def send(self, run_id: str, message_id: str) -> None:
        self.store.send(run_id, "m", {"id": message_id}, message_id=message_id, codec=pickle, keyring=self.keyring)

    def start_wakers(self) -> None:
        """Start the wakers; return once each says it is serving."""
        import subprocess

        sys.path.insert(0, str(SUPPORT))
        import waits_chaos

        logs = []
        for n in range(self.wakers):
            command = [sys.executable, "-m", "amrita_sense", "worker", *self.options, *waits_chaos.graph_options()]
            command += ["--codec", "pickle", "--keys-env", "CHAOS_KEYS", "--owner", f"bench-{n}"]
            log = self.folder / f"waker-{n}.log"
            with open(log, "w") as out:
                self.processes.append(subprocess.Popen(command, env=self.env, stdout=out, stderr=subprocess.STDOUT))
            logs.append(log)
        deadline = time.monotonic() + 120
        while not all("serving" in log.read_text() for log in logs):
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.processes):
                raise RuntimeError("a waker did not start: " + " | ".join(log.read_text()[-500:] for log in logs))
            time.sleep(0.02)
        self.serving_at = time.time()

    def finish(self, timeout: float = 600) -> dict[str, Any]:
        """Wait until every run finished, stop the wakers, and read each run's checkpointed state."""
        waiting = [run_id for run_id, _ in self.spec]
        deadline = time.monotonic() + timeout
        try:
            while waiting:
                waiting = [run_id for run_id in waiting if self.store.load(run_id).record.status != "finished"]
                if waiting and time.monotonic() > deadline:
                    raise RuntimeError(f"{len(waiting)} runs never finished")
                time.sleep(0.1)
        finally:
            for process in self.processes:
                process.terminate()
            for process in self.processes:
                process.wait(60)
        self.helper("report", self.database, "asyncio", str(self.folder / "spec.json"), str(self.folder / "r.json"))
        found = json.loads((self.folder / "r.json").read_text())
        states = {run_id: run["state"] for run_id, run in found.items()}
        expect("every run finished", {run["status"] for run in found.values()}, {"finished"})
        return states


def waker_wakeup(target: Any, runs: int) -> dict[str, float]:
    """A message to a run parked at its WAIT until the run's next node runs, one waker, one message
    at a time (100 ms apart): p50 / p99 of `got_at - sent_at`."""
    scenario = WakerScenario(target, 1)
    scenario.start_runs([[f"wake-{n}", "waitx1"] for n in range(runs)])
    scenario.start_wakers()
    for n in range(runs):
        scenario.send(f"wake-{n}", f"wake-{n}-m0")
        time.sleep(0.1)
    states = scenario.finish()
    latencies = [state["got_at"][0] - state["sent_at"][0] for state in states.values()]
    return {"p50": _percentile(latencies, 0.5), "p99": _percentile(latencies, 0.99)}


def waker_throughput(target: Any, runs: int, wakers: int) -> dict[str, float]:
    """`runs` runs parked at SLEEP_UNTIL(T) whose message is already sent, `wakers` wakers serving
    before T: each run is resumed twice (the timer: restore, a node, the parking save; the message:
    restore, deliver, two nodes, the final save); runs per second from T to the last message taken."""
    until = time.time() + 3 + runs * 0.01  # after the runs started and the wakers serve
    scenario = WakerScenario(target, wakers, until)
    scenario.start_runs([[f"tp-{n}", "untilx1"] for n in range(runs)])
    for n in range(runs):
        scenario.send(f"tp-{n}", f"tp-{n}-m0")
    scenario.start_wakers()
    assert scenario.serving_at is not None
    if scenario.serving_at > until:
        print(f"  (the wakers served {scenario.serving_at - until:.2f} s after T: the row counts from then)")
    states = scenario.finish()
    began = max(until, scenario.serving_at)
    seconds = max(state["got_at"][0] for state in states.values()) - began
    return {"seconds": seconds, "runs/s": runs / seconds, "resumes/s": 2 * runs / seconds}


def waker_lateness(target: Any, runs: int, seed: int = 46) -> dict[str, float]:
    """The fault test's load without kills: `runs` runs of random `waits_chaos` graphs (timers of
    0.1-3 s, one or two messages sent at random times within 4 s of their start), started while
    two wakers serve; timer lateness
    p50 / p99 (`woke_at - due`; due = `parked_at` + the SLEEP, or the SLEEP_UNTIL time)."""
    import random

    sys.path.insert(0, str(SUPPORT))
    import waits_chaos

    rng = random.Random(seed)
    until = time.time() + rng.uniform(0.1, 3.0) + runs * 0.005
    scenario = WakerScenario(target, 2, until)
    names = sorted(name for name, (seconds, _) in waits_chaos.GRAPHS.items() if seconds != 0)
    spec = [[f"late-{n}", rng.choice(names)] for n in range(runs)]
    scenario.start_wakers()  # serving before the first timer starts
    scenario.start_runs(spec)
    sends = sorted(
        (rng.uniform(0, 4.0), run_id, f"{run_id}-m{k}")
        for run_id, name in spec
        for k in range(waits_chaos.GRAPHS[name][1])
    )
    began = time.monotonic()
    order: dict[str, int] = {}
    for at, run_id, _ in sends:
        pause = began + at - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        k = order[run_id] = order.get(run_id, -1) + 1
        scenario.send(run_id, f"{run_id}-m{k}")  # in send order per run
    states = scenario.finish()
    late = []
    for run_id, name in spec:
        seconds, waits = waits_chaos.GRAPHS[name]
        state = states[run_id]
        expect(f"{run_id}'s messages", state["got"], [f"{run_id}-m{k}" for k in range(waits)])
        # SLEEP_UNTIL a time already passed (a run started late) resumes at once: due when parked
        due = max(until, state["parked_at"]) if seconds is None else state["parked_at"] + seconds
        late.append(state["woke_at"] - due)
    expect("no timer woke early", min(late) >= 0, True)
    return {"p50": _percentile(late, 0.5), "p99": _percentile(late, 0.99)}


def waker_targets(dsn: str | None) -> dict[str, Any]:
    """name -> a zero-argument opener of `(worker --store options, DATABASE, store)`: a new SQLite
    file or Postgres schema each time."""
    folder = tempfile.mkdtemp(prefix="sense-bench-waker-stores-")
    counter = [0]

    def sqlite() -> tuple[list[str], str, Any]:
        counter[0] += 1
        path = str(Path(folder) / f"wakers-{counter[0]}.db")
        return ["--store", path, "--poll", str(WAKE_POLL)], path, SQLiteCheckpointStore(path)

    found: dict[str, Any] = {"sqlite": sqlite}
    if dsn is not None:
        from amrita_sense.durable import PostgresCheckpointStore

        def postgres() -> tuple[list[str], str, Any]:
            schema = f"bench_wakers_{time.monotonic_ns()}"
            store = PostgresCheckpointStore(dsn, schema=schema, max_size=4)
            return ["--store", dsn, "--schema", schema], f"{dsn}|{schema}", store

        found["postgres"] = postgres
    return found


def waker_rows(quick: bool, dsn: str | None, sizes: dict[str, int] | None = None) -> list[dict]:
    """The waker rows (real CLI worker processes) on SQLite and, with `dsn`, Postgres; printed as they come."""
    sizes = sizes or ({"wake": 20, "runs": 200, "late": 200} if quick else {"wake": 100, "runs": 1000, "late": 2000})
    results = []

    def row(name: str, size: int, values: dict[str, float]) -> None:
        results.append({"scenario": name, "size": size, **values})
        shown = "  ".join(
            f"{key} {format_seconds(value) if key in ('p50', 'p99', 'seconds') else f'{value:,.0f}'}"
            for key, value in values.items()
        )
        print(f"{name:<40} {size:>6}  {shown}", flush=True)

    for name, opener in waker_targets(dsn).items():
        row(f"waker wake / {name}", sizes["wake"], waker_wakeup(opener(), sizes["wake"]))
        for wakers in (1, 2):
            row(
                f"waker resume / {name} / {wakers} wakers",
                sizes["runs"],
                waker_throughput(opener(), sizes["runs"], wakers),
            )
        row(f"waker lateness / {name}", sizes["late"], waker_lateness(opener(), sizes["late"]))
    return results


def plans_no_wait_cost(length: int = 10) -> list[tuple[str, int, Plan]]:
    """A checkpointed chain of `length` nodes (memory store) without and with `graph=` set: a graph
    without waits runs the same code either way (the core's loop knows nothing of waits)."""

    def plan(graph: str | None) -> Plan:
        tally = [0]
        chain = NodeCompose(*distinct_nodes(length, tally)).render()
        state: dict = {}

        def prepare() -> None:
            tally[0] = 0
            interp = WorkflowInterpreter(chain)
            interp.checkpointing = Checkpointing(MemoryCheckpointStore(), "run", graph=graph)
            state["interp"] = interp

        async def timed() -> None:
            await state["interp"].run()

        def check() -> None:
            expect("nodes run", tally[0], length)

        return Plan(ops=length, timed=timed, prepare=prepare, check=check)

    return [
        (f"chain{length} checkpointed / node", length, plan(None)),
        (f"chain{length} checkpointed graph= / node", length, plan("chain")),
    ]


async def measure_interleaved(plans: list[tuple[str, int, Plan]], rounds: int) -> list[dict]:
    """Each plan measured once per round, the plans alternating; the best of the rounds each."""
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, _, plan in plans:
            value = await measure(plan)
            best[name] = min(best.get(name, value), value)
    results = []
    for name, size, _ in plans:
        results.append({"scenario": name, "size": size, "seconds": best[name], "runs": rounds})
        print(f"{name:<40} {size:>6}  {format_seconds(best[name]):>10}  ({rounds} interleaved)", flush=True)
    return results


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
            results += waker_rows(args.quick, dsn)
        results += asyncio.run(measure_interleaved(plans_no_wait_cost(), 20 if args.quick else 200))
    else:
        results = asyncio.run(measure_all(rows(args.quick), args.quick))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
