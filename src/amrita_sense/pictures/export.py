"""The exporters by format: Mermaid text, DOT text, SVG (through Graphviz), with an overlay."""

from __future__ import annotations

from typing import Any

from amrita_sense.pictures.dot import render_dot
from amrita_sense.pictures.errors import UnknownFormat
from amrita_sense.pictures.mermaid import render_mermaid
from amrita_sense.pictures.model import GraphPicture, picture_of
from amrita_sense.pictures.overlay import NodeMark, Overlay
from amrita_sense.pictures.svg import dot_to_svg

FORMATS = ("mermaid", "dot", "svg")


def _picture(graph: Any) -> GraphPicture:
    return graph if isinstance(graph, GraphPicture) else picture_of(graph)


def _marks(picture: GraphPicture, overlay: Overlay | None) -> dict[str, NodeMark]:
    if overlay is None:
        return {}
    if not isinstance(overlay, Overlay):
        raise TypeError(f"overlay must be an Overlay or None, not {type(overlay).__name__}")
    return overlay.marks(picture)


def to_mermaid(graph: Any, *, overlay: Overlay | None = None) -> str:
    """A rendered graph (or its `GraphPicture`) as Mermaid flowchart text."""
    picture = _picture(graph)
    return render_mermaid(picture, _marks(picture, overlay))


def to_dot(graph: Any, *, overlay: Overlay | None = None) -> str:
    """A rendered graph (or its `GraphPicture`) as Graphviz DOT text."""
    picture = _picture(graph)
    return render_dot(picture, _marks(picture, overlay))


def to_svg(graph: Any, *, overlay: Overlay | None = None) -> str:
    """A rendered graph (or its `GraphPicture`) as SVG, laid out by Graphviz's `dot` program
    (`GraphvizNotFound` when it is not installed)."""
    return dot_to_svg(to_dot(graph, overlay=overlay))


def export(graph: Any, format: str, *, overlay: Overlay | None = None) -> str:
    """`to_mermaid`, `to_dot` or `to_svg` by name (`UnknownFormat` for any other name)."""
    exporter = {"mermaid": to_mermaid, "dot": to_dot, "svg": to_svg}.get(format)
    if exporter is None:
        raise UnknownFormat(f"unknown picture format {format!r}: use one of {', '.join(FORMATS)}")
    return exporter(graph, overlay=overlay)


__all__ = ["FORMATS", "export", "to_dot", "to_mermaid", "to_svg"]
