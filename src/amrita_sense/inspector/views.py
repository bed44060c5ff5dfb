"""What the inspector shows, as plain data: the run list, one run, its history, its drawing.

`Inspector(store, graph=None)` reads a checkpoint store through `list_page` (or `list`), `load`
and `history` only; every answer is made of dicts, lists, strings and numbers (the JSON endpoints
return them as they are, the HTML page renders them). The run list is one page sorted and cut by
the store, and shows the records only: no snapshot is read to list runs. A picked run's snapshot
is read with `inspect_snapshot` and the engine document: nothing is restored or run, and the user
blobs (pools, a panic's codec copy) are never decoded, so no codec and no unpickling is ever involved.

A stored row can hold anything (a time of 1e300, text in a numeric column, bytes that are no
snapshot): such a row is shown as a bad row, saying what is wrong with it, and the page still
answers. A request's bad parameter is a `BadQuery` (400).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from typing import Any

from amrita_sense.durable import STATUSES, CheckpointRecord, inspect_snapshot
from amrita_sense.durable.errors import CheckpointNotFound, DurableError
from amrita_sense.durable.snapshots.fingerprint import graph_fingerprint
from amrita_sense.durable.snapshots.format import decode
from amrita_sense.durable.stores.paging import MAX_OFFSET, PAGE_SORTS, CheckpointPage, page_of
from amrita_sense.pictures import GraphvizFailed, GraphvizNotFound, Overlay, picture_of, to_mermaid, to_svg

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
SORT_KEYS = tuple(PAGE_SORTS)
"""The columns the run list sorts by: the record's own fields (the store sorts; no snapshot is read)."""
ORDERS = ("desc", "asc")
MAX_VERSION = 2**63 - 1
"""The largest version a store can hold (a 64-bit integer): `?version=` above it is a bad query."""
MAX_RUN_ID = 512
"""The longest run id a store accepts (characters)."""
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
            offset=_integer(params, "offset", 0, 0, MAX_OFFSET),
            limit=_integer(params, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT),
            sort=_choice(params, "sort", "updated", tuple(SORT_KEYS)) or "updated",
            order=_choice(params, "order", "desc", ORDERS) or "desc",
            status=_choice(params, "status", None, STATUSES),
        )


def _integer(params: Any, name: str, default: int, low: int, high: int | None) -> int:
    text = params.get(name)
    if text in (None, ""):
        return default
    if not isinstance(text, str) or not text.isascii() or not text.isdigit() or len(text) > 40:
        raise BadQuery(f"{name} is a whole number, not {text!r:.40}")
    value = int(text)
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
    """The `version` parameter of a request (None: the latest); `BadQuery` unless a version a store
    can hold (1 to 2**63 - 1)."""
    if text in (None, ""):
        return None
    return _integer({"version": text}, "version", 0, 1, MAX_VERSION)


def check_run_id(run_id: Any) -> str:
    """`run_id` when a store could hold it (a string of 1 to 512 characters, no NUL); else `BadQuery`."""
    if not isinstance(run_id, str) or not 0 < len(run_id) <= MAX_RUN_ID or "\x00" in run_id:
        raise BadQuery(f"a run id is 1 to {MAX_RUN_ID} characters (no NUL), not {str(run_id)!r:.60}")
    return run_id


def timestamp(seconds: float) -> str:
    """Seconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC`."""
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def record_view(record: CheckpointRecord) -> dict[str, Any]:
    """A checkpoint record as plain data (JSON-safe), with its times also written out. A field that
    does not hold what it should is shown as its `repr` and named in `bad` (None: a sound record)."""
    view: dict[str, Any] = {}
    problems = []
    for field in fields(CheckpointRecord):
        value = getattr(record, field.name)
        problem = _field_problem(field.name, value)
        if problem is not None:
            problems.append(f"{field.name} {problem} ({value!r:.40})")
            value = f"{value!r:.80}"
        view[field.name] = value
    view["created"] = "?" if isinstance(view["created_at"], str) else timestamp(view["created_at"])
    view["updated"] = "?" if isinstance(view["updated_at"], str) else timestamp(view["updated_at"])
    view["bad"] = "; ".join(problems) or None
    return view


def _field_problem(name: str, value: Any) -> str | None:
    """What is wrong with a record field's stored value, or None."""
    if name in ("created_at", "updated_at"):
        return None if _is_time(value) else "is not a time"
    if name in ("version", "size"):
        low = 1 if name == "version" else 0
        return None if type(value) is int and value >= low else "is not a count"
    if name == "status":
        return None if value in STATUSES else "is not a status"
    if name == "forked_from" and value is None:
        return None
    return None if isinstance(value, str) and value else "is not text"


def _is_time(value: Any) -> bool:
    """True for seconds since the epoch a date can be written of."""
    if type(value) not in (int, float) or not math.isfinite(value):
        return False
    try:
        timestamp(value)
    except (OverflowError, OSError, ValueError):
        return False
    return True


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


def unreadable(exc: BaseException) -> str:
    """What a bad row's reading raised, as one line (a store error's own message, else its type too)."""
    message = " ".join(str(exc).split())
    if isinstance(exc, DurableError) and message:
        return message
    return f"the stored row is malformed ({type(exc).__name__}: {message})" if message else type(exc).__name__


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

    `store` is a synchronous checkpoint store (`list_page` or `list`, `load`, and `history` when it
    keeps one); the inspector calls nothing else. `graph` is the rendered graph the runs were taken
    on (`--graph module:factory`): a run is drawn only when its fingerprint is the graph's.
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
        """One page of the run list: the records `query` picks, sorted and cut by the store. Only
        the records are read (no snapshot); a record that holds nonsense is marked `bad`."""
        query = query or RunQuery()
        page = self._page(query)
        return {
            "total": page.total,
            "offset": query.offset,
            "limit": query.limit,
            "sort": query.sort,
            "order": query.order,
            "status": query.status,
            "runs": [record_view(record) for record in page.records],
        }

    def _page(self, query: RunQuery) -> CheckpointPage:
        """The store's `list_page`; a store with only `list` is sorted and cut here."""
        list_page = getattr(self.store, "list_page", None)
        if callable(list_page):
            return list_page(
                status=query.status, sort=query.sort, order=query.order, offset=query.offset, limit=query.limit
            )
        return page_of(self.store.list(status=query.status), query.sort, query.order, query.offset, query.limit)

    # ----- one run -------------------------------------------------------------------------------

    def load(self, run_id: str, version: int | None = None) -> Any:
        """The run's latest checkpoint or its kept `version`; `BadQuery` for an id or version no
        store holds, `RunNotFound`; whatever else reading the row raises (a bad row) goes through."""
        check_run_id(run_id)
        if version is not None and (type(version) is not int or not 0 < version <= MAX_VERSION):
            raise BadQuery(f"version is between 1 and {MAX_VERSION}, not {version!r:.40}")
        try:
            if version is None:
                return self.store.load(run_id)
            if not self.keeps_history:
                raise RunNotFound(f"the store keeps no history: only the latest checkpoint of {run_id!r}")
            return self.store.load(run_id, version=version)
        except CheckpointNotFound as exc:
            raise RunNotFound(str(exc)) from None

    def run(self, run_id: str, version: int | None = None) -> dict[str, Any]:
        """Everything about one checkpoint of a run: its record, what its snapshot says (position,
        pointer, return depth, parked tag, panic and traceback), and whether it can be drawn. A row
        that cannot be read is said so in `error` (the record is still shown when it could be read)."""
        view: dict[str, Any] = {"run_id": run_id, "version": version, "record": None, "snapshot": None}
        view.update(error=None, keeps_history=self.keeps_history)
        try:
            checkpoint = self.load(run_id, version)
        except (RunNotFound, BadQuery):
            raise
        except Exception as exc:  # a bad row, whatever it holds: say so, the rest of the page stands
            view["error"] = unreadable(exc)
            view["graph"] = {"drawable": False, "reason": "the checkpoint cannot be read"}
            return view
        record = record_view(checkpoint.record)
        view.update(record=record, version=record["version"])
        try:
            view["snapshot"] = snapshot_view(checkpoint.data)
        except Exception as exc:  # bytes that are no readable snapshot
            view["error"] = unreadable(exc)
        reason = self._not_drawable(record)
        view["graph"] = {"drawable": reason is None, "reason": reason, "given": self.graph_name}
        return view

    def history(self, run_id: str) -> dict[str, Any]:
        """The run's kept history entries, oldest first (`entries` [] when the store keeps none)."""
        entries: list[dict[str, Any]] = []
        check_run_id(run_id)
        if self.keeps_history:
            try:
                entries = [record_view(record) for record in self.store.history(run_id)]
            except CheckpointNotFound as exc:
                raise RunNotFound(str(exc)) from None
        else:
            self.load(run_id)  # RunNotFound for an unknown run, as with a history store
        return {"run_id": run_id, "keeps_history": self.keeps_history, "entries": entries}

    # ----- the drawing ---------------------------------------------------------------------------

    def _not_drawable(self, record: dict[str, Any]) -> str | None:
        """Why a run of `record` (a `record_view`) cannot be drawn, or None when it can."""
        if self.graph is None:
            return "no graph given: start the inspector with --graph module:factory to draw runs over it"
        if record["bad"] is not None:
            return f"the record is bad ({record['bad']}): not drawn"
        if record["fingerprint"] != self.fingerprint:
            return (
                f"the run was taken on another graph (fingerprint {record['fingerprint']}; the given graph's is "
                f"{self.fingerprint}): not drawn"
            )
        return None

    def drawing(self, run_id: str, version: int | None = None) -> Drawing:
        """The checkpoint drawn over the graph: SVG by Graphviz, else Mermaid text, else why not."""
        try:
            checkpoint = self.load(run_id, version)
        except (RunNotFound, BadQuery):
            raise
        except Exception as exc:  # a bad row
            return Drawing("none", reason=f"the checkpoint cannot be read: {unreadable(exc)}")
        reason = self._not_drawable(record_view(checkpoint.record))
        if reason is not None or self._picture is None:
            return Drawing("none", reason=reason)
        try:
            overlay = Overlay.of_snapshot(checkpoint.data, self.graph)
        except Exception as exc:  # bytes that are no readable snapshot, or not of this graph
            return Drawing("none", reason=f"the snapshot cannot be drawn: {unreadable(exc)}")
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
    "check_run_id",
    "parse_version",
    "record_view",
    "snapshot_view",
    "timestamp",
    "unreadable",
]
