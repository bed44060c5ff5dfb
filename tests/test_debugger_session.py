"""A scripted REPL session: commands piped into examples/debugger_session.py, on the core under test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import amrita_sense
from support.runtime_path import RUNTIME_DIR

ROOT = Path(__file__).resolve().parents[1]
# The directory holding the amrita_sense under test (the source tree, or an installed wheel's runtime).
EXAMPLE = ROOT / "examples" / "debugger_session.py"

COMMANDS = """\
import amrita_sense
print("core:", amrita_sense.IMPLEMENTATION)
break_at_addr(it, "square")
cont(it)
where(it)
step(it)
print("pointer:", it._pointer.base_addr)
print("return stack:", [p.base_addr for p in it._ret_addr_stack.stack])
print("value:", state["value"])
step(it)
print("value:", state["value"])
cont(it)
print("return stack:", [p.base_addr for p in it._ret_addr_stack.stack])
clear_break_addr(it, "square")
cont(it)
print("pointer:", it._pointer.base_addr)
print("trace:", trace)
"""


def run_session(commands: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=RUNTIME_DIR, PYTHONIOENCODING="utf-8")
    env.pop("AMRITA_SENSE_NO_EXTENSIONS", None)
    if amrita_sense.IMPLEMENTATION == "python":
        env["AMRITA_SENSE_NO_EXTENSIONS"] = "1"
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        input=commands,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=60,
        check=False,
    )


def test_piped_session_breaks_steps_inspects_and_finishes():
    done = run_session(COMMANDS)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    out = done.stdout.splitlines()
    assert f"core: {amrita_sense.IMPLEMENTATION}" in out
    assert "🔴 Breakpoint: addr=[1, 1] hits=0" in out
    hits = [line for line in out if line.startswith("⏸️  Hit breakpoint")]
    assert hits == ["⏸️  Hit breakpoint: addr=[1, 1] hits=1", "⏸️  Hit breakpoint: addr=[1, 1] hits=2"]
    assert "📍 [1, 1]  Alias::square  stack_depth=1" in out
    printed = [line for line in out if line.split(":")[0] in ("pointer", "return stack", "value", "trace")]
    assert printed == [
        "pointer: [1, 2, 0]",
        "return stack: [[2]]",
        "value: 3",
        "value: 9",
        "return stack: [[3]]",
        "pointer: []",
        "trace: ['load 3', 'value 9', 'value 81', 'done']",
    ]
    assert "\x1b[" not in done.stdout
    assert "=> <end of workflow>" in out


def test_piped_session_shows_the_listing_at_each_stop():
    done = run_session("break_at_addr(it, 'square')\ncont(it)\n")
    out = done.stdout.splitlines()
    assert "=>[1, 1] (square) ALIAS square; alias for NodeSuspend::_no_operation" in out


def test_demo_session_runs_to_the_end():
    done = run_session("", "--demo")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "trace: ['load 3', 'value 9', 'value 81', 'done']"


def test_the_session_draws_the_rows_around_the_pointer():
    done = run_session('break_at_addr(it, "square")\ncont(it)\ndraw(it, 2)\n')
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "flowchart TD" in done.stdout and "=#62; pointer" in done.stdout and "ALIAS square" in done.stdout
