"""The inspector's web application (Starlette) and its server (uvicorn), on 127.0.0.1 only.

    app = make_app(Inspector(store, graph), store_name="runs.db")
    sock = listen(0)                   # 127.0.0.1, a free port
    serve(app, sock)                   # until Ctrl-C

Endpoints (GET only; everything else is 405):

    /                                  the HTML page (?run=ID&version=V, ?sort=&order=&offset=&limit=&status=)
    /static/inspector.css              its style sheet
    /api/runs                          one page of the run list (same parameters as the page)
    /api/runs/{id}                     one run (?version=V: a history entry)
    /api/runs/{id}/history             its kept history entries
    /api/runs/{id}/graph.svg           its drawing (?version=V), when --graph was given and matches

A run id is one path segment, percent-encoded (`quote(run_id, safe="")`): the id is read from the
raw path, so ids holding `/` work. Requests whose Host header is not 127.0.0.1 or localhost are
refused (a page of another site cannot reach the inspector through DNS rebinding), and every
answer carries a Content-Security-Policy that allows nothing but this server's style sheet.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from amrita_sense.durable.errors import DurableError
from amrita_sense.inspector.assets import STYLESHEET
from amrita_sense.inspector.page import render_page
from amrita_sense.inspector.views import BadQuery, Inspector, RunNotFound, RunQuery, parse_version

HOST = "127.0.0.1"
"""The only address the inspector listens on: it has no authentication, so it is never reachable
from another machine."""
ALLOWED_HOSTS = ("127.0.0.1", "localhost")
SECURITY_HEADERS = (
    (
        b"content-security-policy",
        b"default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; "
        b"form-action 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)
RUNS_PREFIX = b"/api/runs/"

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class SecurityHeaders:
    """ASGI middleware: adds `SECURITY_HEADERS` to every HTTP answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _error(status: int, message: str, **more: Any) -> JSONResponse:
    return JSONResponse({"error": message, **more}, status_code=status)


def _status_of(exc: Exception) -> int:
    """The HTTP status of a request that failed with `exc`: 404 no such run, 503 the store failed,
    400 a bad parameter."""
    if isinstance(exc, RunNotFound):
        return 404
    return 503 if isinstance(exc, DurableError) else 400


def _run_path(request: Request) -> tuple[str, str]:
    """`(run id, what)` of `/api/runs/{id}[/what]`, the id percent-decoded from the raw path."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    rest = raw.split(b"?", 1)[0][len(RUNS_PREFIX) :].decode("ascii", "replace")
    run_id, _, what = rest.partition("/")
    return unquote(run_id, errors="strict"), what


class Endpoints:
    """The request handlers over one `Inspector` (synchronous: Starlette runs them in its thread
    pool, so a slow store or `dot` never holds the event loop)."""

    def __init__(self, inspector: Inspector, store_name: str) -> None:
        self.inspector = inspector
        self.store_name = store_name

    def page(self, request: Request) -> HTMLResponse:
        """The HTML page: the run list, and the run `?run=` names."""
        params = request.query_params
        try:
            query = RunQuery.parse(params)
            version = parse_version(params.get("version"))
        except BadQuery as exc:
            return self._render(RunQuery(), 400, error=str(exc))
        run_id = params.get("run")
        if not run_id:
            return self._render(query, 200)
        try:
            run = self.inspector.run(run_id, version)
            history = self.inspector.history(run_id)
            drawing = self.inspector.drawing(run_id, version) if run["graph"]["drawable"] else None
        except (RunNotFound, BadQuery, DurableError) as exc:
            return self._render(query, _status_of(exc), error=str(exc))
        return self._render(query, 200, run=run, history=history, drawing=drawing)

    def _render(self, query: RunQuery, status: int, **picked: Any) -> HTMLResponse:
        """The page with the run list of `query` (when the store cannot list, the page says so: 503)."""
        try:
            runs = self.inspector.runs(query)
        except DurableError as exc:
            runs = {"total": 0, "offset": query.offset, "limit": query.limit, "runs": []}
            status, picked["error"] = 503, f"the store cannot be listed: {exc}"
        html = render_page(self.store_name, self.inspector.graph_name, runs, query, **picked)
        return HTMLResponse(html, status_code=status)

    def stylesheet(self, request: Request) -> Response:
        return Response(STYLESHEET, media_type="text/css")

    def runs(self, request: Request) -> JSONResponse:
        """`/api/runs`: one page of the run list."""
        try:
            return JSONResponse(self.inspector.runs(RunQuery.parse(request.query_params)))
        except (BadQuery, DurableError) as exc:
            return _error(_status_of(exc), str(exc))

    def run(self, request: Request) -> Response:
        """`/api/runs/{id}`, `/api/runs/{id}/history`, `/api/runs/{id}/graph.svg`."""
        try:
            run_id, what = _run_path(request)
            version = parse_version(request.query_params.get("version"))
            if what == "":
                return JSONResponse(self.inspector.run(run_id, version))
            if what == "history":
                return JSONResponse(self.inspector.history(run_id))
            if what == "graph.svg":
                return self._svg(run_id, version)
        except (RunNotFound, BadQuery, UnicodeDecodeError, DurableError) as exc:
            return _error(_status_of(exc), str(exc))
        return _error(404, f"no such resource: {what!r} (history or graph.svg)")

    def _svg(self, run_id: str, version: int | None) -> Response:
        drawing = self.inspector.drawing(run_id, version)
        if drawing.kind == "svg":
            return Response(drawing.text, media_type="image/svg+xml")
        if drawing.kind == "mermaid":
            return _error(503, drawing.reason or "Graphviz cannot draw it", mermaid=drawing.text)
        return _error(409, drawing.reason or "the run cannot be drawn")


def make_app(inspector: Inspector, *, store_name: str = "") -> Starlette:
    """The inspector's ASGI application over `inspector` (GET only, Host 127.0.0.1 or localhost)."""
    endpoints = Endpoints(inspector, store_name or repr(inspector.store))
    routes = [
        Route("/", endpoints.page, methods=["GET"]),
        Route("/static/inspector.css", endpoints.stylesheet, methods=["GET"]),
        Route("/api/runs", endpoints.runs, methods=["GET"]),
        Route("/api/runs/{rest:path}", endpoints.run, methods=["GET"]),
    ]
    middleware = [
        Middleware(SecurityHeaders),
        Middleware(TrustedHostMiddleware, allowed_hosts=list(ALLOWED_HOSTS)),
    ]
    return Starlette(routes=routes, middleware=middleware)


def listen(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:`port` (0: a free port); `OSError` when it cannot be had."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if os.name != "nt":  # POSIX: reuse a port in TIME_WAIT; a port with a listener is still refused
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def url_of(sock: socket.socket) -> str:
    """The page's address on the socket `listen` returned."""
    host, port = sock.getsockname()[:2]
    return f"http://{host}:{port}/"


def serve(app: Any, sock: socket.socket) -> None:
    """Serve `app` on `sock` until interrupted (Ctrl-C, SIGTERM)."""
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


__all__ = ["ALLOWED_HOSTS", "HOST", "Endpoints", "make_app", "listen", "serve", "url_of"]
