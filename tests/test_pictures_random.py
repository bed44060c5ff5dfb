"""1,000 random programs through the exporters: Graphviz parses every DOT text, Mermaid's own
parser (run in node) every Mermaid text, and the model holds together (every edge joins two
drawn nodes, every cluster's parent is drawn, ids are unique)."""

from __future__ import annotations

import pytest

from amrita_sense.pictures import picture_of, to_dot, to_mermaid
from support.pictures_support import parse_dot, parse_mermaid, random_program

PROGRAMS = 1000


@pytest.fixture(scope="module")
def pictures():
    return [picture_of(random_program(seed)) for seed in range(PROGRAMS)]


def _failures(texts: list[str], verdicts: list[str | None]) -> list[str]:
    return [f"program {i}: {verdict}\n{texts[i]}" for i, verdict in enumerate(verdicts) if verdict is not None]


def test_every_picture_is_well_formed(pictures):
    for picture in pictures:
        ids = [node.id for node in picture.nodes]
        assert len(ids) == len(set(ids))
        drawn = set(ids)
        assert all(edge.source in drawn and edge.target in drawn for edge in picture.edges)
        clusters = {cluster.id for cluster in picture.clusters}
        assert len(clusters) == len(picture.clusters)
        assert all(c.parent is None or c.parent in clusters for c in picture.clusters)
        assert all(n.cluster is None or n.cluster in clusters for n in picture.nodes)


def test_the_programs_use_every_instruction_kind(pictures):
    kinds = {cluster.kind for picture in pictures for cluster in picture.clusters}
    edges = {edge.kind for picture in pictures for edge in picture.edges}
    assert {"if", "while", "do", "try", "archived", "native_if", "native_while", "native_do", "fn"} <= kinds
    assert {"fun_block", "batch_run", "graph", "segment"} <= kinds
    assert {"next", "branch", "merge", "subcall", "jump", "back", "call", "return", "catch", "fork"} <= edges


def test_graphviz_parses_every_dot_output(pictures):
    texts = [to_dot(picture) for picture in pictures]
    assert not _failures(texts, parse_dot(texts))


def test_mermaid_parses_every_mermaid_output(pictures):
    texts = [to_mermaid(picture) for picture in pictures]
    failures = _failures(texts, parse_mermaid(texts))
    assert not failures, failures[0]
