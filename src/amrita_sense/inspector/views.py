"""What the inspector shows, as plain data: the run list, one run, its history, its drawing.

`Inspector(store, graph=None)` reads a checkpoint store through `list`, `load` and `history`
only; every answer is made of dicts, lists, strings and numbers (the JSON endpoints return them
as they are, the HTML page renders them). Snapshots are read with `inspect_snapshot` and the
engine document: nothing is restored or run, and the user blobs (pools, a panic's codec copy)
are never decoded, so no codec and no unpickling is ever involved.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from amrita_sense.durable import STATUSES, CheckpointRecord, inspect_snapshot
from amrita_sense.durable.errors import CheckpointNotFound, DurableError
from amrita_sense.durable.snapshots.fingerprint import graph_fingerprint
from amrita_sense.durable.snapshots.format import decode
from amrita_sense.pictures import GraphvizFailed, GraphvizNotFound, Overlay, picture_of, to_mermaid, to_svg
from amrita_sense.pictures.errors import PictureError

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
SORT_KEYS: dict[str, Callable[[CheckpointRecord], Any]] = {
    "updated": lambda r: (r.updated_at, r.run_id),
    "created": lambda r: (r.created_at, r.run_id),
    "run": lambda r: r.run_id,
    "status": lambda r: (r.status, r.run_id),
    "version": lambda r: (r.version, r.run_id),
}
"""The columns the run list sorts by: the record's own fields (no snapshot is read to sort)."""
ORDERS = ("desc", "asc")
SVG_CACHE_SIZE = 64
"""Drawings kept, by overlay (the graph is fixed for the inspector's life)."""


class BadQuery(ValueError):
    """A request's parameters are out of range (answered with 400)."""


class RunNotFound(LookupError):
    """The store has no such run, or no such kept version of it (answered with 404)."""


@dataclass(frozen=True)
class RunQuery:
    """One page of the run list: `limit` runs from `offset`, sorted, optionally of one status."""

    offset: int = 0
    limit: int = DEFAULT_LIMIT
    sort: str = "updated"
    order: str = "desc"
    status: str | None = None

    @classmethod
    def parse(cls, params: Any) -> RunQuery:
        """The query of a request's parameters (a mapping of strings); `BadQuery` when out of range."""
        return cls(
            offset=_integer(params, "offset", 0, 0, None),
            limit=_integer(params, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT),
            sort=_choice(params, "sort", "updated", tuple(SORT_KEYS)) or "updated",
            order=_choice(params, "order", "desc", ORDERS) or "desc",
            status=_choice(params, "status", None, STATUSES),
        )


def _integer(params: Any, name: str, default: int, low: int, high: int | None) -> int:
    text = params.get(name)
    if text in (None, ""):
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadQuery(f"{name} is an integer, not {text!r:.40}") from None
    if value < low or (high is not None and value > high):
        raise BadQuery(f"{name} is between {low} and {high}" if high else f"{name} is at least {low}")
    return value


def _choice(params: Any, name: str, default: str | None, choices: tuple[str, ...]) -> str | None:
    text = params.get(name)
    if text in (None, ""):
        return default
    if text not in choices:
        raise BadQuery(f"{name} is one of {', '.join(choices)}, not {text!r:.40}")
    return str(text)


def parse_version(text: str | None) -> int | None:
    """The `version` parameter of a request (None: the latest); `BadQuery` when not a positive int."""
    if text in (None, ""):
        return None
    return _integer({"version": text}, "version", 0, 1, None)


def timestamp(seconds: float) -> str:
    """Seconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC`."""
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def record_view(record: CheckpointRecord) -> dict[str, Any]:
    """A checkpoint record as plain data, with its times also written out."""
    view = asdict(record)
    view["created"] = timestamp(record.created_at)
    view["updated"] = timestamp(record.updated_at)
    return view


def snapshot_view(data: bytes) -> dict[str, Any]:
    """What a snapshot says of its run (`inspect_snapshot`) and its panic record, as plain data.
    `SnapshotFormatError` when the bytes are not a readable snapshot."""
    info = inspect_snapshot(data)  # checks every field first: the document below is well formed
    view = asdict(info)
    view["panic_record"] = _panic_record(decode(data).document["interp"])
    return view


def _panic_record(state: dict) -> dict[str, Any] | None:
    """The root run's stored exception: class, message, plain arguments, traceback text, and
    whether a codec copy is stored (it is not decoded here)."""
    panic = state.get("panic")
    if panic is None:
        return None
    return {
        "type": panic["type"],
        "message": panic["message"],
        "args": panic["args"],
        "traceback": panic["traceback"],
        "codec_copy": panic.get("blob") is not None,
    }


@dataclass(frozen=True)
class Drawing:
    """A run drawn over its graph: `kind` "svg" (Graphviz's picture), "mermaid" (its text, when
    Graphviz cannot draw; `reason` says why) or "none" (not drawn; `reason` says why)."""

    kind: str
    reason: str | None = None
    text: str | None = None
    pointer_node: str | None = None
    """The id of the node the pointer stands on in the picture (None: no pointer, or not drawn)."""
    pointer_label: str | None = None


class Inspector:
    """Read-only views of a checkpoint store, and of its runs drawn over `graph` when given.

    `store` is a synchronous checkpoint store (`list`, `load`, and `history` when it keeps one);
    the inspector calls nothing else. `graph` is the rendered graph the runs were taken on
    (`--graph module:factory`): a run is drawn only when its fingerprint is the graph's.
    """

    def __init__(self, store: Any, graph: Any = None, *, graph_name: str | None = None) -> None:
        self.store = store
        self.graph = graph
        self.graph_name = graph_name
        self.fingerprint = None if graph is None else graph_fingerprint(graph)
        self._picture = None if graph is None else picture_of(graph)
        self._svg_cache: OrderedDict[Overlay, str] = OrderedDict()
        self._svg_lock = threading.Lock()  # threads: guards `_svg_cache` (the server's worker threads share it)

    @property
    def keeps_history(self) -> bool:
        """True when the store keeps runs' histories (`HistoryStore`)."""
        return callable(getattr(self.store, "history", None))

    # ----- the run list --------------------------------------------------------------------------

    def runs(self, query: RunQuery | None = None) -> dict[str, Any]:
        """One page of the run list: the records sorted by `query`, each with what its latest
        snapshot says (position, parked tag, panic) — only the page's snapshots are read."""
        query = query or RunQuery()
        records = self.store.list(status=query.status)
        records.sort(key=SORT_KEYS[query.sort], reverse=query.order == "desc")
        page = records[query.offset : query.offset + query.limit]
        return {
            "total": len(records),
            "offset": query.offset,
            "limit": query.limit,
            "sort": query.sort,
            "order": query.order,
            "status": query.status,
            "runs": [self._row(record) for record in page],
        }

    def _row(self, record: CheckpointRecord) -> dict[str, Any]:
        """One line of the run list (the latest checkpoint: it may be newer than the listed one)."""
        row = record_view(record)
        row.update(position=None, parked=None, pointer=None, panic=False, panic_type=None, error=None)
        try:
            checkpoint = self.store.load(record.run_id)
            info = inspect_snapshot(checkpoint.data)
        except CheckpointNotFound:
            row["error"] = "deleted since it was listed"
            return row
        except DurableError as exc:
            row["error"] = str(exc)
            return row
        row.update(record_view(checkpoint.record))
        row.update(position=info.position, parked=info.parked, pointer=info.pointer)
        row.update(panic=info.panic is not None, panic_type=None if info.panic is None else info.panic)
        return row

    # ----- one run -------------------------------------------------------------------------------

    def load(self, run_id: str, version: int | None = None) -> Any:
        """The run's latest checkpoint or its kept `version`; `RunNotFound`, `BadQuery`."""
        try:
            if version is None:
                return self.store.load(run_id)
            if not self.keeps_history:
                raise RunNotFound(f"the store keeps no history: only the latest checkpoint of {run_id!r}")
            return self.store.load(run_id, version=version)
        except CheckpointNotFound as exc:
            raise RunNotFound(str(exc)) from None
        except ValueError as exc:
            raise BadQuery(str(exc)) from None

    def run(self, run_id: str, version: int | None = None) -> dict[str, Any]:
        """Everything about one checkpoint of a run: its record, what its snapshot says (position,
        pointer, return depth, parked tag, panic and traceback), and whether it can be drawn."""
        view: dict[str, Any] = {"run_id": run_id, "version": version, "record": None, "snapshot": None}
        view.update(error=None, keeps_history=self.keeps_history)
        try:
            checkpoint = self.load(run_id, version)
        except (RunNotFound, BadQuery):
            raise
        except DurableError as exc:  # a damaged checkpoint: say so, the rest of the page stands
            view["error"] = str(exc)
            view["graph"] = {"drawable": False, "reason": "the checkpoint cannot be read"}
            return view
        view["record"] = record_view(checkpoint.record)
        view["version"] = checkpoint.record.version
        try:
            view["snapshot"] = snapshot_view(checkpoint.data)
        except DurableError as exc:
            view["error"] = str(exc)
        reason = self._not_drawable(checkpoint.record.fingerprint)
        view["graph"] = {"drawable": reason is None, "reason": reason, "given": self.graph_name}
        return view

    def history(self, run_id: str) -> dict[str, Any]:
        """The run's kept history entries, oldest first (`entries` [] when the store keeps none)."""
        entries: list[dict[str, Any]] = []
        if self.keeps_history:
            try:
                entries = [record_view(record) for record in self.store.history(run_id)]
            except CheckpointNotFound as exc:
                raise RunNotFound(str(exc)) from None
            except ValueError as exc:
                raise BadQuery(str(exc)) from None
        else:
            self.load(run_id)  # RunNotFound for an unknown run, as with a history store
        return {"run_id": run_id, "keeps_history": self.keeps_history, "entries": entries}

    # ----- the drawing ---------------------------------------------------------------------------

    def _not_drawable(self, fingerprint: str) -> str | None:
        """Why a run with `fingerprint` cannot be drawn, or None when it can."""
        if self.graph is None:
            return "no graph given: start the inspector with --graph module:factory to draw runs over it"
        if fingerprint != self.fingerprint:
            return (
                f"the run was taken on another graph (fingerprint {fingerprint}; the given graph's is "
                f"{self.fingerprint}): not drawn"
            )
        return None

    def drawing(self, run_id: str, version: int | None = None) -> Drawing:
        """The checkpoint drawn over the graph: SVG by Graphviz, else Mermaid text, else why not."""
        checkpoint = self.load(run_id, version)
        reason = self._not_drawable(checkpoint.record.fingerprint)
        if reason is not None or self._picture is None:
            return Drawing("none", reason=reason)
        try:
            overlay = Overlay.of_snapshot(checkpoint.data, self.graph)
        except (DurableError, PictureError) as exc:
            return Drawing("none", reason=f"the snapshot cannot be drawn: {exc}")
        node = None if overlay.pointer is None else self._picture.node_for(overlay.pointer)
        marks = {"pointer_node": node.id if node else None, "pointer_label": node.label if node else None}
        try:
            return Drawing("svg", text=self._svg(overlay), **marks)
        except (GraphvizNotFound, GraphvizFailed) as exc:
            text = to_mermaid(self._picture, overlay=overlay)
            return Drawing(
                "mermaid", reason=f"Graphviz cannot draw it ({exc}); the Mermaid text instead", text=text, **marks
            )

    def _svg(self, overlay: Overlay) -> str:
        """The SVG document of the graph under `overlay` (kept for the next view of the same state)."""
        with self._svg_lock:
            if overlay in self._svg_cache:
                self._svg_cache.move_to_end(overlay)
                return self._svg_cache[overlay]
        svg = to_svg(self._picture, overlay=overlay)
        with self._svg_lock:
            self._svg_cache[overlay] = svg
            while len(self._svg_cache) > SVG_CACHE_SIZE:
                self._svg_cache.popitem(last=False)
        return svg


__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "SORT_KEYS",
    "BadQuery",
    "Drawing",
    "Inspector",
    "RunNotFound",
    "RunQuery",
    "parse_version",
    "record_view",
    "snapshot_view",
    "timestamp",
]
