"""pytest-benchmark harness for the scenarios of `bench.scenarios`.

Each benchmark times exactly the scenario's timed part (one round = one timed run
of `ops` operations; `extra_info` holds ops, unit and seconds per op); the
scenario's prepare step runs as the round's setup and its count check as the
teardown, so every round is verified. Benchmarks are grouped by scenario, and
test ids carry the event loop and the core, so runs of different builds print
side by side:

    pytest bench --benchmark-save=cython
    AMRITA_SENSE_NO_EXTENSIONS=1 pytest bench --benchmark-save=python
    pytest-benchmark compare --group-by=group 0001 0002

In CI: `pytest bench --benchmark-disable` runs every scenario once, at its quick
size, with its count check, so the benchmarks cannot rot.
For ratios against amrita-sense 1.1.3 use the runner instead: `python -m amrita_sense.bench`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import sys
from pathlib import Path

import pytest


def _scenarios():
    """The package's scenarios; under another amrita_sense (1.1.3, which has no `bench`), the
    checkout's copy of the same package, loaded by path."""
    try:
        from amrita_sense.bench import scenarios
    except ImportError:
        package = Path(__file__).resolve().parents[1] / "src" / "amrita_sense" / "bench" / "scenarios"
        spec = importlib.util.spec_from_file_location(
            "_amrita_sense_bench_scenarios", package / "__init__.py", submodule_search_locations=[str(package)]
        )
        scenarios = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = scenarios
        spec.loader.exec_module(scenarios)
    return scenarios


S = _scenarios()


def _core_id() -> str:
    import amrita_sense

    impl = getattr(amrita_sense, "IMPLEMENTATION", None)
    if impl is not None:
        return impl
    from importlib.metadata import version

    return f"ref-{version('amrita-sense')}"


LOOPS = ["asyncio"]
if sys.platform != "win32":
    try:
        import uvloop  # noqa: F401

        LOOPS.append("uvloop")
    except ImportError:
        pass


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("amrita-sense bench")
    group.addoption(
        "--bench-size",
        choices=["quick", "full"],
        default=None,
        help="scenario sizes (default: quick with --benchmark-disable, else full)",
    )
    group.addoption("--bench-rounds", type=int, default=5, help="timed rounds per benchmark")


def pytest_report_header(config: pytest.Config) -> str:
    return f"amrita_sense build: {_core_id()}; loops: {', '.join(LOOPS)}"


@pytest.fixture(params=[_core_id()])
def sense_core(request: pytest.FixtureRequest) -> str:
    """The build under test, as a test-id component."""
    return request.param


@pytest.fixture(params=LOOPS)
def event_loop_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def bench_loop(event_loop_name: str):
    if event_loop_name == "uvloop":
        import uvloop

        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(loop.shutdown_default_executor())
    asyncio.set_event_loop(None)
    loop.close()


GUARD_SECONDS = 300.0  # a scenario that hangs (e.g. a lost resume) fails instead of stalling CI


def _call(loop: asyncio.AbstractEventLoop, func):
    if func is None:
        return None
    result = func()
    if inspect.isawaitable(result):
        return loop.run_until_complete(asyncio.wait_for(result, GUARD_SECONDS))
    return result


@pytest.fixture
def bench_scenario(benchmark, bench_loop, sense_core: str, request: pytest.FixtureRequest):
    """Benchmark one scenario by name: `bench_scenario("sync_chain")`."""
    config = request.config
    size_mode = config.getoption("--bench-size") or ("quick" if benchmark.disabled else "full")
    rounds = max(1, config.getoption("--bench-rounds"))

    def run(name: str) -> None:
        spec = S.SCENARIOS[name]
        size = spec.quick_size if size_mode == "quick" else spec.size
        try:
            plan = S.build(name, size)
        except S.Unavailable as exc:
            pytest.skip(f"{sense_core}: {exc}")
        benchmark.group = name
        benchmark.extra_info.update(core=sense_core, ops=plan.ops, unit=spec.unit, size=size)
        pending = []

        def setup() -> None:
            _call(bench_loop, plan.prepare)
            pending.append(True)

        def teardown(*_args) -> None:
            _call(bench_loop, plan.check)
            pending.clear()

        if inspect.iscoroutinefunction(plan.timed) and benchmark.disabled:

            def target() -> None:
                bench_loop.run_until_complete(asyncio.wait_for(plan.timed(), GUARD_SECONDS))
        elif inspect.iscoroutinefunction(plan.timed):

            def target() -> None:
                bench_loop.run_until_complete(plan.timed())
        else:
            target = plan.timed
        benchmark.pedantic(target, setup=setup, teardown=teardown, rounds=rounds, warmup_rounds=1)
        if pending:  # --benchmark-disable skips the teardown: still check the single run
            teardown()
        stats = getattr(benchmark, "stats", None)
        if stats is not None and plan.result is None:
            benchmark.extra_info["median_per_op_s"] = stats.stats.median / plan.ops
        if plan.result is not None:
            benchmark.extra_info["value"] = plan.result(0.0)

    return run
