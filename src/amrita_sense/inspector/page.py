"""The inspector's HTML page, rendered on the server from the views' plain data.

One page, `/`: the run list, and with `?run=ID` (and `&version=V` for a history entry) the run
beside it. Every value that comes from the store or the user (run ids, tags, statuses, exception
messages, tracebacks, node labels) goes through `esc`; links are built with `urlencode`. The page
has no script at all: sorting, paging and picking are links (and the server sends a
Content-Security-Policy that forbids scripts, so none could run).
"""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import urlencode

from amrita_sense.inspector.views import Drawing, RunQuery

COLUMNS = (
    ("run", "Run"),
    ("status", "Status"),
    ("version", "Version"),
    ("updated", "Last update"),
    ("created", "Started"),
)
"""The sortable columns of the run list: (sort key, heading)."""
STATUS_FILTERS = ("finished", "waiting", "suspended", "halted", "panicked", "running", "ready")


def esc(value: Any) -> str:
    """`value` as HTML text (quotes escaped too: safe in attributes)."""
    return escape("" if value is None else str(value), quote=True)


def page_link(query: RunQuery, **changes: Any) -> str:
    """The page's URL for `query` with `changes` applied (None drops a parameter), escaped for an attribute."""
    params = {"sort": query.sort, "order": query.order, "status": query.status, "offset": query.offset}
    params["limit"] = query.limit
    params.update(changes)
    kept = {key: value for key, value in params.items() if value not in (None, "")}
    return esc("/?" + urlencode(kept))


def render_page(
    store_name: str,
    graph_name: str | None,
    runs: dict[str, Any],
    query: RunQuery,
    run: dict[str, Any] | None = None,
    history: dict[str, Any] | None = None,
    drawing: Drawing | None = None,
    error: str | None = None,
) -> str:
    """The whole page: header, run list, and the picked run (or `error` in its place)."""
    title = "AmritaSense inspector" + (f" — {run['run_id']}" if run else "")
    picked = _run_section(run, history, drawing, query) if run else ""
    if error:
        picked = f'<section id="run"><p class="error">{esc(error)}</p></section>'
    graph = f"graph <code>{esc(graph_name)}</code>" if graph_name else "no graph given (--graph module:factory)"
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{esc(title)}</title><link rel="icon" href="data:,">'
        '<link rel="stylesheet" href="/static/inspector.css"></head><body>'
        f"<header><h1>AmritaSense run inspector</h1><p>store <code>{esc(store_name)}</code> · read-only · "
        f"{graph}</p></header><main>{_runs_section(runs, query, run)}{picked}</main></body></html>\n"
    )


# ----- the run list ------------------------------------------------------------------------------


def _runs_section(runs: dict[str, Any], query: RunQuery, run: dict[str, Any] | None) -> str:
    current = run["run_id"] if run else None
    rows = "".join(_run_row(row, query, current) for row in runs["runs"])
    if not rows:
        rows = '<tr><td colspan="6">no runs</td></tr>'
    shown = f"{runs['offset'] + 1}–{runs['offset'] + len(runs['runs'])}" if runs["runs"] else "0"
    return (
        f'<section id="runs"><h2>Runs <small>({shown} of {runs["total"]})</small></h2>'
        f'{_filters(query)}<table id="run-list"><thead><tr>{_headings(query)}'
        f"<th>Bytes</th></tr></thead><tbody>{rows}</tbody></table>"
        f"{_pager(runs, query, current)}</section>"
    )


def _filters(query: RunQuery) -> str:
    links = [_filter_link(query, None, "all")]
    links += [_filter_link(query, status, status) for status in STATUS_FILTERS]
    return f'<p class="filters">{"".join(links)}</p>'


def _filter_link(query: RunQuery, status: str | None, text: str) -> str:
    chosen = ' class="chosen"' if query.status == status else ""
    return f'<a{chosen} href="{page_link(query, status=status, offset=None)}">{esc(text)}</a>'


def _headings(query: RunQuery) -> str:
    cells = []
    for key, heading in COLUMNS:
        order = "asc" if query.sort == key and query.order == "desc" else "desc"
        arrow = (" ▼" if query.order == "desc" else " ▲") if query.sort == key else ""
        href = page_link(query, sort=key, order=order, offset=None)
        cells.append(f'<th><a class="sort" data-sort="{key}" href="{href}">{esc(heading)}{arrow}</a></th>')
    return "".join(cells)


def _run_row(row: dict[str, Any], query: RunQuery, current: str | None) -> str:
    """One line of the run list: the record's fields only (a bad record says what is wrong)."""
    classes = "run-row" + (" current" if row["run_id"] == current else "") + (" bad" if row["bad"] else "")
    href = page_link(query, run=row["run_id"])
    bad = f' <span class="error bad-row">bad row: {esc(row["bad"])}</span>' if row["bad"] else ""
    return (
        f'<tr class="{classes}" data-run-id="{esc(row["run_id"])}"><td class="run-id"><a class="run-link" '
        f'href="{href}">{esc(row["run_id"])}</a>{bad}</td><td>{_status(row["status"])}</td>'
        f"<td>{esc(row['version'])}</td><td>{esc(row['updated'])}</td><td>{esc(row['created'])}</td>"
        f"<td>{esc(row['size'])}</td></tr>"
    )


def _status(status: str) -> str:
    return f'<span class="status status-{esc(status)}">{esc(status)}</span>'


def _pager(runs: dict[str, Any], query: RunQuery, current: str | None) -> str:
    links = []
    if runs["offset"] > 0:
        back = max(0, runs["offset"] - runs["limit"])
        links.append(f'<a rel="prev" href="{page_link(query, offset=back or None, run=current)}">← previous</a>')
    if runs["offset"] + len(runs["runs"]) < runs["total"]:
        ahead = runs["offset"] + runs["limit"]
        links.append(f'<a rel="next" href="{page_link(query, offset=ahead, run=current)}">next →</a>')
    return f'<p class="pager">{"".join(links)}</p>' if links else ""


# ----- one run -----------------------------------------------------------------------------------


def _run_section(run: dict[str, Any], history: dict[str, Any] | None, drawing: Drawing | None, query: RunQuery) -> str:
    entry = f" <small>version {esc(run['version'])}</small>" if run["version"] is not None else ""
    parts = [f'<section id="run" data-run-id="{esc(run["run_id"])}"><h2>{esc(run["run_id"])}{entry}</h2>']
    if run["error"]:
        parts.append(f'<p class="error">{esc(run["error"])}</p>')
    if run["record"]:
        parts.append(_record(run["record"]))
    if run["snapshot"]:
        parts.append(_position(run["snapshot"], drawing))
        parts.append(_panic(run["snapshot"]["panic_record"]))
    parts.append(_history(run, history, query))
    parts.append(_drawing(drawing, run))
    parts.append("</section>")
    return "".join(parts)


def _definitions(pairs: list[tuple[str, str]], ident: str) -> str:
    items = "".join(f"<dt>{esc(term)}</dt><dd>{html}</dd>" for term, html in pairs)
    return f'<dl id="{ident}">{items}</dl>'


def _record(record: dict[str, Any]) -> str:
    pairs = [("bad row", f'<span class="error bad-row">{esc(record["bad"])}</span>')] if record["bad"] else []
    pairs += [
        ("status", _status(record["status"])),
        ("version", esc(record["version"])),
        ("created", esc(record["created"])),
        ("updated", esc(record["updated"])),
        ("size", f"{esc(record['size'])} bytes"),
        ("fingerprint", f"<code>{esc(record['fingerprint'])}</code>"),
    ]
    if record["forked_from"]:
        pairs.append(("forked from", f"<code>{esc(record['forked_from'])}</code>"))
    return "<h3>Record</h3>" + _definitions(pairs, "record")


def _position(snapshot: dict[str, Any], drawing: Drawing | None) -> str:
    pairs = [
        ("position", esc(snapshot["position"])),
        ("pointer", f"<code>{esc(snapshot['pointer'])}</code>"),
        ("return depth", esc(snapshot["return_depth"])),
        ("parked at", f"<code>{esc(snapshot['parked'])}</code>" if snapshot["parked"] else "not parked"),
    ]
    if drawing is not None and drawing.pointer_label is not None:
        pairs.append(("pointer's node", f"<code>{esc(drawing.pointer_label)}</code>"))
    pairs.append(("codec", esc(snapshot["codec"] or "none (engine state only)")))
    pairs.append(("snapshot format", esc(snapshot["version"])))
    return "<h3>Position</h3>" + _definitions(pairs, "position")


def _panic(record: dict[str, Any] | None) -> str:
    if record is None:
        return '<h3>Panic</h3><p id="panic">no panic</p>'
    pairs = [("exception", f"<code>{esc(record['type'])}</code>"), ("message", esc(record["message"]))]
    if record["args"] is not None:
        pairs.append(("arguments", f"<code>{esc(record['args'])}</code>"))
    if record["codec_copy"]:
        pairs.append(("codec copy", "stored (not decoded by the inspector)"))
    return (
        f'<h3>Panic</h3><div id="panic">{_definitions(pairs, "panic-record")}'
        f'<pre id="traceback">{esc(record["traceback"])}</pre></div>'
    )


def _history(run: dict[str, Any], history: dict[str, Any] | None, query: RunQuery) -> str:
    if history is None or not history["keeps_history"]:
        return '<h3>History</h3><p id="history">this store keeps no history</p>'
    if not history["entries"]:
        return '<h3>History</h3><p id="history">no history kept for this run (Checkpointing(..., history=True))</p>'
    rows = []
    for entry in history["entries"]:
        mark = ' class="current"' if entry["version"] == run["version"] else ""
        href = page_link(query, run=run["run_id"], version=entry["version"])
        rows.append(
            f'<tr{mark} data-version="{esc(entry["version"])}"><td><a class="history-link" href="{href}">'
            f"{esc(entry['version'])}</a></td><td>{_status(entry['status'])}</td><td>{esc(entry['updated'])}</td>"
            f"<td>{esc(entry['size'])}</td></tr>"
        )
    latest = f'<a href="{page_link(query, run=run["run_id"])}">latest</a>'
    return (
        f'<h3>History <small>({len(rows)} entries · {latest})</small></h3><table id="history"><thead><tr>'
        f"<th>Version</th><th>Status</th><th>Saved</th><th>Bytes</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _drawing(drawing: Drawing | None, run: dict[str, Any]) -> str:
    if drawing is None:
        reason = run.get("graph", {}).get("reason") or "the run cannot be drawn"
        return f'<h3>Graph</h3><p class="notice" id="graph-note">{esc(reason)}</p>'
    if drawing.kind == "svg" and drawing.text is not None:
        svg = drawing.text[drawing.text.find("<svg") :]  # inline: without the XML prolog and doctype
        node = f' data-pointer-node="{esc(drawing.pointer_node)}"' if drawing.pointer_node else ""
        return f'<h3>Graph</h3><figure id="graph"{node}>{svg}</figure>'
    if drawing.kind == "mermaid":
        return (
            f'<h3>Graph</h3><p class="notice" id="graph-note">{esc(drawing.reason)}</p>'
            f'<pre id="mermaid">{esc(drawing.text)}</pre>'
        )
    return f'<h3>Graph</h3><p class="notice" id="graph-note">{esc(drawing.reason)}</p>'


__all__ = ["COLUMNS", "esc", "page_link", "render_page"]
