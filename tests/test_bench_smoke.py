"""Smoke tests of the benchmark runner (`python -m amrita_sense.bench`) and the scenario checks.

They run our own builds only (no network, no reference venv) at the quick sizes
and check the shape of the table and of the JSON, not any timing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HAS_UVLOOP = sys.platform != "win32" and importlib.util.find_spec("uvloop") is not None


def _env() -> dict:
    env = dict(os.environ)
    inherited = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(inherited)  # absolute: the runs below change directory
    return env


def run_bench(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "amrita_sense.bench", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _scenarios():
    from amrita_sense.bench import scenarios

    return scenarios


def _row(doc: dict, scenario: str, loop: str = "asyncio") -> dict:
    rows = [r for r in doc["results"] if r["scenario"] == scenario and r["loop"] == loop]
    assert len(rows) == 1, f"expected one {scenario}@{loop} row, got {len(rows)}"
    return rows[0]


def test_quick_run_prints_table_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    loop = "both" if HAS_UVLOOP else "asyncio"
    proc = run_bench(
        "--quick", "--builds", "compiled,pure", "--scenarios", "sync_chain,render", "--loop", loop, "--json", str(out)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for word in ("event loop: asyncio", "scenario", "compiled", "pure", "floor", "sync_chain", "render"):
        assert word in proc.stdout
    table = proc.stdout.split("\nnotes:")[0]  # the notes may name floor_call (a build that is n/a there)
    for word in ("x floor", "targets met", "MISS", "floor_call"):  # the project's own goals: --targets only
        assert word not in table
    assert max(len(line) for line in table.splitlines()) <= 120
    assert "sync_chain" in proc.stderr  # progress went to stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == 1
    assert doc["meta"]["quick"] is True and doc["meta"]["repeats"] == 1
    assert set(doc["meta"]["builds"]) == {"compiled", "pure"}
    loops = ["asyncio", "uvloop"] if HAS_UVLOOP else ["asyncio"]
    assert doc["meta"]["loops"] == loops
    for lp in loops:
        chain, floor = _row(doc, "sync_chain", lp), _row(doc, "floor_call", lp)
        assert chain["floor"] == "floor_call" and floor["kind"] == "floor"
        pure = chain["builds"]["pure"]
        assert pure["status"] == "ok" and pure["median"] > 0 and len(pure["values"]) == 1
        assert chain["ratios"]["x_floor"]["pure"] > 0
        assert _row(doc, "render", lp)["builds"]["pure"]["status"] == "ok"
        compiled = chain["builds"]["compiled"]
        assert compiled["status"] in ("ok", "n/a")  # n/a when the compiled core is not built
        if compiled["status"] == "ok":
            assert chain["ratios"]["vs_pure"] > 0 and "vs pure build" in proc.stdout
            assert any(t["target"] == "<=3x floor" for t in chain["targets"])
    again = run_bench("--report", str(out))  # the table again, from the JSON alone
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == proc.stdout.strip()
    wide = run_bench("--report", str(out), "--targets")
    for word in ("x floor", "targets met", "floor_call"):
        assert word in wide.stdout


def _results_written_before_the_pure_build_was_renamed() -> dict:
    """A results file as the runner wrote it while the pure build's key was `twin`."""
    cell = {"status": "ok", "values": [1e-6], "runs": 1, "reason": None, "comparable": True}
    builds = {"compiled": {**cell, "median": 5e-8}, "twin": {**cell, "median": 7e-7}, "ref": {**cell, "median": 5.6e-6}}
    row = {
        "loop": "asyncio",
        "scenario": "sync_chain",
        "title": "a chain of sync nodes",
        "unit": "node",
        "kind": "engine",
        "family": None,
        "measure": "time",
        "size": 20,
        "floor": None,
        "floor_median": None,
        "builds": builds,
        "ratios": {"x_floor": {"compiled": None, "twin": None, "ref": None}, "vs_twin": 14.0, "vs_ref": 112.0},
        "primary": "compiled",
        "targets": [{"target": "pure build >=1x vs 1.1.3", "build": "twin", "actual": 8.0, "met": True}],
        "met": "yes",
    }
    row["ratios"]["twin_vs_ref"] = 8.0
    labels = {"compiled": "compiled", "twin": "twin", "ref": "1.1.3"}
    meta = {"builds": {key: {"label": label, "python": sys.executable} for key, label in labels.items()}}
    return {"schema": 1, "meta": meta, "results": [row]}


def test_report_reads_a_results_file_that_names_the_pure_build_by_its_old_key(tmp_path: Path, capsys) -> None:
    from amrita_sense.bench import runner

    old = tmp_path / "old.json"
    old.write_text(json.dumps(_results_written_before_the_pure_build_was_renamed()))
    assert runner.main(["--report", str(old), "--targets"]) == 0
    header, _, chain = capsys.readouterr().out.splitlines()[2:5]
    columns = [cell for cell in header.split("  ") if cell.strip()]
    assert [c.strip() for c in columns][2:] == [
        "compiled",
        "pure build",
        "1.1.3",
        "floor",
        "x floor",
        "vs pure build",
        "vs 1.1.3",
        "pure build vs 1.1.3",
        "targets met",
    ]
    assert chain.split()[2:10] == ["50", "ns", "700", "ns", "5.6", "us", "14.0x", "112x"]
    assert chain.split()[10] == "8.00x"


def test_the_pure_build_may_still_be_asked_for_by_its_old_key(capsys) -> None:
    from amrita_sense.bench import runner

    builds = runner.select_builds(runner.parse_args(["--builds", "compiled,twin"]))
    assert [(b.key, b.label) for b in builds] == [("compiled", "compiled"), ("pure", "pure build")]
    assert builds[1].env.get("AMRITA_SENSE_NO_EXTENSIONS") == "1"
    assert "'twin' is now called 'pure'" in capsys.readouterr().err


def test_a_scenario_that_does_nothing_fails_its_count_check() -> None:
    s = _scenarios()
    plan = s.build("sync_chain", 20)
    plan.timed = lambda: None
    import asyncio

    with pytest.raises(s.CountMismatch, match="node bodies run: counted 0, expected 20"):
        asyncio.run(s.measure(plan))


def test_a_missing_feature_is_unavailable_not_a_crash() -> None:
    s = _scenarios()
    with pytest.raises(s.Unavailable, match="NoSuchInstruction"):
        s.need("amrita_sense", "NoSuchInstruction")
    with pytest.raises(s.Unavailable, match="cannot import"):
        s.need("amrita_sense.no_such_module")


def _plain_interpreter_imports_1_1_3(cwd: Path) -> bool:
    """True in a development venv that also holds amrita-sense 1.1.3 (pulled by amrita-core for the
    end-to-end test) without our import hook: there this Python is a reference after all."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = "import sys, amrita_sense; sys.exit(0 if hasattr(amrita_sense, 'IMPLEMENTATION') else 3)"
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True).returncode == 3


def test_an_unusable_reference_is_reported_as_na(tmp_path: Path) -> None:
    # A Python without any amrita_sense: the column is n/a, the run goes on.
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    out = tmp_path / "bench.json"
    proc = run_bench(
        "--quick", "--builds", "pure,ref", "--against", str(bare), "--scenarios", "decorate", "--json", str(out)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = _row(json.loads(out.read_text()), "decorate")
    assert row["builds"]["pure"]["status"] == "ok"
    assert row["builds"]["ref"]["status"] == "n/a"
    assert row["builds"]["ref"]["reason"].startswith("build unavailable")
    assert "N/A on 1.1.3" in proc.stdout and "No module named 'amrita_sense'" in proc.stdout


def test_against_another_build_of_this_package(tmp_path: Path) -> None:
    # --against accepts any build: this very environment is another amrita-sense-turbo, named by
    # its version and core; variables before the Python go to its workers.
    if _plain_interpreter_imports_1_1_3(tmp_path):
        pytest.skip("this interpreter imports amrita-sense 1.1.3 without the import hook: it is a reference")
    out = tmp_path / "bench.json"
    paths = shlex.quote(_env()["PYTHONPATH"])  # a source checkout's, in a development venv
    against = f"AMRITA_SENSE_NO_EXTENSIONS=1 PYTHONPATH={paths} {shlex.quote(sys.executable)}"
    proc = run_bench(
        "--quick", "--builds", "pure,ref", "--against", against, "--scenarios", "decorate", "--json", str(out)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    ref = _row(doc, "decorate")["builds"]["ref"]
    assert ref["status"] == "ok", ref
    import amrita_sense

    assert doc["meta"]["builds"]["ref"]["label"] == f"{amrita_sense.__version__} python"
    assert f"vs {amrita_sense.__version__} python" in proc.stdout


def test_user_workflow_is_benchmarked(tmp_path: Path) -> None:
    (tmp_path / "my_flows.py").write_text(
        textwrap.dedent("""
        from amrita_sense import Node, NodeCompose

        def build():
            step = Node(wrap_to_async=False)(lambda: None)
            return NodeCompose(step, step, step).render()
    """)
    )
    out = tmp_path / "bench.json"
    proc = run_bench(
        "--quick",
        "--builds",
        "pure",
        "--workflow",
        "my_flows:build",
        "--workflow-runs",
        "5",
        "--json",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    assert [r["scenario"] for r in doc["results"]] == ["workflow:my_flows:build"]
    pure = doc["results"][0]["builds"]["pure"]
    assert pure["status"] == "ok" and pure["median"] > 0


def test_user_async_callable_is_benchmarked(tmp_path: Path) -> None:
    (tmp_path / "my_calls.py").write_text(
        textwrap.dedent("""
        from amrita_sense import Node, NodeCompose, WorkflowInterpreter

        def build():
            graph = NodeCompose(Node(wrap_to_async=False)(lambda: None)).render()

            async def one_run():
                await WorkflowInterpreter(graph).run()

            return one_run
    """)
    )
    out = tmp_path / "bench.json"
    proc = run_bench(
        "--quick",
        "--builds",
        "pure",
        "--workflow",
        "my_calls:build",
        "--workflow-runs",
        "3",
        "--json",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pure = _row(json.loads(out.read_text()), "workflow:my_calls:build")["builds"]["pure"]
    assert pure["status"] == "ok" and pure["median"] > 0


def test_a_broken_user_workflow_is_reported_and_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "bad_flows.py").write_text("def build():\n    return 42\n")
    proc = run_bench("--quick", "--builds", "pure", "--workflow", "bad_flows:build", cwd=tmp_path)
    assert proc.returncode == 1
    assert "ERR" in proc.stdout and "expected a graph or an async callable" in proc.stdout


def test_unknown_scenario_is_a_usage_error() -> None:
    proc = run_bench("--scenarios", "no_such_scenario")
    assert proc.returncode != 0
    assert "unknown scenario" in proc.stderr


def test_list_names_every_scenario() -> None:
    proc = run_bench("--list")
    assert proc.returncode == 0
    for name in _scenarios().SCENARIOS:
        assert name in proc.stdout


def test_the_families_sweep_prints_a_table_per_loop_and_reprints_it_from_json(tmp_path: Path) -> None:
    out = tmp_path / "families.json"
    proc = run_bench("--quick", "--builds", "pure", "--families", "loop", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    members = [name for name, spec in _scenarios().SCENARIOS.items() if spec.family == "loop"]
    assert {"while_loop", "jmp_loop", "loop_do", "loop_native_while", "loop_goto", "loop_call"} <= set(members)
    assert "near variants, event loop: asyncio" in proc.stdout
    assert "(speed-ups of the" not in proc.stdout  # the families' rows are not repeated in the main table
    for word in ("x fastest", "targets met", "loop (a loop", "slowest/fastest", *members):
        assert word in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["meta"]["families"] == ["loop"]
    assert {r["scenario"] for r in doc["results"] if r["family"] == "loop"} == set(members)
    assert all(_row(doc, name)["builds"]["pure"]["status"] == "ok" for name in members)
    again = run_bench("--report", str(out))
    assert again.returncode == 0, again.stderr
    assert "near variants, event loop: asyncio" in again.stdout and "loop_call" in again.stdout


def test_the_default_set_leaves_the_variants_to_families() -> None:
    from amrita_sense.bench import runner

    specs = _scenarios().SCENARIOS
    default = runner.select_scenarios(runner.parse_args([]))
    assert "amrita_core_turn" in default and "while_loop" in default
    assert not [name for name in default if specs[name].kind in ("variant", "floor", "peer")]
    chosen = runner.select_scenarios(runner.parse_args(["--families", "try,event"]))
    assert set(chosen) == {name for name, spec in specs.items() if spec.family in ("try", "event")}
    assert runner.parse_args(["--families"]).family_list == tuple(_scenarios().FAMILIES)


def test_an_unknown_family_is_a_usage_error() -> None:
    proc = run_bench("--families", "no_such_family")
    assert proc.returncode != 0
    assert "unknown no_such_family" in proc.stderr


def _family_row(name: str, seconds: float, ref_seconds: float) -> dict:
    return {
        "loop": "asyncio",
        "scenario": name,
        "family": "loop",
        "kind": "variant",
        "unit": "iteration",
        "measure": "time",
        "primary": "compiled",
        "builds": {
            "compiled": {"status": "ok", "median": seconds},
            "ref": {"status": "ok", "median": ref_seconds},
        },
        "ratios": {"vs_ref": ref_seconds / seconds},
    }


def test_a_family_view_marks_the_variants_and_the_spread_that_miss() -> None:
    from amrita_sense.bench import runner

    rows = [_family_row("fast", 1e-7, 1e-4), _family_row("slow", 4e-7, 1e-5)]
    builds = [runner.Build("compiled", "", {}), runner.Build("ref", "", {})]
    entry = runner.family_verdicts(rows)[("asyncio", "loop")]
    assert entry["spread"] == pytest.approx(4.0)
    assert [v["met"] for v in entry["verdicts"][0]] == [True, True]
    assert [v["met"] for v in entry["verdicts"][1]] == [False, False]  # 25x vs 1.1.3, 4x the fastest
    text = runner.render_families(rows, builds, ("loop",))
    fast, slow = (next(line for line in text.splitlines() if f" {name} " in line) for name in ("fast", "slow"))
    assert fast.rstrip().endswith("yes") and "1.00x" in fast
    assert "MISS: >=50x vs 1.1.3; <=3x the fastest variant" in slow and "4.00x" in slow
    assert "MISS: slowest/fastest 4.00x (target <=3x); missed by slow" in text


def test_the_amrita_core_split_is_the_share_the_inline_turn_saves() -> None:
    from amrita_sense.bench import runner

    def row(name: str, seconds: float) -> dict:
        return {"loop": "uvloop", "scenario": name, "builds": {"compiled": {"status": "ok", "median": seconds}}}

    text = runner.render_app_split(
        [row("amrita_core_turn", 4e-3), row("amrita_core_turn_inline", 3e-3)], [runner.Build("compiled", "", {})]
    )
    assert "uvloop: compiled 25% (1 ms)" in text
    slower = runner.render_app_split(
        [row("amrita_core_turn", 4e-3), row("amrita_core_turn_inline", 5e-3)], [runner.Build("compiled", "", {})]
    )
    assert "uvloop: compiled -25% (-1 ms)" in slower
    assert runner.render_app_split([row("amrita_core_turn", 4e-3)], [runner.Build("compiled", "", {})]) == ""
