"""pytest plugin: benchmark your workflows inside your own test suite (pytest-benchmark).

Registered through the `pytest11` entry point `amrita_sense_bench`, so an installed
amrita-sense-turbo provides the `workflow_benchmark` fixture to every pytest run of
the environment. It is built on pytest-benchmark's `benchmark` fixture: the results
are pytest-benchmark's own (`--benchmark-autosave`, `--benchmark-compare`,
`pytest-benchmark compare`), so a workflow's speed can be tracked in CI. It runs on
whichever `amrita_sense` is loaded: the compiled core, the pure build, or (with
`AMRITA_SENSE_TURBO=0`) amrita-sense 1.1.3, named in `extra_info["core"]`.

    def test_chat_turn_speed(workflow_benchmark):
        trace = workflow_benchmark(build_graph(), extra_args=(session, config))
        assert trace[0].startswith("load_history")

Without pytest-benchmark nothing is registered but the fixture itself, which then
fails the test that asks for it with the command that installs pytest-benchmark.
Nothing here imports `amrita_sense` before a test asks for the fixture. Without pytest
the module still imports (the documentation's autodoc imports it, and the `docs` extra
installs no pytest): then it defines no fixture.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

try:
    import pytest
except ImportError:  # imported outside pytest where it is not installed (autodoc): no fixture
    HAVE_PYTEST = False
else:
    HAVE_PYTEST = True

try:
    import pytest_benchmark  # noqa: F401 - its presence decides what this plugin offers
except ImportError:
    HAVE_BENCHMARK = False
else:
    HAVE_BENCHMARK = True

INSTALL = "pip install pytest-benchmark  (or: pip install 'amrita-sense-turbo[bench]')"


def _workload() -> Any:
    """The bench package's `workload` module, loaded by path from this distribution's runtime, so it
    works whichever `amrita_sense` is loaded (1.1.3 has no `amrita_sense.bench`)."""
    import amrita_sense_turbo

    name = "_amrita_sense_bench_workload"
    if name not in sys.modules:
        path = os.path.join(amrita_sense_turbo.runtime_parent(), "amrita_sense", "bench", "workload.py")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[name] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules[name]


def core_name() -> str:
    """What `amrita_sense` runs on: "cython", "python", or "amrita-sense <version>"."""
    import amrita_sense

    impl = getattr(amrita_sense, "IMPLEMENTATION", None)
    if impl is not None:
        return str(impl)
    from importlib.metadata import version

    return f"amrita-sense {version('amrita-sense')}"


class WorkflowBenchmark:
    """Call it with a workflow: a rendered graph (or a compose, or a self-compiling instruction),
    run by a new `WorkflowInterpreter(graph, extra_args, extra_kwargs)` per round, as an
    application runs a request; or an async callable, awaited once per round.

    It first runs the workflow once, untimed, and records its node trace (the user functions
    the engine entered, in order: `file:line` labels); a run that enters none fails the test.
    Then pytest-benchmark times one run per round (`rounds`: a fixed number, else its own
    calibration). Returns the trace. `loop_factory` makes the event loop (default asyncio's)."""

    def __init__(self, benchmark: Any, roots: list[str]) -> None:
        self.benchmark = benchmark
        self.roots = roots

    def __call__(
        self,
        workflow: Any,
        *,
        extra_args: tuple = (),
        extra_kwargs: dict | None = None,
        rounds: int | None = None,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
    ) -> list[str]:
        workload = _workload()
        run = self._one_run(workload, workflow, extra_args, extra_kwargs or {})
        loop = (loop_factory or asyncio.new_event_loop)()
        try:
            trace = loop.run_until_complete(workload.trace_run(run, self.roots))
            if not trace:
                import pytest  # a benchmark runs inside a pytest run

                pytest.fail(f"the workflow ran none of the functions under {', '.join(self.roots)}")
            self._describe(trace, loop)
            if rounds:
                self.benchmark.pedantic(lambda: loop.run_until_complete(run()), rounds=rounds, warmup_rounds=1)
            else:
                self.benchmark(lambda: loop.run_until_complete(run()))
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
        return trace

    @staticmethod
    def _one_run(workload: Any, workflow: Any, extra_args: tuple, extra_kwargs: dict) -> Callable[[], Any]:
        graph = workload.as_graph(workflow)
        if graph is None:
            if extra_args or extra_kwargs:
                raise TypeError("extra_args / extra_kwargs go to the interpreter of a graph, not to a callable")
            return workload.one_run(workflow, "workflow_benchmark's argument")
        from amrita_sense import WorkflowInterpreter

        async def run() -> None:
            await WorkflowInterpreter(graph, extra_args=extra_args, extra_kwargs=extra_kwargs).run()

        return run

    def _describe(self, trace: list[str], loop: asyncio.AbstractEventLoop) -> None:
        info = self.benchmark.extra_info
        info.update(core=core_name(), nodes_per_run=len(trace), loop=type(loop).__module__.split(".")[0])
        if not self.benchmark.group:
            self.benchmark.group = "amrita_sense workflows"


def _project_roots(config: pytest.Config) -> list[str]:
    return [str(config.rootpath)]


if HAVE_PYTEST and HAVE_BENCHMARK:

    @pytest.fixture
    def workflow_benchmark(benchmark: Any, request: pytest.FixtureRequest) -> WorkflowBenchmark:
        """Benchmark a workflow with pytest-benchmark: `workflow_benchmark(graph, extra_args=...)`
        (see `amrita_sense_turbo.pytest_plugin.WorkflowBenchmark`)."""
        return WorkflowBenchmark(benchmark, _project_roots(request.config))

elif HAVE_PYTEST:

    @pytest.fixture
    def workflow_benchmark() -> WorkflowBenchmark:
        """Needs pytest-benchmark, which is not installed."""
        pytest.fail(f"the workflow_benchmark fixture needs pytest-benchmark: {INSTALL}", pytrace=False)
