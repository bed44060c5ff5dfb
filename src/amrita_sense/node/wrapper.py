"""The `@Node(...)` decorator factory."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, Protocol, TypeVar, overload

from .core import Node as _Node

P = ParamSpec("P")
R = TypeVar("R")


class NodeDecorator(Protocol):
    """What `Node(...)` returns: turns a function into a `NodeType[R, P]` node that keeps the
    function's parameters `P`; `R` is its result (awaited, for an `async def`)."""

    @overload
    def __call__(self, func: Callable[P, Awaitable[R]], /) -> _Node[R, P]: ...

    @overload
    def __call__(self, func: Callable[P, R], /) -> _Node[R, P]: ...


def Node(tag: str | None = None, wrap_to_async: bool = True, address_able: bool = True) -> NodeDecorator:
    """Turn a plain or `async def` function into a workflow node.

    `tag` names the node's suspend point (default `NodeSuspend::<function name>`);
    `wrap_to_async` runs a sync function in a worker thread; `address_able`
    lets jumps and aliases target it.
    """

    def wrapper(func: Callable[..., Any]) -> _Node[Any]:
        return _Node(func, tag, wrap_to_async, address_able, sys._getframe(1))

    return wrapper  # type: ignore[return-value]  # the overloads of NodeDecorator describe it


__all__ = ["Node"]
