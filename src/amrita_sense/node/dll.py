"""DLLCompose: a graph slot whose payload can be swapped after the graph is rendered.

The renderer builds a `DLLComposeProxy` at the slot. The proxy compiles the
payload in place (its aliases join the host graph's alias map, its compile
hooks run with the host's), and `DLLCompose.apply(new)` later recompiles a
new payload at the same address, like relinking a library at a fixed load
address. The host's node table is rebuilt so running interpreters follow.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from amrita_sense.exceptions import GraphBuildError, NullPointerException
from amrita_sense.node.abc_base import AbstractCompose, AbstractComposeOriginal
from amrita_sense.node.core import NodeCompose


class DLLComposeProxy(AbstractCompose[Any]):
    """The rendered slot of a `DLLCompose`: forwards indexing, `len` and `bool` to the compiled payload.

    It has no address calculator (`calc` raises `AttributeError`) and is never
    a top-level graph. All state is guarded by `_lock`.
    """

    __slots__ = ("_compose", "_lock", "_original", "_prefix", "_symbols_delta", "_top")

    def __init__(self, compose: DLLCompose):
        if compose._proxy is not None:
            raise RuntimeError("One DLLCompose instance could only be used once")
        self._original: Any = compose._compose
        compose._proxy = self
        self._prefix: list[int] | None = None
        self._top: Any = None
        self._compose: Any = None
        self._symbols_delta: set[str] | None = None
        self._lock = threading.Lock()

    @property
    def calc(self) -> NoReturn:
        raise AttributeError("DLLComposeProxy does not have a calculator")

    def _build(self, current_path: list[int] | None = None, top: Any = None) -> None:
        """First build, in the middle of the host's build: hooks are handed to the host."""
        with self._lock:
            self._build_unlocked(current_path, top, run_hooks=False)

    def _apply(self, comp: NodeCompose) -> None:
        """Recompile a new payload at the same address; its hooks run at once."""
        with self._lock:
            self._original = comp
            self._build_unlocked(self._prefix, self._top, run_hooks=True)
        rebuild = getattr(self._top, "_rebuild_program", None)
        if rebuild is not None:
            rebuild()

    def _build_unlocked(self, current_path: list[int] | None, top: Any, *, run_hooks: bool) -> None:
        """Compile `_original` at `current_path` of `top`; the caller holds `_lock`."""
        self._check_build_args(current_path, top)
        self._top = top
        self._prefix = current_path
        for symbol in self._symbols_delta or ():
            top.alias2vector_map.pop(symbol, None)
        known = set(top.alias2vector_map)
        host_hooks = top._collected_hooks if top._collected_hooks is not None else []
        top._collected_hooks = []
        try:
            origin = self._original
            self._compose = origin.get_builder()(origin)
            self._compose._build(current_path, top)
            self._symbols_delta = (top.alias2vector_map.keys() - known) or None
            hooks = top._collected_hooks or []
        except Exception:
            self._compose = None
            self._symbols_delta = None
            raise
        finally:
            top._collected_hooks = host_hooks
            self._original = None
        _dispatch_hooks(hooks, top, host_hooks, run_hooks)

    def _check_build_args(self, current_path: list[int] | None, top: Any) -> None:
        if self._original is None:
            raise GraphBuildError(
                "DLLComposeProxy: No original compose to build, or this proxy has already been built."
            )
        if current_path is None:
            raise GraphBuildError("DLLComposeProxy: current_path cannot be None, this compose cannot be a root compose")
        if top is None:
            raise GraphBuildError("DLLComposeProxy: I cannot be a top-level compose, top cannot be None")
        if self._top is not None and self._top is not top:
            raise GraphBuildError(
                "DLLComposeProxy: The top-level compose has changed, this proxy cannot be reused in a different context"
            )

    def __getitem__(self, key: int) -> Any:
        with self._lock:
            if self._compose is None:
                raise GraphBuildError("DLLComposeProxy: Compose has not been built yet")
            return self._compose[key]

    def __bool__(self) -> bool:
        with self._lock:
            if self._compose is None:
                raise NullPointerException("DLLComposeProxy: Compose has not been built yet")
            return bool(self._compose)

    def __len__(self) -> int:
        with self._lock:
            if self._compose is None:
                raise NullPointerException("DLLComposeProxy: Compose has not been built yet")
            return len(self._compose)


def _dispatch_hooks(hooks: list[Callable[[Any], Any]], top: Any, host_hooks: list, run_now: bool) -> None:
    """Run the payload's compile hooks now (re-apply), or hand them to the host (first build)."""
    if run_now:
        for hook in hooks:
            hook(top)
    else:
        host_hooks.extend(hooks)


class DLLCompose(AbstractComposeOriginal[DLLComposeProxy]):
    """A source slot whose payload (a `NodeCompose`) can be replaced after render with `apply()`.

    It cannot be rendered on its own, and one instance binds to one proxy.
    """

    __slots__ = ("_compose", "_proxy")

    def __init__(self, compose: NodeCompose):
        if not isinstance(compose, NodeCompose):
            raise GraphBuildError("Only NodeCompose is allowed.")
        self._compose = compose
        self._proxy: DLLComposeProxy | None = None

    def __iter__(self) -> Iterator[Any]:
        yield from self._compose

    def __rshift__(self, other: Any) -> DLLCompose:
        self._compose >>= other
        return self

    def render(self) -> NoReturn:
        raise GraphBuildError("DLLCompose: render() is not allowed, please use it in a NodeCompose context.")

    def apply(self, comp: NodeCompose) -> None:
        """Recompile the rendered slot in place with the new payload `comp`."""
        if self._proxy is None:
            raise GraphBuildError("DLLCompose: No proxy to apply to")
        if not isinstance(comp, NodeCompose):
            raise GraphBuildError("DLLCompose: Only NodeCompose is allowed.")
        self._compose = comp
        self._proxy._apply(comp)

    def get_proxy(self) -> DLLComposeProxy:
        """The bound proxy; `GraphBuildError` before the first render."""
        if self._proxy is None:
            raise GraphBuildError("DLLCompose: No proxy available, which means this compose has never been built.")
        return self._proxy

    @classmethod
    def get_builder(cls) -> type[DLLComposeProxy]:
        return DLLComposeProxy
