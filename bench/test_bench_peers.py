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


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("name", list(peers.PEERS))
def test_each_peer_serves_the_work_with_right_results(name: str, loop: str) -> None:
    peer = peers.PEERS[name]
    python = peer_python(peer)
    runs = [{"op": "run", "scenario": work, "size": SMOKE_REQUESTS, "budget": 0} for work in S.PEER_WORKS]
    hello, *replies = ask_worker(python, name, loop, [{"op": "hello"}, *runs])
    assert hello["status"] == "ok", hello
    pinned = dict(requirement.split("==", 1) for requirement in peer.requirements)
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
    name = next(iter(peers.PEERS))
    python = peer_python(peers.PEERS[name])
    _, reply = ask_worker(python, name, "asyncio", [{"op": "hello"}, {"op": "run", "scenario": "sync_chain"}])
    assert reply["status"] == "n/a" and "peers' work only" in reply["reason"]


@pytest.mark.parametrize("name", list(peers.PEERS))
def test_every_peer_module_imports_without_its_library(name: str) -> None:
    peer = peers.PEERS[name]
    module = importlib.import_module(f"amrita_sense.bench.peers.{peer.module}")
    assert Path(module.__file__).resolve() == Path(peer.path).resolve()
    assert callable(module.build) and callable(module.telemetry) and isinstance(module.TELEMETRY_OFF, dict)


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
    assert [r["scenario"] for r in doc["results"]] == list(S.PEER_WORKS)
    for row in doc["results"]:
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
