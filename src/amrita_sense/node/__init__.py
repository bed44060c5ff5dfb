"""Nodes, composes and rendered graphs."""

from .core import Node as NodeType
from .core import NodeCompose, NodeComposeRendered
from .dll import DLLCompose  # noqa: E402 - after core, which it builds on
from .self_compile import SelfCompileInstruction
from .wrapper import Node

__all__ = ["DLLCompose", "Node", "NodeCompose", "NodeComposeRendered", "NodeType", "SelfCompileInstruction"]
