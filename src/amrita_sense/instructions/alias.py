"""ALIAS: give a node a symbolic, addressable name."""

from __future__ import annotations

from typing import Any

from amrita_sense.instructions._support import NODE_SLOTS, require_name, require_node
from amrita_sense.node.core import BaseNode
from amrita_sense.node.self_compile import SelfCompileInstruction


class AliasNode(BaseNode):
    """A node registered in the graph's alias map under `alias`.

    It runs the wrapped node's function (tag `Alias::<alias>`) and the
    renderer forwards the wrapped node's `_post_compile`, so an aliased
    JMP / CALL / INVOKE still resolves its operands.
    """

    __slots__ = (*NODE_SLOTS, "alias", "node")
    _names_a_node = True

    def __init__(self, node: BaseNode, alias: str):
        if isinstance(node, SelfCompileInstruction):
            raise ValueError("Alias node can't be SelfCompileInstruction")
        require_node(node, "ALIAS(node)")
        require_name(alias, "ALIAS(alias)")
        self.node = node
        self._init(node.func, f"Alias::{alias}", node.wrap_to_async, True)
        self.alias = alias

    @property
    def __sdb_dis__(self) -> str:
        return f"ALIAS {self.alias}"

    @property
    def __sdb_cmt__(self) -> str:
        return f"alias for {self.node.tag}"

    def __call__(self, *args: Any, **kwds: Any) -> Any:
        return self.node(*args, **kwds)


def ALIAS(node: BaseNode, alias: str) -> AliasNode:
    """Name `node` so that JMP, CALL, INVOKE and friends can address it."""
    return AliasNode(node, alias)
