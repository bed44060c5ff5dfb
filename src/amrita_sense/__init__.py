"""amrita-sense-turbo: a compiled, drop-in runtime for AmritaSense workflows.

`IMPLEMENTATION` says which core loaded: "cython" (the compiled `_sense_core`)
or "python" (the pure build); `__version__` is amrita-sense-turbo's version (its
API is amrita-sense 1.1.3's).
"""

from . import _unsafe
from ._version import __version__ as __version__  # re-exported
from .core import IMPLEMENTATION
from .di.signature import sign_func
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
from .hook.event import BaseEvent
from .hook.matcher import EventRegistry, Matcher, MatcherFactory
from .hook.on import on_event
from .instructions import (
    ALIAS,
    ARCHIVED_NODES,
    CALL,
    DO,
    GOTO,
    IF,
    INTERRUPT,
    INTERRUPT_INTO,
    INTERRUPT_KEEP_CTX,
    INTERRUPT_RET,
    INVOKE,
    JMP,
    NOP,
    PUSH_AND_GOTO,
    PUSH_STACK,
    RESET,
    RET_FAR,
    SUSPEND,
    TRIGGER_EVENT,
    WHILE,
    Try,
)
from .node import Node, NodeCompose, NodeComposeRendered, NodeType
from .runtime.deps import POINTER_DEPENDS
from .runtime.workflow import WorkflowInterpreter
from .types import PointerVector, Stack

__all__ = [
    "ALIAS",
    "ARCHIVED_NODES",
    "CALL",
    "DO",
    "GOTO",
    "IF",
    "IMPLEMENTATION",
    "INTERRUPT",
    "INTERRUPT_INTO",
    "INTERRUPT_KEEP_CTX",
    "INTERRUPT_RET",
    "INVOKE",
    "JMP",
    "NOP",
    "POINTER_DEPENDS",
    "PUSH_AND_GOTO",
    "PUSH_STACK",
    "RESET",
    "RET_FAR",
    "SUSPEND",
    "TRIGGER_EVENT",
    "Try",
    "WHILE",
    "AliasNotFoundError",
    "BaseEvent",
    "DependsDeclarationError",
    "DependsException",
    "DependsInjectFailed",
    "DependsResolveFailed",
    "EventRegistry",
    "GraphBuildError",
    "IllegalState",
    "InterruptNotice",
    "Matcher",
    "MatcherFactory",
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
    "on_event",
    "sign_func",
]
