"""The benchmark runner on a user's own workflow: where its module is found (for every build,
the reference too), the node-trace check before timing, --profile-nodes, and the chart checks.

The runs are quick-sized; the tests check what the runner reports, never a timing. The
reference column runs when AMRITA_SENSE_REF_PYTHON names an interpreter with amrita-sense
1.1.3 (CI sets it); without it, those tests skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test_bench_smoke import _env, run_bench

REF_PYTHON = os.environ.get("AMRITA_SENSE_REF_PYTHON")
needs_ref = pytest.mark.skipif(not REF_PYTHON, reason="AMRITA_SENSE_REF_PYTHON (amrita-sense 1.1.3) is not set")

FLOWS = """
    import asyncio
    from amrita_sense import Node, NodeCompose

    @Node(wrap_to_async=False)
    def first():
        pass

    @Node()
    async def second():
        await asyncio.sleep(0)

    @Node()
    def in_a_thread():
        pass

    def build():
        return NodeCompose(first, second, in_a_thread, first).render()
"""

# 1.1.3 lets a taken branch whose body is a compose fall through into the ELSE body (README).
FALLS_THROUGH = """
    from amrita_sense import Node, NodeCompose
    from amrita_sense.instructions.native import NATIVE_IF

    @Node(wrap_to_async=False)
    def yes() -> bool:
        return True

    @Node(wrap_to_async=False)
    def taken():
        pass

    @Node(wrap_to_async=False)
    def also_taken():
        pass

    @Node(wrap_to_async=False)
    def otherwise():
        pass

    def build():
        return NodeCompose(NATIVE_IF(yes, NodeCompose(taken, also_taken)).ELSE(otherwise)).render()
"""

DEPENDS_ON_CORE = """
    import amrita_sense
    from amrita_sense import Node, NodeCompose

    @Node(wrap_to_async=False)
    def common():
        pass

    @Node(wrap_to_async=False)
    def only_on_the_pure_build():
        pass

    def build():
        pure_build = getattr(amrita_sense, "IMPLEMENTATION", None) == "python"
        return NodeCompose(common, only_on_the_pure_build if pure_build else common).render()
"""


def write(directory: Path, name: str, source: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(textwrap.dedent(source))
    return path


def run_with_path(directory: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The runner with `directory` first on PYTHONPATH (as a user's own modules would be)."""
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(directory), env["PYTHONPATH"]) if p)
    return subprocess.run(
        [sys.executable, "-m", "amrita_sense.bench", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def against_ref() -> list[str]:
    return ["--against", f"AMRITA_SENSE_TURBO=0 {REF_PYTHON}"]


def workflow_row(out: Path, loop: str = "asyncio") -> dict:
    doc = json.loads(out.read_text())
    rows = [r for r in doc["results"] if r["scenario"].startswith("workflow:") and r["loop"] == loop]
    assert len(rows) == 1, doc["results"]
    return rows[0]


def test_a_file_path_workflow_runs_on_every_build_from_any_directory(tmp_path: Path) -> None:
    flows = write(tmp_path / "project", "flows.py", FLOWS)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "bench.json"
    proc = run_bench(
        "--quick",
        "--builds",
        "compiled,pure",
        "--workflow",
        f"{flows}:build",
        "--workflow-runs",
        "3",
        "--json",
        str(out),
        cwd=elsewhere,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = workflow_row(out)
    assert row["scenario"] == f"workflow:{flows}:build"
    for key in ("compiled", "pure"):
        assert row["builds"][key]["status"] in ("ok", "n/a"), row["builds"][key]
    assert row["builds"]["pure"]["status"] == "ok" and row["builds"]["pure"]["comparable"]
    assert "workflow:flows.py:build" in proc.stdout
    assert "node trace of" in proc.stderr and "4 entries" in proc.stderr


def test_a_module_on_pythonpath_is_found_for_every_build(tmp_path: Path) -> None:
    write(tmp_path / "lib" / "mypkg", "__init__.py", "")
    write(tmp_path / "lib" / "mypkg", "flows.py", FLOWS)
    out = tmp_path / "bench.json"
    proc = run_with_path(
        tmp_path / "lib",
        "--quick",
        "--builds",
        "pure",
        "--workflow",
        "mypkg.flows:build",
        "--workflow-runs",
        "2",
        "--json",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert workflow_row(out)["builds"]["pure"]["status"] == "ok"


def test_the_console_script_finds_a_module_in_the_current_directory(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("amrita-sense-bench")
    if not script.exists():
        pytest.skip("the amrita-sense-bench script is installed with the distribution")
    write(tmp_path, "here_flows.py", FLOWS)
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            str(script),
            "--quick",
            "--builds",
            "pure",
            "--workflow",
            "here_flows:build",
            "--workflow-runs",
            "2",
            "--json",
            str(out),
        ],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert workflow_row(out)["builds"]["pure"]["status"] == "ok"


@needs_ref
def test_the_reference_loads_the_users_module_too(tmp_path: Path) -> None:
    # The bug this replaces: a module found through PYTHONPATH broke the 1.1.3 column.
    write(tmp_path / "lib", "ref_flows.py", FLOWS)
    out = tmp_path / "bench.json"
    proc = run_with_path(
        tmp_path / "lib",
        "--quick",
        "--builds",
        "pure,ref",
        *against_ref(),
        "--workflow",
        "ref_flows:build",
        "--workflow-runs",
        "2",
        "--json",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = workflow_row(out)
    assert row["builds"]["ref"]["status"] == "ok", row["builds"]["ref"]
    assert row["builds"]["ref"]["comparable"] and row["ratios"]["vs_ref"] > 0
    assert "vs 1.1.3" in proc.stdout


@needs_ref
def test_a_reference_that_runs_other_nodes_is_not_comparable(tmp_path: Path) -> None:
    flows = write(tmp_path, "falls_through.py", FALLS_THROUGH)
    out = tmp_path / "bench.json"
    proc = run_bench(
        "--quick",
        "--builds",
        "pure,ref",
        *against_ref(),
        "--workflow",
        f"{flows}:build",
        "--workflow-runs",
        "2",
        "--json",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = workflow_row(out)
    assert row["builds"]["ref"]["status"] == "ok"
    assert row["builds"]["ref"]["comparable"] is False and row["ratios"]["vs_ref"] is None
    assert "n/c" in proc.stdout
    assert "NOT COMPARABLE on 1.1.3" in proc.stdout
    assert "#3 otherwise (falls_through.py:" in proc.stdout  # where 1.1.3 went on


def test_builds_that_run_other_nodes_are_marked_not_comparable(tmp_path: Path) -> None:
    flows = write(tmp_path, "depends_on_core.py", DEPENDS_ON_CORE)
    out = tmp_path / "bench.json"
    proc = run_bench(
        "--quick",
        "--builds",
        "compiled,pure",
        "--workflow",
        f"{flows}:build",
        "--workflow-runs",
        "2",
        "--json",
        str(out),
        cwd=tmp_path,
    )
    row = workflow_row(out)
    if row["builds"]["compiled"]["status"] != "ok":
        pytest.skip("needs the compiled core beside the pure build")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert row["builds"]["compiled"]["comparable"] and not row["builds"]["pure"]["comparable"]
    assert row["ratios"]["vs_pure"] is None
    assert row["builds"]["pure"]["median"] > 0  # still measured, just not compared
    line = next(line for line in proc.stdout.splitlines() if line.startswith("workflow:"))
    assert line.rstrip().endswith("n/c")
    assert "#1 common (depends_on_core.py:" in proc.stdout
    assert "#1 only_on_the_pure_build (depends_on_core.py:" in proc.stdout


def test_a_workflow_that_cannot_be_found_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_bench("--workflow", "no_such_module_here:build", cwd=tmp_path)
    assert proc.returncode == 2 and "no module 'no_such_module_here'" in proc.stderr
    proc = run_bench("--workflow", str(tmp_path / "missing.py") + ":build", cwd=tmp_path)
    assert proc.returncode == 2 and "no such file" in proc.stderr
    proc = run_bench("--workflow", "no_colon", cwd=tmp_path)
    assert proc.returncode == 2 and "expected module:factory" in proc.stderr


def test_profile_nodes_splits_the_run_into_bodies_and_engine(tmp_path: Path) -> None:
    flows = write(tmp_path, "prof_flows.py", FLOWS)
    out = tmp_path / "profile.json"
    proc = run_bench(
        "--profile-nodes",
        "--quick",
        "--builds",
        "pure",
        "--workflow",
        f"{flows}:build",
        "--workflow-runs",
        "20",
        "--json",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [profile] = json.loads(out.read_text())["results"]
    assert profile["status"] == "ok" and profile["runs"] == 20
    calls = {row["label"].split()[0]: row["calls"] for row in profile["rows"]}
    assert calls == {"first": 2, "second": 1, "in_a_thread": 1}  # every thread is profiled
    for row in profile["rows"]:
        assert row["body_s"] >= 0 and row["engine_s"] >= 0
    for word in (
        "node profile of",
        "first (prof_flows.py:",
        "in_a_thread (prof_flows.py:",
        "body",
        "engine",
        "(engine, after the last node)",
    ):
        assert word in proc.stdout


def test_profile_nodes_needs_a_workflow() -> None:
    proc = run_bench("--profile-nodes")
    assert proc.returncode == 2 and "give --workflow" in proc.stderr


def test_plot_without_matplotlib_fails_before_measuring(tmp_path: Path) -> None:
    # A matplotlib that cannot be imported (shadowed here) stops the run at once.
    write(tmp_path / "shadow" / "matplotlib", "__init__.py", "raise ImportError('no matplotlib here')\n")
    proc = run_with_path(tmp_path / "shadow", "--plot", str(tmp_path / "c.png"), cwd=tmp_path)
    assert proc.returncode == 2
    assert "--plot needs matplotlib" in proc.stderr and "amrita-sense-turbo[plot]" in proc.stderr
    assert "scenarios x" not in proc.stderr  # nothing was measured


def test_plot_into_a_missing_directory_fails_before_measuring(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    proc = run_bench("--plot", str(tmp_path / "no" / "such" / "chart.png"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_the_chart_is_stamped_with_versions_mode_date_and_machine(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    chart = tmp_path / "chart.svg"
    out = tmp_path / "bench.json"
    proc = run_bench(
        "--quick", "--builds", "compiled,pure", "--scenarios", "sync_chain", "--plot", str(chart), "--json", str(out)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if "no speed-up to chart" in proc.stderr:
        pytest.skip("needs the compiled core beside the pure build")
    svg = chart.read_text()
    meta = json.loads(out.read_text())["meta"]
    import amrita_sense

    for word in (amrita_sense.__version__, "quick run", meta["started"], f"{os.cpu_count()} cores"):
        assert word in svg, word
