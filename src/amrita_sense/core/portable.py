"""How a `PointerVector` and a `Stack` copy and pickle, the same in both cores.

`copy.copy`, `copy.deepcopy` and `pickle` go through `__reduce__`, which names the functions here
rather than a core's class: a pickle made on the compiled core loads on the pure build and back, and
gives an object of the core that loads it. A subclass comes back as that subclass (made by `__new__`,
initialised by its core base, with its instance dict; its own `__init__` is not called). A bound
pointer comes back as the plain list of its address: equal to the original, tied to no program.
"""

from __future__ import annotations

import importlib
from typing import Any

_CORES = ("amrita_sense.core._structures", "amrita_sense.core.pure_structures")
"""The modules of the two builds' data structures (the classes whose pickles name no class)."""


def pointer_reduce(vec: Any, items: list[int]) -> tuple:
    """`PointerVector.__reduce__` for `vec`, whose address is `items` (a new list)."""
    if type(vec).__module__ in _CORES:
        return (restore_pointer, (items,))
    return (restore_pointer, (items, type(vec)), getattr(vec, "__dict__", None))


def stack_reduce(stack: Any, ovf: int, items: list) -> tuple:
    """`Stack.__reduce__` for `stack`, of capacity `ovf`, holding `items`."""
    if type(stack).__module__ in _CORES:
        return (restore_stack, (ovf, list(items)))
    return (restore_stack, (ovf, list(items), type(stack)), getattr(stack, "__dict__", None))


def _made(cls: Any, name: str) -> tuple[Any, Any]:
    """A new instance of `cls` (None: the running core's class `name`), not initialised, and the core
    class that initialises it."""
    if cls is None:
        # by name at run time: the cores import this module, and the selector (`core`) imports the cores
        cls = getattr(importlib.import_module("amrita_sense.core"), name)
        return cls.__new__(cls), cls
    return cls.__new__(cls), next(c for c in cls.__mro__ if c.__module__ in _CORES)


def restore_pointer(items: list[int], cls: type | None = None) -> Any:
    """A `PointerVector` of the core that runs here (or of the subclass `cls`) holding `items`."""
    vec, base = _made(cls, "PointerVector")
    base.__init__(vec, items)
    return vec


def restore_stack(ovf: int, items: list, cls: type | None = None) -> Any:
    """A `Stack` of the core that runs here (or of the subclass `cls`) of capacity `ovf` holding `items`."""
    stack, base = _made(cls, "Stack")
    base.__init__(stack, ovf)
    stack.stack = items
    return stack
