"""The core's checks at the write: what the fields Python can write may hold (the compiled core's
typed fields and the pools' checks), and the table of the parts the layers above give the core
(`provide`). Cold code: each check runs where a value is stored, never per step.

One source for both builds, as the core's: Cython compiles it with `_checks.pxd` into
`amrita_sense.core._checks`, which the compiled core cimports; the pure build runs it as
`amrita_sense.core.pure_checks`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

try:
    import cython
except ModuleNotFoundError:  # a pure build without Cython installed
    from amrita_sense.core import cython_shim as cython  # type: ignore[no-redef,unused-ignore]

from amrita_sense.exceptions import InvalidMiddleware, InvalidOperand

if not cython.compiled and __name__.rpartition(".")[2] == "_checks":
    # imported as Python under the compiled module's name: the extension is not built here
    raise ImportError("the compiled core is not built here; the pure build is amrita_sense.core.pure_checks")


def _row_index(value, nrows, lowest):
    """`value` as a row of a table of `nrows` rows (`lowest` is -1 where "no row" is allowed)."""
    row = _ssize(_checked_int(value, "Program: a row"))
    if row < lowest or row >= nrows:
        raise ValueError(f"Program: row {row} is outside the table of {nrows} rows")
    return row


def _row_map(rows, nrows):
    """A copy of an address-to-row map whose rows all exist."""
    for row in _checked(rows, dict, "Program: an address map", "a dict").values():
        _row_index(row, nrows, 0)
    return dict(rows)


def _checked_int(value, what):
    if not isinstance(value, int):
        raise TypeError(f"{what} is an int, not {type(value).__name__}")
    return value


def _check_index(value, what):
    if not isinstance(value, int):
        raise InvalidOperand(f"{what} needs an int, not {type(value).__name__}")


def _refuse_delete(name):
    raise AttributeError(f"{name} cannot be deleted")


def _checked_items(items, what):
    for item in items:
        if not isinstance(item, int):
            raise InvalidOperand(f"{what}: an address holds ints, not {type(item).__name__}")
    return items


def _ssize(value):
    """An int as a C `Py_ssize_t` field of the compiled core takes it (`OverflowError` if too large)."""
    if cython.compiled:
        return value  # converted to the C Py_ssize_t it returns there, with that OverflowError
    if not -sys.maxsize - 1 <= value <= sys.maxsize:
        raise OverflowError("Python int too large to convert to C ssize_t")
    return int(value)


def _checked(value, kind, name, what):
    """`value` if it is a `kind`, else `TypeError` naming `name`."""
    if not isinstance(value, kind):
        raise InvalidOperand(f"{name} must be {what}, not {type(value).__name__}")
    return value


def _checked_seconds(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidOperand(f"{name} must be a number of seconds, not {type(value).__name__}")
    return float(value)


def _checked_middleware(value, name):
    if value is not None and not callable(value):
        raise InvalidMiddleware(
            f"{name} must be a callable taking a WorkflowInterpreter and returning an awaitable, "
            f"or None, not {type(value).__name__}"
        )
    return value


class _NotProvided:
    """Stands for a class of the layer's that no module has provided yet (`provide`): as nothing
    can be an instance of a class whose module was never imported, nothing is an instance of this."""


_PROVIDED = {
    "DIRecord": _NotProvided,  # runtime/dicache.py
    "DependencyStore": _NotProvided,  # di/cache.py
    "PoolShape": _NotProvided,  # runtime/plans.py
    "SuspendObjectStream": _NotProvided,  # streaming.py
    "resume_near": None,  # instructions/_support.py: a called node suspended; resume at a slot
    "resume_offset": None,  # instructions/_support.py: the same, at an offset from the current slot
}
"""The parts of the layers above that the core checks against or calls: the one place it reaches up.
Each module that defines one provides it when it is imported, so the core imports nothing above it."""
# threads: immutable once published: each key is written once, by its module's import (under the
# import lock, before anything can use that part), then only read


def provide(**parts):
    """Give the core the layer's `parts` (names of `_PROVIDED`), from the module that defines them."""
    for name, part in parts.items():
        if name not in _PROVIDED:
            raise KeyError(f"the core takes no part named {name!r}")
        _PROVIDED[name] = part


def _provided(name):
    return _PROVIDED[name]


def _optional(value, kind, name, what):
    """`value` if it is None or a `kind`, else `TypeError` naming `name`."""
    if value is not None and not isinstance(value, kind):
        raise InvalidOperand(f"{name} must be {what} or None, not {type(value).__name__}")
    return value


def args_pool(value, name):
    """A positional injection pool: a tuple (a list or another iterable becomes one); `TypeError`
    naming `name` otherwise."""
    if type(value) is tuple:
        return value
    if value is None or isinstance(value, (str, bytes, dict)):
        raise InvalidOperand(f"{name} must be a tuple of values, not {type(value).__name__}")
    try:
        return tuple(value)
    except TypeError:
        raise InvalidOperand(f"{name} must be a tuple of values, not {type(value).__name__}") from None


def kwargs_pool(value, name):
    """A keyword injection pool: a dict (kept), or another mapping (copied); `TypeError` naming `name`
    otherwise."""
    if type(value) is dict:
        return value
    if not isinstance(value, Mapping):
        raise InvalidOperand(f"{name} must be a dict of values by name, not {type(value).__name__}")
    return dict(value)


def exception_types(value, name):
    """Exception classes that pass through the workflow's handlers (`exception_ignored`), as a tuple."""
    kinds = args_pool(value, name)
    for kind in kinds:
        if not (isinstance(kind, type) and issubclass(kind, BaseException)):
            raise InvalidOperand(f"{name} holds exception classes, not {kind!r}")
    return kinds


def check_stream(stream, name):
    """`stream` if it can be an interpreter's `object_io` (a SuspendObjectStream, or another gate with
    `_wait_for_continue`), else `TypeError` naming `name`."""
    if not isinstance(stream, _provided("SuspendObjectStream")) and not callable(
        getattr(stream, "_wait_for_continue", None)
    ):
        raise InvalidOperand(
            f"{name} must be a SuspendObjectStream (or another gate with `_wait_for_continue`), "
            f"not {type(stream).__name__}"
        )
    return stream
