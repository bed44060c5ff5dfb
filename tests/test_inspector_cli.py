"""`python -m amrita_sense inspect ...`, run as a user would: serving, and bad input."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request
from urllib.parse import quote

import pytest

from support.inspector_programs import HOSTILE_ID
from support.inspector_support import (
    GRAPH_TARGET,
    cli_env,
    postgres_store,
    require_server,
    run_cli,
    running_inspector,
    sqlite_store,
)


@pytest.fixture(autouse=True)
def _server():
    require_server()


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=60) as answer:  # the server is on 127.0.0.1
        return answer.status, answer.read().decode("utf-8")


def test_port_zero_picks_a_free_port_and_prints_the_url(tmp_path):
    path, expected = sqlite_store(tmp_path)
    with running_inspector("--store", path, "--graph", GRAPH_TARGET) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        status, page = _get(url)
        assert status == 200 and "AmritaSense run inspector" in page
        status, body = _get(url + "api/runs/" + quote(HOSTILE_ID, safe=""))
        assert status == 200 and json.loads(body)["record"]["run_id"] == HOSTILE_ID
        status, body = _get(url + "api/runs?limit=2")
        assert json.loads(body)["total"] == len(expected)


def test_a_postgres_url_with_its_schema(request):
    url, schema, expected = postgres_store(request)
    with running_inspector("--store", url, "--schema", schema) as address:
        status, body = _get(address + "api/runs")
    assert status == 200 and json.loads(body)["total"] == len(expected)


def _fails(done, *needles: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("python -m amrita_sense inspect: error:"), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_a_missing_file_is_one_line_and_creates_nothing(tmp_path):
    missing = tmp_path / "missing.db"
    _fails(run_cli("--store", str(missing)), "no such checkpoint database")
    assert not missing.exists()


def test_a_file_that_is_not_a_store(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    _fails(run_cli("--store", str(other)), "not a readable SQLite database")


@pytest.mark.parametrize(
    ("store", "needle"),
    [
        ("http://example.invalid/runs", "unsupported store URL"),
        ("postgresql://nobody@127.0.0.1:1/none", "cannot connect to postgres user=nobody"),
        ("postgresql://u:secret@127.0.0.1:1/db?sslmode=bogus", "sslmode"),
    ],
)
def test_a_bad_url(store, needle):
    done = run_cli("--store", store)
    _fails(done, needle)
    assert "secret" not in done.stderr


def test_a_port_in_use(tmp_path):
    path, _ = sqlite_store(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        _fails(run_cli("--store", path, "--port", str(port)), f"cannot listen on 127.0.0.1:{port}")


def test_another_host_or_a_bad_graph_or_port_is_refused(tmp_path):
    path, _ = sqlite_store(tmp_path)
    _fails(run_cli("--store", path, "--host", "0.0.0.0"), "127.0.0.1 only")
    _fails(run_cli("--store", path, "--graph", "support.inspector_programs:nothing"), "has no attribute")
    _fails(run_cli("--store", path, "--port", "70000"), "between 0 and 65535")
    _fails(run_cli("--store", path, "--port", "many"), "invalid int value")
    _fails(run_cli("--schema", "x", "--store", path), "--schema is for a Postgres store only")
    _fails(run_cli(), "--store")


def test_without_the_server_library_the_cli_says_which_extra():
    code = (
        "import sys; sys.modules['starlette'] = None; "  # as if the [inspect] extra were not installed
        "from amrita_sense.inspector import cli; sys.exit(cli.main(['inspect', '--store', 'runs.db']))"
    )
    done = subprocess.run([sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, timeout=120)
    _fails(done, "pip install 'amrita-sense-turbo[inspect]'")
