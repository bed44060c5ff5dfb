"""The durable-run benchmarks (`python -m bench.durable`) run once at their quick sizes, checks included."""

import asyncio

from amrita_sense.bench.scenarios import measure
from bench import durable


def test_every_durable_row_runs_and_checks():
    plans = durable.rows(quick=True)
    assert {name for name, _, _ in plans} >= {"snapshot", "restore", "run_sqlite / node", "run_off / node"}
    for _, _, plan in plans:
        assert asyncio.run(measure(plan)) > 0
