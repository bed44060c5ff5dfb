"""An LRU map whose values are held by weak reference."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T")

_MISSING: Any = object()


class WeakValueLRUCache(Generic[K, V]):
    """An LRU map from keys to weakly referenced values.

    An entry disappears once nothing else holds its value, so the map suits
    pools of shared objects (locks per key, for example). Values must support
    weak references; None is refused.

    When a new key would exceed `capacity`, the oldest entries are evicted;
    in loose mode live entries are kept and only dead ones are evicted, so the
    map may grow past its capacity. `len()` counts dead entries not purged yet;
    `size()` counts live ones.
    """

    __slots__ = ("_cache", "_capacity", "_lock", "_loose_mode")

    def __init__(self, *, capacity: int, loose_mode: bool = False, items: dict[K, V] | None = None):
        if capacity < 0:
            raise ValueError("Capacity must be a positive integer")
        self._capacity = capacity
        self._loose_mode = loose_mode
        self._cache: OrderedDict[K, weakref.ref[V]] = OrderedDict()
        # threads: guarded by `_lock`: every write, and every read that may purge or reorder (the
        # eviction walks the order); a lone `get` of the dict (`__contains__`, `len`) is atomic
        self._lock = threading.Lock()
        if items:
            for key, value in items.items():
                self.put(key, value)

    # ----- limits ---------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        return self._capacity

    def get_capacity(self) -> int:
        return self._capacity

    def resize(self, new_size: int) -> None:
        """Change the capacity (existing entries are not evicted until the next `put`)."""
        self._capacity = new_size

    @property
    def loose(self) -> bool:
        return self._loose_mode

    def set_loose(self, loose: bool) -> None:
        self._loose_mode = loose

    # ----- access ---------------------------------------------------------------------

    def _live(self, key: K) -> V | None:
        """The live value of `key`, purging the entry if its value died."""
        ref = self._cache.get(key)
        if ref is None:
            return None
        value = ref()
        if value is None:
            del self._cache[key]
        return value

    def get(self, key: K, default: T | None = None) -> V | T | None:
        """The value of `key` (refreshing its recency), or `default` if absent or dead."""
        with self._lock:
            value = self._live(key)
            if value is None:
                return default
            self._cache.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        """Store `value` under `key` as the most recent entry, evicting if over capacity."""
        if value is None:
            raise ValueError("Cannot store None value in WeakValueLRUCache")
        ref = weakref.ref(value)
        with self._lock:
            cache = self._cache
            if key in cache:
                del cache[key]
            else:
                self._evict(len(cache) + 1 - self._capacity)
            cache[key] = ref

    def _evict(self, excess: int) -> None:
        """Free `excess` slots, oldest first; loose mode only evicts dead entries. Bounded by one pass."""
        cache = self._cache
        for _ in range(len(cache)):
            if excess <= 0:
                return
            oldest = next(iter(cache))
            if self._loose_mode and cache[oldest]() is not None:
                cache.move_to_end(oldest)
            else:
                del cache[oldest]
                excess -= 1

    def expire(self, length: int | None = None) -> None:
        """Purge dead entries among the `length` oldest keys (default: a fifth of the map)."""
        with self._lock:
            cache = self._cache
            if length is None:
                length = len(cache) // 5
            for key in list(cache)[: max(0, length)]:
                if cache[key]() is None:
                    del cache[key]

    def pop(self, key: K, default: Any = _MISSING) -> Any:
        """Remove `key` and return its live value; `default` (or `KeyError`) if absent or dead."""
        with self._lock:
            ref = self._cache.pop(key, None)
        value = ref() if ref is not None else None
        if value is None:
            if default is _MISSING:
                raise KeyError(key)
            return default
        return value

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    # ----- mapping protocol -----------------------------------------------------------

    def __getitem__(self, key: K) -> V:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value  # type: ignore[return-value]  # present: a V

    def __setitem__(self, key: K, value: V) -> None:
        self.put(key, value)

    def __delitem__(self, key: K) -> None:
        with self._lock:
            del self._cache[key]

    def __contains__(self, key: object) -> bool:
        ref = self._cache.get(key)  # type: ignore[arg-type]
        return ref is not None and ref() is not None

    def __len__(self) -> int:
        return len(self._cache)

    def __iter__(self) -> Iterator[K]:
        for key, _ in self.items():
            yield key

    def keys(self) -> Iterator[K]:
        return iter(self)

    def values(self) -> Iterator[V]:
        for _, value in self.items():
            yield value

    def items(self) -> Iterator[tuple[K, V]]:
        """Live `(key, value)` pairs, oldest first; dead entries met on the way are purged."""
        with self._lock:
            keys = list(self._cache)
        for key in keys:
            with self._lock:  # `_live` purges a dead entry: a get-then-delete another thread may race
                value = self._live(key)
            if value is not None:
                yield key, value

    def size(self) -> int:
        """The number of live entries."""
        with self._lock:
            refs = list(self._cache.values())
        return sum(1 for ref in refs if ref() is not None)

    def is_full(self) -> bool:
        return len(self._cache) >= self._capacity

    def __repr__(self) -> str:
        shown = ", ".join(f"{k!r}: {v!r}" for k, v in self.items())
        return f"{type(self).__name__}(capacity={self._capacity}, items={{{shown}}})"
