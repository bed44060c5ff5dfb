"""Dependency lifecycles (stub: the events/DI issue owns this package)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from enum import Enum
from typing import Any


class Scope(str, Enum):
    CALL = "call"
    DISPATCH = "dispatch"
    WORKFLOW = "workflow"


class LifecycleScope:
    """An exit stack plus a per-key value map; closes in LIFO order."""

    def __init__(self, scope: Scope | str) -> None:
        self.scope = Scope(scope)
        self._stack = AsyncExitStack()
        self._values: dict[Any, Any] = {}
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._stack.aclose()


class DependencyStore:
    def __init__(self) -> None:
        self._entries: dict[Any, Any] = {}

    def clear(self) -> None:
        self._entries.clear()


__all__ = ["DependencyStore", "LifecycleScope", "Scope"]
