"""AmritaCore 1.3.1 works unchanged on this runtime: real `ChatObject` turns (see
`tests/support/amrita_core_turns.py`), on the core under test and both event loops.

The same expectations are checked against amrita-sense 1.1.3 when it is installed
(AmritaCore pulls it; `AMRITA_SENSE_TURBO=0` selects it), so they describe what
AmritaCore does on the reference. Skipped without amrita-core, unless
AMRITA_SENSE_REQUIRE_AMRITA_CORE=1 (CI), which makes that a failure.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CORE

SCRIPT = Path(__file__).parent / "support" / "amrita_core_turns.py"
REQUIRED = os.environ.get("AMRITA_SENSE_REQUIRE_AMRITA_CORE", "") not in ("", "0")
ERR_PREFIX = "ERR: Tool sense_e2e_explode execution failed"

if importlib.util.find_spec("amrita_core") is None:
    if REQUIRED:
        raise ImportError("AMRITA_SENSE_REQUIRE_AMRITA_CORE=1 but amrita-core is not installed")
    pytest.skip("amrita-core is not installed (pip install amrita-core==1.3.1)", allow_module_level=True)

_cache: dict[tuple[str, str], dict] = {}


def _turns(runtime: str, loop: str) -> dict:
    """Run every scenario in a fresh interpreter on `runtime` ("this" or "1.1.3")."""
    if (runtime, loop) not in _cache:
        env = {k: v for k, v in os.environ.items() if k != "LOG_LEVEL"}
        if runtime == "this":
            env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        else:
            env.pop("PYTHONPATH", None)
            env["AMRITA_SENSE_TURBO"] = "0"
        done = subprocess.run(
            [sys.executable, str(SCRIPT), loop], env=env, cwd=SCRIPT.parent, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        line = next(line for line in done.stdout.splitlines() if line.startswith("SENSE-E2E "))
        _cache[runtime, loop] = json.loads(line.removeprefix("SENSE-E2E "))
    return _cache[runtime, loop]


def _reference_installed() -> bool:
    try:
        return importlib.metadata.version("amrita-sense") == "1.1.3"
    except importlib.metadata.PackageNotFoundError:
        return False


def _cases():
    yield pytest.param(("this", "asyncio"), id="this-asyncio")
    if sys.platform != "win32":
        yield pytest.param(("this", "uvloop"), id="this-uvloop")
    yield pytest.param(("1.1.3", "asyncio"), id="reference-asyncio")


@pytest.fixture(params=list(_cases()))
def turns(request):
    runtime, loop = request.param
    if runtime == "1.1.3" and not _reference_installed():
        pytest.skip("amrita-sense 1.1.3 is not installed beside amrita-core")
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    result = _turns(runtime, loop)
    assert result["runtime"]["turbo"] == (runtime == "this"), result["runtime"]
    if runtime == "this":
        assert result["runtime"]["implementation"] == CORE
    return result["outcomes"]


def _kinds(outcome: dict) -> list[str]:
    return [request["kind"] for request in outcome["requests"]]


def _last_messages(outcome: dict) -> list[dict]:
    return outcome["requests"][-1]["messages"]


def _finished(outcome: dict) -> None:
    assert outcome["exception"] is None


def test_plain_answer(turns):
    outcome = turns["plain_answer"]
    _finished(outcome)
    assert outcome["received"] == "Hello world"
    assert _kinds(outcome) == ["call_tools", "call_api"]
    assert _last_messages(outcome)[-1] == {"role": "user", "content": "What is the weather?"}


def test_a_tool_call_reaches_the_model_with_its_result(turns):
    outcome = turns["tool_call"]
    _finished(outcome)
    assert outcome["received"] == "Hello world"
    assert _kinds(outcome) == ["call_tools", "call_tools", "call_api"]
    assert _last_messages(outcome)[-1] == {"role": "tool", "content": "sunny in Oslo"}


def test_a_failing_tool_is_logged_and_reported_to_the_model(turns):
    outcome = turns["failing_tool"]
    _finished(outcome)
    assert outcome["received"] == "Hello world"
    tool_message = _last_messages(outcome)[-1]
    assert tool_message["role"] == "tool"
    assert tool_message["content"].startswith(ERR_PREFIX) and "tool exploded: on purpose" in tool_message["content"]
    assert "Function sense_e2e_explode execution failed: tool exploded: on purpose" in outcome["errors_logged"]


def test_the_answer_streams_through_the_response_generator(turns):
    outcome = turns["streamed_answer"]
    _finished(outcome)
    assert outcome["received"] == ["Hello", " world"]


def test_a_peer_message_joins_the_native_step_loop_at_a_step_boundary(turns):
    outcome = turns["step_loop_with_a_peer_message"]
    _finished(outcome)
    assert outcome["received"] == "Hello world"
    peer = {"role": "user", "content": "[peer message]\npeer note"}
    assert all(peer in request["messages"] for request in outcome["requests"])
    assert "call_tools" in _kinds(outcome)


def test_a_retried_completion_streams_one_clean_answer(turns):
    if "retried_completion" not in turns:
        pytest.skip("node policies are this runtime's (1.1.3 has none)")
    outcome = turns["retried_completion"]
    _finished(outcome)
    assert outcome["received"] == ["Hello", " world"]
    assert _kinds(outcome) == ["call_tools", "call_api", "call_api", "call_api"]
    markers = [item for item in outcome["raw"] if item in ("AttemptStarted", "AttemptVoided")]
    assert markers == ["AttemptStarted", "AttemptVoided"] * 2 + ["AttemptStarted"]
    assert outcome["raw"].count("Hel") == 2  # what the failed attempts streamed reached the consumer, marked void


def test_a_traced_turn_is_one_trace_whose_model_call_parents_the_http_span(turns):
    if "traced_turn" not in turns:
        pytest.skip("telemetry is this runtime's (1.1.3 has none)")
    outcome = turns["traced_turn"]
    _finished(outcome)
    from amrita_core.components import LLM_COMPLETION

    assert (outcome["traces"], outcome["runs"]) == (1, 1)
    assert outcome["http_parents"] == [f"amrita_sense.node {LLM_COMPLETION.tag}"]
