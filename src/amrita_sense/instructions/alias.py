"""ALIAS (stub: the instruction-set issue owns this module)."""

from __future__ import annotations

from amrita_sense.node.core import BaseNode


class AliasNode(BaseNode):
    def __init__(self, node: BaseNode, alias: str):
        self.node = node
        self.alias = alias
        self._init(node.func, f"Alias::{alias}", node.wrap_to_async, node.address_able)

    def __call__(self, *args, **kwargs):
        return self.node(*args, **kwargs)


def ALIAS(node: BaseNode, alias: str) -> AliasNode:
    return AliasNode(node, alias)
