"""Per-class values computed once, without keeping the classes alive."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any


def _lives_forever(cls: type) -> bool:
    """A builtin or a module-level class of this package: it lives as long as the process."""
    module = getattr(cls, "__module__", "")
    if module == "builtins":
        return True
    return (module == "amrita_sense" or module.startswith("amrita_sense.")) and "<locals>" not in cls.__qualname__


class ClassMemo:
    """`memo(cls)` is `compute(cls)`, computed once per class; values must not be None.

    Classes that live forever (builtins, this package's own) sit in the plain dict `forever`, which
    hot paths read first. Other classes (user classes, classes made at run time) are held by id:
    a weak reference drops the entry when its class is collected, before the id can be reused, so
    the memo never keeps a class, its module or its closure alive.

    Threads: a race only recomputes the same value (`compute` must be a pure function of the class):
    each dict op is atomic (the GIL, or each dict's own lock in a free-threaded build), two threads
    missing at once both compute and the last store wins; a replaced weak reference is dropped
    without its callback, the kept one still forgets the entry when the class dies.
    """

    __slots__ = ("_by_id", "_compute", "_refs", "forever")

    def __init__(self, compute: Callable[[type], Any]) -> None:
        self._compute = compute
        self.forever: dict[type, Any] = {}
        self._by_id: dict[int, Any] = {}
        self._refs: dict[int, weakref.ref] = {}

    def __call__(self, cls: type) -> Any:
        value = self.forever.get(cls)
        if value is None:
            value = self._by_id.get(id(cls))
            if value is None:
                value = self._remember(cls, self._compute(cls))
        return value

    def _remember(self, cls: type, value: Any) -> Any:
        if _lives_forever(cls):
            self.forever[cls] = value
            return value
        key = id(cls)

        def forget(_ref: weakref.ref, key: int = key) -> None:
            self._forget(key)

        self._refs[key] = weakref.ref(cls, forget)
        self._by_id[key] = value
        return value

    def _forget(self, key: int) -> None:
        self._by_id.pop(key, None)
        self._refs.pop(key, None)

    def __len__(self) -> int:
        return len(self.forever) + len(self._by_id)
