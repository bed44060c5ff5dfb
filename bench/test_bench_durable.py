"""The durable-run benchmarks (`python -m bench.durable`) run once at their quick sizes, checks included."""

import asyncio

from amrita_sense.bench.scenarios import measure
from bench import durable


def test_every_durable_row_runs_and_checks():
    plans = durable.rows(quick=True)
    assert {name for name, _, _ in plans} >= {"snapshot", "restore", "run_sqlite / node", "run_off / node"}
    for _, _, plan in plans:
        assert asyncio.run(measure(plan)) > 0


def test_the_waits_rows_run_and_check():
    plans = durable.waits_rows(quick=True, dsn=None)
    assert {name for name, _, _ in plans} == {
        "wake / sqlite",
        "resume / sqlite / 1 claimers",
        "resume / sqlite / 2 claimers",
    }
    for _, _, plan in plans:
        try:
            assert asyncio.run(measure(plan)) > 0
        finally:
            plan.close()


def test_the_waker_rows_run_and_check():
    results = durable.waker_rows(quick=True, dsn=None, sizes={"wake": 3, "runs": 10, "late": 12})
    by_name = {row["scenario"]: row for row in results}
    assert set(by_name) == {
        "waker wake / sqlite",
        "waker resume / sqlite / 1 wakers",
        "waker resume / sqlite / 2 wakers",
        "waker lateness / sqlite",
    }
    assert by_name["waker wake / sqlite"]["p99"] > 0
    assert by_name["waker resume / sqlite / 2 wakers"]["runs/s"] > 0
    assert by_name["waker lateness / sqlite"]["p99"] >= by_name["waker lateness / sqlite"]["p50"] >= 0


def test_the_no_wait_cost_rows_run_and_check():
    plans = durable.plans_no_wait_cost()
    results = asyncio.run(durable.measure_interleaved(plans, 2))
    assert [row["scenario"] for row in results] == ["chain10 checkpointed / node", "chain10 checkpointed graph= / node"]
    assert all(row["seconds"] > 0 for row in results)
