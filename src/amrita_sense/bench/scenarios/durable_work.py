"""The durable work: the peers' comparison with a checkpoint after every node (`--peers`).

A request is a 10-node chain (node k folds k into the value, `peer_mix`), a new run per request
with its own run id, saved after every node into a store: SQLite (a file of its own per system,
in a temporary folder), Postgres (a database of its own per system on the runner's throwaway server
on loopback) or, for pydantic-graph, files. Every request's result is checked, and the last
request's stored state is read back through the system's own API and checked (ours: the store's
record is the run's, finished, saved after every node, and the restored run holds the final value).

Each system says which durability modes it has (`DURABLE_MODES`: a mode runs only on the systems
that have it): ours in each mode `Checkpointing(..., durability=...)` accepts (today's builds
without the parameter: sync only), LangGraph sync and its default (async), the rest one mode (the
step waits for its save: sync). The floor is the store's own writes of the same bytes: the
snapshots one of our runs saves, written as plain upserts, each its own commit (SQLite: a plain
`sqlite3` connection with the store's journal settings; Postgres: a plain psycopg connection,
autocommit, one statement round trip per save), as many per request as our run saves.

No amrita_sense at module level: a peer's environment loads this module too.
"""

import dataclasses
import inspect
import itertools
import os
import pickle
import shutil
import statistics
import tempfile
import time
import uuid
from typing import Any, Awaitable, Callable, Dict, List, Optional

from .bodies import api, distinct_function
from .framework import CountMismatch, Plan, Unavailable, expect, expect_results, need, scenario
from .peer_work import ChainRequest, peer_mix

DURABLE_CHAIN_NODES = 10
DURABLE_MODES = ("sync", "async", "exit")
"""The durability modes, as LangGraph's users know them: `sync` (a step waits for its save),
`async` (saves written while the next nodes run), `exit` (saved when the run ends)."""


def durable_chain_result(x: int) -> int:
    """The durable chain: node k (0..9) folds k into the value, starting from x."""
    value = x
    for k in range(DURABLE_CHAIN_NODES):
        value = peer_mix(value, k)
    return value


@dataclasses.dataclass(frozen=True)
class DurableWork:
    """One of the durable works: its title and the store it saves into."""

    name: str
    title: str
    store: str  # "sqlite", "postgres" or "file"
    floor: Optional[str] = None
    compare: Optional[str] = None  # the work ours is measured on for the ratios (ours has no file store)

    @property
    def ours_on(self) -> str:
        return self.compare or self.name


DURABLE_WORKS: Dict[str, DurableWork] = {
    work.name: work
    for work in (
        DurableWork(
            "durable_sqlite",
            f"{DURABLE_CHAIN_NODES}-node chain, a checkpoint after every node, into SQLite (a temporary file)",
            "sqlite",
            "durable_sqlite_floor",
        ),
        DurableWork(
            "durable_postgres",
            f"{DURABLE_CHAIN_NODES}-node chain, a checkpoint after every node, into Postgres (a throwaway server on loopback)",
            "postgres",
            "durable_postgres_floor",
        ),
        DurableWork(
            "durable_file",
            f"{DURABLE_CHAIN_NODES}-node chain, a snapshot after every node, into a file per run",
            "file",
            compare="durable_sqlite",
        ),
    )
}


@dataclasses.dataclass
class DurableSystem:
    """A system's version of a durable work, ready to serve.

    `serve(x)`: one request (a new run with a new id), its result. `stored()`: the result of the
    last request served, read back from the store through the system's own API (raises when what
    is stored is not that run's finished state). `note`: the store's settings, as the system set
    them. `close()`: releases connections and files (plain or `async def`)."""

    serve: Callable[[int], Awaitable[int]]
    stored: Callable[[], Awaitable[Any]]
    note: str = ""
    close: Optional[Callable[[], Any]] = None
    parts: Optional[Callable[[], Awaitable[Dict[str, float]]]] = None


def durable_plan(name: str, n: int, system: DurableSystem) -> Plan:
    """A plan whose timed part serves `n` requests of durable work `name` (x = 0..n-1, a new
    run each); every result is checked, then the last request's stored state, read back. One
    untimed request (checked, its stored state too) comes before each measurement."""
    expected = durable_chain_result
    want = [expected(x) for x in range(n)]
    got: list = [None] * n

    async def read_back(x: int) -> None:
        try:
            value = await system.stored()
        except CountMismatch:
            raise
        except Exception as exc:  # noqa: BLE001 - what the store holds is not the run's
            raise CountMismatch(f"{name}: the stored state of request {x} does not read back: {exc!r}") from exc
        if value != expected(x):
            raise CountMismatch(f"{name}: the stored state of request {x} holds {value!r}, expected {expected(x)!r}")

    async def timed() -> None:
        for x in range(n):
            got[x] = await system.serve(x)

    async def prepare() -> None:
        got[:] = [None] * n
        expect_results(f"{name} (untimed request)", [await system.serve(n)], [expected(n)])
        await read_back(n)

    async def check() -> None:
        expect_results(name, got, want)
        await read_back(n - 1)

    return Plan(n, timed, prepare, check, close=system.close, note=system.note, parts=system.parts)


# ---------------------------------------------------------------------------
# Where a system stores: the worker's place (a folder, the Postgres server's address)


def postgres_place(place: Optional[dict], work: str) -> dict:
    """The Postgres server this system stores into (host, port, user, dbname, dsn, url), or
    raise `Unavailable` saying why there is none."""
    server = (place or {}).get("postgres")
    if not server:
        why = (place or {}).get("postgres_problem") or "no Postgres server was given to the worker"
        raise Unavailable(f"{work}: {why}")
    return server


class Folder:
    """A folder for one plan's files (under the worker's, or a temporary one), removed by `remove`."""

    def __init__(self, place: Optional[dict], prefix: str) -> None:
        base = (place or {}).get("dir") or None
        self.path = tempfile.mkdtemp(prefix=f"{prefix}-", dir=base)

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def run_ids(prefix: str) -> Callable[[], str]:
    """A fresh id per call (unique across measurements, plans and workers)."""
    token = uuid.uuid4().hex[:10]
    counter = itertools.count()
    return lambda: f"{prefix}-{token}-{next(counter)}"


def sqlite_settings(conn: Any) -> str:
    """`journal_mode=... synchronous=...` of an open sqlite3 connection."""
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    level = conn.execute("PRAGMA synchronous").fetchone()[0]
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return f"journal_mode={journal}, synchronous={names.get(level, level)}"


async def settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


# ---------------------------------------------------------------------------
# Ours


def our_modes() -> Dict[str, str]:
    """The durability modes this build's `Checkpointing` accepts, each with how it is written
    (sync only, its default behaviour, when it has no `durability` parameter)."""
    Checkpointing, MemoryCheckpointStore = need("amrita_sense.durable", "Checkpointing", "MemoryCheckpointStore")
    parameter = inspect.signature(Checkpointing).parameters.get("durability")
    if parameter is None:
        return {"sync": "sync (no durability= yet)"}
    modes = {}
    for mode in DURABLE_MODES:
        try:
            Checkpointing(MemoryCheckpointStore(), "probe", durability=mode)
        except (TypeError, ValueError):
            continue
        default = " (default)" if parameter.default == mode else ""
        modes[mode] = f'durability="{mode}"{default}'
    return modes


def durable_systems() -> Dict[str, Dict[str, str]]:
    """What this build runs of the durable work: {work: {mode: how it is written}} ({} without
    `amrita_sense.durable`)."""
    try:
        modes = our_modes()
    except Unavailable:
        return {}
    return {"durable_sqlite": dict(modes), "durable_postgres": dict(modes)}


def _durable_chain_graph() -> Any:
    """10 distinct async nodes (each its own code object), each taking the request by type."""
    Node, NodeCompose, _ = api()
    scope = {"ChainRequest": ChainRequest, "mix": peer_mix}
    nodes = []
    for k in range(DURABLE_CHAIN_NODES):
        source = f"async def step_{k}(request: ChainRequest):\n    request.value = mix(request.value, {k})\n"
        nodes.append(Node()(distinct_function(source, f"step_{k}", scope)))
    return NodeCompose(*nodes).render()


class _Capture:
    """A codec (pickle's) that keeps what it loads, to find the request in a restored run."""

    def __init__(self) -> None:
        self.loaded: List[Any] = []

    def dumps(self, value: Any) -> bytes:
        return pickle.dumps(value)

    def loads(self, data: bytes) -> Any:
        value = pickle.loads(data)
        self.loaded.append(value)
        return value


def _find_request(value: Any, depth: int = 0) -> Optional[ChainRequest]:
    if isinstance(value, ChainRequest):
        return value
    if depth < 4 and isinstance(value, (tuple, list)):
        items: Any = value
    elif depth < 4 and isinstance(value, dict):
        items = value.values()
    else:
        return None
    for item in items:
        found = _find_request(item, depth + 1)
        if found is not None:
            return found
    return None


def _store_synchronous() -> str:
    """`SQLiteCheckpointStore`'s default `synchronous` (the floor writes with the same)."""
    SQLiteCheckpointStore = need("amrita_sense.durable", "SQLiteCheckpointStore")
    parameter = inspect.signature(SQLiteCheckpointStore).parameters.get("synchronous")
    return str(parameter.default).upper() if parameter is not None else "NORMAL"


def _our_store(work: DurableWork, place: Optional[dict], folder: Folder) -> tuple:
    """The store `work` saves into (as a user makes it), how it is set, and how it closes."""
    if work.store == "sqlite":
        SQLiteCheckpointStore = need("amrita_sense.durable", "SQLiteCheckpointStore")
        store = SQLiteCheckpointStore(folder.file("checkpoints.db"))
        import sqlite3

        probe = sqlite3.connect(store.path)  # the store's own connection sets the same journal mode
        journal = probe.execute("PRAGMA journal_mode").fetchone()[0]
        probe.close()
        note = f"SQLiteCheckpointStore(path): journal_mode={journal}, synchronous={_store_synchronous()} (its default)"
        return store, note, store.close
    server = postgres_place(place, work.name)
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise Unavailable(
            f"psycopg is not installed here (pip install 'amrita-sense-turbo[postgres]'): {exc}"
        ) from None
    PostgresCheckpointStore = need("amrita_sense.durable", "PostgresCheckpointStore")
    # a direct connection to the server, as the peers' drivers have (psycopg prepares a statement it
    # runs often by default; the store only when told, since PgBouncer's transaction mode may not)
    prepare = "prepare" in inspect.signature(PostgresCheckpointStore).parameters
    store = PostgresCheckpointStore(server["dsn"], **({"prepare": True} if prepare else {}))
    return (
        store,
        f"PostgresCheckpointStore(dsn{', prepare=True' if prepare else ''}): a pool of 1-4, statements prepared "
        "on the server (a direct connection, as the floor's); a connection idle for a second or more checked",
        store.close,
    )


def our_durable(work_name: str, mode: str, place: Optional[dict] = None) -> DurableSystem:
    """Ours: `Checkpointing(store, run_id, every_nodes=1, codec=pickle, keyring=...)` (in `mode`;
    signed where the build has keyrings) on a new interpreter per request; read back with
    `store.load(run_id)` and `WorkflowInterpreter.restore` (the signature checked)."""
    work = DURABLE_WORKS[work_name]
    modes = durable_systems().get(work_name, {})
    if mode not in modes:
        raise Unavailable(
            f"{work_name}: this build has no durability mode {mode!r} (it has {', '.join(modes) or 'none'})"
        )
    Checkpointing = need("amrita_sense.durable", "Checkpointing")
    _, _, WorkflowInterpreter = api()
    graph = _durable_chain_graph()
    folder = Folder(place, "amrita-durable")
    try:
        store, note, close_store = _our_store(work, place, folder)
    except BaseException:
        folder.remove()
        raise
    parameters = inspect.signature(Checkpointing).parameters
    options: Dict[str, Any] = {"durability": mode} if "durability" in parameters else {}
    if "keyring" in parameters:  # signed checkpoints, as a deployment runs them
        options["keyring"] = need("amrita_sense.durable", "Keyring").generate("bench")
    new_id = run_ids("ours")
    last: List[str] = []

    async def serve(x: int) -> int:
        run_id = new_id()
        request = ChainRequest(x)
        interp = WorkflowInterpreter(graph, extra_args=(request,))
        interp.checkpointing = Checkpointing(store, run_id, every_nodes=1, codec=pickle, **options)
        await interp.run()
        last[:] = [run_id]
        return request.value

    async def stored() -> int:
        checkpoint = await settle(store.load(last[0]))
        record = checkpoint.record
        expect(f"{work_name}: the stored run's id", record.run_id, last[0])
        expect(f"{work_name}: the stored run's status", record.status, "finished")
        if mode == "sync" and record.version < DURABLE_CHAIN_NODES:
            raise CountMismatch(
                f"{work_name}: the run saved {record.version} times, not after each of its {DURABLE_CHAIN_NODES} nodes"
            )
        codec = _Capture()
        keyring = options.get("keyring")
        if keyring is None:
            WorkflowInterpreter.restore(graph, checkpoint.data, codec=codec)
        else:
            bound = keyring.bound_to(record.run_id, record.version)
            WorkflowInterpreter.restore(graph, checkpoint.data, codec=codec, keyring=bound)
        request = _find_request(codec.loaded)
        if request is None:
            raise CountMismatch(f"{work_name}: the restored run holds no request")
        return request.value

    def close() -> None:
        try:
            close_store()
        finally:
            folder.remove()

    async def parts() -> Dict[str, float]:
        """Where a request's time goes (medians of a few more requests, untimed): the engine (the
        same request without checkpoints), writing (the time spent in the store's `save`) and
        encoding (the rest: building the snapshots, the checkpointer's own work)."""
        timing = _Timing(store)
        engine, total, write = [], [], []
        for x in range(_PARTS_REQUESTS):
            request = ChainRequest(x)
            started = time.perf_counter()
            await WorkflowInterpreter(graph, extra_args=(request,)).run()
            engine.append(time.perf_counter() - started)
            expect(f"{work_name}: the request without checkpoints", request.value, durable_chain_result(x))
            request, timing.spent = ChainRequest(x), 0.0
            interp = WorkflowInterpreter(graph, extra_args=(request,))
            interp.checkpointing = Checkpointing(timing, new_id(), every_nodes=1, codec=pickle, **options)
            started = time.perf_counter()
            await interp.run()
            total.append(time.perf_counter() - started)
            write.append(timing.spent)
            expect(f"{work_name}: the timed request", request.value, durable_chain_result(x))
        engine_s, total_s, write_s = (statistics.median(v) for v in (engine, total, write))
        return {"engine": engine_s, "encode": max(0.0, total_s - write_s - engine_s), "write": write_s}

    return DurableSystem(serve, stored, f"ours: {note}", close, parts if mode == "sync" else None)


_PARTS_REQUESTS = 5


class _Timing:
    """A store that adds up the time its `save` takes (the rest is the store's own)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.spent = 0.0

    def save(self, run_id: str, data: bytes, **options: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.store.save(run_id, data, **options)
        finally:
            self.spent += time.perf_counter() - started

    def load(self, run_id: str, **options: Any) -> Any:
        return self.store.load(run_id, **options)

    def list(self, **options: Any) -> Any:
        return self.store.list(**options)

    def delete(self, run_id: str, **options: Any) -> Any:
        return self.store.delete(run_id, **options)


# ---------------------------------------------------------------------------
# The floor: the store's own writes of our snapshots' bytes


class _Recording:
    """A store that keeps the bytes of every save (of one run), in a memory store."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.saves: List[bytes] = []

    def save(self, run_id: str, data: bytes, **options: Any) -> Any:
        self.saves.append(bytes(data))
        return self.store.save(run_id, data, **options)

    def load(self, run_id: str, **options: Any) -> Any:
        return self.store.load(run_id, **options)

    def list(self, **options: Any) -> Any:
        return self.store.list(**options)

    def delete(self, run_id: str, **options: Any) -> Any:
        return self.store.delete(run_id, **options)


async def our_snapshots() -> List[bytes]:
    """The bytes of every checkpoint one request of ours saves (in the sync mode)."""
    Checkpointing, MemoryCheckpointStore = need("amrita_sense.durable", "Checkpointing", "MemoryCheckpointStore")
    _, _, WorkflowInterpreter = api()
    recording = _Recording(MemoryCheckpointStore())
    request = ChainRequest(1)
    interp = WorkflowInterpreter(_durable_chain_graph(), extra_args=(request,))
    interp.checkpointing = Checkpointing(recording, "floor", every_nodes=1, codec=pickle)
    await interp.run()
    expect("the floor's run", request.value, durable_chain_result(1))
    return recording.saves


_SQLITE_UPSERT = (
    "INSERT INTO floor (run_id, version, data) VALUES (?, ?, ?) "
    "ON CONFLICT (run_id) DO UPDATE SET version = excluded.version, data = excluded.data"
)
_POSTGRES_UPSERT = (
    "INSERT INTO floor (run_id, version, data) VALUES (%s, %s, %s) "
    "ON CONFLICT (run_id) DO UPDATE SET version = EXCLUDED.version, data = EXCLUDED.data"
)


async def durable_floor(work_name: str, place: Optional[dict] = None) -> DurableSystem:
    """The floor of `work_name`: per request, as many upserts of our snapshots' bytes as our run
    saves, each its own commit, on a plain connection; read back with a plain SELECT."""
    work = DURABLE_WORKS[work_name]
    saves = await our_snapshots()
    new_id = run_ids("floor")
    last: List[Any] = []
    folder = Folder(place, "amrita-floor")
    if work.store == "sqlite":
        import sqlite3

        path = folder.file("floor.db")
        synchronous = _store_synchronous()
        conn: Any = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("CREATE TABLE floor (run_id TEXT PRIMARY KEY, version INTEGER NOT NULL, data BLOB NOT NULL)")
        execute, upsert, select = conn.execute, _SQLITE_UPSERT, "SELECT version, data FROM floor WHERE run_id = ?"
        note = f"floor: a plain sqlite3 connection, autocommit, {sqlite_settings(conn)}"
    else:
        server = postgres_place(place, work_name)
        try:
            import psycopg
        except ImportError as exc:
            folder.remove()
            raise Unavailable(f"psycopg is not installed here: {exc}") from None
        conn = psycopg.connect(server["dsn"], autocommit=True)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS floor (run_id text PRIMARY KEY, version integer NOT NULL, data bytea NOT NULL)"
        )
        execute, upsert, select = conn.execute, _POSTGRES_UPSERT, "SELECT version, data FROM floor WHERE run_id = %s"
        note = "floor: a plain psycopg connection, autocommit, its defaults (one round trip and commit per save; a statement run 5 times is prepared)"

    async def serve(x: int) -> int:
        run_id = new_id()
        for version, data in enumerate(saves, 1):
            execute(upsert, (run_id, version, data))
        last[:] = [run_id, x]
        return durable_chain_result(x)  # the engine's part, without the engine (ten folds)

    async def stored() -> int:
        run_id, x = last
        version, data = execute(select, (run_id,)).fetchone()
        expect(f"{work_name} floor: the stored version", version, len(saves))
        expect(f"{work_name} floor: the stored bytes are the last save's", bytes(data) == saves[-1], True)
        return durable_chain_result(x)

    def close() -> None:
        try:
            conn.close()
        finally:
            folder.remove()

    return DurableSystem(serve, stored, f"{note}; {len(saves)} saves per request", close)


# ---------------------------------------------------------------------------
# The scenarios (ours and the floor, on our builds; a peer's worker calls its own module's
# `durable(work, mode, scenarios, place)` for the same work, see `peers/`)


def _durable_scenario(name: str, floor: Optional[str]) -> Callable[[Callable[..., Plan]], Callable[..., Plan]]:
    return scenario(name, DURABLE_WORKS[name].title, unit="request", size=100, quick=10, kind="durable", floor=floor)


@_durable_scenario("durable_sqlite", "durable_sqlite_floor")
def durable_sqlite(n: int, mode: str = "sync", place: Optional[dict] = None) -> Plan:
    return durable_plan("durable_sqlite", n, our_durable("durable_sqlite", mode, place))


@_durable_scenario("durable_postgres", "durable_postgres_floor")
def durable_postgres(n: int, mode: str = "sync", place: Optional[dict] = None) -> Plan:
    return durable_plan("durable_postgres", n, our_durable("durable_postgres", mode, place))


@_durable_scenario("durable_file", None)
def durable_file(n: int, mode: str = "sync", place: Optional[dict] = None) -> Plan:
    raise Unavailable("durable_file: ours has no file store (the SQLite store is its embedded one)")


def _floor_scenario(name: str, work: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    title = f"the floor of {work}: the store's own writes of our snapshots' bytes, per request"
    return scenario(name, title, unit="request", size=100, quick=10, kind="floor")


@_floor_scenario("durable_sqlite_floor", "durable_sqlite")
async def durable_sqlite_floor(n: int, mode: str = "sync", place: Optional[dict] = None) -> Plan:
    return durable_plan("durable_sqlite_floor", n, await durable_floor("durable_sqlite", place))


@_floor_scenario("durable_postgres_floor", "durable_postgres")
async def durable_postgres_floor(n: int, mode: str = "sync", place: Optional[dict] = None) -> Plan:
    return durable_plan("durable_postgres_floor", n, await durable_floor("durable_postgres", place))
