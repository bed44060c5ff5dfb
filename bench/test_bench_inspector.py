"""The inspector benchmark (`python -m bench.inspector`) runs once at its quick size, checks included."""

import pytest

pytest.importorskip("starlette", reason="the [inspect] extra is not installed")
pytest.importorskip("httpx", reason="httpx (Starlette's test client) is not installed")

from bench import inspector  # noqa: E402


def test_the_inspector_benchmark_runs_at_a_small_size():
    found = inspector.rows(quick=True)
    assert found["runs"] == inspector.QUICK_RUNS
    assert all(found[name] > 0 for name in ("api_runs", "api_runs_500", "page"))
    assert inspector.main(["--quick"]) == 0
