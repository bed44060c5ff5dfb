"""The inspector's JSON endpoints and HTML page over an SQLite and a Postgres store, in process."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from amrita_sense.inspector import BadStore, close_store, open_store
from amrita_sense.pictures import picture_of
from support import inspector_programs
from support.inspector_programs import HOSTILE_ID, PANIC_MESSAGE
from support.inspector_support import (
    client,
    file_state,
    postgres_rows,
    postgres_store,
    require_server,
    sqlite_store,
)
from support.pictures_support import require_dot


@pytest.fixture(autouse=True)
def _server():
    require_server()


@pytest.fixture(params=["sqlite", "postgres"])
def filled(request, tmp_path):
    """`(store opened by the inspector, EXPECTED)` over each backend."""
    if request.param == "sqlite":
        path, expected = sqlite_store(tmp_path)
        store = open_store(path)
    else:
        url, schema, expected = postgres_store(request)
        store = open_store(url, schema=schema)
    yield store, expected
    close_store(store)


def _url(run_id: str, what: str = "") -> str:
    return f"/api/runs/{quote(run_id, safe='')}" + (f"/{what}" if what else "")


def test_the_run_list_says_every_run_s_record_and_each_run_its_position_and_panic(filled):
    store, expected = filled
    with client(store) as http:
        answer = http.get("/api/runs")
        runs = {run_id: http.get(_url(run_id)).json() for run_id in expected}
    assert answer.status_code == 200
    body = answer.json()
    assert body["total"] == len(expected) and body["sort"] == "updated" and body["order"] == "desc"
    rows = {row["run_id"]: row for row in body["runs"]}
    assert set(rows) == set(expected)
    for run_id, want in expected.items():
        assert (rows[run_id]["status"], rows[run_id]["bad"]) == (want.status, None), run_id
        assert rows[run_id]["size"] > 0 and "position" not in rows[run_id]  # the list reads no snapshot
        snapshot = runs[run_id]["snapshot"]
        assert (snapshot["position"], snapshot["parked"], snapshot["panic_record"] is not None) == (
            want.position,
            want.parked,
            want.panic,
        ), run_id
    updated = [row["updated_at"] for row in body["runs"]]
    assert updated == sorted(updated, reverse=True)  # newest first


def test_the_run_list_pages_sorts_and_filters(filled):
    store, expected = filled
    with client(store) as http:
        first = http.get("/api/runs", params={"sort": "run", "order": "asc", "limit": 3}).json()
        second = http.get("/api/runs", params={"sort": "run", "order": "asc", "limit": 3, "offset": 3}).json()
        panicked = http.get("/api/runs", params={"status": "panicked"}).json()
    names = sorted(expected)
    assert [row["run_id"] for row in first["runs"]] == names[:3]
    assert [row["run_id"] for row in second["runs"]] == names[3:6]
    assert [row["run_id"] for row in panicked["runs"]] == ["panicked"] and panicked["total"] == 1


def test_one_run_its_position_panic_and_traceback(filled):
    store, _ = filled
    with client(store) as http:
        parked = http.get(_url("parked")).json()
        panicked = http.get(_url("panicked")).json()
        hostile = http.get(_url(HOSTILE_ID)).json()
    snapshot = parked["snapshot"]
    assert (snapshot["position"], snapshot["parked"], snapshot["pointer"], snapshot["return_depth"]) == (
        "gate",
        "NodeSuspend::gamma",
        [3],
        0,
    )
    assert parked["graph"]["drawable"] is True
    panic = panicked["snapshot"]["panic_record"]
    assert panic["type"] == "builtins:ValueError" and panic["message"] == PANIC_MESSAGE
    assert "Traceback (most recent call last)" in panic["traceback"] and "raise ValueError" in panic["traceback"]
    assert hostile["record"]["run_id"] == HOSTILE_ID  # an id with a slash is one path segment


def test_history_lists_the_entries_and_an_entry_shows_itself(filled):
    store, expected = filled
    with client(store) as http:
        history = http.get(_url("with-history", "history")).json()
        versions = [entry["version"] for entry in history["entries"]]
        first = http.get(_url("with-history"), params={"version": versions[0]}).json()
        none = http.get(_url("finished", "history")).json()
        missing = http.get(_url("with-history"), params={"version": 99})
    assert history["keeps_history"] and len(versions) == expected["with-history"].history
    assert versions == sorted(versions)
    assert first["version"] == versions[0] and first["record"]["status"] == "running"
    assert [entry["status"] for entry in history["entries"]][-1] == "finished"
    assert none["entries"] == []
    assert missing.status_code == 404 and "no kept checkpoint of version 99" in missing.json()["error"]


def test_the_graph_is_drawn_with_the_pointer_marked(filled):
    store, _ = filled
    require_dot()
    with client(store) as http:
        svg = http.get(_url("parked", "graph.svg"))
        page = http.get("/", params={"run": "parked"}).text
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    node = picture_of(inspector_programs.GRAPH).node_for((3,))
    assert node is not None and "gamma" in node.label
    assert "=&gt; pointer" in svg.text and f"<title>{node.id}</title>" in svg.text
    assert f'<figure id="graph" data-pointer-node="{node.id}"><svg' in page


def test_without_graphviz_the_mermaid_text_is_shown_and_why(filled, monkeypatch):
    store, _ = filled
    monkeypatch.setattr("amrita_sense.pictures.svg.find_dot", lambda: None)
    with client(store) as http:
        page = http.get("/", params={"run": "halted"}).text
        svg = http.get(_url("halted", "graph.svg"))
    assert '<pre id="mermaid">' in page and "Graphviz" in page and "flowchart" in page
    assert svg.status_code == 503 and "Graphviz" in svg.json()["error"] and "flowchart" in svg.json()["mermaid"]


def test_no_graph_or_another_graph_is_said_not_guessed(filled):
    store, _ = filled
    with client(store) as http:
        foreign = http.get(_url("foreign")).json()
        foreign_svg = http.get(_url("foreign", "graph.svg"))
        foreign_page = http.get("/", params={"run": "foreign"}).text
    assert foreign["graph"]["drawable"] is False and "another graph" in foreign["graph"]["reason"]
    assert foreign_svg.status_code == 409 and "<svg" not in foreign_page and "another graph" in foreign_page
    with client(store, graph=None) as http:
        page = http.get("/", params={"run": "parked"}).text
        svg = http.get(_url("parked", "graph.svg"))
    assert "no graph given" in page and "<svg" not in page
    assert svg.status_code == 409 and "--graph" in svg.json()["error"]


def test_everything_user_controlled_is_escaped(filled):
    store, _ = filled
    with client(store) as http:
        listing = http.get("/").text
        hostile = http.get("/", params={"run": HOSTILE_ID}).text
        panicked = http.get("/", params={"run": "panicked"}).text
        missing = http.get("/", params={"run": "<i>nope</i>"})
    for page in (listing, hostile, panicked, missing.text):
        assert "<img" not in page and "<script" not in page and "<b>" not in page and "<i>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;/&amp;&quot;quoted&quot; run" in hostile
    assert "&lt;b&gt;bad&lt;/b&gt; &amp; &quot;worse&quot; &lt;script&gt;" in panicked
    assert missing.status_code == 404 and "&lt;i&gt;nope&lt;/i&gt;" in missing.text


def test_bad_requests_and_foreign_hosts_are_refused(filled):
    store, _ = filled
    with client(store) as http:
        assert http.get("/api/runs", params={"limit": "lots"}).status_code == 400
        assert http.get("/api/runs", params={"sort": "panic; DROP"}).status_code == 400
        assert http.get("/api/runs/nope").status_code == 404
        assert http.get(_url("finished", "else")).status_code == 404
        assert http.get("/", params={"offset": "-1"}).status_code == 400
        assert http.post("/api/runs").status_code == 405
        assert http.get("/", headers={"host": "attacker.example"}).status_code == 400
        page = http.get("/")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"


def _session(store) -> None:
    """Every kind of view, as a person clicking through would ask for them."""
    with client(store) as http:
        http.get("/")
        http.get("/api/runs", params={"sort": "run", "order": "asc"})
        for run_id in inspector_programs.EXPECTED:
            for url in (_url(run_id), _url(run_id, "history"), _url(run_id, "graph.svg")):
                http.get(url)
            http.get("/", params={"run": run_id})
        http.get("/", params={"run": "with-history", "version": 1})


def test_a_session_leaves_the_sqlite_file_unchanged(tmp_path):
    path, _ = sqlite_store(tmp_path)
    before = file_state(path)
    store = open_store(path)
    _session(store)
    close_store(store)
    assert file_state(path) == before


def test_a_session_leaves_the_postgres_rows_unchanged(request):
    url, schema, _ = postgres_store(request)
    before = postgres_rows(url, schema)
    assert before["checkpoints"] and before["history"]
    store = open_store(url, schema=schema)
    _session(store)
    close_store(store)
    assert postgres_rows(url, schema) == before


def test_stores_that_are_not_checkpoint_stores_are_refused_untouched(tmp_path, request):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    other = tmp_path / "text.db"
    other.write_text("not a database")
    for path, message in ((empty, "holds no checkpoint store"), (other, "not a readable SQLite database")):
        before = path.read_bytes()
        with pytest.raises(BadStore, match=message):
            open_store(str(path))
        assert path.read_bytes() == before
    with pytest.raises(BadStore, match="no such checkpoint database"):
        open_store(str(tmp_path / "missing.db"))
    assert not (tmp_path / "missing.db").exists()
    url, schema, _ = postgres_store(request)
    with pytest.raises(BadStore, match="holds no checkpoint store"):
        open_store(url, schema=f"{schema}_absent")
    assert postgres_rows(url, f"{schema}_absent") == {}  # no schema, no table was created
