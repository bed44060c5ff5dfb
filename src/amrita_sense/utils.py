"""Small helpers shared across the package."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class TimeInsighter:
    """Sync and async context manager recording `t_beg`, `t_end` and `t_diff`."""

    t_beg: datetime
    t_end: datetime
    t_diff: timedelta

    def __enter__(self) -> TimeInsighter:
        self.t_beg = datetime.now()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.t_end = datetime.now()
        self.t_diff = self.t_end - self.t_beg

    async def __aenter__(self) -> TimeInsighter:
        return self.__enter__()

    async def __aexit__(self, exc_type, exc, tb) -> None:
        self.__exit__(exc_type, exc, tb)


class Ref(Generic[T]):
    """A mutable box around one value."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value


def search_exceptions(seq: Sequence[BaseException | list | None]) -> list[BaseException]:
    """Flatten nested lists and keep only the exceptions, in order."""
    found: list[BaseException] = []
    for item in seq:
        if isinstance(item, BaseException):
            found.append(item)
        elif isinstance(item, list):
            found.extend(search_exceptions(item))
    return found


def _fingerprint_args(ava_args: tuple, ava_kwargs: Mapping[str, Any]) -> int:
    """Hash the type names of the injection pools (the DI cache key component)."""
    type_seq = tuple(type(arg).__name__ for arg in ava_args)
    kw_seq = tuple(sorted((k, type(v).__name__) for k, v in ava_kwargs.items())) if ava_kwargs else ()
    return hash((type_seq, kw_seq))


def isabstractmethod(fn: Callable) -> bool:
    """True when `fn` is still the abstract default (so the engine skips it)."""
    return getattr(fn, "__isabstractmethod__", False)
