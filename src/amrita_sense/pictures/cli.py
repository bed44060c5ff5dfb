"""`python -m amrita_sense graph module:factory --format svg|mermaid|dot [-o FILE]`.

`factory` names a callable that returns a rendered graph (it is called with no arguments), or a
rendered graph itself; `module:a.b` reaches an attribute of an attribute. The picture goes to
standard output, or to FILE with `-o`. Bad input (no such module or name, not a graph, an unknown
format) prints one line to standard error and exits with 2; a failure to draw (Graphviz missing
for SVG, `dot` failing) exits with 1. No traceback either way.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any, NoReturn

from amrita_sense.node.abc_base import is_rendered_compose
from amrita_sense.node.core import BaseNode
from amrita_sense.pictures.errors import GraphvizFailed, GraphvizNotFound, PictureError
from amrita_sense.pictures.export import FORMATS, export
from amrita_sense.pictures.overlay import Overlay

COMMANDS = ("graph",)
"""The subcommands of `python -m amrita_sense` (any other first argument: the runtime report)."""

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1
PROG = "python -m amrita_sense"


class BadInput(Exception):
    """What the command line names cannot be drawn (the message is the one line printed)."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (no usage block) and exit with 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Tools for AmritaSense workflows.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    graph = commands.add_parser("graph", help="draw a rendered graph as Mermaid, DOT or SVG")
    graph.add_argument("target", help="module:factory, a callable returning a rendered graph (or the graph)")
    graph.add_argument("--format", "-f", default="mermaid", help=f"one of {', '.join(FORMATS)} (default mermaid)")
    graph.add_argument("-o", "--output", metavar="FILE", help="write the picture to FILE instead of standard output")
    graph.add_argument("--snapshot", metavar="FILE", help="draw the run a snapshot file holds over the graph")
    return parser


def load_graph(target: str) -> Any:
    """The rendered graph `module:factory` names (`BadInput` otherwise)."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise BadInput(f"expected module:factory, not {target!r}")
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise BadInput(f"cannot import module {module_name!r}: {exc}") from None
    except Exception as exc:
        raise BadInput(f"importing module {module_name!r} failed: {type(exc).__name__}: {exc}") from None
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise BadInput(f"module {module_name!r} has no attribute {attribute!r}")
        found = getattr(found, part)
    if isinstance(found, BaseNode):
        raise BadInput(f"{target} is a node, not a rendered graph (render a NodeCompose holding it)")
    what = target
    if not is_rendered_compose(found) and callable(found) and not isinstance(found, type):
        try:
            found = found()
        except Exception as exc:
            raise BadInput(f"{target}() raised {type(exc).__name__}: {exc}") from None
        what = f"{target}() returned {type(found).__name__}, which"
    if isinstance(found, type) or not is_rendered_compose(found):
        raise BadInput(f"{what} is not a rendered graph (render the compose: NodeCompose(...).render())")
    return found


def _overlay(path: str | None, graph: Any) -> Overlay | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as exc:
        raise BadInput(f"cannot read snapshot {path!r}: {exc.strerror or exc}") from None
    try:
        return Overlay.of_snapshot(data, graph)
    except (PictureError, ValueError) as exc:
        raise BadInput(f"snapshot {path!r}: {exc}") from None


def _write(text: str, path: str | None) -> None:
    if path is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        with open(path, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(text)
    except OSError as exc:
        raise BadInput(f"cannot write {path!r}: {exc.strerror or exc}") from None


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


def graph_command(args: argparse.Namespace) -> int:
    """Draw the graph the arguments name; the exit code."""
    try:
        if args.format not in FORMATS:
            raise BadInput(f"unknown format {args.format!r}: use one of {', '.join(FORMATS)}")
        graph = load_graph(args.target)
        text = export(graph, args.format, overlay=_overlay(args.snapshot, graph))
        _write(text, args.output)
    except (BadInput, PictureError) as exc:
        code = EXIT_FAILED if isinstance(exc, (GraphvizNotFound, GraphvizFailed)) else EXIT_BAD_INPUT
        sys.stderr.write(f"{PROG} graph: error: {_one_line(str(exc))}\n")
        return code
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the subcommand `argv` names (default: `sys.argv[1:]`); the exit code."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    return graph_command(args)


__all__ = ["COMMANDS", "BadInput", "graph_command", "load_graph", "main"]
