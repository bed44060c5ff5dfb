"""Stores: where snapshots are kept by run id, one module per backend.

`base` holds the protocol (`CheckpointStore`, `HistoryStore`) and the records; `sqlite`, `memory`
and `postgres` (extra `[postgres]`, imported on first use) are the backends. Every backend passes
the same conformance suite (tests/test_store_conformance.py).
"""

from amrita_sense.durable.stores.base import (
    HISTORY_METHODS,
    Checkpoint,
    CheckpointRecord,
    CheckpointStore,
    HistoryStore,
)
from amrita_sense.durable.stores.memory import MemoryCheckpointStore
from amrita_sense.durable.stores.sqlite import SQLiteCheckpointStore

__all__ = [
    "HISTORY_METHODS",
    "Checkpoint",
    "CheckpointRecord",
    "CheckpointStore",
    "HistoryStore",
    "MemoryCheckpointStore",
    "SQLiteCheckpointStore",
]
