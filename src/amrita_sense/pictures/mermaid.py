"""A `GraphPicture` as Mermaid flowchart text (`flowchart TD`).

Every node is declared inside the subgraph of its cluster before any edge (Mermaid places a
node where it first appears), then the edges in picture order, then the style classes.
"""

from __future__ import annotations

from amrita_sense.pictures.model import GraphPicture, PictureEdge
from amrita_sense.pictures.overlay import NodeMark
from amrita_sense.pictures.text import mermaid_text

SHAPES = {
    "step": ('["', '"]'),
    "test": ('{"', '"}'),
    "else": ('[/"', '"/]'),
    "loop": ('[\\"', '"\\]'),
    "jump": ('>"', '"]'),
    "call": ('[["', '"]]'),
    "ret": ('(["', '"])'),
    "try": ('{{"', '"}}'),
    "nop": ('(("', '"))'),
    "fork": ('[("', '")]'),
    "stop": ('[/"', '"\\]'),
    "empty": ('["', '"]'),
}
"""The opening and closing of each node kind's shape (the label goes between, quoted)."""

ARROWS = {
    "next": "-->",
    "branch": "-->",
    "merge": "-->",
    "subcall": "-.-o",
    "jump": "-.->",
    "back": "==>",
    "call": "-.->",
    "return": "-.->",
    "catch": "-.-x",
    "fork": "==o",
}
"""The link of each edge kind: solid flow, dotted jumps and calls, thick back edges and forks."""

CLASS_DEFS = (
    ("empty", "stroke-dasharray:4 3"),
    ("pointer", "fill:#ffe066,stroke:#d9480f,stroke-width:3px"),
    ("returnaddr", "fill:#d0ebff,stroke:#1c7ed6,stroke-width:2px"),
    ("contextaddr", "fill:#e5dbff,stroke:#7048e8,stroke-width:2px"),
    ("visited1", "fill:#ebfbee"),
    ("visited2", "fill:#b2f2bb"),
    ("visited3", "fill:#69db7c"),
)
"""The style classes the nodes may use (`empty` nodes, and the overlay's marks)."""


def render_mermaid(picture: GraphPicture, marks: dict[str, NodeMark]) -> str:
    """The Mermaid text of `picture`, with `marks` (an overlay's) applied."""
    lines = ["flowchart TD"]
    by_id = {node.id: node for node in picture.nodes}
    titles = {cluster.id: cluster.label for cluster in picture.clusters}
    members = picture.members()

    def emit(cluster: str | None, indent: str) -> None:
        for kind, ident in members[cluster]:
            if kind == "node":
                lines.append(indent + _node(by_id[ident].id, by_id[ident].kind, by_id[ident].label, marks.get(ident)))
            else:
                lines.append(f'{indent}subgraph {ident}["{mermaid_text(titles[ident])}"]')
                emit(ident, indent + "  ")
                lines.append(indent + "end")

    emit(None, "  ")
    lines.extend("  " + _edge(edge) for edge in picture.edges)
    lines.extend(_classes(picture, marks))
    return "\n".join(lines) + "\n"


def _node(ident: str, kind: str, label: str, mark: NodeMark | None) -> str:
    opening, closing = SHAPES[kind]
    if mark is not None:
        label = "\n".join([label, *mark.lines])
    return f"{ident}{opening}{mermaid_text(label)}{closing}"


def _edge(edge: PictureEdge) -> str:
    arrow = ARROWS[edge.kind]
    label = f'|"{mermaid_text(edge.label)}"|' if edge.label else ""
    return f"{edge.source} {arrow}{label} {edge.target}"


def _classes(picture: GraphPicture, marks: dict[str, NodeMark]) -> list[str]:
    """The class definitions in use, then one `class` line per class (ids in picture order)."""
    members: dict[str, list[str]] = {}
    for node in picture.nodes:
        mark = marks.get(node.id)
        style = mark.style if mark is not None else ("empty" if node.kind == "empty" else None)
        if style is not None:
            members.setdefault(style, []).append(node.id)
    lines = [f"  classDef {name} {css}" for name, css in CLASS_DEFS if name in members]
    lines.extend(f"  class {','.join(members[name])} {name}" for name, _ in CLASS_DEFS if name in members)
    return lines


__all__ = ["ARROWS", "CLASS_DEFS", "SHAPES", "render_mermaid"]
