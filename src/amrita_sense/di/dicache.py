"""`interp._di_cache`: 1.1.3's DI cache record, as a view made when it is read.

1.1.3 keeps, per interpreter, a `DICache`: the pools' type fingerprint
(`args_hash`), whether it is trusted (`hash_trustable`) and an LRU `payload`
mapping `hash((id(node.func), args_hash))` to `(static_kwargs, per_call_factories)`
for every node a call (or the preload) resolved. Here plans store where values
come from and are shared by every interpreter of a pool shape, so there is no
such record to keep up to date on the hot path. Instead, reading `_di_cache`
gives a `DICacheView` whose fields are computed from the interpreter: the
payload lists the entries 1.1.3 would hold, each built from the interpreter's
plans and current pools (see `WorkflowInterpreter._di_payload`).

What the view needs to remember per interpreter (entries written into it, the
nodes `_call()` resolved outside a run, the preload) lives in a `DIRecord`,
made on first use, together with the plans that cannot be shared.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, MutableMapping
from typing import Any

from amrita_sense import core as _core
from amrita_sense.types import DICache, LRUCache

PAYLOAD_SIZE = 2048
"""1.1.3's payload bound (its LRU's `maxsize`)."""


class DIRecord:
    """An interpreter's own DI cache state, made on first use.

    `own_plans`: the plans that cannot be shared, `(function, shape) -> PlanEntry`.
    `written`: entries written through the view (shown by it, never used to inject).
    `called`: the nodes `_call()` resolved through the cache outside a run (`id(func) -> node`).
    `preloaded`: the preload ran outside a run (every node counts as resolved).
    """

    __slots__ = ("called", "own_plans", "preloaded", "view", "written")

    def __init__(self) -> None:
        self.own_plans: LRUCache = LRUCache(PAYLOAD_SIZE)
        self.written: LRUCache | None = None
        self.called: dict[int, Any] | None = None
        self.preloaded = False
        self.view: DICacheView | None = None

    def note_call(self, node: Any) -> None:
        called = self.called
        if called is None:
            called = self.called = {}
        elif len(called) >= PAYLOAD_SIZE and id(node.func) not in called:
            return
        called[id(node.func)] = node

    def forget(self) -> None:
        """Forget what the view lists (1.1.3 clearing its payload)."""
        self.written = None
        self.called = None
        self.preloaded = False
        self.own_plans.clear()


class DICacheView(DICache):
    """1.1.3's `DICache` of one interpreter, computed when read.

    `args_hash` is the pools' type fingerprint as of the last `rehash_args()`
    (read-only), `hash_trustable` says the pools were not reassigned since
    (assigning False bypasses the cache until `rehash_args()`, True trusts the
    current pools without forgetting anything), `payload` is a `PayloadView`.
    """

    def __init__(self, interp: Any) -> None:  # the dataclass fields are properties here
        self._owner = weakref.ref(interp)

    def _interp(self) -> Any:
        interp = self._owner()
        if interp is None:
            raise ReferenceError("the interpreter of this DI cache view no longer exists")
        return interp

    @property
    def args_hash(self) -> int:
        return self._interp().args_hash

    @args_hash.setter
    def args_hash(self, value: int) -> None:
        raise AttributeError("_di_cache.args_hash is the pools' fingerprint; call rehash_args() to take it again")

    @property
    def hash_trustable(self) -> bool:
        return self._interp().args_hash_trustable

    @hash_trustable.setter
    def hash_trustable(self, value: bool) -> None:
        self._interp()._set_di_trust(bool(value))

    @property  # type: ignore[override]
    def payload(self) -> PayloadView:
        return PayloadView(self._interp())

    @payload.setter
    def payload(self, value: Any) -> None:
        self._interp()._adopt_di_payload(value)


class PayloadView(MutableMapping):
    """1.1.3's payload of one interpreter: `hash((id(func), args_hash)) -> (static_kwargs, factories)`.

    Reading lists the entries (computed on every read, from the current
    pools). Writing stores an entry that the view shows, kept or cleared by
    `rehash_args()` as 1.1.3 keeps or clears its payload, and never used to
    inject. `clear()` and deleting a listed entry forget the entries and the
    `use_cache` provider results behind them, as clearing 1.1.3's cache does.
    """

    __slots__ = ("_interp",)
    maxsize = PAYLOAD_SIZE

    def __init__(self, interp: Any) -> None:
        self._interp = interp

    def _entries(self) -> dict:
        return self._interp._di_payload()

    @property
    def currsize(self) -> int:
        return len(self._entries())

    def __getitem__(self, key: Any) -> Any:
        return self._entries()[key]

    def __contains__(self, key: object) -> bool:
        return key in self._entries()

    def __iter__(self) -> Iterator:
        return iter(list(self._entries()))

    def __len__(self) -> int:
        return len(self._entries())

    def keys(self) -> Any:
        return self._entries().keys()

    def items(self) -> Any:
        return self._entries().items()

    def values(self) -> Any:
        return self._entries().values()

    def __setitem__(self, key: Any, value: Any) -> None:
        self._interp._write_di_entry(key, value)

    def __delitem__(self, key: Any) -> None:
        self._interp._delete_di_entry(key)

    def clear(self) -> None:
        self._interp._clear_di_cache()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PayloadView):
            other = other._entries()
        return self._entries() == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PayloadView({self._entries()!r})"


__all__ = ["PAYLOAD_SIZE", "DICacheView", "DIRecord", "PayloadView"]

_core.provide(DIRecord=DIRecord)
