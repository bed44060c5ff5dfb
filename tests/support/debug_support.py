"""Nodes for the debugger tests: each records its tag (its name) in a log and returns it."""

from __future__ import annotations

from amrita_sense import Node, NodeCompose


def recorder(log: list, name: str):
    """An inline node tagged `name` that appends `name` to `log` and returns it."""

    @Node(tag=name, wrap_to_async=False)
    def record():
        log.append(name)
        return name

    return record


def chain(log: list, names: str) -> NodeCompose:
    """One recorder per character of `names`, in order."""
    return NodeCompose(*(recorder(log, name) for name in names))
