"""Instructions per request of the durable SQLite work (`durable_sqlite`, sync, signed), counted by
callgrind as the speed guard counts (`amrita_sense.bench.perf_guard`), with the parts of a save:

    PYTHONPATH=src:. python -m bench.durable_count            # every part
    PYTHONPATH=src:. python -m bench.durable_count request floor

Parts (each a 10-node chain, a new interpreter and run id per request, `every_nodes=1`,
`codec=pickle`, 10 saves per request (the last node's is the end's); instructions per request =
(I(n2) - I(n1)) / (n2 - n1)):

- `off`: the request without checkpoints (the engine);
- `null`: checkpointed into a store whose save only makes the record (no keyring): the snapshots
  and the policy;
- `signed`: the same with a keyring: `signed - null` is the signing;
- `request`: `durable_sqlite` itself (SQLite, a keyring);
- `floor`: `durable_sqlite_floor`, one plain upsert and commit of the same bytes per save.

Counts, not seconds: they do not move with the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import gc
import glob
import os
import pickle
import subprocess
import sys
import tempfile
import time
from typing import Any

from amrita_sense.bench.perf_guard import MARKER, _fixed_layout, _totals, _valgrind
from amrita_sense.durable.snapshots.format import read_header
from amrita_sense.durable.stores.base import _record

PARTS = ("off", "null", "signed", "request", "floor")
SIZES = (2, 12)


class _NullStore:
    """A store whose save only makes the record a store returns."""

    def save(self, run_id: str, data: bytes, *, expected_version: Any = None, **_: Any) -> Any:
        header = read_header(data)
        version = (expected_version or 0) + 1
        return _record(run_id, version, header.status, header.fingerprint, len(data), 0.0, 0.0)

    def load(self, *_: Any, **__: Any) -> Any:
        raise NotImplementedError

    list = delete = load


def _chain_plan(part: str, n: int) -> Any:
    from amrita_sense.bench.scenarios.durable_work import ChainRequest, _durable_chain_graph
    from amrita_sense.durable import Checkpointing, Keyring
    from amrita_sense.runtime.workflow import WorkflowInterpreter

    graph = _durable_chain_graph()
    keyring = Keyring.generate("bench") if part == "signed" else None
    store = _NullStore()

    async def timed() -> None:
        for x in range(n):
            interp = WorkflowInterpreter(graph, extra_args=(ChainRequest(x),))
            if part != "off":
                interp.checkpointing = Checkpointing(store, f"run-{x}", every_nodes=1, codec=pickle, keyring=keyring)
            await interp.run()

    return timed


def _plan(part: str, n: int, loop: Any) -> Any:
    """The coroutine function of `part`'s timed part at size `n` (run once uncounted first)."""
    if part in ("off", "null", "signed"):
        return _chain_plan(part, n)
    from amrita_sense.bench.scenarios import build

    made = build("durable_sqlite" if part == "request" else "durable_sqlite_floor", n)
    plan = loop.run_until_complete(made) if asyncio.iscoroutine(made) else made
    loop.run_until_complete(plan.prepare())
    return plan.timed


def _count(part: str, out: str) -> None:
    loop = asyncio.SelectorEventLoop()
    asyncio.set_event_loop(loop)
    for n in SIZES:
        timed = _plan(part, n, loop)
        loop.run_until_complete(timed())  # warm-up
        gc.collect()
        gc.disable()
        sys.call_tracing(loop.run_until_complete, (timed(),))
        gc.enable()
    with open(out, "w") as f:
        import amrita_sense

        f.write(amrita_sense.IMPLEMENTATION)


def count_part(part: str) -> int:
    """Instructions per request of `part` on the compiled build."""
    with tempfile.TemporaryDirectory(prefix="durable_count_") as tmp:
        out = os.path.join(tmp, "callgrind.out")
        env = dict(os.environ, PYTHONHASHSEED="0", AMRITA_SENSE_REQUIRE_EXTENSIONS="1")
        env.pop("AMRITA_SENSE_NO_EXTENSIONS", None)
        command = [
            _valgrind(),
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            f"--log-file={out}.log",
            "--collect-atstart=no",
            f"--toggle-collect={MARKER}",
            f"--dump-after={MARKER}",
            sys.executable,
            "-m",
            "bench.durable_count",
            "_count",
            part,
            "--out",
            os.path.join(tmp, "loaded"),
        ]
        done = subprocess.run(command, env=env, capture_output=True, text=True, preexec_fn=_fixed_layout)
        if done.returncode != 0:
            raise RuntimeError(f"{part}: exit {done.returncode}\n{done.stderr[-3000:]}")
        dumps = sorted(glob.glob(out + ".*[0-9]"), key=lambda path: int(path.rsplit(".", 1)[1]))
        i1, i2 = (_totals(path) for path in dumps)
    return round((i2 - i1) / (SIZES[1] - SIZES[0]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.durable_count", description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", default=list(PARTS))
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if args.parts[:1] == ["_count"]:
        _count(args.parts[1], args.out)
        return 0
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        counts = dict(zip(args.parts, pool.map(count_part, args.parts)))
    from amrita_sense.bench.scenarios.durable_work import our_snapshots

    saves = len(asyncio.run(our_snapshots()))
    for part, count in counts.items():
        print(f"  {part:<8} {count:>10,} instructions/request")
    if {"off", "null", "signed"} <= counts.keys():
        print(f"  per save: snapshot+policy {(counts['null'] - counts['off']) / saves:,.0f}", end="")
        print(f", signing {(counts['signed'] - counts['null']) / saves:,.0f}")
    if {"request", "floor"} <= counts.keys():
        print(f"  request / floor: {counts['request'] / counts['floor']:.2f}x")
        if "signed" in counts:
            print(f"  per save: store {(counts['request'] - counts['signed']) / saves:,.0f}", end="")
            print(f"; floor per write {counts['floor'] / saves:,.0f}")
    print(f"  ({saves} saves per request; {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
