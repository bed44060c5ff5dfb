"""The abstract contracts of source composes, rendered graphs and address calculators."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar

Compose_T = TypeVar("Compose_T", bound="AbstractCompose")
Calc_T = TypeVar("Calc_T", bound="AbstractAddressCalculator")


class AbstractComposeOriginal(ABC, Generic[Compose_T]):
    """A source container: children are nodes, composes or self-compiling instructions."""

    @abstractmethod
    def __init__(self, *nodes: Any): ...

    @abstractmethod
    def __iter__(self): ...

    @abstractmethod
    def __rshift__(self, other: Any): ...

    @abstractmethod
    def render(self) -> Compose_T: ...

    @classmethod
    @abstractmethod
    def get_builder(cls) -> type[Compose_T]: ...


class AbstractCompose(ABC, Generic[Calc_T]):
    """A rendered graph: indexable by position, read-only at run time."""

    __rendered_compose__: bool = True

    @abstractmethod
    def __init__(self, compose: Any): ...

    @property
    @abstractmethod
    def calc(self) -> Calc_T: ...

    @abstractmethod
    def __getitem__(self, key: int) -> Any: ...

    @abstractmethod
    def __bool__(self) -> bool: ...

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def _build(self, current_path: list[int] | None = None, top: Any = None) -> None: ...


class AbstractAddressCalculator(ABC, Generic[Compose_T]):
    """Resolves aliases and addresses in a rendered graph and advances pointers."""

    @abstractmethod
    def __init__(self, graph: Compose_T): ...

    @abstractmethod
    def resolve_alias(self, alias: str) -> list[int]: ...

    @abstractmethod
    def find_addr_safe(self, addr: list[int]) -> Any: ...

    @abstractmethod
    def find_addr(self, addr: list[int]) -> Any: ...

    @abstractmethod
    def advance(self, pointer: Any) -> bool: ...


def is_rendered_compose(obj: Any) -> bool:
    """Duck test for a rendered graph (reads `__rendered_compose__`)."""
    return getattr(obj, "__rendered_compose__", False) is True
