"""The lint tools CI installs are the versions pre-commit pins: `.ci/run`, the GitHub workflows and the
Makefile's development packages install ruff and cython-lint at the `rev:` of their repository in
`.pre-commit-config.yaml`, so a hook, `make lint` and CI cannot disagree about what is clean.
Read as text (no YAML library, no network)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = {"ruff": "astral-sh/ruff-pre-commit", "cython-lint": "MarcoGorelli/cython-lint"}
"""Each lint tool and the repository of its pre-commit hooks."""

TOOL_TOKEN = re.compile(r"""^["']?(ruff|cython-lint)(?:\[[^\]]*\])?(?:(==|>=|<=|~=|!=|>|<)([^"'\s;]+))?["']?$""")


def _revs(config: str) -> dict[str, str]:
    """Each tool's version from its hook repository's `rev:` (without the leading `v`)."""
    revs = {}
    for block in re.split(r"^\s*- repo:", config, flags=re.MULTILINE)[1:]:
        url = block.split()[0]
        rev = re.search(r"^\s*rev:\s*['\"]?([^'\"\s#]+)", block, flags=re.MULTILINE)
        for tool, repo in TOOLS.items():
            if url.rstrip("/").endswith(repo) and rev:
                revs[tool] = rev.group(1).removeprefix("v")
    return revs


def _install_lines(text: str) -> list[str]:
    """The `pip install` commands of a script or workflow, and the Makefile's DEV_PACKAGES (continuation
    lines joined)."""
    joined = re.sub(r"\\\n", " ", text)
    return [
        line.split(" #", 1)[0]
        for line in joined.splitlines()
        if re.search(r"\bpip install\b", line) or line.startswith("DEV_PACKAGES")
    ]


def _requested(text: str) -> list[tuple[str, str, str]]:
    """Every (tool, operator, version) a file installs; operator and version are "" when unpinned."""
    found = []
    for line in _install_lines(text):
        for token in line.split():
            match = TOOL_TOKEN.match(token)
            if match:
                found.append((match.group(1), match.group(2) or "", match.group(3) or ""))
    return found


def _installers() -> dict[str, str]:
    files = [ROOT / ".ci" / "run", ROOT / "Makefile", *sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))]
    return {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in files}


def test_pre_commit_pins_both_lint_tools() -> None:
    revs = _revs((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    assert set(revs) == set(TOOLS), revs


@pytest.mark.parametrize("path", [".ci/run", ".github/workflows/ci.yml", "Makefile"])
def test_ci_and_the_dev_venv_install_both_lint_tools(path: str) -> None:
    assert {tool for tool, _, _ in _requested(_installers()[path])} == set(TOOLS)


def test_every_install_of_a_lint_tool_is_the_version_pre_commit_pins() -> None:
    revs = _revs((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    wrong = [
        f"{path}: {tool}{op}{version or ' (unpinned)'}, pre-commit pins {tool}=={revs[tool]}"
        for path, text in _installers().items()
        for tool, op, version in _requested(text)
        if (op, version) != ("==", revs[tool])
    ]
    assert not wrong, wrong


def test_the_reader_sees_pins_and_their_absence() -> None:
    config = "repos:\n  - repo: https://github.com/astral-sh/ruff-pre-commit\n    rev: v1.2.3  # note\n"
    assert _revs(config) == {"ruff": "1.2.3"}
    script = 'x -m pip install -q build "ruff==1.2.3" \\\n  cython-lint  # pinned here\n"$W/bin/ruff" check .\n'
    assert _requested(script) == [("ruff", "==", "1.2.3"), ("cython-lint", "", "")]
    makefile = "DEV_PACKAGES := cython ruff>=1 \\\n\tcython-lint==0.1 pre-commit\n"
    assert _requested(makefile) == [("ruff", ">=", "1"), ("cython-lint", "==", "0.1")]
