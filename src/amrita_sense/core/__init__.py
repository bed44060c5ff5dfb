"""The core, on the ground floor of the package, and the choice of which one runs: the compiled
`amrita_sense.core._sense_core`, or the pure build.

One source: `_sense_core.py` is the pure build (run as Python by `core.pure`, under that name:
beside it, the compiled extension wins an import of the source's own name), and the compiled core
is the same file compiled by Cython with `_sense_core.pxd`. Beside them: the opcode table
(`opcodes`), the C-API helpers (`_capi.pxd`), the pickle support (`portable`) and the stand-in
for Cython's pure-mode module (`cython_shim`). The core's other parts are modules of their own, split
the same way (`COMPILED_PARTS`): its data structures (`_structures`: the node table, the pointer, the
stack, the lock), the interpreter's state (`_state`: `CoreState`, which the loop's `InterpreterCore`
extends), the checks at the write (`_checks`) and the async-library pin (`_async_pin`). The selector
takes every part from the same build as the core. Nothing here imports above the core: what it needs
from the layers above is given to it (`provide`), and what it calls on the interpreter is its
declared `LAYER_CONTRACT`.

AMRITA_SENSE_NO_EXTENSIONS=1 forces the pure build; AMRITA_SENSE_REQUIRE_EXTENSIONS=1
makes a missing compiled core an error instead of a fallback. A fallback nobody asked
for (CPython without a loadable compiled core) warns once, at import: the pure build is about
ten times slower on the engine's own work. `IMPLEMENTATION` records what actually loaded
and `CORE_REASON` why.

Type checkers see the pure build's classes (one set of classes, from a real module), whichever
core loads at run time.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import platform
import warnings
from typing import TYPE_CHECKING

COMPILED_PARTS = ("_sense_core", "_state", "_structures", "_checks", "_async_pin", "_events")
"""The core's compiled modules (each beside its source, which the pure build runs as `pure*`)."""


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def _pure(reason: str):
    from amrita_sense.core import pure as core

    return core, reason


def _load():
    """(core module, why it was chosen)."""
    if _flag("AMRITA_SENSE_NO_EXTENSIONS"):
        return _pure("the pure build: AMRITA_SENSE_NO_EXTENSIONS asked for it")
    if platform.python_implementation() != "CPython":
        if _flag("AMRITA_SENSE_REQUIRE_EXTENSIONS"):
            raise ImportError("the compiled core was required but this interpreter cannot load it")
        return _pure(f"the pure build: {platform.python_implementation()} cannot load the compiled core")
    try:
        if not _compiled_core_installed():
            raise ImportError("this installation has no compiled core")
        from amrita_sense.core import _sense_core as core
    except ImportError as exc:
        if _flag("AMRITA_SENSE_REQUIRE_EXTENSIONS"):
            raise
        if not _compiled_core_installed():
            return _unasked_pure(
                "this installation has no compiled core (it was built with AMRITA_SENSE_NO_EXTENSIONS=1, "
                "or pip reused such a build from its cache)"
            )
        return _unasked_pure(f"the compiled core failed to load ({exc})")
    return core, f"the compiled core ({core.__file__})"


def _compiled_core_installed() -> bool:
    """Whether the compiled extensions sit beside their sources (the sources alone are the pure build)."""
    for stem in COMPILED_PARTS:
        spec = importlib.util.find_spec(f"{__name__}.{stem}")
        if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            return False
    return True


def _unasked_pure(why: str):
    warnings.warn(
        f"amrita_sense runs on its pure build, about 10x slower: {why}. Reinstall with a C compiler "
        "(pip install --no-cache-dir --force-reinstall amrita-sense-turbo), or set AMRITA_SENSE_NO_EXTENSIONS=1 "
        "to choose the pure build and silence this warning",
        RuntimeWarning,
        stacklevel=4,
    )
    return _pure(f"the pure build: {why}")


if TYPE_CHECKING:
    from amrita_sense.core import _sense_core as _impl

    CORE_REASON: str
else:
    _impl, CORE_REASON = _load()

IMPLEMENTATION: str = _impl.IMPLEMENTATION

# The core's other parts, of the same build as the core that loaded (type checkers see one set).
if TYPE_CHECKING or IMPLEMENTATION == "cython":
    from amrita_sense.core import _async_pin as _pin_part
    from amrita_sense.core import _checks as _checks_part
    from amrita_sense.core import _events as _events_part
    from amrita_sense.core import _state as _state_part
    from amrita_sense.core import _structures as _structures_part
else:
    from amrita_sense.core import pure_async_pin as _pin_part
    from amrita_sense.core import pure_checks as _checks_part
    from amrita_sense.core import pure_events as _events_part
    from amrita_sense.core import pure_state as _state_part
    from amrita_sense.core import pure_structures as _structures_part

Program = _structures_part.Program
PointerVector = _structures_part.PointerVector
address_list = _structures_part.address_list
args_pool = _checks_part.args_pool
kwargs_pool = _checks_part.kwargs_pool
exception_types = _checks_part.exception_types
check_stream = _checks_part.check_stream
Stack = _structures_part.Stack
SuspendFlag = _structures_part.SuspendFlag
StreamGate = _structures_part.StreamGate
wake = _structures_part.wake
settle = _structures_part.settle
InterpretLock = _structures_part.InterpretLock
InterpreterCore = _impl.InterpreterCore
NEVER_PENDING = _structures_part.NEVER_PENDING
ALWAYS_PENDING = _structures_part.ALWAYS_PENDING
FLAG_IF = _impl.FLAG_IF
FLAG_HLT = _impl.FLAG_HLT
FLAG_JMP = _impl.FLAG_JMP
ROW_CORO = _impl.ROW_CORO
ROW_THREAD = _impl.ROW_THREAD
ROW_PRECHECK = _impl.ROW_PRECHECK
ROW_EMPTY = _impl.ROW_EMPTY
NOT_NOW = _impl.NOT_NOW
CallPlan = _structures_part.CallPlan
NO_ARGUMENTS = _structures_part.NO_ARGUMENTS
UNSHARED = _structures_part.UNSHARED
same_types = _impl.same_types
RUNNING = _state_part.RUNNING
pin_async_library = _pin_part.pin_async_library
provide = _checks_part.provide
restore_async_library = _pin_part.restore_async_library
STEP_RAN = _impl.STEP_RAN
STEP_SKIPPED = _impl.STEP_SKIPPED
STEP_END = _impl.STEP_END
PC_CHECKPOINT = _impl.PC_CHECKPOINT
LAYER_CONTRACT = _state_part.LAYER_CONTRACT
events = _events_part
"""The event dispatch's hot path (`_events`): `DispatchLock`, `trigger_event`, and `install`,
`remember`, `FastPlan`, `FastStep` through which `hook.matcher` gives it its slow paths and plans."""
