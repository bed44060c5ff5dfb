"""The pytest plugin (`amrita_sense_turbo.pytest_plugin`, entry point `amrita_sense_bench`): a user's
suite in a temporary directory, run by a separate pytest process on the core under test.

An installed distribution loads the plugin through its entry point; in a source checkout (no
entry point) the inner runs load it with `-p`.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import amrita_sense

USER_SUITE = """
    import asyncio

    from amrita_sense import Node, NodeCompose

    class Session:
        pass

    @Node(wrap_to_async=False)
    def load(session: Session):
        assert isinstance(session, Session)

    @Node()
    async def answer():
        await asyncio.sleep(0)

    GRAPH = NodeCompose(load, answer, load).render()

    def test_a_turn(workflow_benchmark):
        trace = workflow_benchmark(GRAPH, extra_args=(Session(),), rounds=3)
        assert [entry.split()[0] for entry in trace] == ["load", "answer", "load"]

    def test_an_async_callable(workflow_benchmark):
        async def turn():
            await asyncio.sleep(0)
        assert workflow_benchmark(turn, rounds=2)[0].startswith("test_an_async_callable.<locals>.turn")

    def test_something_else():
        assert True
"""


def run_inner(tmp_path: Path, *args: str, first_path: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_user_suite.py").write_text(textwrap.dedent(USER_SUITE))
    # a suite of its own, not one more worker of ours: pytest-benchmark writes no results in an xdist worker
    child_env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_XDIST_")}
    child_env.update(env)
    inherited = [os.path.abspath(p) for p in child_env.get("PYTHONPATH", "").split(os.pathsep) if p]
    child_env["PYTHONPATH"] = os.pathsep.join(([str(first_path)] if first_path else []) + inherited)
    load = (
        []
        if _installed_entry_point() and "PYTEST_DISABLE_PLUGIN_AUTOLOAD" not in env
        else ["-p", "amrita_sense_turbo.pytest_plugin"]
    )
    return subprocess.run(
        [sys.executable, "-m", "pytest", *load, "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), *args],
        cwd=tmp_path,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _installed_dist() -> importlib.metadata.Distribution | None:
    """amrita-sense-turbo installed in this environment (a source checkout's egg-info has no RECORD)."""
    return next(
        (
            d
            for d in importlib.metadata.distributions()
            if (d.metadata["Name"] or "").lower() == "amrita-sense-turbo" and d.read_text("RECORD")
        ),
        None,
    )


def _installed_entry_point() -> bool:
    dist = _installed_dist()
    return dist is not None and any(ep.group == "pytest11" for ep in dist.entry_points)


def test_the_fixture_benchmarks_a_users_graph_on_the_loaded_core(tmp_path: Path) -> None:
    pytest.importorskip("pytest_benchmark")
    out = tmp_path / "bench.json"
    proc = run_inner(tmp_path, f"--benchmark-json={out}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout
    assert "PytestAssertRewriteWarning" not in proc.stdout + proc.stderr  # the installed hook, imported early
    doc = json.loads(out.read_text())
    turns = {b["name"]: b for b in doc["benchmarks"]}
    turn = turns["test_a_turn"]
    assert turn["extra_info"]["core"] == amrita_sense.IMPLEMENTATION
    assert turn["extra_info"]["nodes_per_run"] == 3 and turn["extra_info"]["loop"] == "asyncio"
    assert turn["group"] == "amrita_sense workflows" and turn["stats"]["rounds"] == 3
    assert turns["test_an_async_callable"]["stats"]["rounds"] == 2


def test_the_fixture_follows_benchmark_disable(tmp_path: Path) -> None:
    pytest.importorskip("pytest_benchmark")
    proc = run_inner(tmp_path, "--benchmark-disable")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout


def test_without_pytest_benchmark_only_the_fixtures_users_fail(tmp_path: Path) -> None:
    # pytest-benchmark made unimportable: the suite still runs; the fixture says what to install.
    shadow = tmp_path / "shadow" / "pytest_benchmark"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('pytest-benchmark is not installed here')\n")
    proc = run_inner(tmp_path, "-p", "no:benchmark", first_path=tmp_path / "shadow", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 passed, 2 errors" in proc.stdout  # the fixture fails at setup, the rest runs
    assert "the workflow_benchmark fixture needs pytest-benchmark: pip install pytest-benchmark" in proc.stdout


def test_the_entry_point_registers_the_plugin() -> None:
    dist = _installed_dist()
    if dist is None:
        pytest.skip("amrita-sense-turbo is not installed (a source checkout on PYTHONPATH)")
    points = {ep.name: ep.value for ep in dist.entry_points if ep.group == "pytest11"}
    assert points == {"amrita_sense_bench": "amrita_sense_turbo.pytest_plugin"}
    scripts = {ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"}
    assert scripts == {"amrita-sense-bench": "amrita_sense.bench.runner:main"}


def test_the_module_imports_without_pytest(tmp_path: Path) -> None:
    # What the documentation's autodoc does in an environment with the `docs` extra only (issue 43):
    # the module imports, with `WorkflowBenchmark` to document and no fixture.
    shadow = tmp_path / "shadow"
    for name in ("pytest", "_pytest", "pytest_benchmark"):
        (shadow / name).mkdir(parents=True)
        (shadow / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed here')\n")
    script = (
        "import amrita_sense_turbo.pytest_plugin as plugin, sys\n"
        "assert 'pytest' not in sys.modules and 'amrita_sense' not in sys.modules, sorted(sys.modules)\n"
        "assert not plugin.HAVE_PYTEST and not plugin.HAVE_BENCHMARK\n"
        "assert not hasattr(plugin, 'workflow_benchmark') and plugin.WorkflowBenchmark.__doc__\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
