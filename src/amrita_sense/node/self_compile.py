"""Instructions that expand themselves into a source compose when rendered (1.1.3's module path;
the class lives in `node.core`, beside the renderer that expands it)."""

from amrita_sense.node.core import SelfCompileInstruction

__all__ = ["SelfCompileInstruction"]
