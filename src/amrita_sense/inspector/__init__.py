"""A local, read-only run inspector in the browser, over a checkpoint store.

    python -m amrita_sense inspect --store runs.db --graph myapp.flows:build [--port 8765]
    python -m amrita_sense inspect --store postgresql://app@db/app --schema amrita_sense

The page (http://127.0.0.1:PORT/) lists the runs (newest first, sortable, paged) and shows a
picked run: its record, its position (pointer, return depth, parked tag), its history, its panic
and traceback, and its graph drawn with the pointer marked (`--graph`, when the fingerprints
match). JSON endpoints give the same data (`amrita_sense.inspector.server`).

It only reads: the store is opened so that nothing is ever written (`amrita_sense.inspector.stores`:
an SQLite file read-only, without journal files; Postgres sessions read-only), the run list is one
page sorted by the store from the records alone, and a Postgres password is never shown;
snapshots are read without a codec (user blobs are never unpickled), and the server listens on
127.0.0.1 only. The web server needs the `[inspect]` extra (Starlette, uvicorn); the views below
do not:

    inspector = Inspector(open_store("runs.db"), graph)
    inspector.runs(RunQuery(limit=20))        # plain data, as /api/runs answers it
    inspector.run("chat-42")                  # as /api/runs/chat-42
"""

from __future__ import annotations

from amrita_sense.inspector.stores import BadStore, close_store, describe_store, open_store
from amrita_sense.inspector.views import BadQuery, Drawing, Inspector, RunNotFound, RunQuery

__all__ = [
    "BadQuery",
    "BadStore",
    "Drawing",
    "Inspector",
    "RunNotFound",
    "RunQuery",
    "close_store",
    "describe_store",
    "open_store",
]
