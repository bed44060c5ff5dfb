"""Nodes, composes and rendered graphs."""

from .core import Node as NodeType
from .core import NodeCompose, NodeComposeRendered
from .self_compile import SelfCompileInstruction
from .wrapper import Node

__all__ = ["Node", "NodeCompose", "NodeComposeRendered", "NodeType", "SelfCompileInstruction"]
