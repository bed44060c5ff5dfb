"""Process-wide engine switches.

Each uppercase flag can be set once per process (except the two that stay
writable), and two pairs of flags refuse to be true together. These are not
covered by semantic-versioning guarantees; leave them at their defaults in
production.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_ALWAYS_WRITABLE = frozenset({"WORKFLOW_DI_PRELOAD_BATCH", "WORKFLOW_DI_NO_CACHE"})
_CONFLICTS = frozenset(
    {
        ("WORKFLOW_DI_PRELOAD_CACHE", "NO_DEPENDENCY_META_CACHE"),
        ("WORKFLOW_DI_NO_CACHE", "WORKFLOW_DI_PRELOAD_CACHE"),
    }
)


_listeners: list = []
"""Called with no argument after any flag is written (the event dispatch's plans depend on flags)."""


@dataclass
class _Flags:
    FORCE_NOT_WRAP_TO_ASYNC: bool = False
    """Run sync nodes inline on the event-loop thread even when `wrap_to_async` is set."""
    DISABLE_EXC_IGNORED: bool = False
    """Leave the pass-through exception tuple empty."""
    NO_DEPENDENCY_META_CACHE: bool = False
    """Analyse a node's signature again on every call."""
    NO_SHARED_MIDDLEWARE: bool = False
    """Forked interpreters do not inherit their parent's middleware."""
    WORKFLOW_DI_NO_CACHE: bool = False
    """Resolve a node's injection plan on every call."""
    WORKFLOW_DI_PRELOAD_CACHE: bool = False
    """Resolve every node's injection plan when a run starts."""
    WORKFLOW_DI_PRELOAD_BATCH: int = 10
    """How many plans the preload resolves concurrently."""
    SQUASHED_LOOP: bool = False
    """WHILE / DO iterate inside one node call instead of jumping back."""
    _writeables: set = field(default_factory=lambda: set(_ALWAYS_WRITABLE))
    _modified_flags: set = field(default_factory=set)
    _args_conflicts: set = field(default_factory=lambda: set(_CONFLICTS))

    def __setattr__(self, key: str, value) -> None:
        if key.isupper() and "_modified_flags" in self.__dict__:
            self._check_assignment(key, value)
            self._modified_flags.add(key)
        object.__setattr__(self, key, value)
        for listener in _listeners:
            listener()

    def _check_assignment(self, key: str, value) -> None:
        if key not in self._writeables and key in self._modified_flags:
            raise RuntimeError(f"{key} is modified")
        for pair in self._args_conflicts:
            if key in pair and all(value if name == key else getattr(self, name, False) for name in pair):
                raise RuntimeError(f"Conflicting flags:{pair} are set, please check the documentation for more details")


__flags__ = _Flags()

__all__: list[str] = ["__flags__"]
