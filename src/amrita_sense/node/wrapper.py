"""The `@Node(...)` decorator factory."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, Protocol, TypeVar, overload

from amrita_sense.policies import PolicyNode, Retry, make_policy

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


def Node(
    tag: str | None = None,
    wrap_to_async: bool = True,
    address_able: bool = True,
    *,
    timeout: float | None = None,
    idle_timeout: float | None = None,
    retry: Retry | None = None,
    fallback: Any = None,
    mark_void: bool = False,
) -> NodeDecorator:
    """Turn a plain or `async def` function into a workflow node.

    `tag` names the node's suspend point (default `NodeSuspend::<function name>`);
    `wrap_to_async` runs a sync function in a worker thread; `address_able`
    lets jumps and aliases target it. The keyword-only arguments declare the node's
    policy (`amrita_sense.policies`): `timeout` and `idle_timeout` in seconds, `retry`
    a `Retry`, `fallback` a node (or a tuple of nodes) that runs when the attempts run
    out, `mark_void` markers on the stream around attempts. Without them the node is
    a plain node, as in 1.1.3.
    """
    if timeout is None and idle_timeout is None and retry is None and fallback is None and mark_void is False:

        def wrapper(func: Callable[..., Any]) -> _Node[Any]:
            return _Node(func, tag, wrap_to_async, address_able, sys._getframe(1))

        return wrapper  # type: ignore[return-value]  # the overloads of NodeDecorator describe it

    def with_policy(func: Callable[..., Any]) -> _Node[Any]:
        policy = make_policy(
            func, timeout=timeout, idle_timeout=idle_timeout, retry=retry, fallback=fallback, mark_void=mark_void
        )
        return PolicyNode(func, tag, wrap_to_async, address_able, sys._getframe(1), policy)

    return with_policy  # type: ignore[return-value]


__all__ = ["Node"]
