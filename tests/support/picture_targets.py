"""Targets for the `python -m amrita_sense graph` tests: factories, graphs and things that are not."""

from __future__ import annotations

from amrita_sense import NodeCompose
from amrita_sense.node.wrapper import Node
from support.pictures_support import KIND_PROGRAMS


def factory():
    """A callable returning a rendered graph."""
    return KIND_PROGRAMS["if_elif_else"]()


GRAPH = KIND_PROGRAMS["try"]()
"""A rendered graph itself."""

UNRENDERED = NodeCompose(Node()(lambda: None))
"""A compose that was never rendered."""

NUMBER = 42


def returns_none():
    """A factory that forgets to return its graph."""


def raises():
    """A factory that fails."""
    raise RuntimeError("factory failed on purpose")


class Holder:
    """A graph reached through an attribute path (`Holder.graph`)."""

    graph = KIND_PROGRAMS["sequence"]()


@Node()
def a_node() -> None:
    """A node, not a graph."""
