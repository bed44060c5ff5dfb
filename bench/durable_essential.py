"""The least a checkpointed request on SQLite can cost, beside the floor and ours (issue 44's SQLite
`sync` target, 1.5x the floor):

    PYTHONPATH=src:. python -m bench.durable_essential            # 15 interleaved rounds
    PYTHONPATH=src:. python -m bench.durable_essential --quick    # a smoke run

Rows, each a 10-node chain request (`durable_work`), measured interleaved in one run, medians:

- `floor`: the shipped `durable_sqlite_floor`: the store's own writes of our snapshots' bytes (one
  upsert and commit each, back to back, no engine);
- `engine + write`: the chain on the engine, each node writing its save's bytes with the floor's
  upsert (the same bytes, the same settings, a file of its own): a write among the engine's work;
- `essential`: the same, each node also doing what any checkpoint of this run must: pickle what the
  run holds (its injection pools, as ours encodes them) and sign the bytes it writes (HMAC-SHA256,
  the padded-key states computed once, as `signing._HmacSha256` does). Nothing else: no engine
  state captured, no framing, no checksum, no policy, no store bookkeeping;
- `ours`: the shipped `durable_sqlite` (sync, signed).

`essential / floor` is the least any checkpointer with pickle and a signature reaches; what a save
of ours may spend on everything else at 1.5x the floor is `(1.5 * floor - essential) / saves`.
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import sqlite3
import statistics
import sys
import time
from typing import Any

from amrita_sense.bench.scenarios import build, expect
from amrita_sense.bench.scenarios.bodies import api, distinct_function
from amrita_sense.bench.scenarios.durable_work import (
    _SQLITE_UPSERT,
    DURABLE_CHAIN_NODES,
    ChainRequest,
    Folder,
    durable_chain_result,
    our_snapshots,
    peer_mix,
    run_ids,
    settle,
)
from amrita_sense.durable import Keyring

ROWS = ("floor", "engine + write", "essential", "ours")
TARGET = 1.5


def _floor_connection(path: str) -> sqlite3.Connection:
    """A plain connection as the floor's (`durable_work.durable_floor`): autocommit, WAL, NORMAL."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE floor (run_id TEXT PRIMARY KEY, version INTEGER NOT NULL, data BLOB NOT NULL)")
    return conn


class WritingChain:
    """The chain on the engine, node k writing save k's bytes (and, `essential`, pickling the run's
    pools and signing those bytes first) into a file of its own; `request(x)` serves one."""

    def __init__(self, saves: list[bytes], path: str, essential: bool) -> None:
        self.saves = saves
        self.conn = _floor_connection(path)
        self.new_id = run_ids("essential" if essential else "write")
        self.signer = Keyring.generate("bench")._macs["bench"]
        self.signatures: list[bytes] = []
        self.run_id = ""
        Node, NodeCompose, self.Interpreter = api()
        scope = {"ChainRequest": ChainRequest, "mix": peer_mix, "save": self.save_essential if essential else self.save}
        nodes = []
        for k in range(DURABLE_CHAIN_NODES):
            source = (
                f"async def step_{k}(request: ChainRequest):\n"
                f"    request.value = mix(request.value, {k})\n"
                f"    save(request, {k})\n"
            )
            nodes.append(Node()(distinct_function(source, f"step_{k}", scope)))
        self.graph = NodeCompose(*nodes).render()

    def save(self, request: ChainRequest, k: int) -> None:
        self.conn.execute(_SQLITE_UPSERT, (self.run_id, k + 1, self.saves[k]))

    def save_essential(self, request: ChainRequest, k: int) -> None:
        pickle.dumps(((request,), {}))
        data = self.saves[k]
        self.signatures.append(self.signer.signed_trailer(b"", b"", data))
        self.conn.execute(_SQLITE_UPSERT, (self.run_id, k + 1, data))

    async def request(self, x: int) -> int:
        self.run_id = self.new_id()
        self.signatures.clear()
        request = ChainRequest(x)
        await self.Interpreter(self.graph, extra_args=(request,)).run()
        return request.value

    def stored(self) -> tuple[int, bytes]:
        return self.conn.execute("SELECT version, data FROM floor WHERE run_id = ?", (self.run_id,)).fetchone()


async def _chain_plan(saves: list[bytes], path: str, essential: bool, n: int) -> tuple:
    chain = WritingChain(saves, path, essential)
    got: list[int] = []

    async def timed() -> None:
        got.clear()
        for x in range(n):
            got.append(await chain.request(x))

    def check() -> None:
        expect("the writing chain's results", got, [durable_chain_result(x) for x in range(n)])
        expect("the writing chain's last stored save", chain.stored(), (len(saves), saves[-1]))
        if essential:
            expect("the essential chain's signatures", len(chain.signatures), DURABLE_CHAIN_NODES)

    return timed, check, chain.conn.close


async def _shipped_plan(name: str, n: int) -> tuple:
    made = build(name, n)
    plan = await made if asyncio.iscoroutine(made) else made
    await plan.prepare()
    return plan.timed, plan.check, plan.close


async def measure(rounds: int, n: int) -> dict[str, float]:
    """Seconds per request of each row: the median of `rounds` interleaved measurements of `n`
    requests each (every result and the last stored save checked, outside the timing)."""
    saves = await our_snapshots()
    folder = Folder(None, "amrita-essential")
    plans: dict[str, Any] = {}
    try:
        plans["floor"] = await _shipped_plan("durable_sqlite_floor", n)
        plans["engine + write"] = await _chain_plan(saves, folder.file("write.db"), False, n)
        plans["essential"] = await _chain_plan(saves, folder.file("essential.db"), True, n)
        plans["ours"] = await _shipped_plan("durable_sqlite", n)
        times: dict[str, list[float]] = {row: [] for row in ROWS}
        for _ in range(rounds):
            for row in ROWS:
                timed, check, _ = plans[row]
                started = time.perf_counter()
                await timed()
                times[row].append((time.perf_counter() - started) / n)
                await settle(check())
        return {row: statistics.median(values) for row, values in times.items()}
    finally:
        for _, _, close in plans.values():
            await settle(close() if close is not None else None)
        folder.remove()


def report(seconds: dict[str, float], saves: int) -> list[str]:
    floor = seconds["floor"]
    lines = [f"  {row:<16} {seconds[row] * 1e6:8.1f} us/request  {seconds[row] / floor:5.2f}x floor" for row in ROWS]
    left = (TARGET * floor - seconds["essential"]) / saves
    spent = (seconds["ours"] - seconds["essential"]) / saves
    lines.append(
        f"  at {TARGET}x the floor a save may spend {left * 1e6:.1f} us beyond the essential work; ours spends "
        f"{spent * 1e6:.1f} us ({saves} saves per request)"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.durable_essential", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds of 5 requests: a smoke run")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--requests", type=int, default=200, help="requests per measurement")
    args = parser.parse_args(argv)
    rounds, n = (3, 5) if args.quick else (args.rounds, args.requests)
    seconds = asyncio.run(measure(rounds, n))
    print(f"SQLite {sqlite3.sqlite_version}, WAL, synchronous=NORMAL; medians of {rounds} interleaved rounds of {n}")
    print("\n".join(report(seconds, len(asyncio.run(our_snapshots())))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
