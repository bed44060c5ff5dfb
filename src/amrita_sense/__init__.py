"""amrita-sense-turbo: a compiled, drop-in runtime for AmritaSense workflows.

`IMPLEMENTATION` says which core loaded: "cython" (the compiled `_sense_core`)
or "python" (the pure twin).
"""

from . import _unsafe
from ._core import IMPLEMENTATION
from .exceptions import (
    AliasNotFoundError,
    DependsDeclarationError,
    DependsException,
    DependsInjectFailed,
    DependsResolveFailed,
    GraphBuildError,
    IllegalState,
    InterruptNotice,
    NullPointerException,
    StreamStateError,
)
from .hook.fun_typing import sign_func
from .node import Node, NodeCompose, NodeComposeRendered, NodeType
from .runtime.workflow import WorkflowInterpreter
from .types import PointerVector, Stack

__all__ = [
    "IMPLEMENTATION",
    "AliasNotFoundError",
    "DependsDeclarationError",
    "DependsException",
    "DependsInjectFailed",
    "DependsResolveFailed",
    "GraphBuildError",
    "IllegalState",
    "InterruptNotice",
    "Node",
    "NodeCompose",
    "NodeComposeRendered",
    "NodeType",
    "NullPointerException",
    "PointerVector",
    "Stack",
    "StreamStateError",
    "WorkflowInterpreter",
    "_unsafe",
    "sign_func",
]
