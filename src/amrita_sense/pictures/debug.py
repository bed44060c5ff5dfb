"""The debugger's `draw` command: a picture of the rows around the program counter.

Like the debugger's commands (`amrita_sense.debugger`), `draw(inter, around)` takes the
interpreter first and prints, and `neighbourhood` returns the text. It lives here, not in the
debugger's package, because the pictures stand above the debugger (the debugger imports nothing
of them): `from amrita_sense.pictures import draw`.
"""

from __future__ import annotations

from typing import Any

from amrita_sense.debugger._checks import require_interpreter
from amrita_sense.pictures.export import export
from amrita_sense.pictures.model import GraphPicture, picture_of
from amrita_sense.pictures.overlay import Overlay

DEFAULT_AROUND = 5
"""Rows drawn before and after the program counter by `draw`."""

TEXT_FORMATS = ("mermaid", "dot")


def window(picture: GraphPicture, center: int, around: int) -> GraphPicture:
    """The rows `center - around` .. `center + around` of the drawn graph (no sub-graph rows),
    the clusters around them and the edges between them."""
    low, high = center - around, center + around
    nodes = tuple(n for n in picture.nodes if n.graph == 0 and low <= n.row <= high)
    kept = {n.id for n in nodes}
    edges = tuple(e for e in picture.edges if e.source in kept and e.target in kept)
    return GraphPicture(nodes, edges, picture.clusters)


def neighbourhood(inter: Any, around: int = DEFAULT_AROUND, *, format: str = "mermaid") -> str:
    """The rows around `inter`'s program counter as Mermaid or DOT text, the pointer and the
    stacks marked (before the run starts, the first rows)."""
    require_interpreter(inter, "neighbourhood", "get_graph", "_pointer")
    if isinstance(around, bool) or not isinstance(around, int) or around < 0:
        raise ValueError(f"around must be a non-negative int, not {around!r}")
    if format not in TEXT_FORMATS:
        raise ValueError(f"draw shows {' or '.join(TEXT_FORMATS)} text, not {format!r}")
    overlay = Overlay.of(inter)
    picture = picture_of(inter.get_graph())
    node = picture.node_for(overlay.pointer) if overlay.pointer is not None else None
    center = node.row if node is not None else 0
    return export(window(picture, center, around), format, overlay=overlay)


def draw(inter: Any, around: int = DEFAULT_AROUND, *, format: str = "mermaid") -> None:
    """Print the picture of the rows around `inter`'s program counter (see `neighbourhood`)."""
    print(neighbourhood(inter, around, format=format))


__all__ = ["DEFAULT_AROUND", "draw", "neighbourhood", "window"]
