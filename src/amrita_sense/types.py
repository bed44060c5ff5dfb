"""Public value types: the program counter, the bounded stack, the DI cache record."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from amrita_sense.core import PointerVector, Stack


class LRUCache(OrderedDict):
    """A small least-recently-used mapping with `maxsize` and `currsize`."""

    def __init__(self, maxsize: int) -> None:
        super().__init__()
        self.maxsize = maxsize

    @property
    def currsize(self) -> int:
        return len(self)

    def __getitem__(self, key: Any) -> Any:
        value = super().__getitem__(key)
        self.move_to_end(key)
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        if key in self:
            return self[key]
        return default

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.maxsize:
            self.popitem(last=False)


@dataclass
class DICache:
    """Per-interpreter DI cache record: the pools' type fingerprint, its validity, and the LRU."""

    args_hash: int
    hash_trustable: bool
    payload: LRUCache = field(default_factory=lambda: LRUCache(2048))


__all__ = ["DICache", "PointerVector", "Stack"]
