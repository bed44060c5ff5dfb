"""Nodes, source composes and rendered graphs."""

from __future__ import annotations

import inspect
import sys
import threading
import time
import types
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from amrita_sense._classmemo import ClassMemo
from amrita_sense.di.signature import sign_func
from amrita_sense.exceptions import GraphBuildError, InvalidOperand, NullPointerException
from amrita_sense.logging import debug_log, engine_debug_enabled, logger
from amrita_sense.node.abc_base import AbstractCompose, AbstractComposeOriginal, is_rendered_compose
from amrita_sense.node.addressing import AddressCalculator
from amrita_sense.node.table import build_program
from amrita_sense.utils import isabstractmethod

NODE_T = TypeVar("NODE_T", covariant=True)


def _is_coroutine_function(func: Any) -> bool:
    code = getattr(func, "__code__", None)
    if code is not None and type(func) is types.FunctionType:
        return bool(code.co_flags & inspect.CO_COROUTINE)
    return inspect.iscoroutinefunction(func)


class BaseNode:
    """Base of every node and instruction.

    Subclasses call `_init(func, tag, wrap_to_async, address_able, frame)`.
    `_pre_check(interpreter)` runs before each execution and
    `_post_compile(rendered_top)` once after the top-level graph is built,
    when overridden; the abstract defaults are skipped.
    """

    tag: str
    func: Any
    wrap_to_async: bool
    address_able: bool
    is_coro: bool
    __sdb_dis__: Any = None
    __sdb_cmt__: Any = None
    _names_a_node = False
    """True for ALIAS: rendering registers `self.alias` in the graph's alias map and forwards
    the compile hook of the node it names (`self.node`)."""

    def _init(self, func, tag, wrap_to_async, address_able, frame=None) -> None:
        if not callable(func):
            raise InvalidOperand(f"a node wraps a callable, not {type(func).__name__}")
        if tag is not None and not isinstance(tag, str):
            raise InvalidOperand(f"a node's tag must be a string or None, not {type(tag).__name__}")
        self.fun_sign = sign_func(func)
        self.fun_frame = frame or sys._getframe(1)
        self.func = func
        self.is_coro = _is_coroutine_function(func)
        self.tag = tag or sys.intern(f"NodeSuspend::{getattr(func, '__name__', type(func).__name__)}")
        self.wrap_to_async = wrap_to_async
        self.address_able = address_able

    def __repr__(self) -> str:
        return f"<Node at {id(self)}:{self.tag}>"

    def __str__(self) -> str:
        return self.tag

    @abstractmethod
    def _pre_check(self, pointer: Any) -> None: ...

    @abstractmethod
    def _post_compile(self, compose: Any) -> None: ...

    @abstractmethod
    def __call__(self, *args: Any, **kwds: Any) -> Any: ...

    def __rshift__(self, other: Any) -> NodeCompose:
        return NodeCompose(self, other)

    def as_compose(self) -> NodeCompose:
        return NodeCompose(self)


if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import FrameType

    from typing_extensions import ParamSpec

    NODE_P = ParamSpec("NODE_P", default=...)

    class Node(BaseNode, Generic[NODE_T, NODE_P]):
        """A node wrapping one function; calling the node calls the function.

        For type checkers `Node[T, P]`: `T` is what the function returns (awaited, for an
        `async def`), as in 1.1.3's `Node[T]` (which still means `Node[T, ...]`), and `P`
        its parameters, so a decorated function keeps its signature."""

        func: Callable[NODE_P, NODE_T | Awaitable[NODE_T]]
        fun_frame: FrameType

        def __init__(
            self,
            func: Callable[NODE_P, NODE_T | Awaitable[NODE_T]],
            tag: str | None = None,
            wrap_to_async: bool = True,
            address_able: bool = True,
            frame: FrameType | None = None,
        ) -> None: ...

        def __call__(self, *args: NODE_P.args, **kwargs: NODE_P.kwargs) -> Any: ...

else:

    class Node(BaseNode, Generic[NODE_T]):
        """A node wrapping one function; calling the node calls the function."""

        __slots__ = ("address_able", "fun_frame", "fun_sign", "func", "is_coro", "tag", "wrap_to_async")

        def __init__(self, func, tag=None, wrap_to_async=True, address_able=True, frame=None):
            self._init(func, tag, wrap_to_async, address_able, frame or sys._getframe(1))

        @property
        def __call__(self):
            return self.func


_REFUSE, _ACCEPT, _CHECK = "refuse", "accept", "check"
_MISSING = object()


def _source_verdict(cls: type) -> str:
    """Whether a source compose may hold instances of `cls`: never (a compose, a rendered graph),
    always (the class has no `__rendered_compose__` and no `__getattr__` that could give one), or
    per object. (An instance attribute `__rendered_compose__` is not looked for: rendered graphs
    carry it on their class.)"""
    flag = getattr(cls, "__rendered_compose__", _MISSING)
    if flag is True or issubclass(cls, AbstractCompose):
        return _REFUSE
    if flag is _MISSING and not hasattr(cls, "__getattr__"):
        return _ACCEPT
    return _CHECK


_SOURCE_VERDICTS = ClassMemo(_source_verdict)
# threads: a race only recomputes the same verdict (see ClassMemo)
_ACCEPTED: set[type] = set()
"""The package's own and builtin classes whose instances a source composition always takes: `>>`
looks its operand's class up here first (one set lookup)."""
# threads: grows only, by one `add` of a class whose verdict is fixed; a missed add only costs a lookup


def _refuse_rendered(node: Any, error: type[TypeError] = InvalidOperand) -> None:
    """`error` for what a source composition cannot hold (a compose, a rendered graph): 1.1.3's
    `TypeError` where it checks (the constructor), `InvalidOperand` (also a TypeError) at `>>`."""
    kind = type(node)
    verdict = _SOURCE_VERDICTS(kind)
    if verdict is _ACCEPT:
        if _SOURCE_VERDICTS.forever.get(kind) is _ACCEPT:
            _ACCEPTED.add(kind)
        return
    if verdict is _REFUSE or isinstance(node, AbstractCompose) or is_rendered_compose(node):
        raise error("A rendered composition cannot be used in a source composition")


class NodeCompose(AbstractComposeOriginal["NodeComposeRendered"]):
    """A mutable source sequence; `>>` appends in place and returns the same compose."""

    __slots__ = ("_graph",)

    def __init__(self, *nodes: Any):
        for kind in set(map(type, nodes)):  # per class: a long chain is mostly one class
            if _SOURCE_VERDICTS(kind) is not _ACCEPT:
                for node in nodes:
                    if type(node) is kind:
                        _refuse_rendered(node, TypeError)
        self._graph = list(nodes)

    def __iter__(self):
        return iter(self._graph)

    def __rshift__(self, other: Any) -> NodeCompose:
        if type(other) not in _ACCEPTED:
            _refuse_rendered(other)
        self._graph.append(other)
        return self

    def render(self) -> NodeComposeRendered:
        """Compile this compose into an executable graph."""
        debug_log(f"Size of the main graph is : {len(self._graph)}")
        started = time.perf_counter()
        rendered = NodeComposeRendered(self)
        rendered._build()
        if engine_debug_enabled():
            logger.debug(f"node compose rendered, cost: {time.perf_counter() - started}s")
        return rendered

    @classmethod
    def get_builder(cls) -> type[NodeComposeRendered]:
        return NodeComposeRendered


class NodeComposeRendered(AbstractCompose[AddressCalculator]):
    """A compiled graph segment; the top-level one also owns `calc` and the node table."""

    __slots__ = ("_calc", "_collected_hooks", "_graph", "_original", "_program", "alias2vector_map")
    _calc: AddressCalculator
    _collected_hooks: Any  # the top graph's post-compile hooks while it is being built, else None
    _graph: list[Any]
    _original: Any
    _program: Any

    def __init__(self, original_graph: Any):
        self._original = original_graph
        self.alias2vector_map: dict[str, list[int]] = {}
        self._collected_hooks = None
        self._program = None

    @property
    def calc(self) -> AddressCalculator:
        try:
            return self._calc
        except AttributeError:
            raise AttributeError("only the top-level rendered graph has an address calculator") from None

    def __bool__(self) -> bool:
        return bool(getattr(self, "_graph", False))

    def __len__(self) -> int:
        graph = getattr(self, "_graph", None)
        return len(graph) if graph is not None else -1

    def __getitem__(self, key: int) -> Any:
        try:
            return self._graph[key]
        except IndexError:
            raise NullPointerException(f"NodeComposeRendered index out of range: {key}") from None
        except AttributeError:
            raise NullPointerException("NodeComposeRendered is not built") from None

    def _build(self, current_path: list[int] | None = None, top: NodeComposeRendered | None = None) -> None:
        if hasattr(self, "_graph"):
            raise GraphBuildError("NodeComposeRendered is already built")
        if not self._original:
            raise GraphBuildError("No original graph to build")
        path = current_path or []
        top = top if top is not None else self  # a top still being built is falsy
        self._graph = []
        if top is self:
            self._collected_hooks = []
        self._render_children(list(self._original), path, top)
        self._original = None
        if top is self:
            self._finish_top()

    def _finish_top(self) -> None:
        self._calc = AddressCalculator(self)
        hooks, self._collected_hooks = self._collected_hooks, []
        for hook in hooks:
            hook(self)

    def _render_children(self, nodes: list, path: list[int], top: NodeComposeRendered) -> None:
        graph = self._graph
        if all(_KINDS(kind) is _PLAIN for kind in set(map(type, nodes))):
            graph.extend(nodes)  # plain nodes only: they render as themselves
            return
        hooks = top._collected_hooks
        for idx, node in enumerate(nodes):
            kind = _KINDS.forever.get(type(node)) or _KINDS(type(node))
            if kind is _PLAIN:
                graph.append(node)
            elif kind is _HOOKED:
                hooks.append(node._post_compile)
                graph.append(node)
            else:
                graph.append(self._render_special(kind, node, [*path, idx], top))

    def _render_special(self, kind: str, node: Any, node_path: list[int], top: NodeComposeRendered) -> Any:
        if kind is _COMPOSE:
            return _render_nested(node, node_path, top)
        if kind is _SELF_COMPILING:
            return _render_nested(node.extract(), node_path, top)
        if kind is _ALIAS:
            _register_alias(top, node.alias, node, node_path)
            _collect_hook(top, node.node)
            return node
        raise InvalidOperand(f"cannot place {node!r} at {node_path}: not a node, compose or instruction")

    def _rebuild_program(self) -> None:
        """Recompile the node table after a slot was swapped in place (if one was built yet)."""
        with _program_lock:
            old = self._program
            if old is not None:
                self._program = build_program(self)
                old.successor = self._program


_PLAIN, _HOOKED, _ALIAS, _COMPOSE, _SELF_COMPILING, _INVALID = (
    "plain",
    "hooked",
    "alias",
    "compose",
    "self-compiling",
    "invalid",
)


def _classify(cls: type) -> str:
    """How a child of this class renders (see `_KINDS`)."""
    if issubclass(cls, AbstractComposeOriginal):
        kind = _COMPOSE
    elif issubclass(cls, SelfCompileInstruction):
        kind = _SELF_COMPILING
    elif issubclass(cls, BaseNode) and cls._names_a_node:
        kind = _ALIAS
    elif issubclass(cls, BaseNode):
        kind = _PLAIN if isabstractmethod(cls._post_compile) else _HOOKED
    else:
        kind = _INVALID
    return kind


_KINDS = ClassMemo(_classify)
"""How a child renders, per class."""
# threads: a race only recomputes the same kind (see ClassMemo)


def _render_nested(source: Any, path: list[int], top: NodeComposeRendered) -> Any:
    rendered = source.get_builder()(source)
    rendered._build(path, top)
    return rendered


def _register_alias(top: NodeComposeRendered, alias: str, node: Any, path: list[int]) -> None:
    if not node.address_able:
        raise ValueError(f"Alias node `{alias}` cannot be used in an addressable node.")
    if alias in top.alias2vector_map:
        raise GraphBuildError(f"Alias {alias} already exists in address `{top.alias2vector_map[alias]}`")
    top.alias2vector_map[alias] = path


def _collect_hook(top: NodeComposeRendered, node: Any) -> None:
    hook = node._post_compile
    if not isabstractmethod(hook):
        top._collected_hooks.append(hook)


_program_lock = threading.RLock()
"""threads: guards the first compile of a graph's node table (`program_of`) and its recompile after a slot
swap (`_rebuild_program`), so a graph shared by threads gets one table and every interpreter the
same one (its plan tables, its successor after a swap). Reentrant: compiling a graph may compile
another. Taken only when the table is missing or rebuilt, never on the path that finds it."""


def program_of(graph: Any) -> Any:
    """The node table of a top-level rendered graph, compiled on first use and then shared."""
    prog = getattr(graph, "_program", None)
    if prog is None:
        with _program_lock:
            prog = getattr(graph, "_program", None)  # another thread may have compiled it meanwhile
            if prog is None:
                prog = build_program(graph)
                try:
                    graph._program = prog
                except AttributeError:
                    pass
    while prog.successor is not None:
        prog = prog.successor
    return prog


_LEADER: list[Any] = []
"""The node `instr >> x` puts in front: NOP, given by `instructions.workfl_ctrl` through `lead_with`
when the package is imported (before any compose can be built)."""
# threads: immutable once published (set once, at import, under the import lock)


def lead_with(node: Any) -> None:
    """Make `node` the leader of every `instr >> x` compose (called once, with NOP)."""
    _LEADER[:] = [node]


class SelfCompileInstruction(ABC):
    """A macro: `extract()` returns the source compose it stands for.

    Rendered in place as one nested segment. `>>` puts a NOP in front:
    `instr >> x` is `NodeCompose(NOP, instr, x)`.
    """

    @abstractmethod
    def extract(self) -> Any: ...

    def __rshift__(self, other: Any) -> Any:
        return NodeCompose(_LEADER[0], self, other)
