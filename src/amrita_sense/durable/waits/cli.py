"""`python -m amrita_sense worker --store STORE --graph NAME=module:factory [--graph ...]`: a waker.

Serves a `Waker` over STORE until SIGTERM or SIGINT (Ctrl-C): it resumes the waiting runs of the
graphs named with `--graph` as they become due, and stops cleanly (the runs it is resuming run
until they wait again or end, then it exits with 0). STORE is an SQLite file path, or a Postgres
connection string (a `postgresql://` / `postgres://` URL or a libpq `key=value` string;
`--schema` for its schema). Options::

    --graph NAME=module:factory   a graph runs were started with (`Checkpointing(..., graph=NAME)`);
                                  `module:attribute` is a rendered graph or a zero-argument factory
    --codec json|pickle           how the runs' pools and message payloads are encoded (json: plain
                                  JSON payloads and no pools, the default)
    --keys-env VARIABLE           the environment variable holding the keyring (`Keyring.from_env`);
                                  AMRITA_SENSE_KEYS when it is set and no other is named
    --allow-unsigned              decode unsigned data with pickle (a store only you write)
    --lease S / --poll S          lease seconds (30) / longest pause between polls (1)
    --concurrency N / --owner ID  runs resumed at once (64) / the name in the leases
    --lookahead S                 claim and restore a timer's run S seconds before it ends (1, at
                                  most a third of the lease; 0: only once due)
    --migrate                     move runs parked on an older version of their graph onto it

Bad input (a graph that cannot be loaded, a store that cannot be opened, a missing key variable)
prints one line to standard error and exits with 2.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import pickle
import signal
import sys
from typing import Any, NoReturn

from amrita_sense.durable.snapshots.signing import Keyring
from amrita_sense.durable.stores.sqlite import SQLiteCheckpointStore
from amrita_sense.durable.waits.waker import DEFAULT_CONCURRENCY, Waker
from amrita_sense.pictures.cli import EXIT_BAD_INPUT, PROG, BadInput, load_graph

DEFAULT_KEYS_ENV = "AMRITA_SENSE_KEYS"
POOL_RUNS = 14
"""The runs in flight the CLI worker's Postgres pool keeps a connection for (two more beside them)."""
_POSTGRES = ("postgresql://", "postgres://")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, not {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, not {text!r}")
    return value


def parser() -> argparse.ArgumentParser:
    """The `worker` subcommand's arguments."""
    found = _Parser(prog=f"{PROG} worker", description="Resume waiting runs as they become due (a Waker).")
    found.add_argument("--store", required=True, help="an SQLite checkpoint file, or a postgresql:// URL")
    found.add_argument("--schema", help="the Postgres schema of the checkpoint tables (default amrita_sense)")
    found.add_argument("--graph", action="append", required=True, metavar="NAME=MODULE:FACTORY")
    found.add_argument("--codec", choices=("json", "pickle"), default="json")
    found.add_argument("--keys-env", metavar="VARIABLE", help="the environment variable holding the keyring")
    found.add_argument("--allow-unsigned", action="store_true")
    found.add_argument("--migrate", action="store_true")
    found.add_argument("--lease", type=_positive, default=30.0)
    found.add_argument("--poll", type=_positive, default=1.0)
    found.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    found.add_argument("--lookahead", type=_seconds, default=None)
    found.add_argument("--owner")
    return found


def _graphs(specs: list[str]) -> dict[str, Any]:
    graphs: dict[str, Any] = {}
    for spec in specs:
        name, sep, target = spec.partition("=")
        if not sep or not name or not target:
            raise BadInput(f"--graph takes NAME=module:factory, not {spec!r}")
        if name in graphs:
            raise BadInput(f"--graph {name!r} is given twice")
        graphs[name] = load_graph(target)
    return graphs


def _keyring(variable: str | None) -> Keyring | None:
    if variable is None:
        if not os.environ.get(DEFAULT_KEYS_ENV):
            return None
        variable = DEFAULT_KEYS_ENV
    try:
        return Keyring.from_env(variable)
    except ValueError as exc:
        raise BadInput(f"--keys-env {variable}: {exc}") from None


def _pool_size(concurrency: int) -> int:
    """A connection for each run in flight, up to `POOL_RUNS`, and two more (a claim, a renewal or a
    release beside them): an operation that waits for a connection costs more than the connection,
    but runs in flight mostly wait for their nodes, not the store, and a server's connections are few."""
    return max(4, min(concurrency, POOL_RUNS) + 2)


def _store(spec: str, schema: str | None, concurrency: int) -> Any:
    if spec.startswith(_POSTGRES) or ("://" not in spec and "=" in spec and not os.path.exists(spec)):
        try:
            from amrita_sense.durable.stores.postgres import AsyncPostgresCheckpointStore
        except ImportError as exc:
            raise BadInput(f"a Postgres store needs the [postgres] extra (psycopg): {exc}") from None
        try:
            # the asyncio store: the runs a waker resumes at once overlap their round trips (a
            # blocking store's save would hold the loop, and every other run with it)
            options: dict[str, Any] = {"max_size": _pool_size(concurrency)}
            if schema:
                options["schema"] = schema
            return AsyncPostgresCheckpointStore(spec, **options)
        except Exception as exc:
            raise BadInput(f"cannot open the Postgres store: {type(exc).__name__}") from None
    if "://" in spec:
        raise BadInput(f"unsupported store URL {spec.split('://', 1)[0][:20]}://...: an SQLite path or postgresql://")
    if schema is not None:
        raise BadInput("--schema is for a Postgres store only")
    try:
        return SQLiteCheckpointStore(spec)
    except Exception as exc:
        raise BadInput(f"cannot open the SQLite store {spec!r}: {exc}") from None


def build_waker(args: argparse.Namespace) -> Waker:
    """The waker the parsed arguments describe (`BadInput` for what cannot be loaded or opened)."""
    graphs = _graphs(args.graph)
    keyring = _keyring(args.keys_env)
    store = _store(args.store, args.schema, args.concurrency)
    try:
        return Waker(
            store,
            graphs,
            codec=pickle if args.codec == "pickle" else None,
            keyring=keyring,
            allow_unsigned=args.allow_unsigned,
            migrate=args.migrate,
            lease_seconds=args.lease,
            poll_interval=args.poll,
            concurrency=args.concurrency,
            lookahead=args.lookahead,
            owner=args.owner,
        )
    except (TypeError, ValueError) as exc:
        raise BadInput(str(exc)) from None


async def serve(waker: Waker) -> None:
    """Serve until SIGTERM / SIGINT."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, waker.stop)
    print(f"worker {waker.owner} serving {', '.join(waker.graph_names)}", flush=True)
    try:
        await waker.serve()
    finally:
        close = getattr(waker.store, "close", None)
        if close is not None and inspect.iscoroutinefunction(close):
            await close()  # an asyncio store's pool belongs to this loop: closed before it ends
    print(f"worker {waker.owner} stopped", flush=True)


def main(argv: list[str]) -> int:
    """`python -m amrita_sense worker ...` (argv[0] is "worker"); the exit code."""
    args = parser().parse_args(argv[1:])
    try:
        waker = build_waker(args)
    except BadInput as exc:
        print(f"{PROG} worker: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    asyncio.run(serve(waker))
    return 0


__all__ = ["build_waker", "main", "parser", "serve"]
