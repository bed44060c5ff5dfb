"""Every script in examples/ runs, as a user runs it, and does what it says.

Each script runs in a subprocess (`sys.executable`, the checkout's root as the working directory)
on the build under test: the amrita_sense this process imported (`RUNTIME_DIR`: the source tree or
an installed wheel's runtime) and its core (`AMRITA_SENSE_NO_EXTENSIONS` set from
`amrita_sense.IMPLEMENTATION`). The scripts that other test files already run are listed in
`RUN_ELSEWHERE` with the file that runs them; `test_every_example_is_run_somewhere` fails for a
script that is in neither list, so no example goes untested.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import amrita_sense
from support.runtime_path import RUNTIME_DIR

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CORE = amrita_sense.IMPLEMENTATION

# Scripts another test file runs (or imports and drives), with that file.
RUN_ELSEWHERE = {
    "debugger_session.py": "tests/test_debugger_session.py",
    "durable_approval.py": "tests/test_durable_example.py",
    "human_in_the_loop.py": "tests/test_examples_stream.py",
    "single_step_debugger.py": "tests/test_examples_stream.py",
    "telemetry_console.py": "tests/test_telemetry.py",
    "typed_usage.py": "tests/test_typing.py",
}
# Scripts this file runs (each by a test below).
RUN_HERE = {
    "amritacore_dropin.py",
    "benchmark_own_workflow.py",
    "inspector_local.py",
    "migrate_parked_run.py",
    "pictures_graph.py",  # tests/test_pictures_cli.py draws its graph through the CLI; here it runs as a script
    "policies.py",
    "postgres_history.py",
    "quickstart.py",
    "ray_scale_out.py",
    "threads_many_loops.py",
}


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=RUNTIME_DIR, PYTHONIOENCODING="utf-8")
    env.pop("AMRITA_SENSE_EXAMPLE_DSN", None)
    env.pop("RAY_ADDRESS", None)  # the Ray example starts its own local Ray
    env["AMRITA_SENSE_NO_EXTENSIONS"] = "1" if CORE == "python" else "0"
    env.update(extra)
    return env


def run_example(name: str, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=ROOT,
        env=_env(**env),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        check=False,
    )


def lines_of(name: str, *args: str, timeout: float = 120, **env: str) -> list[str]:
    done = run_example(name, *args, timeout=timeout, **env)
    assert done.returncode == 0, f"{name} exited with {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout.splitlines()


def _required(switch: str) -> bool:
    return os.environ.get(switch, "") not in ("", "0")


# ----- the inventory ----------------------------------------------------------------------------------


def test_every_example_is_run_somewhere():
    scripts = {path.name for path in EXAMPLES.glob("*.py")}
    assert not RUN_HERE & set(RUN_ELSEWHERE), "a script is listed twice"
    assert scripts - RUN_HERE - set(RUN_ELSEWHERE) == set(), (
        "examples no test runs: add them to RUN_HERE or RUN_ELSEWHERE"
    )
    assert (RUN_HERE | set(RUN_ELSEWHERE)) - scripts == set(), "listed examples that no longer exist"


@pytest.mark.parametrize("script", sorted(RUN_ELSEWHERE))
def test_the_test_file_named_for_an_example_runs_it(script):
    source = (ROOT / RUN_ELSEWHERE[script]).read_text(encoding="utf-8")
    assert Path(script).stem in source, f"{RUN_ELSEWHERE[script]} does not mention {script}"


def test_the_examples_do_not_put_the_source_tree_on_the_path():
    """They must run on an installed wheel: no `sys.path` edits towards src/."""
    for path in EXAMPLES.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"sys\.path\.(insert|append)", text), path.name


# ----- the scripts --------------------------------------------------------------------------------


def test_quickstart():
    assert lines_of("quickstart.py") == [
        "order [40, 70]: 10% off, total 99",
        "order [10, 20]: shipping 5, total 35",
        f"core: {CORE}",
    ]


def test_amritacore_dropin():
    lines = lines_of("amritacore_dropin.py")
    assert lines[:4] == [
        "turn 1: 'hi there' -> '(scripted-model) Hello!' via load_history > build_prompt > completion",
        "turn 2: 'what is the weather in Paris?' -> '(scripted-model) It is sunny.'"
        " via load_history > build_prompt > call_tools > completion",
        "memory holds 5 messages",
        f"core: {CORE}",
    ]
    if importlib.util.find_spec("amrita_core") is None:
        if _required("AMRITA_SENSE_REQUIRE_AMRITA_CORE"):
            pytest.fail("AMRITA_SENSE_REQUIRE_AMRITA_CORE=1 but amrita_core cannot be imported")
        assert lines[-1].startswith("amrita-core is not installed")
    else:
        # AmritaCore's own `import amrita_sense` is this runtime, on the build under test.
        (imported,) = [line.split(" from ", 1)[1] for line in lines if line.startswith("amrita_core imports")]
        assert Path(imported).resolve() == Path(amrita_sense.__file__).resolve()
        assert "amrita_core's SuspendObjectStream is this runtime's: True" in lines
        assert lines[-1] == f"amrita_core runs on: {CORE}"


def test_postgres_history(postgres_dsn):
    lines = lines_of("postgres_history.py", postgres_dsn)
    run_id = lines[0].split(":")[0]
    assert lines[0] == f"{run_id}: parked at version 2 (halted)"
    assert f"{run_id}: 4 history entries" in lines
    assert [line.split(":")[1].split()[0] for line in lines if line.startswith("  version ")] == [
        "running",
        "halted",
        "running",
        "finished",
    ]
    decided = [line.strip() for line in lines if line.startswith("  Threads and loops: ")]
    assert decided == [
        "Threads and loops: published (drafted, editor: approve, published)",
        "Threads and loops: rejected (drafted, editor: reject, rejected)",  # time travel: back to version 2
        "Threads and loops: published (drafted, editor: approve, published)",  # the fork
    ]
    assert f"{run_id}: latest is version 6 (finished), 6 entries" in lines
    assert f"{run_id}-what-if: forked from {run_id}@2 (version 1)" in lines
    assert lines[-1] == f"{run_id}: still 6 entries; {run_id}-what-if: 3"


def test_postgres_history_without_a_dsn_says_how_to_give_one():
    done = run_example("postgres_history.py")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == ["usage: postgres_history.py DSN (or set AMRITA_SENSE_EXAMPLE_DSN)"]


def test_migrate_parked_run():
    lines = lines_of("migrate_parked_run.py")
    assert lines[0] == "halted runs on v1: ['order-1001']"
    assert lines[1].startswith("plain restore refused: GraphMismatch: ")
    assert lines[2:] == [
        "order-1001: pointer moves [1] -> [2]",
        "order 1001 finished on v2: receive > fraud_check > ship",  # audit (before the pointer) did not run
        "order-1001 is now finished",
    ]


@pytest.mark.ray
def test_ray_scale_out():
    if importlib.util.find_spec("ray") is None:
        if _required("AMRITA_SENSE_REQUIRE_RAY"):
            pytest.fail("AMRITA_SENSE_REQUIRE_RAY=1 but Ray cannot be imported")
        pytest.skip("Ray is not installed (pip install 'amrita-sense-turbo[ray]')")
    lines = lines_of("ray_scale_out.py", timeout=300, RAY_TQDM_PATCH_PRINT="0")
    assert lines[:2] == ["one run: hello", "its outcome: finished, result 'spam', attempts 1"]
    assert [line.rsplit("'", 2)[-2] for line in lines[2:8]] == ["cat", "be", "rose", "go", "fish", "buffalo"]
    outcomes = [line for line in lines if re.match(r"  [0-9a-f]{8}: ", line)]
    assert len(outcomes) == 6 and all(": finished on sense-pool worker " in line for line in outcomes)
    assert re.fullmatch(r"6 runs finished on [12] worker\(s\)", lines[-1])


def test_ray_scale_out_without_ray_exits_2():
    """`import ray` failing (as where Ray is not installed): a one-line message and status 2."""
    code = (
        "import runpy, sys; sys.modules['ray'] = None; "
        f"runpy.run_path({str(EXAMPLES / 'ray_scale_out.py')!r}, run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "ray_scale_out.py needs Ray: pip install 'amrita-sense-turbo[ray]'"


def test_policies():
    lines = lines_of("policies.py")
    events = [line.strip() for line in lines if line.startswith("  event ")]
    assert events == [
        "event timeout: NodeSuspend::lookup attempt 1 (NodeTimeout)",
        "event retry: NodeSuspend::lookup attempt 1 (NodeTimeout), next attempt in 0.00 s",
        "event retry: NodeSuspend::charge attempt 1 (ConnectionError), next attempt in 0.05 s",
        "event retry: NodeSuspend::charge attempt 2 (ConnectionError), next attempt in 0.10 s",
        "event retry: NodeSuspend::recommend attempt 1 (RuntimeError), next attempt in 0.00 s",
        "event fallback: NodeSuspend::recommend attempt 2 (RuntimeError), fallback NodeSuspend::cached_recommendation",
        "event retry: NodeSuspend::complete attempt 1 (ConnectionError), next attempt in 0.00 s",
    ]
    assert lines[len(events) :] == [
        "attempts: {'lookup': 2, 'charge': 3, 'recommend': 2, 'complete': 2}",
        "lookup: found",
        "charge: charged",
        "recommend: cached list (after model overloaded)",
        "streamed: 'Your order Your order ships today.'; without the voided attempt: 'Your order ships today.'",
    ]


def test_inspector_local():
    from support.inspector_support import require_server

    require_server()  # Starlette, uvicorn, httpx: skipped without them (AMRITA_SENSE_REQUIRE_INSPECTOR=1 fails)
    lines = lines_of("inspector_local.py")
    assert lines[:5] == [
        "order-3 panicked: order 3: negative amount -7",
        "the inspector lists 3 runs:",
        "  order-1: finished v5 at idle pointer=[]",
        "  order-2: halted v2 at idle pointer=[1, 2]",
        "  order-3: panicked v4 at idle pointer=[2] panic=builtins:ValueError: order 3: negative amount -7",
    ]
    assert lines[5].startswith("GET /?run=order-2: 200, ")
    assert lines[6] == "order-2 has 2 history entries"
    assert re.fullmatch(
        r"from the checkout's root: python -m amrita_sense inspect --store \S+runs\.db"
        r" --graph examples\.inspector_local:build_graph",
        lines[7],
    )


def test_benchmark_own_workflow():
    lines = lines_of("benchmark_own_workflow.py", timeout=180)
    assert lines[0].startswith("$ -m amrita_sense.bench --workflow ")
    results = [line for line in lines if re.match(r"(compiled|pure): ", line)]
    builds = ["compiled", "pure"] if CORE == "cython" else ["pure"]
    assert [line.split(":")[0] for line in results] == builds
    for line in results:
        assert re.fullmatch(r"\w+: ok, [0-9.]+ us per request, same nodes: True", line), line


def test_threads_many_loops():
    lines = lines_of("threads_many_loops.py")
    assert lines[:4] == [f"loop-{i}: 50 requests, 0 traces differ from the serial run" for i in range(4)]
    assert lines[4] == "e.g. request 10: start > fetch > crunch > even > caught 10"
    assert lines[-1] == "4 threads x 50 requests over one graph: 0 mismatches"


def test_pictures_graph_as_a_script():
    lines = lines_of("pictures_graph.py")
    assert lines[0] == "flowchart TD" and any("WHILE" in line for line in lines)
