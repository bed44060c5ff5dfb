"""A small agent-shaped graph to draw: a plan step, a guarded action, a loop, an answer.

    python -m amrita_sense graph examples.pictures_graph:graph --format mermaid
    python -m amrita_sense graph examples.pictures_graph:graph --format svg -o graph.svg   # needs Graphviz

The README's picture (docs/images/graph-example.png) is this graph: `dot -Tpng` over `--format dot`.
"""

from __future__ import annotations

from amrita_sense import Node, NodeCompose
from amrita_sense.instructions import IF, WHILE


@Node(wrap_to_async=False)
def plan() -> None:
    """Decide what to do."""


@Node(wrap_to_async=False)
def ready() -> bool:
    return True


@Node(wrap_to_async=False)
def act() -> None:
    """Do one step."""


@Node(wrap_to_async=False)
def more() -> bool:
    return False


@Node(wrap_to_async=False)
def answer() -> None:
    """Say what was done."""


def graph():
    """The rendered graph (`python -m amrita_sense graph` calls this)."""
    return NodeCompose(plan, IF(ready, act), WHILE(more).ACTION(act), answer).render()


if __name__ == "__main__":
    from amrita_sense.pictures import to_mermaid

    print(to_mermaid(graph()))
