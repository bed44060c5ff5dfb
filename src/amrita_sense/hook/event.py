"""Event base classes."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

stringSub_T = TypeVar("stringSub_T", bound=str, covariant=True)


@dataclass
class BaseEvent(ABC, Generic[stringSub_T]):
    """The base of every event.

    A subclass names its type with `get_event_type()` (and the `event_type`
    property); handlers registered for that type receive the event.
    """

    @abstractmethod
    def get_event_type(self) -> stringSub_T:
        """The event type string that selects the handlers."""
        raise NotImplementedError

    @property
    @abstractmethod
    def event_type(self) -> stringSub_T:
        """The same string as `get_event_type()`."""


@dataclass
class ConstructableEvent(BaseEvent[stringSub_T], Generic[stringSub_T]):
    """An event that `TRIGGER_EVENT` can build from an interpreter's argument pools."""

    @classmethod
    @abstractmethod
    def constructor(cls, *args: Any, **kwargs: Any) -> ConstructableEvent | Awaitable[ConstructableEvent]:
        """Build the event; its parameters are injected like a node's (sync or async)."""


__all__ = ["BaseEvent", "ConstructableEvent"]
