"""Inspector benchmark: listing 1,000 checkpointed runs through the inspector's app.

    python -m bench.inspector            # an SQLite store of 1,000 runs (target: under 1 s per request)
    python -m bench.inspector --quick    # 60 runs, a smoke run

Rows (each the best of several requests, through the ASGI app in process: Starlette's test
client, no socket): `api_runs` (`/api/runs`, the first page of 50, newest first: sorted and cut
by the store, only the page's records read, no snapshot), `api_runs_500` (a page of 500), `page` (the
HTML page's first render, `/`), `page_run` (`/?run=...`, a halted run with its history and its
graph drawn, when Graphviz is installed; its SVG is cached after the first view, so this row is
the cached one and `page_run_first` the first). The store is filled through `Checkpointing`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from amrita_sense import SUSPEND, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import Checkpointing, SQLiteCheckpointStore
from amrita_sense.inspector import Inspector, close_store, open_store
from amrita_sense.inspector.server import make_app
from amrita_sense.node.wrapper import Node

FULL_RUNS = 1_000
QUICK_RUNS = 60
TARGET_SECONDS = 1.0


def _step(name: str) -> Any:
    def body() -> str:
        return name

    body.__name__ = body.__qualname__ = name
    return Node()(body)


GRAPH = NodeCompose(_step("fetch"), _step("think"), SUSPEND, _step("answer"), _step("log")).render()


async def _fill(store: Any, count: int) -> None:
    """`count` runs: every third one halted at SUSPEND, the others finished; one in ten keeps history."""
    for index in range(count):
        interp = WorkflowInterpreter(GRAPH)
        interp.checkpointing = Checkpointing(store, f"run-{index:05d}", every_nodes=None, history=index % 10 == 0)
        await interp.run()
        if index % 3:
            await interp.run()


def best(run: Callable[[], Any], repeat: int) -> float:
    """The best wall time of `repeat` runs of `run`, in seconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def _get(http: TestClient, url: str) -> Any:
    answer = http.get(url)
    assert answer.status_code == 200, (url, answer.status_code, answer.text[:200])
    return answer


def rows(quick: bool) -> dict[str, Any]:
    """The measured rows: the number of runs and the seconds of each request."""
    count = QUICK_RUNS if quick else FULL_RUNS
    repeat = 3 if quick else 5
    with tempfile.TemporaryDirectory() as work:
        path = str(Path(work) / "runs.db")
        writer = SQLiteCheckpointStore(path)
        asyncio.run(_fill(writer, count))
        writer.close()
        store = open_store(path)
        try:
            return _measure(store, count, repeat)
        finally:
            close_store(store)


def _measure(store: Any, count: int, repeat: int) -> dict[str, Any]:
    app = make_app(Inspector(store, GRAPH, graph_name="bench.inspector:GRAPH"), store_name="bench")
    with TestClient(app, base_url="http://127.0.0.1") as http:
        listed = _get(http, "/api/runs").json()
        assert listed["total"] == count and len(listed["runs"]) == min(50, count)
        assert listed["runs"][0]["updated_at"] >= listed["runs"][-1]["updated_at"]  # newest first
        found: dict[str, Any] = {"runs": count}
        found["api_runs"] = best(lambda: _get(http, "/api/runs"), repeat)
        found["api_runs_500"] = best(lambda: _get(http, "/api/runs?limit=500"), repeat)
        found["page"] = best(lambda: _get(http, "/"), repeat)
        found["page_bytes"] = len(_get(http, "/").text)
        if shutil.which("dot") is not None:
            found["page_run_first"] = best(lambda: _get(http, "/?run=run-00000"), 1)
            found["page_run"] = best(lambda: _get(http, "/?run=run-00000"), repeat)
    return found


TIMED = ("api_runs", "api_runs_500", "page", "page_run_first", "page_run")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.inspector", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="60 runs, a smoke run")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    found = rows(args.quick)
    if args.json:
        print(json.dumps(found))
        return 0
    print(f"SQLite store of {found['runs']} checkpointed runs, through the inspector's app")
    for name in TIMED:
        if name not in found:
            continue
        verdict = "" if args.quick else ("  ok" if found[name] < TARGET_SECONDS else f"  over {TARGET_SECONDS} s")
        print(f"  {name:<15} {found[name] * 1000:9.1f} ms{verdict}")
    print(f"  page: {found['page_bytes']} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
