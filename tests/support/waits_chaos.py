"""Graphs and processes of the waits fault test (tests/test_durable_waits_chaos.py) and of the waker
rows of `bench/durable.py --waits`.

    python tests/support/waits_chaos.py start DATABASE LOOP SPEC       # start the runs SPEC lists
    python tests/support/waits_chaos.py report DATABASE LOOP SPEC OUT  # their checkpointed states, as JSON
    python tests/support/waits_chaos.py worker LOOP WORKER-ARGS...      # the CLI worker on LOOP

DATABASE is an SQLite file path, or `DSN|SCHEMA` for a Postgres store; SPEC a JSON file of
`[[run_id, graph_name], ...]`. The keyring is in the environment variable CHAOS_KEYS (`id:base64`,
as `Keyring.from_env` reads it), SLEEP_UNTIL's time in CHAOS_UNTIL (epoch seconds; every process
must see the same). Every node appends `<node> <run> <pid>` to the file CHAOS_TRACE names (when set):
the executions, which may repeat after a kill.

A graph `sleep<ms>x<k>` (or `untilx<k>`, `waitx1`): `mark` (the time before the timer),
SLEEP(ms / 1000) (or SLEEP_UNTIL(CHAOS_UNTIL), or no timer), `woke` (the time after it), then k times WAIT("m") + a node appending the
delivered message id, then `done`. The run's `State` (injected, checkpointed with codec=pickle and
the keyring) is the durable truth the test checks. `worker` starts the same CLI worker as
`python -m amrita_sense worker` (its `main`), on the asyncio loop or on uvloop.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import pickle
import random
import sys
import time
from typing import Any

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import SLEEP, SLEEP_UNTIL, WAIT, Checkpointing, Keyring, Message, SQLiteCheckpointStore

KEYS_ENV = "CHAOS_KEYS"
SLEEPS_MS = (100, 300, 700, 1500, 3000)
GRAPHS: dict[str, tuple[float | None, int]] = {
    **{f"sleep{ms}x{k}": (ms / 1000, k) for ms in SLEEPS_MS for k in (1, 2)},
    **{f"untilx{k}": (None, k) for k in (1, 2)},
    "waitx1": (0.0, 1),
}
"""graph name -> (SLEEP seconds, None for SLEEP_UNTIL(CHAOS_UNTIL), 0 for no timer; how many
messages it waits for)."""


class State:
    """A run's own record, kept in its checkpoints (injected by type)."""

    def __init__(self, run_id: str, graph: str) -> None:
        self.run_id = run_id
        self.graph = graph
        self.parked_at: float | None = None
        self.woke_at: float | None = None
        self.got: list[str] = []
        self.sent_at: list[float] = []
        self.got_at: list[float] = []
        self.done = False

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


async def _work() -> None:
    """A node's work: a few milliseconds, so that a kill lands mid-run now and then."""
    await asyncio.sleep(random.uniform(0, 0.02))


def _trace(node: str, state: State) -> None:
    path = os.environ.get("CHAOS_TRACE")
    if path:
        with open(path, "a") as sink:
            sink.write(f"{node} {state.run_id} {os.getpid()}\n")


@Node()
async def mark(state: State) -> None:
    _trace("mark", state)
    state.parked_at = time.time()


@Node()
async def woke(state: State) -> None:
    _trace("woke", state)
    state.woke_at = time.time()
    await _work()


def _taker(index: int) -> Any:
    async def node(message: Message, state: State) -> None:
        _trace(f"got{index}", state)
        state.got.append(message.message_id)
        state.sent_at.append(message.sent_at)
        state.got_at.append(time.time())
        await _work()

    node.__name__ = node.__qualname__ = f"got{index}"
    return Node()(node)


got1, got2 = _taker(1), _taker(2)


@Node()
async def done(state: State) -> None:
    _trace("done", state)
    state.done = True


def until() -> float:
    return float(os.environ["CHAOS_UNTIL"])


def build(name: str) -> Any:
    """Graph `name` of `GRAPHS` (the same source renders the same graph in every process)."""
    seconds, waits = GRAPHS[name]
    steps: list[Any] = [mark]
    if seconds != 0:
        steps.append(SLEEP_UNTIL(until()) if seconds is None else SLEEP(seconds))
    steps.append(woke)
    for taker in (got1, got2)[:waits]:
        steps += [WAIT("m"), taker]
    return NodeCompose(*steps, done).render()


for _name in GRAPHS:
    globals()[f"build_{_name}"] = functools.partial(build, _name)


def graph_options() -> list[str]:
    """The CLI worker's `--graph` options for every graph of `GRAPHS`."""
    found = []
    for name in GRAPHS:
        found += ["--graph", f"{name}=waits_chaos:build_{name}"]
    return found


def open_store(database: str) -> Any:
    """An SQLite file path, or `DSN|SCHEMA` for a Postgres store."""
    if "|" in database:
        from amrita_sense.durable import PostgresCheckpointStore

        dsn, schema = database.split("|")
        return PostgresCheckpointStore(dsn, schema=schema)
    return SQLiteCheckpointStore(database)


def keyring() -> Keyring:
    return Keyring.from_env(KEYS_ENV)


async def start(database: str, spec: list[list[str]]) -> None:
    """Start every run of `spec`: each runs until its timer parks it."""
    store, keys, graphs = open_store(database), keyring(), {name: build(name) for name in GRAPHS}
    for run_id, name in spec:
        interp = WorkflowInterpreter(graphs[name], extra_args=(State(run_id, name),))
        interp.checkpointing = Checkpointing(store, run_id, graph=name, codec=pickle, keyring=keys)
        await interp.run()


async def report(database: str, spec: list[list[str]]) -> dict[str, Any]:
    """Each run's status and its `State` as its latest checkpoint holds it."""
    store, keys, graphs = open_store(database), keyring(), {name: build(name) for name in GRAPHS}
    found: dict[str, Any] = {}
    for run_id, name in spec:
        policy = Checkpointing(store, run_id, graph=name, codec=pickle, keyring=keys)
        interp = await policy.resume(graphs[name])
        states = [value for value in interp._ava_args if isinstance(value, State)]
        assert policy.last is not None
        found[run_id] = {"status": policy.last.status, "state": states[0].as_dict() if states else None}
    return found


def new_loop(name: str) -> asyncio.AbstractEventLoop:
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def main(argv: list[str]) -> int:
    mode = argv[0]
    if mode == "worker":
        if argv[1] == "uvloop":
            import uvloop

            asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        from amrita_sense.durable.waits.cli import main as worker_main

        return worker_main(["worker", *argv[2:]])
    database, loop_name, spec_path = argv[1:4]
    with open(spec_path) as source:
        spec = json.load(source)
    loop = new_loop(loop_name)
    try:
        if mode == "start":
            loop.run_until_complete(start(database, spec))
        else:
            found = loop.run_until_complete(report(database, spec))
            with open(argv[4], "w") as sink:
                json.dump(found, sink)
    finally:
        loop.close()
    return 0


if __name__ == "__main__":
    # the nodes by their importable name (`waits_chaos.mark`, not `__main__.mark`), as the CLI
    # worker's `--graph NAME=waits_chaos:build_NAME` imports them
    import importlib

    sys.exit(importlib.import_module("waits_chaos").main(sys.argv[1:]))
