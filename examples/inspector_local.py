"""The run inspector on a local SQLite store: a finished, a parked and a panicked run.

    pip install 'amrita-sense-turbo[inspect]' httpx
    python examples/inspector_local.py            # fill a store, fetch the inspector's pages in process
    python examples/inspector_local.py --serve    # ... then serve it on 127.0.0.1 until Ctrl-C

Three orders run through one workflow with checkpoints into an SQLite file in a temporary
folder: one finishes, one parks at `SUSPEND` (it waits for a review), one panics in `check`.
The inspector's app (`amrita_sense.inspector.server.make_app`, the same one the command line
serves) is then driven in process by Starlette's test client: the JSON run list and the HTML page.
The inspector only reads: the store is opened read-only and no snapshot is unpickled.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.testclient import TestClient

from amrita_sense import IF, SUSPEND, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import Checkpointing, SQLiteCheckpointStore
from amrita_sense.inspector import Inspector, close_store, open_store
from amrita_sense.inspector.server import listen, make_app, serve, url_of

GRAPH_TARGET = "examples.inspector_local:build_graph"  # what `--graph` names (from the checkout's root)


@dataclass
class Order:
    number: int
    amount: int


@Node(wrap_to_async=False)
def intake(order: Order) -> None:
    pass


@Node(wrap_to_async=False)
def needs_review(order: Order) -> bool:
    return order.amount > 1000


@Node(wrap_to_async=False)
def check(order: Order) -> None:
    if order.amount < 0:
        raise ValueError(f"order {order.number}: negative amount {order.amount}")


@Node(wrap_to_async=False)
def ship(order: Order) -> None:
    pass


def build_graph():
    return NodeCompose(intake, IF(needs_review, SUSPEND), check, ship).render()


async def fill(path: str) -> None:
    """Run three orders with checkpoints (and their history) into the SQLite file at `path`."""
    graph = build_graph()
    with SQLiteCheckpointStore(path) as store:
        for run_id, order in (("order-1", Order(1, 50)), ("order-2", Order(2, 5000)), ("order-3", Order(3, -7))):
            interp: WorkflowInterpreter[Any] = WorkflowInterpreter(graph, extra_args=(order,))
            interp.checkpointing = Checkpointing(store, run_id, history=True)
            try:
                await interp.run()
            except ValueError as exc:  # the panic is recorded in the checkpoint too
                print(f"{run_id} panicked: {exc}")


def show(path: str) -> Inspector:
    store = open_store(path)  # read-only, as `python -m amrita_sense inspect --store` opens it
    inspector = Inspector(store, build_graph(), graph_name=GRAPH_TARGET)
    client = TestClient(make_app(inspector, store_name=path), base_url="http://127.0.0.1")
    response = client.get("/api/runs", params={"sort": "run", "order": "asc"})
    response.raise_for_status()
    listing = response.json()
    print(f"the inspector lists {listing['total']} runs:")
    for row in listing["runs"]:  # the list holds the records; a run's own view reads its snapshot
        snapshot = client.get(f"/api/runs/{quote(row['run_id'], safe='')}").json()["snapshot"]
        where = snapshot["parked"] or snapshot["position"]
        panic = f" panic={snapshot['panic']}" if snapshot["panic"] else ""
        print(f"  {row['run_id']}: {row['status']} v{row['version']} at {where} pointer={snapshot['pointer']}{panic}")
    page = client.get("/", params={"run": "order-2"})
    print(f"GET /?run=order-2: {page.status_code}, {len(page.text)} bytes of HTML, graph drawn: {'<svg' in page.text}")
    history = client.get("/api/runs/order-2/history").json()
    print(f"order-2 has {len(history['entries'])} history entries")
    return inspector


def main(argv: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "runs.db")
        asyncio.run(fill(path))
        inspector = show(path)
        print(f"from the checkout's root: python -m amrita_sense inspect --store {path} --graph {GRAPH_TARGET}")
        try:
            if "--serve" in argv:
                sock = listen(0)  # 127.0.0.1, a free port
                print(f"serving {url_of(sock)} (Ctrl-C stops)", flush=True)
                try:
                    serve(make_app(inspector, store_name=path), sock)
                except KeyboardInterrupt:
                    print("stopped")
                finally:
                    sock.close()
        finally:
            close_store(inspector.store)


if __name__ == "__main__":
    main(sys.argv[1:])
