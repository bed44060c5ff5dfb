"""The async-library pin: which async library `sniffio` reports inside a run, pinned by the
outermost run of each thread (so `sniffio.current_async_library()` in a worker-thread node answers
as in the run that started it). Called twice per run, never per step.

One source for both builds: Cython compiles it with `_async_pin.pxd` into
`amrita_sense.core._async_pin`, which the compiled core cimports; the pure build runs it as
`amrita_sense.core.pure_async_pin`.
"""

from __future__ import annotations

import threading
from typing import Any

import sniffio

try:
    import cython
except ModuleNotFoundError:  # a pure build without Cython installed
    from amrita_sense.core import cython_shim as cython  # type: ignore[no-redef,unused-ignore]

if not cython.compiled and __name__.rpartition(".")[2] == "_async_pin":
    # imported as Python under the compiled module's name: the extension is not built here
    raise ImportError("the compiled core is not built here; the pure build is amrita_sense.core.pure_async_pin")


class _PinState(threading.local):
    """Per thread: `cell` is `[runs in flight, the sniffio name the outermost one found]`."""

    cell: list[Any] | None = None


_pin_state = _PinState()

_sniffio_local = sniffio.thread_local  # sniffio's own per-thread answer, an object it never replaces

_sniffio_cvar = sniffio.current_async_library_cvar


def pin_async_library(task):
    """Record the running async library in `sniffio.thread_local` for the outermost run of this
    thread (`task`: the current asyncio task, so the answer is sniffio's without asking it)."""
    state = _pin_state
    cell = state.cell
    if cell is None:
        cell = state.cell = [0, None]
    depth = cell[0]
    cell[0] = depth + 1
    if depth == 0:
        tlocal = _sniffio_local
        previous = cell[1] = tlocal.name
        if previous is None:
            name = _sniffio_cvar.get()
            if name is None and task is not None:
                name = "asyncio"
            if name is None:
                try:
                    name = sniffio.current_async_library()
                except sniffio.AsyncLibraryNotFoundError:
                    pass
            tlocal.name = name


def restore_async_library():
    """Undo `pin_async_library()`: the outermost run of the thread restores the previous name. A
    run cut short between its claim and its pin (a KeyboardInterrupt) restores what it never
    pinned: at worst the name is restored while another run of the thread is in flight, where
    sniffio finds the running library itself."""
    cell = _pin_state.cell
    if cell is None or cell[0] == 0:
        return
    if cell[0] > 1:
        cell[0] -= 1
        return
    cell[0] = 0
    _sniffio_local.name = cell[1]
