"""Building from the sdist, in fresh virtual environments: without a C compiler the build FAILS
and says what to do, unless the pure build is asked for (AMRITA_SENSE_NO_EXTENSIONS=1); the pure
build installs a `py3-none-any` wheel that warns at import unless asked for at run time.

Marked `install` (real builds with build requirements from PyPI), gated like
tests/test_install.py. AMRITA_SENSE_SDIST names the sdist (CI); without it one is built
with `python -m build` when that is installed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_install import ROOT, _run, _unavailable

pytestmark = pytest.mark.install

NO_COMPILER = {"CC": "/nonexistent/cc", "CXX": "/nonexistent/c++", "LDSHARED": "/nonexistent/cc -shared"}


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    given = os.environ.get("AMRITA_SENSE_SDIST")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("sdist")
    done = _run([sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(ROOT)], check=False)
    if done.returncode != 0:
        _unavailable(f"building the sdist failed (no `build` module, or no PyPI):\n{done.stderr[-2000:]}")
    return next(out.glob("*.tar.gz"))


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sdist-venv")
    _run([sys.executable, "-m", "venv", str(root)])
    return root


def _pip_install(venv: Path, sdist: Path, **env: str) -> subprocess.CompletedProcess:
    return _run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-cache-dir", str(sdist)],
        env={**NO_COMPILER, **env},
        check=False,
    )


def test_without_a_compiler_the_build_fails_and_says_why(venv: Path, sdist: Path) -> None:
    done = _pip_install(venv, sdist)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "the compiled core could not be built" in output
    assert "AMRITA_SENSE_NO_EXTENSIONS=1 pip install" in output
    probe = _run([str(venv / "bin" / "python"), "-c", "import amrita_sense"], check=False)
    assert probe.returncode != 0  # nothing was installed


def test_the_pure_build_installs_when_asked_for_and_warns_unless_asked_for_at_run_time(venv: Path, sdist: Path) -> None:
    done = _pip_install(venv, sdist, AMRITA_SENSE_NO_EXTENSIONS="1")
    assert done.returncode == 0, done.stdout + done.stderr
    python = str(venv / "bin" / "python")
    tag = _run(
        [
            python,
            "-c",
            "from importlib.metadata import distribution as d; print(d('amrita-sense-turbo').read_text('WHEEL'))",
        ],
        cwd=venv,
    ).stdout
    assert "Tag: py3-none-any" in tag and "Root-Is-Purelib: true" in tag
    code = "import amrita_sense; print(amrita_sense.IMPLEMENTATION)"
    unasked = _run([python, "-c", code], cwd=venv)
    assert unasked.stdout.strip() == "python"
    assert (
        re.search(r"runs on its pure[\w -]*, about 10x slower", unasked.stderr) and "no compiled core" in unasked.stderr
    )
    asked = _run([python, "-c", code], env={"AMRITA_SENSE_NO_EXTENSIONS": "1"}, cwd=venv)
    assert asked.stdout.strip() == "python" and "RuntimeWarning" not in asked.stderr
