"""Dependency lifecycles: scopes for generator providers and compute-once stores.

- `Scope`: how long a generator dependency's value stays open (`call`,
  `dispatch`, `workflow`).
- `LifecycleScope`: the exit stack owning one scope's values.
- `DependencyStore` / `DependencyCache`: at most one computation per key,
  shared by concurrent resolvers.
"""

from .cache import CacheState, DependencyCache, DependencyStore
from .scope import LifecycleScope, Scope, lift_sync_context

__all__ = [
    "CacheState",
    "DependencyCache",
    "DependencyStore",
    "LifecycleScope",
    "Scope",
    "lift_sync_context",
]
