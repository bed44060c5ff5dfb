"""A `GraphPicture` as Graphviz DOT text (`digraph`), clusters as `subgraph cluster_...`."""

from __future__ import annotations

from amrita_sense.pictures.model import GraphPicture, PictureEdge, PictureNode
from amrita_sense.pictures.overlay import NodeMark
from amrita_sense.pictures.text import dot_text

SHAPES = {
    "step": "shape=box",
    "test": "shape=diamond",
    "else": "shape=parallelogram",
    "loop": "shape=trapezium",
    "jump": "shape=cds",
    "call": "shape=box, peripheries=2",
    "ret": "shape=oval",
    "try": "shape=hexagon",
    "nop": "shape=ellipse",
    "fork": "shape=box3d",
    "stop": "shape=octagon",
    "empty": "shape=box, style=dashed",
}
"""The attributes of each node kind's shape."""

EDGE_STYLES = {
    "next": "",
    "branch": "",
    "merge": "",
    "subcall": "style=dotted, arrowhead=odot",
    "jump": "style=dashed",
    "back": 'style=bold, color="#c92a2a"',
    "call": 'style=dashed, color="#1c7ed6"',
    "return": 'style=dotted, color="#1c7ed6"',
    "catch": 'style=dashed, color="#e8590c", arrowhead=tee',
    "fork": "style=bold, arrowhead=odot",
}
"""The attributes of each edge kind (empty: a plain solid arrow)."""

MARK_STYLES = {
    "pointer": 'style=filled, fillcolor="#ffe066", color="#d9480f", penwidth=3',
    "returnaddr": 'style=filled, fillcolor="#d0ebff", color="#1c7ed6", penwidth=2',
    "contextaddr": 'style=filled, fillcolor="#e5dbff", color="#7048e8", penwidth=2',
    "visited1": 'style=filled, fillcolor="#ebfbee"',
    "visited2": 'style=filled, fillcolor="#b2f2bb"',
    "visited3": 'style=filled, fillcolor="#69db7c"',
}
"""The attributes an overlay's mark adds to a node."""

_HEADER = (
    "digraph amrita_sense {",
    '  graph [rankdir=TB, fontname="Helvetica", fontsize=10, labeljust=l, newrank=true];',
    '  node [fontname="Helvetica", fontsize=10];',
    '  edge [fontname="Helvetica", fontsize=9];',
)


def render_dot(picture: GraphPicture, marks: dict[str, NodeMark]) -> str:
    """The DOT text of `picture`, with `marks` (an overlay's) applied."""
    lines = list(_HEADER)
    by_id = {node.id: node for node in picture.nodes}
    titles = {cluster.id: cluster.label for cluster in picture.clusters}
    members = picture.members()

    def emit(cluster: str | None, indent: str) -> None:
        for kind, ident in members[cluster]:
            if kind == "node":
                lines.append(indent + _node(by_id[ident], marks.get(ident)))
            else:
                lines.append(f"{indent}subgraph cluster_{ident} {{")
                lines.append(f'{indent}  label="{dot_text(titles[ident])}"; style=rounded; color="#868e96";')
                emit(ident, indent + "  ")
                lines.append(indent + "}")

    emit(None, "  ")
    lines.extend("  " + _edge(edge) for edge in picture.edges)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _node(node: PictureNode, mark: NodeMark | None) -> str:
    label = node.label if mark is None else "\n".join([node.label, *mark.lines])
    attributes = [f'label="{dot_text(label)}"', SHAPES[node.kind]]
    if mark is not None:
        attributes.append(MARK_STYLES[mark.style])
    return f"{node.id} [{', '.join(attributes)}];"


def _edge(edge: PictureEdge) -> str:
    attributes = [EDGE_STYLES[edge.kind]] if EDGE_STYLES[edge.kind] else []
    if edge.label:
        attributes.insert(0, f'label="{dot_text(edge.label)}"')
    suffix = f" [{', '.join(attributes)}]" if attributes else ""
    return f"{edge.source} -> {edge.target}{suffix};"


__all__ = ["EDGE_STYLES", "MARK_STYLES", "SHAPES", "render_dot"]
