"""Lifecycle scopes for generator (context-manager) dependencies.

A generator provider yields its value and runs its teardown when the scope
that opened it closes. Scopes nest: a `CALL` scope closes before the
`DISPATCH` or `WORKFLOW` scope around it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from contextlib import AbstractAsyncContextManager, AbstractContextManager, AsyncExitStack
from enum import Enum
from typing import Any

__all__ = ["LifecycleScope", "Scope", "lift_sync_context"]


class Scope(str, Enum):
    """How long a generator dependency's value stays open."""

    CALL = "call"
    """One node call or one handler call."""

    DISPATCH = "dispatch"
    """One `trigger_event` dispatch: every handler of that event."""

    WORKFLOW = "workflow"
    """One interpreter run (kept open across a panic or a suspend, for the resume)."""


class _LiftedContext(AbstractAsyncContextManager):
    """A synchronous context manager presented as an asynchronous one."""

    __slots__ = ("_cm",)

    def __init__(self, cm: AbstractContextManager[Any]) -> None:
        self._cm = cm

    async def __aenter__(self) -> Any:
        return self._cm.__enter__()

    async def __aexit__(self, exc_type, exc, tb) -> bool | None:
        return self._cm.__exit__(exc_type, exc, tb)


def lift_sync_context(cm: AbstractContextManager[Any]) -> AbstractAsyncContextManager[Any]:
    """Wrap a synchronous context manager so an `AsyncExitStack` can enter it.

    Sync and async providers then share one stack and one LIFO teardown order.
    """
    return _LiftedContext(cm)


class LifecycleScope:
    """An exit stack plus the values it produced, one per key.

    `acquire(key, cm_factory)` enters `cm_factory()` the first time a key is
    seen and returns the same value afterwards. `aclose()` runs the teardowns
    in reverse order of entry; it is idempotent. The scope is also an async
    context manager that closes itself on exit.
    """

    __slots__ = ("_closed", "_stack", "_values", "scope")

    def __init__(self, scope: Scope | str) -> None:
        self.scope = scope if type(scope) is Scope else Scope(scope)
        self._stack: AsyncExitStack | None = None  # created on the first acquire
        self._values: dict[Hashable, Any] = {}
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once `aclose()` ran."""
        return self._closed

    @property
    def active(self) -> bool:
        """True while the scope still accepts new values."""
        return not self._closed

    @property
    def unused(self) -> bool:
        """True while the scope is open and nothing was ever entered in it."""
        return self._stack is None and not self._closed

    async def acquire(self, key: Hashable, cm_factory: Callable[[], AbstractAsyncContextManager[Any]], /) -> Any:
        """The value for `key`, entering `cm_factory()` on first use.

        Raises `RuntimeError` once the scope is closed.
        """
        values = self._values
        if key in values:
            return values[key]
        if self._closed:
            raise RuntimeError(f"Cannot acquire a resource from an inactive {self.scope.value!r} scope")
        stack = self._stack
        if stack is None:
            stack = self._stack = AsyncExitStack()
        value = await stack.enter_async_context(cm_factory())
        values[key] = value
        return value

    async def aclose(self) -> None:
        """Run every teardown, last opened first. Calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        stack, self._stack = self._stack, None
        self._values.clear()
        if stack is not None:
            await stack.aclose()

    async def __aenter__(self) -> LifecycleScope:
        if not self.active:
            raise RuntimeError(f"{self.scope.value!r} scope has already been closed")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._values)} open"
        return f"<LifecycleScope {self.scope.value} ({state})>"
