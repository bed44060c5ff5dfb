"""The `@Node(...)` decorator factory."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .core import Node as _Node


def Node(tag: str | None = None, wrap_to_async: bool = True, address_able: bool = True):
    """Turn a plain or `async def` function into a workflow node.

    `tag` names the node's suspend point (default `NodeSuspend::<function name>`);
    `wrap_to_async` runs a sync function in a worker thread; `address_able`
    lets jumps and aliases target it.
    """

    def wrapper(func: Callable[..., Any]) -> _Node:
        return _Node(func, tag, wrap_to_async, address_able, sys._getframe(1))

    return wrapper


__all__ = ["Node"]
