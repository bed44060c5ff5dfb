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
