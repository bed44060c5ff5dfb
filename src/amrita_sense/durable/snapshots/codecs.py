"""Codecs for the user objects of a snapshot (the injection pools, panic exceptions).

`PartialPickle` pickles what pickles and leaves the rest to the resuming code:
an injected object that does not pickle (a client, a connection, a lock) is
stored as a `Fresh` marker naming its place and type, and the restoring side's
codec (`codec.with_fresh(args, kwargs)`) puts the object at the same place of
the pools it was given there, after checking that it has the same type. So the
run's data comes back as its nodes left it, and its resources are opened anew;
nothing is placed by guess: a marker whose place holds no object of its type is
a `CodecError`.
"""

from __future__ import annotations

import builtins
import io
import pickle
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from amrita_sense.durable.errors import CodecError
from amrita_sense.logging import logger


@dataclass(frozen=True)
class Fresh:
    """An injected object left out of a snapshot: its place in the pools and its type."""

    place: int | str
    """Its index among the extra arguments, or its keyword."""
    type_name: str
    """`module:QualName` of its class."""


def _type_name(value: Any) -> str:
    cls = type(value)
    return f"{cls.__module__}:{cls.__qualname__}"


def _is_pools(value: Any) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], tuple)
        and isinstance(value[1], (dict, type(None)))
    )


class PartialPickle:
    """`pickle` for snapshots, except for injected objects that do not pickle: those are left for the
    resuming code to give again (see the module docstring). `SensePool` uses it with a store unless
    its checkpoint options name a codec.

    Args:
        fresh_args, fresh_kwargs: the pools a restore takes the left-out objects from (use
            `with_fresh`); without them a snapshot holding a `Fresh` marker cannot be decoded.
        allowed_modules: when given, loading rebuilds only classes of these modules (and their
            submodules), plain builtin types and exceptions, and the standard library's data types
            (`datetime`, `decimal`, `uuid`, `collections`): anything else is a `CodecError`, before
            it is imported or called. A second line behind a keyring, not a replacement for one.
    """

    def __init__(
        self, fresh_args: tuple = (), fresh_kwargs: dict | None = None, *, allowed_modules: Iterable[str] | None = None
    ):
        self.fresh_args = tuple(fresh_args)
        self.fresh_kwargs = dict(fresh_kwargs or {})
        self.allowed_modules = None if allowed_modules is None else _checked_modules(allowed_modules)
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        if self.allowed_modules is None:
            return "PartialPickle()"
        return f"PartialPickle(allowed_modules={self.allowed_modules!r})"

    def __reduce__(self) -> tuple:
        # what a restore gives is never shipped
        return (_partial_pickle, (self.allowed_modules,))

    def with_fresh(self, args: tuple, kwargs: dict | None) -> PartialPickle:
        """This codec, decoding `Fresh` markers into the objects at the same place of `args` / `kwargs`."""
        return PartialPickle(args, kwargs, allowed_modules=self.allowed_modules)

    def dumps(self, value: Any) -> bytes:
        try:
            return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
        except Exception:
            if not _is_pools(value):
                raise
        args, kwargs = value
        kept_args = tuple(self._kept(item, index) for index, item in enumerate(args))
        kept_kwargs = None if kwargs is None else {key: self._kept(item, key) for key, item in kwargs.items()}
        return pickle.dumps((kept_args, kept_kwargs), pickle.HIGHEST_PROTOCOL)

    def _kept(self, item: Any, place: int | str) -> Any:
        try:
            pickle.dumps(item, pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - any reason it does not pickle: left out
            marker = Fresh(place, _type_name(item))
            if marker.type_name not in self._warned:
                self._warned.add(marker.type_name)
                logger.warning(
                    f"checkpoints leave out the injected {marker.type_name} at {place!r} ({exc!r:.120}): a resumed "
                    f"run gets the one its resuming code gives"
                )
            return marker
        return item

    def loads(self, data: bytes) -> Any:
        if self.allowed_modules is None:
            value = pickle.loads(data)
        else:
            value = _AllowedUnpickler(io.BytesIO(data), self.allowed_modules).load()
        if not _is_pools(value):
            return value
        args, kwargs = value
        args = tuple(self._filled(item) for item in args)
        if kwargs is not None:
            kwargs = {key: self._filled(item) for key, item in kwargs.items()}
        return args, kwargs

    def _filled(self, item: Any) -> Any:
        if not isinstance(item, Fresh):
            return item
        place = item.place
        if isinstance(place, int):
            found = self.fresh_args[place] if place < len(self.fresh_args) else None
        else:
            found = self.fresh_kwargs.get(place)
        if found is None or _type_name(found) != item.type_name:
            given = "nothing" if found is None else f"a {_type_name(found)}"
            raise CodecError(
                f"the snapshot left out the injected {item.type_name} at {place!r} (it does not pickle) and the "
                f"resuming code gave {given} there: pass the pools to take it from (codec.with_fresh(args, kwargs))"
            )
        return found


def _partial_pickle(allowed_modules: tuple[str, ...] | None) -> PartialPickle:
    return PartialPickle(allowed_modules=allowed_modules)


def _checked_modules(modules: Iterable[str]) -> tuple[str, ...]:
    if isinstance(modules, str):
        raise TypeError("allowed_modules is an iterable of module names, not one string")
    found = tuple(modules)
    if not all(isinstance(m, str) and m and all(part.isidentifier() for part in m.split(".")) for m in found):
        raise ValueError(f"allowed_modules holds module names (dotted identifiers), not {found!r:.120}")
    return found


_STANDARD_DATA = {
    "datetime": {"date", "time", "datetime", "timedelta", "timezone"},
    "decimal": {"Decimal"},
    "uuid": {"UUID", "SafeUUID"},
    "collections": {"OrderedDict", "deque", "defaultdict", "Counter"},
    "amrita_sense.durable.snapshots.codecs": {"Fresh"},
}
_BUILTIN_TYPES = {
    "set",
    "frozenset",
    "bytearray",
    "complex",
    "range",
    "slice",
    "list",
    "dict",
    "tuple",
    "int",
    "float",
    "str",
    "bytes",
    "bool",
}


def _builtin_allowed(name: str) -> bool:
    """A plain builtin type or an exception class (never a function such as `eval` or `getattr`)."""
    found = getattr(builtins, name, None)
    return name in _BUILTIN_TYPES or (isinstance(found, type) and issubclass(found, Exception))


class _AllowedUnpickler(pickle.Unpickler):
    """An unpickler that looks up only the classes `PartialPickle(allowed_modules=...)` allows."""

    def __init__(self, file: Any, allowed: tuple[str, ...]) -> None:
        super().__init__(file)
        self._allowed = allowed

    def find_class(self, module: str, name: str) -> Any:
        if (
            (module == "builtins" and _builtin_allowed(name))
            or name in _STANDARD_DATA.get(module, ())
            or any(module == m or module.startswith(m + ".") for m in self._allowed)
        ):
            return super().find_class(module, name)
        raise CodecError(f"the snapshot asks for {module}.{name}, which allowed_modules does not allow")
