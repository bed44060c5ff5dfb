"""Pickling what travels to a worker: graphs, setup factories, inputs, outputs and outcomes.

Everything is pickled with cloudpickle (Ray's copy), so lambdas, closures and
functions defined in `__main__` travel by value; functions of importable
modules travel by reference (the worker imports the module: install it there,
or ship it with Ray's `runtime_env`).

A rendered graph needs two things dropped on the way:

- the frame each node keeps as `fun_frame` (the caller's frame when the node
  was made; the engine never reads it): frames cannot be pickled, a shipped
  node has `fun_frame = None`;
- the graph's compiled node table (`_program`, a core object): the worker
  compiles its own on first use, on whichever core it loaded.

Weak mappings and sets (what FUN_BLOCK and BATCH_RUN nodes keep of the
interpreters running them here) arrive empty: they refer only to live
objects of this process, never to the graph's definition.
"""

from __future__ import annotations

import io
import pickle
import types
import weakref
from typing import Any

from ray import cloudpickle  # type: ignore[import-not-found,unused-ignore]

from amrita_sense import core as _core
from amrita_sense.core import pure as _core_py
from amrita_sense.distributed.errors import NotPicklable
from amrita_sense.durable.snapshots.fingerprint import outline_of
from amrita_sense.durable.snapshots.node_state import sub_graphs


def _program_types() -> tuple[type, ...]:
    """The node-table classes of both cores (the pure build's is a Python class, the compiled one is not picklable)."""
    return tuple({_core.Program, _core_py.Program})


_DROPPED: tuple[type, ...] = (types.FrameType, *_program_types())
_EMPTIED: tuple[type, ...] = (weakref.WeakKeyDictionary, weakref.WeakValueDictionary, weakref.WeakSet)


def _dropped() -> None:
    return None


class _Pickler(cloudpickle.CloudPickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, _DROPPED):
            return _dropped, ()
        if isinstance(obj, _EMPTIED):
            return type(obj), ()
        return super().reducer_override(obj)


def dumps(obj: Any) -> bytes:
    """`obj` as bytes (cloudpickle, frames and node tables dropped); raises what pickling raises."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def loads(data: bytes) -> Any:
    return pickle.loads(data)


def dumps_checked(obj: Any, what: str) -> bytes:
    """`dumps(obj)`, or `NotPicklable` naming `what`."""
    try:
        return dumps(obj)
    except Exception as exc:  # noqa: BLE001 - any pickling failure is reported the same way
        raise NotPicklable(what, _reason(exc)) from exc


def dumps_graph(graph: Any) -> bytes:
    """The rendered graph as bytes; `NotPicklable` naming the first node (and its part) that is not picklable."""
    try:
        return dumps(graph)
    except Exception as exc:  # noqa: BLE001
        culprit = find_unpicklable_node(graph)
        raise NotPicklable(culprit or "the graph", _reason(exc)) from exc


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _picklable(obj: Any) -> bool:
    try:
        dumps(obj)
    except Exception:  # noqa: BLE001
        return False
    return True


def find_unpicklable_node(graph: Any, where: str = "") -> str | None:
    """Which node of `graph` (and of its sub-graphs) cannot be pickled, and which part of it, or None."""

    outline = outline_of(graph)
    prog = outline.program
    for row in range(prog.nrows):
        node = prog.nodes[row]
        if _picklable(node):
            continue
        for sub in sub_graphs(node):
            inner = find_unpicklable_node(sub, f"{where}in the sub-graph of {outline.describe_row(row)}: ")
            if inner is not None:
                return inner
        return f"{where}the node at {outline.describe_row(row)}{_unpicklable_part(node)}"
    return None


def _unpicklable_part(node: Any) -> str:
    """`, in <part>` for the first attribute, closure variable or global of `node` that fails, or ''."""
    for name, value in _attributes(node):
        if _picklable(value):
            continue
        inner = _unpicklable_function_part(value) if isinstance(value, types.FunctionType) else ""
        return f", in its attribute {name!r}{inner}"
    return ""


def _attributes(obj: Any) -> list[tuple[str, Any]]:
    found = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if name not in found and hasattr(obj, name):
                found[name] = getattr(obj, name)
    return [(name, found[name]) for name in sorted(found) if name != "fun_frame"]


def _unpicklable_function_part(func: types.FunctionType) -> str:
    code = func.__code__
    for name, cell in zip(code.co_freevars, func.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if not _picklable(value):
            return f" (closure variable {name!r} of {func.__qualname__}, a {type(value).__name__})"
    for name in code.co_names:
        if name in func.__globals__ and not _picklable(func.__globals__[name]):
            return f" (global {name!r} of {func.__qualname__}, a {type(func.__globals__[name]).__name__})"
    return ""


__all__ = ["dumps", "dumps_checked", "dumps_graph", "find_unpicklable_node", "loads"]
