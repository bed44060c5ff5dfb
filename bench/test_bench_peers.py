"""The peers in the benchmark (`--peers`): each peer module's version of the work returns the
right result for every request, in that peer's own environment.

The environments are looked for under $AMRITA_SENSE_PEERS_DIR (default: the checkout's
`.venv-peers`, where `scripts/bench.sh --peers` keeps them); a peer without one is skipped,
saying how to make it, unless AMRITA_SENSE_REQUIRE_PEERS=1 (CI, after its quick `--peers` run
made them) turns the skip into a failure. The rest runs everywhere, without any peer installed.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from amrita_sense.bench import peers, runner
from amrita_sense.bench import scenarios as S
from amrita_sense.bench.peers import venvs

ROOT = Path(__file__).resolve().parents[1]
PEERS_DIR = Path(os.environ.get("AMRITA_SENSE_PEERS_DIR") or ROOT / ".venv-peers")
REQUIRED = os.environ.get("AMRITA_SENSE_REQUIRE_PEERS", "") not in ("", "0")
LOOPS = ["asyncio"] + (["uvloop"] if sys.platform != "win32" else [])
SMOKE_REQUESTS = 7  # odd and even inputs both reach the IF/ELSE


def peer_python(peer: peers.Peer) -> str:
    """The Python of `peer`'s environment, or skip (fail when required) saying how to make it."""
    python = venvs.venv_python(str(PEERS_DIR / peer.name))
    if not os.path.exists(python):
        reason = (
            f"no environment for {peer.label} at {PEERS_DIR / peer.name}: make it with "
            f"`python -m amrita_sense.bench --peers {peer.name} --quick` (or scripts/bench.sh --peers)"
        )
        if REQUIRED:
            pytest.fail(reason)
        pytest.skip(reason)
    return python


def ask_worker(python: str, peer: str, loop: str, commands: list[dict]) -> list[dict]:
    """Replies of a peer worker (`_worker.py --expect peer`) to `commands`, in order."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [python, runner.WORKER, "--loop", loop, "--expect", "peer", "--peer", peer],
        input="".join(json.dumps(c) + "\n" for c in commands),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


UNWRITTEN = {("pydantic-graph", "peer_retry"), ("burr", "peer_retry"), ("llamaindex", "peer_retry")}
"""The peers' work a peer's module does not write (its `build` says why: n/a in the table)."""


PLAIN_PEERS = [name for name, peer in peers.PEERS.items() if "peer" in peer.kinds]
DURABLE_PEERS = [name for name, peer in peers.PEERS.items() if "durable" in peer.kinds]


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("name", PLAIN_PEERS)
def test_each_peer_serves_the_work_with_right_results(name: str, loop: str) -> None:
    peer = peers.PEERS[name]
    python = peer_python(peer)
    runs = [{"op": "run", "scenario": work, "size": SMOKE_REQUESTS, "budget": 0} for work in S.PEER_WORKS]
    hello, *replies = ask_worker(python, name, loop, [{"op": "hello"}, *runs])
    assert hello["status"] == "ok", hello
    pinned = {dist.split("[")[0]: v for dist, v in (r.split("==", 1) for r in peer.requirements)}
    assert {dist: hello["versions"][dist] for dist in pinned} == pinned
    assert hello["telemetry"]  # the worker switched it off and says how it stands
    for work, reply in zip(S.PEER_WORKS, replies):
        if (name, work) in UNWRITTEN:
            assert reply["status"] == "n/a" and "is not written for" in reply["reason"], f"{work}: {reply}"
            continue
        # "ok" only after the plan's check compared every request's result with the expected one
        assert reply["status"] == "ok", f"{work}: {reply}"
        assert reply["ops"] == SMOKE_REQUESTS and reply["value"] > 0


def test_a_peer_worker_runs_nothing_but_the_peers_work() -> None:
    name = PLAIN_PEERS[0]
    python = peer_python(peers.PEERS[name])
    _, reply = ask_worker(python, name, "asyncio", [{"op": "hello"}, {"op": "run", "scenario": "sync_chain"}])
    assert reply["status"] == "n/a" and "peers' work only" in reply["reason"]


@pytest.mark.parametrize("name", list(peers.PEERS))
def test_every_peer_module_imports_without_its_library(name: str) -> None:
    peer = peers.PEERS[name]
    module = importlib.import_module(f"amrita_sense.bench.peers.{peer.module}")
    assert Path(module.__file__).resolve() == Path(peer.path).resolve()
    assert callable(module.build) and callable(module.telemetry) and isinstance(module.TELEMETRY_OFF, dict)
    durable = getattr(module, "DURABLE", {})
    assert bool(durable) == ("durable" in peer.kinds) and (not durable or callable(module.durable))
    for work, modes in durable.items():  # written for works and modes that exist, each saying how
        assert work in S.DURABLE_WORKS and set(modes) <= set(S.DURABLE_MODES) and all(modes.values()), work


def _wrong_at(bad: int, work: str):
    async def serve(x: int) -> int:
        right = S.PEER_WORKS[work].expected(x)
        return right + 1 if x == bad else right

    return serve


@pytest.mark.parametrize("work", list(S.PEER_WORKS))
def test_one_wrong_result_fails_the_measurement(work: str) -> None:
    assert asyncio.run(S.measure(S.peer_plan(work, 5, _wrong_at(-1, work)))) > 0
    with pytest.raises(S.CountMismatch, match=f"{work}: request 3 returned"):
        asyncio.run(S.measure(S.peer_plan(work, 5, _wrong_at(3, work))))
    with pytest.raises(S.CountMismatch, match="untimed request"):  # the untimed request is checked too
        asyncio.run(S.measure(S.peer_plan(work, 5, _wrong_at(5, work))))


def test_a_missing_result_fails_the_measurement() -> None:
    plan = S.peer_plan("peer_chain", 4, _wrong_at(-1, "peer_chain"))
    plan.timed = lambda: None  # served nothing: every result is missing

    with pytest.raises(S.CountMismatch, match="request 0 returned None"):
        asyncio.run(S.measure(plan))


@pytest.mark.parametrize("work", list(S.PEER_WORKS))
def test_our_version_of_the_work_returns_the_expected_results(work: str) -> None:
    plan = S.build(work, 6)
    assert asyncio.run(S.measure(plan)) > 0  # the plan's check compared all six results


def test_peers_are_chosen_by_name() -> None:
    assert peers.select("all") == tuple(peers.PEERS.values())
    assert [p.name for p in peers.select("burr, langgraph,burr")] == ["burr", "langgraph"]
    with pytest.raises(ValueError, match="unknown peer.*crewai"):
        peers.select("burr,crewai")


def test_an_environment_is_reused_only_for_the_same_pins_and_python(tmp_path: Path) -> None:
    peer = peers.PEERS["burr"]
    directory = tmp_path / peer.name
    python = Path(venvs.venv_python(str(directory)))
    python.parent.mkdir(parents=True)
    python.touch()
    assert not venvs.is_ready(peer, str(directory), "3.11.7")  # no stamp: not made by us
    (directory / venvs.STAMP).write_text(json.dumps(venvs.wanted(peer, "3.11.7")))
    assert venvs.is_ready(peer, str(directory), "3.11.7")
    assert not venvs.is_ready(peer, str(directory), "3.12.1")
    other = peers.Peer(peer.name, peer.label, peer.module, ("apache-burr==0.1.0",), peer.reported)
    assert not venvs.is_ready(other, str(directory), "3.11.7")


def test_a_peer_whose_environment_fails_is_a_column_saying_why(monkeypatch, tmp_path: Path, capsys) -> None:
    def cannot(*args, **kwargs):
        raise venvs.PeerEnvError("pip install into .venv-peers/burr failed (exit 1):\nno network")

    monkeypatch.setattr(venvs, "ensure", cannot)
    out = tmp_path / "peers.json"
    argv = ["--quick", "--builds", "pure", "--peers", "burr", "--scenarios", "peer_if_else", "--json", str(out)]
    assert runner.main(argv) == 0
    printed = capsys.readouterr().out
    assert "peers, event loop: asyncio" in printed and "N/A on Burr" in printed
    doc = json.loads(out.read_text())
    row = next(r for r in doc["results"] if r["scenario"] == "peer_if_else")
    assert row["builds"]["pure"]["status"] == "ok"
    assert row["builds"]["burr"]["status"] == "n/a" and "no network" in row["builds"]["burr"]["reason"]
    assert doc["meta"]["builds"]["burr"]["peer"] is True


def test_the_runner_puts_a_peer_beside_our_builds(tmp_path: Path) -> None:
    peer = peers.PEERS["burr"]
    peer_python(peer)  # reuses the environment: nothing is installed here
    out = tmp_path / "peers.json"
    args = ["--quick", "--builds", "pure", "--peers", peer.name, "--peers-dir", str(PEERS_DIR), "--json", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "amrita_sense.bench", *args], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "peers, event loop: asyncio" in proc.stdout and "Burr" in proc.stdout
    assert "scenario" not in proc.stdout  # only the peers' work ran: no main table
    doc = json.loads(out.read_text())
    assert [r["scenario"] for r in doc["results"] if r["kind"] == "peer"] == list(S.PEER_WORKS)
    durable = {(r["scenario"], r["mode"]) for r in doc["results"] if r["kind"] == "durable" and "burr" in r["builds"]}
    assert durable == {(work, "sync") for work in ("durable_sqlite", "durable_postgres")}  # Burr's, beside ours
    assert "durable work, event loop: asyncio" in proc.stdout
    for row in (r for r in doc["results"] if r["kind"] == "peer"):
        status = "n/a" if ("burr", row["scenario"]) in UNWRITTEN else "ok"
        assert row["kind"] == "peer" and row["builds"]["burr"]["status"] == status, row
        assert row["ratios"]["x_primary"]["pure"] == pytest.approx(1.0)
        if status == "ok":
            assert row["ratios"]["x_primary"]["burr"] > 0
    meta = doc["meta"]["builds"]["burr"]
    assert meta["versions"]["apache-burr"] == "0.42.0" and meta["telemetry"]
    again = subprocess.run(
        [sys.executable, "-m", "amrita_sense.bench", "--report", str(out)], capture_output=True, text=True, cwd=ROOT
    )
    assert again.returncode == 0 and again.stdout.strip() == proc.stdout.strip()


# ---------------------------------------------------------------------------
# The durable work (a checkpoint after every node): ours and the floor here, the peers in their
# environments; SQLite and files always, Postgres when a throwaway server starts here


@pytest.fixture(scope="module")
def postgres_server():
    """A throwaway Postgres cluster's `server(name)` (a database of its own per name), or None
    when this machine has no server binaries (the Postgres cases then skip)."""
    from amrita_sense.bench.postgres import throwaway

    with throwaway() as (cluster, problem):
        if cluster is None:
            yield None
            return
        made: dict = {}

        def server(name: str) -> dict:
            if name not in made:
                cluster.createdb(name)
                made[name] = {
                    "dsn": cluster.dsn_of(name),
                    "url": f"postgresql://postgres@127.0.0.1:{cluster.port}/{name}",
                    "host": "127.0.0.1",
                    "port": cluster.port,
                    "user": "postgres",
                    "password": "",
                    "dbname": name,
                }
            return made[name]

        yield server


def place_for(work: str, postgres_server, name: str, tmp_path: Path) -> dict:
    place = {"dir": str(tmp_path)}
    if S.DURABLE_WORKS[work].store == "postgres":
        if postgres_server is None:
            pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl) here")
        place["postgres"] = postgres_server("bench_" + name.replace("-", "_"))
    return place


async def measure_and_close(plan) -> float:
    if hasattr(plan, "__await__"):
        plan = await plan
    try:
        return await S.measure(plan)
    finally:
        if plan.close is not None:
            plan.close()


OUR_DURABLE = [(work, mode) for work, modes in S.durable_systems().items() for mode in modes]


@pytest.mark.parametrize(("work", "mode"), OUR_DURABLE)
def test_our_durable_work_checks_every_result_and_the_stored_state(work, mode, postgres_server, tmp_path) -> None:
    place = place_for(work, postgres_server, "ours", tmp_path)
    plan = S.build(work, 4, mode=mode, place=place)
    assert "ours:" in plan.note
    # the plan's check compared the four results and read the last run back from the store
    assert asyncio.run(measure_and_close(plan)) > 0
    assert not list(tmp_path.iterdir())  # its files went with it


def test_ours_runs_every_durability_mode_its_checkpointing_has() -> None:
    from amrita_sense.durable import Checkpointing

    modes = S.durable_systems()["durable_sqlite"]
    if "durability" in inspect.signature(Checkpointing).parameters:
        assert set(modes) <= set(S.DURABLE_MODES) and "sync" in modes
    else:
        assert list(modes) == ["sync"]  # today: one mode, the step waits for its save


@pytest.mark.parametrize("work", [w.name for w in S.DURABLE_WORKS.values() if w.floor])
def test_the_floor_writes_our_snapshots_bytes(work, postgres_server, tmp_path) -> None:
    floor = S.DURABLE_WORKS[work].floor
    place = place_for(work, postgres_server, "floor", tmp_path)
    plan = asyncio.run(_built(floor, place))
    assert f"{S.DURABLE_CHAIN_NODES} saves per request" in plan.note  # as many as our run saves
    assert asyncio.run(measure_and_close(plan)) > 0


async def _built(name: str, place: dict):
    return await S.build(name, 4, mode="sync", place=place)


def _durable_system(wrong_result_at: int = -1, wrong_store: bool = False):
    state = {"x": None}

    async def serve(x: int) -> int:
        state["x"] = x
        right = S.durable_chain_result(x)
        return right + 1 if x == wrong_result_at else right

    async def stored() -> int:
        return S.durable_chain_result(state["x"]) + (1 if wrong_store else 0)

    return S.DurableSystem(serve, stored)


def test_a_wrong_result_or_stored_state_fails_the_durable_measurement() -> None:
    assert asyncio.run(S.measure(S.durable_plan("durable_sqlite", 3, _durable_system()))) > 0
    with pytest.raises(S.CountMismatch, match="request 1 returned"):
        asyncio.run(S.measure(S.durable_plan("durable_sqlite", 3, _durable_system(wrong_result_at=1))))
    with pytest.raises(S.CountMismatch, match="stored state of request 3 holds"):  # the untimed one's first
        asyncio.run(S.measure(S.durable_plan("durable_sqlite", 3, _durable_system(wrong_store=True))))


def test_the_durable_table_has_ours_the_floor_and_a_postgres_column_saying_why(monkeypatch, tmp_path, capsys) -> None:
    from amrita_sense.bench import postgres

    monkeypatch.setattr(postgres, "find_bindir", lambda: None)  # as on a machine without the server
    out = tmp_path / "durable.json"
    argv = ["--quick", "--builds", "pure", "--scenarios", "durable_sqlite,durable_postgres", "--json", str(out)]
    assert runner.main(argv) == 0  # n/a is not a failure
    printed = capsys.readouterr().out
    assert "durable work, event loop: asyncio" in printed and "floor" in printed
    assert "no PostgreSQL server binaries" in printed  # the notes say why the Postgres column is n/a
    doc = json.loads(out.read_text())
    rows = {(r["scenario"], r.get("mode")): r for r in doc["results"]}
    sqlite = rows[("durable_sqlite", "sync")]
    assert sqlite["builds"]["pure"]["status"] == "ok" and "SQLiteCheckpointStore" in sqlite["builds"]["pure"]["note"]
    floor = rows[("durable_sqlite_floor", None)]["builds"]["pure"]
    assert floor["status"] == "ok"
    # the ratio to the floor is ours over the floor's median (which is the larger is the machine's business)
    assert sqlite["ratios"]["x_ours"]["pure"] == pytest.approx(1.0)
    assert sqlite["ratios"]["x_floor"]["pure"] == pytest.approx(sqlite["builds"]["pure"]["median"] / floor["median"])
    parts = sqlite["builds"]["pure"]["parts"]  # where a request of ours goes: engine, encoding, writing
    assert set(parts) == {"engine", "encode", "write"} and parts["write"] > 0 and parts["engine"] > 0
    assert "where a request of ours goes" in printed
    postgres_row = rows[("durable_postgres", "sync")]["builds"]["pure"]
    assert postgres_row["status"] == "n/a" and "no PostgreSQL server binaries" in postgres_row["reason"]
    assert doc["meta"]["builds"]["pure"]["durable"]["durable_sqlite"]
    again = subprocess.run(
        [sys.executable, "-m", "amrita_sense.bench", "--report", str(out)], capture_output=True, text=True, cwd=ROOT
    )
    assert again.returncode == 0 and again.stdout.strip() == printed.strip()


@pytest.mark.parametrize("name", DURABLE_PEERS)
def test_each_peer_serves_the_durable_work_and_reads_it_back(name: str, postgres_server, tmp_path) -> None:
    peer = peers.PEERS[name]
    python = peer_python(peer)
    module = importlib.import_module(f"amrita_sense.bench.peers.{peer.module}")
    commands, cases = [{"op": "hello"}], []
    for work, modes in module.DURABLE.items():
        if S.DURABLE_WORKS[work].store == "postgres" and postgres_server is None:
            continue  # no server binaries here
        extra = {"postgres": postgres_server(f"bench_{name.replace('-', '_')}")} if work == "durable_postgres" else {}
        for mode in modes:
            commands.append({"op": "run", "scenario": work, "size": 3, "budget": 0, "mode": mode, **extra})
            cases.append((work, mode))
    hello, *replies = ask_worker(python, name, "asyncio", commands)
    assert hello["status"] == "ok" and hello["durable"] == module.DURABLE, hello
    for (work, mode), reply in zip(cases, replies):
        # "ok" only after every result was checked and the last run's stored state read back and checked
        assert reply["status"] == "ok", f"{work} {mode}: {reply}"
        assert reply["ops"] == 3 and reply["value"] > 0 and reply["note"]
