"""`python -m amrita_sense inspect --store STORE [--graph module:factory] [--port N]`.

Serves the inspector's page on http://127.0.0.1:PORT/ (`--port 0`, the default: a free port) and
prints its address. STORE is an SQLite file path, or a Postgres connection string: a
`postgresql://` / `postgres://` URL or a libpq `key=value` string (`--schema` for the Postgres
schema); the page and the messages show it without its password (`describe_store`). `--graph` names the rendered graph the runs were taken on,
loaded as the `graph` subcommand loads it (`amrita_sense.pictures.cli.load_graph`), to draw them.

Bad input (a missing or foreign store, a bad URL, a graph that cannot be loaded, a port in use,
another host than 127.0.0.1, the `[inspect]` extra missing) prints one line to standard error and
exits with 2, without a traceback. Ctrl-C stops the server (exit 0).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from amrita_sense.inspector.stores import BadStore, close_store, describe_store, open_store, without_secrets
from amrita_sense.inspector.views import Inspector
from amrita_sense.pictures.cli import EXIT_BAD_INPUT, PROG, BadInput, load_graph

try:
    from amrita_sense.inspector import server
except ImportError as exc:  # the [inspect] extra (Starlette, uvicorn) is not installed
    if exc.name not in ("starlette", "uvicorn") and not str(exc.name).startswith(("starlette.", "uvicorn.")):
        raise
    server = None  # type: ignore[assignment]
    _SERVER_MISSING: ImportError | None = exc
else:
    _SERVER_MISSING = None

LOCAL_HOSTS = ("127.0.0.1", "localhost")
INSTALL_HINT = "the inspector needs the [inspect] extra: pip install 'amrita-sense-turbo[inspect]'"


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (no usage block) and exit with 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=f"{PROG} inspect", description="A local, read-only web page over a checkpoint store.")
    parser.add_argument("--store", required=True, help="an SQLite checkpoint file, or a postgresql:// URL")
    parser.add_argument("--schema", help="the Postgres schema of the checkpoint tables (default amrita_sense)")
    parser.add_argument("--graph", metavar="MODULE:FACTORY", help="the rendered graph the runs were taken on")
    parser.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (default 0: a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="127.0.0.1 (the only address served)")
    return parser


def _check_address(host: str, port: int) -> None:
    if host not in LOCAL_HOSTS:
        raise BadInput(f"the inspector listens on 127.0.0.1 only (it has no authentication), not {host!r}")
    if not 0 <= port <= 65535:
        raise BadInput(f"--port is between 0 and 65535, not {port}")


def _listen(port: int) -> Any:
    try:
        return server.listen(port)
    except OSError as exc:
        raise BadInput(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None


def inspect_command(args: argparse.Namespace) -> int:
    """Serve the inspector the arguments describe until interrupted; the exit code."""
    store = None
    try:
        if server is None:
            raise BadInput(f"{INSTALL_HINT} ({_SERVER_MISSING})")
        _check_address(args.host, args.port)
        graph = load_graph(args.graph) if args.graph else None
        store = open_store(args.store, schema=args.schema)
        sock = _listen(args.port)
    except (BadInput, BadStore) as exc:
        if store is not None:
            close_store(store)
        message = without_secrets(" ".join(str(exc).split()), args.store)
        sys.stderr.write(f"{PROG} inspect: error: {message}\n")
        return EXIT_BAD_INPUT
    try:
        app = server.make_app(
            Inspector(store, graph, graph_name=args.graph), store_name=describe_store(args.store, args.schema)
        )
        sys.stdout.write(f"AmritaSense inspector (read-only) on {server.url_of(sock)}\n")
        sys.stdout.flush()
        server.serve(app, sock)
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        close_store(store)
    return 0


def main(argv: list[str] | None = None) -> int:
    """`inspect ...` (the subcommand's name first, as `python -m amrita_sense` passes it); the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["inspect"]:
        args = args[1:]
    return inspect_command(_parser().parse_args(args))


__all__ = ["INSTALL_HINT", "inspect_command", "main"]
