"""Exceptions and exception classes in a snapshot, as plain data.

A panic is stored as its class (`module:QualName`), its arguments when every
one is a plain value (None, bool, int, float, str), its message and its
formatted traceback; with a codec, also as the codec's bytes.

On restore, `get_exception()` returns, in this order of preference:

1. the codec's copy, when a codec was used on both sides and it decodes to an exception
   (a copy the codec cannot decode is skipped);
2. a new instance of the original class, built from the stored arguments, when
   the class is already imported in the restoring process (it is looked up in
   `sys.modules`, never imported) and rebuilding gives the same arguments;
3. otherwise a `RestoredPanic` carrying the class name, message, arguments and
   traceback text.

The original traceback text is attached to the exception as
`__sense_restored_traceback__` (see `restored_traceback`); the traceback object
itself cannot cross processes.
"""

from __future__ import annotations

import math
import sys
import traceback
from typing import Any

from amrita_sense.durable.errors import CorruptSnapshot, RestoredPanic, RestoreError

MAX_TRACEBACK = 64 * 1024
"""Characters of traceback text kept per exception (the end of the text is kept)."""
TRACEBACK_ATTR = "__sense_restored_traceback__"


def type_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def find_class(name: str) -> type | None:
    """The class named `module:QualName` if its module is already imported, else None (nothing is imported)."""
    module_name, _, qualname = name.partition(":")
    obj: Any = sys.modules.get(module_name)
    if obj is None or not qualname:
        return None
    for part in qualname.split("."):
        if part.startswith("<"):
            return None
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if isinstance(obj, type) else None


_NEVER_REBUILT = (BaseException, KeyboardInterrupt, SystemExit, GeneratorExit)
"""Classes a snapshot never brings back by name (a restoring caller may pass them itself)."""


def graph_modules(prog: Any) -> frozenset[str]:
    """The modules of the code a node table runs: the exception classes a snapshot of it may name
    come from these, the builtins, or the engine (kept per table: every restore of a graph asks)."""
    kept = _GRAPH_MODULES.get(id(prog))
    if kept is not None and kept[0] is prog and kept[1] == len(prog.nodes):
        return kept[2]
    modules = set()
    for node in prog.nodes:
        func = getattr(node, "func", None)
        modules.add(getattr(func, "__module__", None) or type(node).__module__)
    if len(_GRAPH_MODULES) >= 256:
        _GRAPH_MODULES.clear()
    found = _GRAPH_MODULES[id(prog)] = (prog, len(prog.nodes), frozenset(modules))
    return found[2]


_GRAPH_MODULES: dict[int, tuple[Any, int, frozenset[str]]] = {}
"""id(node table) -> (the table, its node count, `graph_modules`): the table is held, so its id is its own."""


def trusted_exception(cls: Any, modules: frozenset[str]) -> bool:
    """An exception class a snapshot may name: a builtin one, the engine's, or one of the graph's code."""
    if not isinstance(cls, type) or not issubclass(cls, BaseException) or cls in _NEVER_REBUILT:
        return False
    module = cls.__module__
    return module in ("builtins", "amrita_sense") or module.startswith("amrita_sense.") or module in modules


def exception_classes(names: list[str], what: str, modules: frozenset[str]) -> tuple[type, ...]:
    """Resolve stored exception class names; `RestoreError` naming the first one that is not loaded,
    or not one a snapshot may name (`trusted_exception`)."""
    found = []
    for name in names:
        cls = find_class(name)
        if cls is None or not issubclass(cls, BaseException):
            raise RestoreError(f"{what}: the exception class {name} is not loaded in this process")
        if not trusted_exception(cls, modules):
            raise RestoreError(
                f"{what}: the snapshot names {name}, which is neither a builtin exception, the engine's, nor "
                f"one of the graph's code (pass it yourself: exception_ignored=...)"
            )
        found.append(cls)
    return tuple(found)


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, str)):
        return True
    if isinstance(value, int):
        return abs(value) < 2**63
    return isinstance(value, float) and math.isfinite(value)


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not break the snapshot
        return f"<{type(exc).__name__} with an unprintable message>"


def _traceback_text(exc: BaseException) -> str:
    stored = getattr(exc, TRACEBACK_ATTR, None)
    if isinstance(stored, str):
        return stored
    try:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:  # noqa: BLE001
        text = f"{type(exc).__name__}: {_message(exc)}\n"
    return text[-MAX_TRACEBACK:]


def encode_exception(exc: BaseException, codec: Any, blobs: list[bytes]) -> dict:
    """The plain-data record of `exc` (its codec copy appended to `blobs` when the codec can encode it)."""
    record: dict[str, Any]
    if isinstance(exc, RestoredPanic):
        record = {"type": exc.type_name, "args": list(exc.args), "message": exc.message}
    else:
        args = list(exc.args) if all(_plain(a) for a in exc.args) else None
        record = {"type": type_name(type(exc)), "args": args, "message": _message(exc)}
    record["traceback"] = _traceback_text(exc)
    record["blob"] = None
    if codec is not None:
        try:
            blob = codec.dumps(exc)
        except Exception:  # noqa: BLE001 - the plain record is enough
            blob = None
        if isinstance(blob, (bytes, bytearray)):
            record["blob"] = len(blobs)
            blobs.append(bytes(blob))
    return record


def check_exception_record(record: Any, what: str, blob_count: int) -> dict:
    """`record` if it has the fields `encode_exception` writes, with the right types; else `CorruptSnapshot`."""
    if not isinstance(record, dict):
        raise CorruptSnapshot(f"{what}: an exception record is an object")
    for key, kinds in (("type", str), ("message", str), ("traceback", str), ("args", (list, type(None)))):
        if not isinstance(record.get(key), kinds):
            raise CorruptSnapshot(f"{what}: the exception record's {key!r} is missing or of the wrong type")
    if record["args"] is not None and not all(_plain(a) for a in record["args"]):
        raise CorruptSnapshot(f"{what}: the exception record's arguments are not plain values")
    blob = record.get("blob")
    if blob is not None and (type(blob) is not int or not 0 <= blob < blob_count):
        raise CorruptSnapshot(f"{what}: the exception record names a user blob that does not exist")
    return record


def revive_exception(record: dict, codec: Any, blobs: list[bytes], modules: frozenset[str]) -> BaseException:
    """The exception `get_exception()` returns for a stored record (see the module docstring)."""
    exc = _from_codec(record, codec, blobs)
    if exc is None:
        exc = _rebuild(record, modules)
    if exc is None:
        args = tuple(record["args"] or ())
        exc = RestoredPanic(record["type"], record["message"], args, record["traceback"])
    try:
        setattr(exc, TRACEBACK_ATTR, record["traceback"])
    except (AttributeError, TypeError):
        pass
    return exc


def _from_codec(record: dict, codec: Any, blobs: list[bytes]) -> BaseException | None:
    if codec is None or record.get("blob") is None:
        return None
    try:
        exc = codec.loads(blobs[record["blob"]])
    except Exception:  # noqa: BLE001 - some exceptions pickle but do not unpickle: the record stands in
        return None
    return exc if isinstance(exc, BaseException) else None


def _rebuild(record: dict, modules: frozenset[str]) -> BaseException | None:
    """The exception rebuilt from its class and arguments, when the class is one a snapshot may name."""
    cls = find_class(record["type"])
    if (
        cls is None
        or not issubclass(cls, BaseException)
        or not trusted_exception(cls, modules)
        or record["args"] is None
    ):
        return None
    try:
        exc = cls(*record["args"])
    except Exception:  # noqa: BLE001 - a class that cannot be rebuilt from its args
        return None
    if type(exc) is not cls or list(exc.args) != record["args"] or _message(exc) != record["message"]:
        return None
    return exc


def restored_traceback(exc: BaseException) -> str | None:
    """The original traceback text of an exception restored from a snapshot (None for others)."""
    text = getattr(exc, TRACEBACK_ATTR, None)
    return text if isinstance(text, str) else None
