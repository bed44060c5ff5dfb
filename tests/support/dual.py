"""Side-by-side copies of `amrita_sense` (one per core) and traced test programs.

`load_sense(core)` returns an independent copy of the whole package tree
running on the chosen core ("cython" or "python"). The copy that matches the
core the test session imported is that session's own package; the other one
is imported fresh with `AMRITA_SENSE_NO_EXTENSIONS` set or unset, and the
original `sys.modules` entries are restored afterwards. Lazy imports inside
the package must resolve to the copy that runs, so render and run a copy's
programs inside `with copy.active():`.

`Recorder` builds traced nodes on any copy (default: the session's package),
and `run_program` drives an interpreter step by step, collecting what the
tests compare.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.machinery
import os
import pkgutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

PACKAGE = "amrita_sense"
COMPILED_CORE = "amrita_sense.core._sense_core"
CORES = ("cython", "python")
CORE_MODULES = {"cython": COMPILED_CORE, "python": "amrita_sense.core.pure"}
"""The module each core lives in: `core/_sense_core.py` compiled (setup.py), and that file run as Python."""


def _is_package_module(name: str) -> bool:
    return name == PACKAGE or name.startswith(PACKAGE + ".")


def _package_entries() -> dict[str, ModuleType]:
    return {name: mod for name, mod in sys.modules.items() if _is_package_module(name)}


def compiled_core_importable() -> bool:
    """True when the compiled core imports (without binding it to a package copy if it is already loaded)."""
    if COMPILED_CORE in sys.modules:
        return True
    spec = importlib.util.find_spec(COMPILED_CORE)
    return spec is not None and isinstance(spec.loader, importlib.machinery.ExtensionFileLoader)


class SenseCopy:
    """One copy of the package tree: `sub("instructions")` is that copy's `amrita_sense.instructions`."""

    def __init__(self, core: str, modules: dict[str, ModuleType]):
        self.core = core
        self.modules = modules

    @property
    def root(self) -> ModuleType:
        return self.modules[PACKAGE]

    def sub(self, dotted: str) -> ModuleType:
        """The copy's submodule `amrita_sense.<dotted>` (imported on demand while active)."""
        name = f"{PACKAGE}.{dotted}"
        if name not in self.modules:
            with self.active():
                importlib.import_module(name)
        return self.modules[name]

    @contextlib.contextmanager
    def active(self) -> Iterator[SenseCopy]:
        """Make this copy the `amrita_sense` that imports resolve to, then restore the previous one."""
        saved = _package_entries()
        for name in saved:
            del sys.modules[name]
        sys.modules.update(self.modules)
        try:
            yield self
        finally:
            for name, mod in _package_entries().items():
                self.modules[name] = mod
                del sys.modules[name]
            sys.modules.update(saved)


_copies: dict[str, SenseCopy] = {}


def load_sense(core: str) -> SenseCopy:
    """The package copy running on `core` ("cython" or "python"), loaded once per process.

    Raises `ImportError` when the compiled core cannot be loaded for a fresh copy.
    """
    if core not in CORES:
        raise ValueError(f"core must be one of {CORES}, not {core!r}")
    if core not in _copies:
        current = sys.modules.get(PACKAGE)
        if current is not None and getattr(current, "IMPLEMENTATION", None) == core:
            _import_all_submodules(current)
            _copies[core] = SenseCopy(core, _package_entries())
        else:
            _copies[core] = _import_fresh(core)
    return _copies[core]


def _exceptions_bound_to_core(core_name: str) -> ModuleType | None:
    """The `amrita_sense.exceptions` module an already imported extension module `core_name` (the
    compiled core) raises from, if any.

    An extension module is initialised once per process, so a fresh copy on
    that core has to share that exceptions module for `except` clauses to match.
    """
    core = sys.modules.get(core_name)
    if core is None or not isinstance(getattr(core, "__loader__", None), importlib.machinery.ExtensionFileLoader):
        return None
    known = [*sys.modules.values(), *(m for c in _copies.values() for m in c.modules.values())]
    for mod in known:
        if getattr(mod, "__name__", None) == f"{PACKAGE}.exceptions" and getattr(
            mod, "NullPointerException", None
        ) is getattr(core, "NullPointerException", object()):
            return mod
    raise ImportError("the compiled core is bound to an exceptions module that is no longer loaded")


def _import_fresh(core: str) -> SenseCopy:
    shared = _exceptions_bound_to_core(CORE_MODULES[core])
    saved = _package_entries()
    for name in saved:
        del sys.modules[name]
    if shared is not None:
        sys.modules[shared.__name__] = shared
    env_saved = {k: os.environ.get(k) for k in ("AMRITA_SENSE_NO_EXTENSIONS", "AMRITA_SENSE_REQUIRE_EXTENSIONS")}
    os.environ.pop("AMRITA_SENSE_REQUIRE_EXTENSIONS", None)
    if core == "python":
        os.environ["AMRITA_SENSE_NO_EXTENSIONS"] = "1"
    else:
        os.environ.pop("AMRITA_SENSE_NO_EXTENSIONS", None)
    try:
        root = importlib.import_module(PACKAGE)
        if root.IMPLEMENTATION != core:
            raise ImportError(f"asked for the {core} core, but the {root.IMPLEMENTATION} core loaded")
        _import_all_submodules(root)
        return SenseCopy(core, _package_entries())
    finally:
        for name in _package_entries():
            del sys.modules[name]
        sys.modules.update(saved)
        for key, value in env_saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _import_all_submodules(root: ModuleType) -> None:
    for info in pkgutil.walk_packages(root.__path__, prefix=PACKAGE + ".", onerror=lambda _name: None):
        with contextlib.suppress(ImportError):
            importlib.import_module(info.name)


# ----- traced programs -------------------------------------------------------------------


class Recorder:
    """Makes nodes that append their name to `trace` when they run.

    `mode` picks how a node runs: "inline" (sync, on the loop thread),
    "thread" (sync, offloaded; the `@Node()` default) or "async".
    """

    def __init__(self, sense: SenseCopy | None = None):
        self.trace: list[Any] = []
        wrapper = sense.sub("node.wrapper") if sense is not None else importlib.import_module(f"{PACKAGE}.node.wrapper")
        self._node = wrapper.Node

    def _make(self, name: str, body: Any, mode: str) -> Any:
        trace = self.trace
        if mode == "async":

            async def step() -> Any:
                trace.append(name)
                return body()

        else:

            def step() -> Any:
                trace.append(name)
                return body()

        step.__name__ = f"n_{name}"
        return self._node(wrap_to_async=mode == "thread")(step)

    def act(self, name: str, ret: Any = None, *, exc: BaseException | None = None, mode: str = "inline") -> Any:
        """A node that records `name`, then raises `exc` or returns `ret`."""

        def body() -> Any:
            if exc is not None:
                raise exc
            return ret

        return self._make(name, body, mode)

    def cond(self, name: str, *values: Any, mode: str = "inline") -> Any:
        """A node that records `name` and returns `values` in turn, repeating the last one."""
        calls = [0]

        def body() -> Any:
            index = min(calls[0], len(values) - 1)
            calls[0] += 1
            return values[index]

        return self._make(name, body, mode)

    def counter(self, name: str, limit: int, mode: str = "inline") -> Any:
        """A loop condition: records `name<n>` on call n and is True for the first `limit` calls."""
        calls = [0]
        trace = self.trace

        def step() -> bool:
            calls[0] += 1
            trace.append(f"{name}{calls[0]}")
            return calls[0] <= limit

        step.__name__ = f"n_{name}"
        return self._node(wrap_to_async=mode == "thread")(step)


@dataclass
class Outcome:
    """What one run did: yields of `run_step_by`, the trace, the error, the state afterwards."""

    yields: list[Any] = field(default_factory=list)
    trace: list[Any] = field(default_factory=list)
    error: BaseException | None = None
    pointer: list[int] = field(default_factory=list)
    stack_depth: int = 0
    flags: int = 0
    truncated: bool = False

    def summary(self) -> tuple:
        """A comparable digest (exceptions by type name and message)."""
        err = None if self.error is None else (type(self.error).__name__, str(self.error))
        return (self.yields, self.trace, err, self.pointer, self.stack_depth, self.flags, self.truncated)


def _finish(out: Outcome, interp: Any, recorder: Recorder | None, start: int) -> Outcome:
    """Fill in what the run left behind: the trace since `start`, pointer, stack depth, flags."""
    if recorder is not None:
        out.trace = recorder.trace[start:]
    out.pointer = list(interp._pointer)
    out.stack_depth = len(interp._ret_addr_stack)
    out.flags = int(interp.flags)
    return out


async def run_program(interp: Any, recorder: Recorder | None = None, *, max_steps: int | None = None) -> Outcome:
    """Drive `interp.run_step_by()` to the end (or `max_steps` yields) and record the outcome."""
    out = Outcome()
    start = len(recorder.trace) if recorder is not None else 0
    steps = interp.run_step_by()
    try:
        async for value in steps:
            out.yields.append(value)
            if max_steps is not None and len(out.yields) >= max_steps:
                out.truncated = True
                break
    except Exception as exc:
        out.error = exc
    finally:
        await steps.aclose()
    return _finish(out, interp, recorder, start)


async def run_whole(interp: Any, recorder: Recorder | None = None, *, timeout: float = 5.0) -> Outcome:
    """Drive `interp.run()` (the step loop with its native opcodes) to the end, or cancel it after
    `timeout` seconds (`truncated`), and record the outcome."""
    out = Outcome()
    start = len(recorder.trace) if recorder is not None else 0
    try:
        await asyncio.wait_for(interp.run(), timeout)
    except asyncio.TimeoutError:
        out.truncated = True
    except Exception as exc:
        out.error = exc
    return _finish(out, interp, recorder, start)


def install_flags(monkeypatch: Any, flags: Any) -> None:
    """Make `flags` (a fresh `_unsafe._Flags`) the engine's switches for one test, in every module
    that holds them."""
    from amrita_sense import _unsafe
    from amrita_sense.hook import matcher
    from amrita_sense.runtime import workflow

    for module in (_unsafe, workflow, matcher):
        monkeypatch.setattr(module, "__flags__", flags)


def new_loop(name: str) -> asyncio.AbstractEventLoop:
    """A fresh event loop of the named kind ("asyncio" or "uvloop"; uvloop skips the test if missing)."""
    if name == "uvloop":
        import pytest

        uvloop = pytest.importorskip("uvloop")
        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run_on(sense: SenseCopy, drive: Any, spec: Any, loop_name: str) -> Any:
    """Run `drive(sense, spec)` on a fresh loop with `sense` as the active package copy."""
    loop = new_loop(loop_name)
    try:
        with sense.active():
            return loop.run_until_complete(drive(sense, spec))
    finally:
        loop.close()


def both_cores() -> tuple[SenseCopy, SenseCopy]:
    """The compiled and the pure copies; skips (or fails when the compiled core is required) without one."""
    import pytest

    required = os.environ.get("AMRITA_SENSE_REQUIRE_EXTENSIONS", "") not in ("", "0")
    try:
        if not compiled_core_importable():
            raise ImportError("no compiled core (amrita_sense.core._sense_core) was found")
        return load_sense("cython"), load_sense("python")
    except ImportError as exc:
        if required:
            pytest.fail(f"AMRITA_SENSE_REQUIRE_EXTENSIONS=1 but the compiled core cannot be loaded: {exc}")
        pytest.skip(f"the compiled core cannot be loaded, nothing to compare the pure build with: {exc}")
