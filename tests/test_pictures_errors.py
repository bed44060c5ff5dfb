"""What the exporters refuse (typed errors), SVG without Graphviz, and label escaping."""

from __future__ import annotations

import pytest

from amrita_sense import NodeCompose
from amrita_sense.node.wrapper import Node
from amrita_sense.pictures import (
    GraphvizFailed,
    GraphvizNotFound,
    NotARenderedGraph,
    PictureError,
    UnknownFormat,
    export,
    picture_of,
    svg,
    to_dot,
    to_mermaid,
    to_svg,
)
from amrita_sense.pictures.text import dot_text, mermaid_text
from support.pictures_support import KIND_PROGRAMS, require_dot

step = Node()(lambda: None)


@pytest.mark.parametrize(
    "thing",
    [None, 42, "graph", NodeCompose(step), step, NodeCompose, type(KIND_PROGRAMS["sequence"]()), object()],
    ids=["none", "int", "str", "unrendered", "node", "class", "rendered-class", "object"],
)
@pytest.mark.parametrize("exporter", [to_mermaid, to_dot, to_svg, picture_of])
def test_things_that_are_not_rendered_graphs(thing, exporter):
    with pytest.raises(NotARenderedGraph) as caught:
        exporter(thing)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, PictureError)


def test_a_nested_segment_is_not_a_top_level_graph():
    graph = NodeCompose(step, NodeCompose(step, step)).render()
    with pytest.raises(NotARenderedGraph, match="top-level"):
        to_mermaid(graph[1])


def test_unknown_formats_and_overlays():
    graph = KIND_PROGRAMS["sequence"]()
    with pytest.raises(UnknownFormat):
        export(graph, "png")
    with pytest.raises(TypeError):
        to_mermaid(graph, overlay="pointer")


def test_svg_without_graphviz_says_to_install_it(monkeypatch):
    monkeypatch.setattr(svg, "find_dot", lambda: None)
    with pytest.raises(GraphvizNotFound, match="install graphviz"):
        to_svg(KIND_PROGRAMS["sequence"]())


def test_svg_with_graphviz():
    require_dot()
    text = to_svg(KIND_PROGRAMS["escaping"]())
    assert "<svg" in text and "odd_tag" in text
    assert text == to_svg(KIND_PROGRAMS["escaping"]())


def test_a_failing_dot_is_a_typed_error():
    require_dot()
    with pytest.raises(GraphvizFailed):
        svg.dot_to_svg("digraph { this is not dot")


@pytest.mark.parametrize(
    ("text", "mermaid", "dot"),
    [
        ('say "hi"', "say #34;hi#34;", 'say \\"hi\\"'),
        ("a\nb", "a<br>b", "a\\nb"),
        ("<b>&amp;", "#60;b#62;#38;amp#59;", "<b>&amp;amp;"),
        ("back\\slash", "back#92;slash", "back\\\\slash"),
        ("pipe|#;", "pipe#124;#35;#59;", "pipe|#;"),
        ("ü😀", "#252;#128512;", "ü😀"),
        ("bell\x07", "bell#92;x07", "bell\\\\x07"),
        ("lone\ud800", "lone#92;ud800", "lone\\\\ud800"),
        ("[x] {y} (z)", "[x] {y} (z)", "[x] {y} (z)"),
        ("%% `md` fa:fa-car", "#37;#37; #96;md#96; fa#58;fa-car", "%% `md` fa:fa-car"),
    ],
)
def test_escaping(text, mermaid, dot):
    assert mermaid_text(text) == mermaid
    assert dot_text(text) == dot
    assert mermaid_text(text).isascii()
