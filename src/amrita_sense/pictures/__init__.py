"""Pictures of a rendered graph: Mermaid and DOT text, SVG through Graphviz, a run drawn over it.

    graph = (alpha >> IF(ready, beta) >> gamma).render()
    print(to_mermaid(graph))                       # paste into any Mermaid viewer
    open("graph.svg", "w").write(to_svg(graph))    # needs Graphviz's `dot`
    print(to_dot(graph, overlay=Overlay.of(interp)))   # the pointer, the stacks, highlighted

`python -m amrita_sense graph module:factory --format svg|mermaid|dot [-o FILE]` does the same
from the command line. Every output is deterministic: the same bytes in every run, process and
core. The model the exporters print is `picture_of(graph)` (`amrita_sense.pictures.model`).
"""

from __future__ import annotations

from amrita_sense.pictures.debug import draw, neighbourhood
from amrita_sense.pictures.errors import (
    GraphvizFailed,
    GraphvizNotFound,
    NotARenderedGraph,
    OverlayMismatch,
    PictureError,
    UnknownFormat,
)
from amrita_sense.pictures.export import FORMATS, export, to_dot, to_mermaid, to_svg
from amrita_sense.pictures.model import GraphPicture, PictureCluster, PictureEdge, PictureNode, picture_of
from amrita_sense.pictures.overlay import NodeMark, Overlay, RunRecorder

__all__ = [
    "FORMATS",
    "GraphPicture",
    "GraphvizFailed",
    "GraphvizNotFound",
    "NodeMark",
    "NotARenderedGraph",
    "Overlay",
    "OverlayMismatch",
    "PictureCluster",
    "PictureEdge",
    "PictureError",
    "PictureNode",
    "RunRecorder",
    "UnknownFormat",
    "draw",
    "export",
    "neighbourhood",
    "picture_of",
    "to_dot",
    "to_mermaid",
    "to_svg",
]
