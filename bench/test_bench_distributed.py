"""The scale-out benchmark (`python -m bench.distributed`) runs once at tiny sizes (needs Ray: skipped without it)."""

import os

import pytest


@pytest.mark.ray
def test_the_distributed_bench_runs():
    if os.environ.get("AMRITA_SENSE_REQUIRE_RAY", "") in ("", "0"):
        pytest.importorskip("ray", reason="Ray is not installed (pip install 'amrita-sense-turbo[ray]')")
    import ray

    from bench import distributed

    started_here = not ray.is_initialized()
    try:
        report = distributed.measure(quick=True, rounds=1, runs=4)
    finally:
        if started_here:
            ray.shutdown()
    for workload in distributed.WORKLOADS:
        assert all(way["runs_per_s"] > 0 for way in report[workload]["ways"].values())
    assert report["latency"]["remote_s"] > 0
