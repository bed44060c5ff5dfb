"""SVG through Graphviz's `dot` program (`dot -Tsvg`), run locally; never a network service."""

from __future__ import annotations

import shutil
import subprocess

from amrita_sense.pictures.errors import GraphvizFailed, GraphvizNotFound

DOT_TIMEOUT = 120.0
"""Seconds `dot` may take for one picture."""

INSTALL_HINT = (
    "SVG export needs Graphviz's `dot` program on PATH: install graphviz "
    "(apt-get install graphviz, dnf install graphviz, brew install graphviz, choco install graphviz), "
    "or export Mermaid or DOT text instead"
)


def find_dot() -> str | None:
    """The path of Graphviz's `dot` program, or None when it is not installed."""
    return shutil.which("dot")


def dot_to_svg(source: str) -> str:
    """Lay `source` (DOT text) out with `dot -Tsvg`; `GraphvizNotFound` without Graphviz,
    `GraphvizFailed` when `dot` rejects the text or fails."""
    program = find_dot()
    if program is None:
        raise GraphvizNotFound(INSTALL_HINT)
    try:
        done = subprocess.run(
            [program, "-Tsvg"], input=source.encode("utf-8"), capture_output=True, timeout=DOT_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GraphvizFailed(f"running {program} -Tsvg failed: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip() or f"exit code {done.returncode}"
        raise GraphvizFailed(f"dot -Tsvg failed: {message}")
    return done.stdout.decode("utf-8")


__all__ = ["DOT_TIMEOUT", "INSTALL_HINT", "dot_to_svg", "find_dot"]
