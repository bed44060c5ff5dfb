"""`python -m amrita_sense graph module:factory --format ... [-o FILE]`, run as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from amrita_sense import WorkflowInterpreter
from amrita_sense.pictures import to_dot, to_mermaid
from support import picture_targets
from support.pictures_support import require_dot
from support.runtime_path import RUNTIME_DIR

TESTS_DIR = str(Path(__file__).resolve().parent)


def _cli(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([RUNTIME_DIR, TESTS_DIR])
    return subprocess.run(
        [sys.executable, "-m", "amrita_sense", *args], env=env, capture_output=True, text=True, timeout=120, cwd=cwd
    )


def test_mermaid_of_a_factory_goes_to_standard_output():
    done = _cli("graph", "support.picture_targets:factory", "--format", "mermaid")
    assert done.returncode == 0, done.stderr
    assert done.stdout == to_mermaid(picture_targets.factory())


def test_dot_of_a_graph_object_and_an_attribute_path(tmp_path):
    out = tmp_path / "g.dot"
    done = _cli("graph", "support.picture_targets:GRAPH", "--format", "dot", "-o", str(out))
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert out.read_text(encoding="utf-8") == to_dot(picture_targets.GRAPH)
    done = _cli("graph", "support.picture_targets:Holder.graph", "-f", "dot")
    assert done.returncode == 0 and done.stdout == to_dot(picture_targets.Holder.graph)


def test_svg_is_laid_out_by_graphviz(tmp_path):
    require_dot()
    out = tmp_path / "g.svg"
    done = _cli("graph", "support.picture_targets:factory", "--format", "svg", "-o", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text(encoding="utf-8")
    assert text.lstrip().startswith("<?xml") and "<svg" in text and "JMPIF" in text


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_such_module_here:factory", "cannot import module 'no_such_module_here'"),
        ("support.picture_targets:missing", "has no attribute 'missing'"),
        ("support.picture_targets:NUMBER", "is not a rendered graph"),
        ("support.picture_targets:UNRENDERED", "is not a rendered graph"),
        ("support.picture_targets:returns_none", "returned NoneType"),
        ("support.picture_targets:raises", "raised RuntimeError: factory failed on purpose"),
        ("support.picture_targets:a_node", "is a node, not a rendered graph"),
        ("support.picture_targets", "expected module:factory"),
    ],
)
def test_bad_targets_are_one_line_and_exit_2(target, message):
    done = _cli("graph", target)
    assert done.returncode == 2
    assert done.stdout == ""
    assert message in done.stderr and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


@pytest.mark.parametrize("args", [("graph", "support.picture_targets:factory", "--format", "png"), ("graph",)])
def test_bad_arguments_are_one_line_and_exit_2(args):
    done = _cli(*args)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_a_snapshot_overlay_from_the_command_line(tmp_path):
    path = tmp_path / "snap.bin"
    path.write_bytes(WorkflowInterpreter(picture_targets.GRAPH).snapshot())
    done = _cli("graph", "support.picture_targets:GRAPH", "--snapshot", str(path))
    assert done.returncode == 0, done.stderr
    assert "class n0_0 pointer" in done.stdout
    done = _cli("graph", "support.picture_targets:factory", "--snapshot", str(path))
    assert done.returncode == 2 and "another graph" in done.stderr


def test_no_arguments_still_print_the_runtime_report():
    done = _cli()
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr and "usage" not in done.stdout.lower()
    assert done.stdout.strip()


def test_the_readme_example_draws():
    """examples/pictures_graph.py, drawn as the README shows (from the checkout's root)."""
    root = Path(TESTS_DIR).parent
    done = _cli("graph", "examples.pictures_graph:graph", "--format", "mermaid", cwd=str(root))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("flowchart TD") and "answer" in done.stdout and "WHILE" in done.stdout
