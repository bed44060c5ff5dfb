"""What type checkers see: mypy (configured in pyproject.toml) on snippets of user code, and the
typed example run as a script. The mypy tests skip where mypy is not installed (CI installs it
and also runs `mypy` on the package and the example)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test_examples_stream import run_script

ROOT = Path(__file__).resolve().parents[1]

USER_CODE = """
    from amrita_sense import Node, NodeCompose, WorkflowInterpreter
    from amrita_sense.node import NodeType
    from amrita_sense.types import PointerVector

    @Node(wrap_to_async=False)
    def add(x: int, y: int = 1) -> int:
        return x + y

    @Node()
    async def fetch(url: str) -> bytes:
        return b""

    reveal_type(add)
    reveal_type(fetch)
    reveal_type(PointerVector)
    add(1, y=2)
    old_style: NodeType[int] = add
    WorkflowInterpreter(NodeCompose(add, fetch).render())
    interp = WorkflowInterpreter(NodeCompose(add).render())  # no annotation needed without an object_io
    reveal_type(interp)
    add("one")  # E1
    fetch(3)  # E2
    WorkflowInterpreter(42)  # E3
    wrong: NodeType[str] = add  # E4
"""


def mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    if (
        shutil.which("mypy") is None
        and subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True).returncode != 0
    ):
        pytest.skip("mypy is not installed")
    snippet = tmp_path / "user_code.py"
    snippet.write_text(textwrap.dedent(source))
    env = {**os.environ, "MYPY_CACHE_DIR": str(ROOT / ".mypy_cache")}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), str(snippet)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_type_checkers_see_signatures_and_one_set_of_classes(tmp_path: Path) -> None:
    done = mypy(tmp_path, USER_CODE)
    lines = done.stdout.splitlines()
    revealed = [line.split("Revealed type is ", 1)[1] for line in lines if "Revealed type is" in line]
    assert revealed[0] == '"amrita_sense.node.core.Node[int, [x: int, y: int =]]"'
    assert revealed[1] == '"amrita_sense.node.core.Node[bytes, [url: str]]"'
    assert revealed[2].startswith('"def (') and "amrita_sense.core._structures.PointerVector" in revealed[2]
    assert revealed[3] == '"amrita_sense.runtime.workflow.WorkflowInterpreter[Any]"'
    errors = {int(line.split(":")[1]): line for line in lines if ": error:" in line}
    source = textwrap.dedent(USER_CODE).splitlines()
    expected = {number: text for number, text in enumerate(source, start=1) if "# E" in text}
    assert set(errors) == set(expected), done.stdout
    assert 'incompatible type "str"; expected "int"' in errors[next(n for n, t in expected.items() if "E1" in t)]
    assert (
        '"WorkflowInterpreter" has incompatible type "int"' in errors[next(n for n, t in expected.items() if "E3" in t)]
    )


def test_the_typed_example_runs() -> None:
    assert run_script("typed_usage").splitlines() == [
        "hello Ada Lovelace",
        "a high score",
        "score 120, called directly: direct",
    ]
