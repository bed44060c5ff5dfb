"""The inspector trusts nothing and leaks nothing (issue 45): an SQLite file read without a write,
a Postgres password never shown, bad rows shown as bad rows, bad query values answered with 400,
and 200,000 runs paged by the store without a snapshot read."""

from __future__ import annotations

import html
import json
import os
import re
import sqlite3
import stat
import urllib.error
import urllib.request
from collections import deque
from urllib.parse import quote, urljoin, urlsplit

import pytest

from amrita_sense.durable import CheckpointError, MemoryCheckpointStore, SQLiteCheckpointStore
from amrita_sense.durable.stores.paging import PAGE_ORDERS, PAGE_SORTS, page_of
from amrita_sense.inspector import BadStore, close_store, describe_store, open_store
from support import inspector_programs
from support.inspector_support import (
    GRAPH_TARGET,
    client,
    folder_state,
    many_runs,
    postgres_store,
    postgres_with_runs,
    require_server,
    run_cli,
    serving_inspector,
    sqlite_store,
    sqlite_with_runs,
)
from support.stores import sample_snapshots

SECRET = "Pw-9f3kq-SECRET"


@pytest.fixture(autouse=True)
def _server():
    require_server()


def _url(run_id: str, what: str = "") -> str:
    return f"/api/runs/{quote(run_id, safe='')}" + (f"/{what}" if what else "")


def _session(store) -> None:
    """Every kind of view: pages of the list, every run's page, history and drawing, an entry."""
    with client(store) as http:
        for params in ({}, {"sort": "run", "order": "asc"}, {"status": "finished", "limit": 2, "offset": 1}):
            assert http.get("/", params=params).status_code == 200
            assert http.get("/api/runs", params=params).status_code == 200
        for run_id in inspector_programs.EXPECTED:
            assert http.get("/", params={"run": run_id}).status_code == 200
            for url in (_url(run_id), _url(run_id, "history")):
                assert http.get(url).status_code == 200
            http.get(_url(run_id, "graph.svg"))
        assert http.get("/", params={"run": "with-history", "version": 1}).status_code == 200


# ----- list_page ---------------------------------------------------------------------------------------


def test_every_store_pages_as_the_list_sorted(tmp_path):
    memory, sqlite = MemoryCheckpointStore(), SQLiteCheckpointStore(tmp_path / "runs.db")
    for store in (memory, sqlite):
        inspector_programs.fill(store)
        for sort in PAGE_SORTS:
            for order in PAGE_ORDERS:
                page = store.list_page(sort=sort, order=order, offset=1, limit=3)
                assert page == page_of(store.list(), sort, order, 1, 3) and len(page.records) == 3
        assert store.list_page(status="finished").total == 4
        for bad in ({"sort": "data"}, {"order": "up"}, {"offset": -1}, {"limit": 0}, {"offset": 2**63}):
            with pytest.raises(ValueError):
                store.list_page(**bad)
    sqlite.close()


# ----- SQLite: read-only ---------------------------------------------------------------------------


def test_serving_an_sqlite_store_writes_no_byte_and_creates_no_file(tmp_path):
    path, _ = sqlite_store(tmp_path)
    before = folder_state(tmp_path)
    store = open_store(path)
    _session(store)
    assert folder_state(tmp_path) == before  # the file's bytes and time, and no -wal / -shm / -journal
    close_store(store)
    with pytest.raises(CheckpointError, match="read-only"):
        store.save("new", sample_snapshots()[0])
    assert folder_state(tmp_path) == before


def test_a_file_in_a_folder_it_may_only_read_is_served(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    path, _ = sqlite_store(folder)
    before = folder_state(folder)
    os.chmod(path, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)  # 0444
    os.chmod(folder, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    try:
        store = open_store(path)
        _session(store)
        during = folder_state(folder)
        close_store(store)
    finally:
        os.chmod(folder, stat.S_IRWXU)
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    assert during == before and folder_state(folder) == before


def test_a_writer_works_on_while_the_inspector_reads_and_it_sees_the_new_runs(tmp_path):
    path, expected = sqlite_store(tmp_path)
    store = open_store(path)
    writer = SQLiteCheckpointStore(path, timeout=0.5)  # its -wal and -shm: the inspector reads through them
    halted, _ = sample_snapshots()
    try:
        with client(store) as http:
            for index in range(3):
                assert http.get("/").status_code == 200
                writer.save(f"late-{index}", halted)  # never waits for a lock the inspector holds
                listed = http.get("/api/runs", params={"limit": 500}).json()
                assert listed["total"] == len(expected) + index + 1
    finally:
        writer.close()
        close_store(store)


def test_framed_checkpoints_load_read_only_as_written(tmp_path):
    path = tmp_path / "runs.db"
    big = sample_snapshots(payload=20_000)  # stored as frames: a keyframe, then a delta
    with SQLiteCheckpointStore(path) as writer:
        for data in big:
            writer.save("big", data, history=True)
    reader = SQLiteCheckpointStore(path, read_only=True)
    assert reader.load("big").data == big[1]
    assert [reader.load("big", version=v).data for v in (1, 2)] == list(big)
    assert [r.version for r in reader.history("big")] == [1, 2]
    assert reader.list_page().records == reader.list()


def test_a_file_of_another_schema_version_is_refused_read_only(tmp_path):
    path = tmp_path / "runs.db"
    SQLiteCheckpointStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    before = folder_state(tmp_path)
    with pytest.raises(CheckpointError, match="schema version 2"):
        SQLiteCheckpointStore(path, read_only=True)
    with pytest.raises(BadStore, match="schema version 2"):
        open_store(str(path))
    assert folder_state(tmp_path) == before


# ----- Postgres: the password never shows ------------------------------------------------------------


def _with_password(dsn: str, form: str) -> str:
    """The session cluster's DSN carrying SECRET as its password, in one of the three forms."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    where = f"{params['host']}:{params['port']}/{params['dbname']}"
    if form == "key=value":
        return make_conninfo("", **{**params, "password": SECRET})
    if form == "userinfo":
        return f"postgresql://{params['user']}:{SECRET}@{where}"
    return f"postgres://{params['user']}@{where}?password={SECRET}&application_name=inspector"


def _crawl(base: str, limit: int = 150) -> dict[str, tuple[int, str]]:
    """Every page and link the inspector serves from `base` (at most `limit`, breadth first), and the
    JSON endpoints of every listed run: `{url: (status, headers and body)}`."""
    seen: dict[str, tuple[int, str]] = {}
    runs = urljoin(base, "/api/runs?limit=500")
    queue = deque([runs, base, urljoin(base, "/?run=nope&offset=abc")])
    while queue and len(seen) < limit:
        url = queue.popleft()
        if url in seen:
            continue
        status, headers, body = _get(url)
        seen[url] = (status, headers + body)
        for link in re.findall(r'(?:href|src)="([^"]*)"', body):
            target = urljoin(url, html.unescape(link))
            if urlsplit(target).netloc == urlsplit(base).netloc:
                queue.append(target)
        for row in json.loads(body)["runs"] if url == runs else ():
            queue.extend(urljoin(base, _url(row["run_id"], what)) for what in ("", "history", "graph.svg"))
    return seen


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            return answer.status, str(answer.headers), answer.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as answer:
        return answer.code, str(answer.headers), answer.read().decode("utf-8", "replace")


@pytest.mark.parametrize("form", ["key=value", "userinfo", "query"])
def test_the_postgres_password_never_appears_in_any_answer_or_output(request, form):
    _, schema, expected = postgres_store(request)
    dsn = _with_password(request.getfixturevalue("postgres_dsn"), form)
    assert SECRET in dsn and SECRET not in describe_store(dsn, schema)
    with serving_inspector("--store", dsn, "--schema", schema, "--graph", GRAPH_TARGET) as (url, process):
        pages = _crawl(url)
    output = process.communicate(timeout=30)
    assert len(pages) > 2 * len(expected) and all(status < 500 for status, _ in pages.values())
    header = pages[url][1]
    assert f"store <code>{html.escape(describe_store(dsn, schema))}</code>" in header
    for page, (_, text) in pages.items():
        assert SECRET not in text, page
    assert SECRET not in output[0] + output[1]


@pytest.mark.parametrize("form", ["key=value", "userinfo", "query"])
def test_the_postgres_password_never_appears_in_an_error(request, form):
    dsn = _with_password(request.getfixturevalue("postgres_dsn"), form)
    unreachable = dsn.replace(str(_port(dsn)), "1")
    with pytest.raises(BadStore) as refused:
        open_store(unreachable)
    assert "cannot connect" in str(refused.value) and SECRET not in str(refused.value)
    with pytest.raises(BadStore) as absent:
        open_store(dsn, schema="no_such_schema")
    assert "holds no checkpoint store" in str(absent.value) and SECRET not in str(absent.value)
    broken = dsn + (" sslmode=bogus" if form == "key=value" else "&sslmode=bogus" if "?" in dsn else "?sslmode=bogus")
    done = run_cli("--store", broken)
    assert done.returncode == 2 and "sslmode" in done.stderr
    assert SECRET not in done.stdout + done.stderr


def _port(dsn: str) -> int:
    from psycopg.conninfo import conninfo_to_dict

    return int(conninfo_to_dict(dsn)["port"])


# ----- bad rows, bad queries ---------------------------------------------------------------------------

BAD_ROWS = {
    "sqlite": {
        "finished": "updated_at = 1e300",
        "halted": "version = 'many'",
        "panicked": "created_at = 'yesterday', size = 'big'",
        "parked": "data = x'00010203'",
    },
    "postgres": {
        "finished": "updated_at = 1e300",
        "halted": "created_at = 'NaN'",
        "parked": "data = '\\x00010203'::bytea",
    },
}
UNDECODABLE = "parked"


def _spoil(backend: str, where: str, schema: str | None) -> None:
    """Write `BAD_ROWS[backend]` into the store's rows behind its back."""
    table = "sense_checkpoints" if backend == "sqlite" else f'"{schema}".checkpoints'
    statements = [f"UPDATE {table} SET {change} WHERE run_id = '{run}'" for run, change in BAD_ROWS[backend].items()]
    if backend == "sqlite":
        conn = sqlite3.connect(where)
        with conn:
            for statement in statements:
                conn.execute(statement)
        conn.close()
        return
    import psycopg

    with psycopg.connect(where, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.fixture(params=["sqlite", "postgres"])
def spoiled(request, tmp_path):
    """`(store opened by the inspector, backend)` whose rows `BAD_ROWS` spoiled."""
    if request.param == "sqlite":
        path, _ = sqlite_store(tmp_path)
        _spoil("sqlite", path, None)
        store = open_store(path)
    else:
        url, schema, _ = postgres_store(request)
        _spoil("postgres", url, schema)
        store = open_store(url, schema=schema)
    yield store, request.param
    close_store(store)


def test_a_bad_row_is_shown_as_a_bad_row_and_every_page_answers(spoiled):
    store, backend = spoiled
    bad = BAD_ROWS[backend]
    with client(store) as http:
        for sort in ("updated", "created", "run", "status", "version"):
            for order in ("asc", "desc"):
                assert http.get("/", params={"sort": sort, "order": order}).status_code == 200
                assert http.get("/api/runs", params={"sort": sort, "order": order}).status_code == 200
        rows = {row["run_id"]: row for row in http.get("/api/runs").json()["runs"]}
        listing = http.get("/").text
        runs = {run_id: http.get(_url(run_id)) for run_id in bad}
        pages = {run_id: http.get("/", params={"run": run_id}) for run_id in bad}
        others = [http.get(_url(run_id, what)) for run_id in bad for what in ("history", "graph.svg")]
    for run_id in bad:
        if run_id == UNDECODABLE:  # the list reads no snapshot: only the run's own view finds it out
            assert rows[run_id]["bad"] is None
            assert runs[run_id].json()["error"] and runs[run_id].json()["snapshot"] is None
        else:
            assert rows[run_id]["bad"], run_id
            assert runs[run_id].json()["record"]["bad"], run_id
            assert f'class="run-row bad" data-run-id="{run_id}"' in listing
        assert runs[run_id].status_code == 200 and pages[run_id].status_code == 200
        assert 'class="error' in pages[run_id].text
    assert all(answer.status_code in (200, 409) for answer in others)
    assert rows["with-history"]["bad"] is None  # the sound rows stay sound


BAD_QUERIES = [
    "/?run=finished&version=" + "9" * 20,
    "/api/runs/finished?version=" + "9" * 20,
    "/api/runs/finished/graph.svg?version=99999999999999999999",
    "/api/runs/finished?version=-1",
    "/api/runs/finished?version=1.5",
    "/?version=x",
    "/?offset=" + "9" * 20,
    "/api/runs?offset=99999999999999999999",
    "/api/runs?offset=1e3",
    "/api/runs?limit=0",
    "/api/runs?limit=501",
    "/api/runs?limit=lots",
    "/api/runs?sort=panic;DROP",
    "/?order=sideways",
    "/api/runs?status=nope",
    "/?run=" + "x" * 600,
    "/api/runs/" + "x" * 600,
    "/?run=a%00b",
    "/api/runs/a%00b",
    "/api/runs/%FF",
]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_bad_query_value_answers_400(request, tmp_path, backend):
    if backend == "sqlite":
        store = open_store(sqlite_store(tmp_path)[0])
    else:
        url, schema, _ = postgres_store(request)
        store = open_store(url, schema=schema)
    try:
        with client(store) as http:
            answers = {query: http.get(query) for query in BAD_QUERIES}
    finally:
        close_store(store)
    assert {query: answer.status_code for query, answer in answers.items()} == dict.fromkeys(BAD_QUERIES, 400)


# ----- 200,000 runs --------------------------------------------------------------------------------------

RUNS = 200_000


class LoadSpy:
    """A store that counts its `load` calls (the run list must make none)."""

    def __init__(self, store) -> None:
        self.store, self.loads = store, 0

    def __getattr__(self, name: str):
        if name == "load":
            self.loads += 1
        return getattr(self.store, name)


def _expected(rows: list[tuple], sort: str, order: str, status: str | None) -> list[str]:
    column = {"updated": 5, "created": 4, "run": 0, "status": 2, "version": 1}[sort]
    kept = [row for row in rows if status is None or row[2] == status]
    kept.sort(key=lambda row: (row[column], row[0]), reverse=order == "desc")
    return [row[0] for row in kept]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_200000_runs_are_paged_by_the_store_without_reading_a_snapshot(request, tmp_path, backend):
    rows = [(*row[:6], b"not a snapshot") for row in many_runs(RUNS)]  # a snapshot read would fail
    if backend == "sqlite":
        store = open_store(sqlite_with_runs(tmp_path / "runs.db", rows))
    else:
        dsn, schema = postgres_with_runs(request, rows)
        store = open_store(dsn, schema=schema)
    spy = LoadSpy(store)
    pages = [
        ("updated", "desc", None, 0),
        ("updated", "desc", None, 100_000),
        ("updated", "asc", None, RUNS - 20),
        ("run", "asc", None, 150_000),
        ("created", "desc", None, 50_000),
        ("status", "asc", "halted", 99_990),
        ("version", "desc", None, 1234),
    ]
    try:
        with client(spy) as http:
            for sort, order, status, offset in pages:
                params = {"sort": sort, "order": order, "offset": offset, "status": status or ""}
                body = http.get("/api/runs", params=params).json()
                want = _expected(rows, sort, order, status)
                assert body["total"] == len(want)
                assert [row["run_id"] for row in body["runs"]] == want[offset : offset + 50], params
                assert all(row["bad"] is None for row in body["runs"])
            page = http.get("/", params={"offset": 50})
    finally:
        close_store(store)
    assert page.status_code == 200 and page.text.count('class="run-row"') == 50
    assert spy.loads == 0
