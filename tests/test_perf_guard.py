"""The instruction-count guard (`python -m amrita_sense.bench.perf_guard`, issue 43).

The committed baseline must parse and name the eight user shapes; `record` must refuse a missing
reason; a baseline whose counts change without a new `why` must fail `check`; and, under callgrind,
a build slowed on purpose (a `sitecustomize` that makes event dispatch do extra work) must fail
`check` naming event dispatch with both counts, while the same scenario unslowed passes. The
callgrind test is skipped without valgrind (a failure with AMRITA_SENSE_REQUIRE_CALLGRIND=1) and on
the pure build (the guard counts the compiled core).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import amrita_sense
from amrita_sense.bench import perf_guard

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "bench" / "perf_baseline.json"
SHAPES = {
    "peer_chain",
    "peer_agent",
    "peer_if_else",
    "event_dispatch",
    "event_request",
    "per_request",
    "suspend_resume",
    "durable_sqlite",
}


def _baseline(per_op: dict, why: str = "first record", python: str | None = None) -> dict:
    recorded = perf_guard.interpreter()
    if python is not None:
        recorded["python"] = python
    return {
        "why": why,
        "recorded_on": recorded,
        "scenarios": {name: {"shape": name, "per_op": value, "n": [10, 20]} for name, value in per_op.items()},
    }


def _write(path: Path, baseline: dict) -> Path:
    path.write_text(json.dumps(baseline, indent=2) + "\n", encoding="utf-8")
    return path


def test_the_committed_baseline_names_the_user_shapes():
    baseline = perf_guard.parse_baseline(BASELINE.read_text(encoding="utf-8"), str(BASELINE))
    assert set(baseline["scenarios"]) == SHAPES == set(perf_guard.SHAPES)
    for name, entry in baseline["scenarios"].items():
        assert entry["per_op"] > 1000, name  # instructions per operation, not a time
        n1, n2 = entry["n"]
        assert 0 < n1 < n2, name
    assert baseline["why"].strip()
    assert {"implementation", "python", "machine"} <= set(baseline["recorded_on"])


def test_the_scenarios_are_the_benchmarks_own():
    from amrita_sense.bench.scenarios import SCENARIOS

    assert SHAPES <= set(SCENARIOS)


@pytest.mark.parametrize("why", ["", "   "])
def test_record_refuses_an_empty_why(tmp_path, capsys, why):
    path = tmp_path / "baseline.json"
    assert perf_guard.main(["record", "--why", why, "--baseline", str(path)]) == 2
    assert "needs --why" in capsys.readouterr().err
    assert not path.exists()


def test_record_refuses_the_same_why_again(tmp_path, capsys):
    path = _write(tmp_path / "baseline.json", _baseline({"event_dispatch": 20000}, why="faster dispatch"))
    assert perf_guard.main(["record", "--why", "faster dispatch", "--baseline", str(path)]) == 2
    assert "repeats" in capsys.readouterr().err


def test_a_rise_over_three_percent_is_named_with_both_counts():
    baseline = _baseline({"event_dispatch": 20000, "suspend_resume": 80000})
    measured = {"event_dispatch": {"per_op": 20700}, "suspend_resume": {"per_op": 82000}}  # +3.5%, +2.5%
    lines, failures = perf_guard.compare(baseline, measured)
    assert len(lines) == 2
    assert len(failures) == 1
    assert failures[0].startswith("event_dispatch (event dispatch")
    assert "20,000 -> 20,700 instructions per operation (+3.50%" in failures[0]


def test_another_interpreter_is_skipped_or_fails_when_strict(tmp_path, capsys):
    path = _write(tmp_path / "baseline.json", _baseline({"event_dispatch": 20000}, python="2.7.18"))
    assert perf_guard.main(["check", "--baseline", str(path)]) == 0
    assert "not comparable" in capsys.readouterr().out
    assert perf_guard.main(["check", "--strict", "--baseline", str(path)]) == 3


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_changed_counts_need_a_new_why(tmp_path):
    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True, capture_output=True
        )

    git("init", "-q")
    path = _write(tmp_path / "perf_baseline.json", _baseline({"event_dispatch": 20000}, why="first record"))
    git("add", ".")
    git("commit", "-qm", "baseline")
    assert perf_guard.history_problem(str(path))[0] is None  # no previous commit: a note only
    _write(path, _baseline({"event_dispatch": 21000}, why="first record"))  # not committed yet
    problem, _ = perf_guard.history_problem(str(path))
    assert problem is not None and "'why' is unchanged" in problem
    git("commit", "-qam", "counts changed, why not")
    problem, _ = perf_guard.history_problem(str(path))
    assert problem is not None and "HEAD~1" in problem
    _write(path, _baseline({"event_dispatch": 21000}, why="dispatch checks the event's type now"))
    git("commit", "-qam", "say why")
    assert perf_guard.history_problem(str(path)) == (None, "")


# ---------------------------------------------------------------------------
# Under callgrind

SLOWER_DISPATCH = """\
# A deliberately slowed build: every event dispatch does extra work first.
from amrita_sense import MatcherFactory

_trigger_event = MatcherFactory.trigger_event


async def trigger_event(*args, **kwargs):
    sum(range(50))  # about +30% of a dispatch
    return await _trigger_event(*args, **kwargs)


MatcherFactory.trigger_event = trigger_event
"""


def _needs_callgrind() -> None:
    if amrita_sense.IMPLEMENTATION != "cython":
        pytest.skip("the pure build is under test; the guard counts the compiled core")
    problem = perf_guard.marker_missing()  # no valgrind, or a Python without symbols
    if problem is not None:
        if os.environ.get("AMRITA_SENSE_REQUIRE_CALLGRIND") == "1":
            pytest.fail(f"AMRITA_SENSE_REQUIRE_CALLGRIND=1, but {problem}")
        pytest.skip(f"{problem} (AMRITA_SENSE_REQUIRE_CALLGRIND=1 makes this a failure)")


def _guard(*args: str, shim: Path | None = None) -> subprocess.Popen:
    env = dict(os.environ)
    paths = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(([str(shim)] if shim else []) + paths)
    return subprocess.Popen(
        [sys.executable, "-m", "amrita_sense.bench.perf_guard", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(process: subprocess.Popen) -> tuple[int, str]:
    output, _ = process.communicate(timeout=300)
    return process.returncode, output


def test_a_slowed_event_dispatch_fails_the_guard_and_the_unslowed_passes(tmp_path):
    _needs_callgrind()
    path = str(tmp_path / "baseline.json")
    scenario = ["--scenario", "event_dispatch", "--baseline", path]
    code, output = _finish(_guard("record", "--why", "the test's baseline", "--sizes", "20,100", *scenario))
    assert code == 0, output
    before = json.loads(Path(path).read_text(encoding="utf-8"))["scenarios"]["event_dispatch"]["per_op"]

    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(textwrap.dedent(SLOWER_DISPATCH), encoding="utf-8")
    unslowed, slowed = _guard("check", *scenario), _guard("check", *scenario, shim=shim)
    (code, output), (slowed_code, slowed_output) = _finish(unslowed), _finish(slowed)

    assert code == 0, output
    assert "perf guard: ok" in output
    assert slowed_code == 1, slowed_output
    found = re.search(
        r"event_dispatch \(event dispatch[^)]*\): ([\d,]+) -> ([\d,]+) instructions per operation \(\+([\d.]+)%",
        slowed_output,
    )
    assert found, slowed_output
    reported_before, after = (int(group.replace(",", "")) for group in found.group(1, 2))
    assert reported_before == before
    assert after > before * 1.03
    assert "record --why" in slowed_output
