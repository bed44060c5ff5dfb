"""The page's only asset, its style sheet, served by the inspector itself (`/static/inspector.css`).

It lives in a Python string so that the wheel carries it without package data; the page loads
nothing else (no script, no font, nothing from another host).
"""

from __future__ import annotations

STYLESHEET = """
:root { color-scheme: light; --ink: #212529; --muted: #6c757d; --line: #dee2e6; --accent: #1c7ed6;
        --warn: #c92a2a; --soft: #f8f9fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); }
header { padding: 10px 18px; border-bottom: 1px solid var(--line); background: var(--soft); }
header h1 { margin: 0; font-size: 18px; }
header p { margin: 2px 0 0; color: var(--muted); }
main { display: flex; gap: 18px; padding: 12px 18px; align-items: flex-start; }
#runs { flex: 0 0 auto; max-width: 48%; overflow-x: auto; }
#run { flex: 1 1 auto; min-width: 0; }
h2 { font-size: 16px; margin: 4px 0 8px; word-break: break-all; }
h3 { font-size: 14px; margin: 16px 0 6px; }
table { border-collapse: collapse; }
th, td { padding: 3px 8px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: var(--soft); white-space: nowrap; }
th a, td a { color: var(--accent); text-decoration: none; }
tr.current td { background: #fff3bf; }
td.run-id { max-width: 22em; word-break: break-all; font-family: ui-monospace, monospace; }
.status { padding: 0 6px; border-radius: 8px; background: var(--soft); border: 1px solid var(--line); }
.status-panicked { color: #fff; background: var(--warn); border-color: var(--warn); }
.status-finished { background: #d3f9d8; }
.status-suspended, .status-halted { background: #fff3bf; }
tr.bad td { background: #fff5f5; }
.bad-row { display: inline-block; margin-left: 6px; padding: 0 6px; font-family: system-ui, sans-serif; }
.filters a, .pager a { margin-right: 8px; }
.filters .chosen { font-weight: 700; color: var(--ink); }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0; }
dt { color: var(--muted); }
dd { margin: 0; word-break: break-all; }
pre { background: var(--soft); border: 1px solid var(--line); padding: 8px; overflow-x: auto; max-height: 28em; }
.notice { padding: 6px 10px; border-left: 3px solid var(--accent); background: var(--soft); }
.error { padding: 6px 10px; border-left: 3px solid var(--warn); background: #fff5f5; }
figure#graph { margin: 0; overflow: auto; border: 1px solid var(--line); padding: 6px; }
figure#graph svg { max-width: 100%; max-height: 75vh; width: auto; height: auto; }
"""

__all__ = ["STYLESHEET"]
