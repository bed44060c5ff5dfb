"""The streaming examples: run as scripts, and driven through their functions."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from support.runtime_path import RUNTIME_DIR

ROOT = Path(__file__).resolve().parents[1]
# The directory holding the amrita_sense under test (the source tree, or an installed wheel's runtime).
EXAMPLES = ROOT / "examples"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script(name: str) -> str:
    env = dict(os.environ, PYTHONPATH=RUNTIME_DIR)
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


# ----- the single-step debugger ---------------------------------------------------------------------


def test_debugger_script_prints_every_stop():
    lines = run_script("single_step_debugger").splitlines()
    stops = [line for line in lines if line.startswith("stop ")]
    assert stops[0] == "stop 1: pointer=[0] next=NodeSuspend::load"
    assert "stop 5: pointer=[2] next=NodeSuspend::audit" in stops
    assert "  redirected to [3] (NodeSuspend::report)" in lines
    assert lines.count("workflow finished") == 2
    assert lines[-1] == "trace: ['load', 'validate', 'ok', 'accept', 'report']"


@pytest.mark.asyncio
async def test_debugger_stops_once_per_main_loop_node():
    example = load_example("single_step_debugger")
    trace: list[str] = []
    printed: list[str] = []
    stops = await example.debug(example.build_workflow(trace), out=printed.append)
    assert stops == [[0], [1, 0], [1, 1, 0], [1, 1, 3], [2], [3]]
    assert trace == ["load", "validate", "ok", "accept", "audit", "report"]
    assert printed[-1] == "workflow finished"


@pytest.mark.asyncio
async def test_debugger_redirects_by_writing_the_pointer():
    example = load_example("single_step_debugger")
    trace: list[str] = []
    stops = await example.debug(example.build_workflow(trace), redirects={(1, 0): [2]}, out=lambda _line: None)
    assert stops == [[0], [1, 0], [3]]  # the stop at [1, 0] continued at [2]
    assert trace == ["load", "audit", "report"]


@pytest.mark.asyncio
async def test_debugger_main():
    example = load_example("single_step_debugger")
    assert await example.main(out=lambda _line: None) == ["load", "validate", "ok", "accept", "report"]


# ----- human in the loop ------------------------------------------------------------------------------


def test_human_in_the_loop_script():
    lines = run_script("human_in_the_loop").splitlines()
    assert lines[0] == "human: hello, I am reviewing"
    assert [line.split(":")[0] for line in lines[:6]] == ["human", "agent", "human", "agent", "human", "agent"]
    assert lines[-1].startswith("[answer] answer to 'who drains peer messages?'")


@pytest.mark.asyncio
async def test_each_reply_is_drained_at_the_next_step_boundary():
    example = load_example("human_in_the_loop")
    questions = ["q1", "q2", "q3", "q4"]
    replies = iter(["r1", "r2", "r3", "r4"])
    conversation = await example.session(
        questions, lambda _response: next(replies), opening="hi", out=lambda _line: None
    )
    kinds = [entry.split("]")[0] + "]" for entry in conversation]
    assert kinds == ["[peer message]", "[question]", "[answer]"] + ["[peer message]", "[question]", "[answer]"] * 3
    assert [entry for entry in conversation if entry.startswith("[peer")] == [
        "[peer message] hi",
        "[peer message] r1",
        "[peer message] r2",
        "[peer message] r3",
    ]  # r4 answers the last step: no boundary is left to read it


@pytest.mark.asyncio
async def test_a_silent_human_leaves_the_conversation_alone():
    example = load_example("human_in_the_loop")
    printed: list[str] = []
    conversation = await example.session(["q1", "q2"], lambda _response: None, out=printed.append)
    assert conversation == [
        "[question] q1",
        "[answer] answer to 'q1'",
        "[question] q2",
        "[answer] answer to 'q2'",
    ]
    assert printed == ["agent: answer to 'q1'", "agent: answer to 'q2'"]


@pytest.mark.asyncio
async def test_human_in_the_loop_main():
    example = load_example("human_in_the_loop")
    conversation = await example.main(out=lambda _line: None)
    assert conversation[-1] == (
        "[answer] answer to 'who drains peer messages?', following: hello, I am reviewing; please cite sources; be brief"
    )
