"""The core's data structures: the node table (`Program`) and its injection plans (`CallPlan`), the
program counter (`PointerVector`), the bounded stack (`Stack`), the interpreter lock
(`InterpretLock`), the stream's suspend flag (`SuspendFlag`) and its gate (`StreamGate`). The step loop (`_sense_core`)
reads and writes their fields; nothing here knows about it.

One source for both builds: Cython compiles it with `_structures.pxd` into
`amrita_sense.core._structures`, whose types and C functions the compiled core cimports (their
fields are C struct members there, read without a call); the pure build runs it as
`amrita_sense.core.pure_structures`.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

try:
    import cython
except ModuleNotFoundError:  # a pure build without Cython installed
    from amrita_sense.core import cython_shim as cython  # type: ignore[no-redef,unused-ignore]

if not cython.compiled and __name__.rpartition(".")[2] == "_structures":
    # imported as Python under the compiled module's name: the extension is not built here
    raise ImportError("the compiled core is not built here; the pure build is amrita_sense.core.pure_structures")

if not cython.compiled:  # the pure build (type checkers read these)
    from amrita_sense.core.pure_checks import (  # type: ignore[attr-defined]
        _check_index,
        _checked_int,
        _checked_items,
        _optional,
        _refuse_delete,
        _row_index,
        _row_map,
        _ssize,
    )
else:
    from cython.cimports.amrita_sense.core._capi import KEYWORD, RESULT, bounded_push, checked_pop, dict_get
    from cython.cimports.amrita_sense.core._checks import (
        _check_index,
        _checked_int,
        _checked_items,
        _optional,
        _refuse_delete,
        _row_index,
        _row_map,
        _ssize,
    )
    from cython.cimports.cpython.mem import PyMem_Free, PyMem_Malloc
    from cython.cimports.cpython.pythread import (
        NOWAIT_LOCK,
        WAIT_LOCK,
        PyThread_acquire_lock,
        PyThread_allocate_lock,
        PyThread_free_lock,
        PyThread_get_thread_ident,
        PyThread_release_lock,
    )

from amrita_sense.core import opcodes as _opcodes
from amrita_sense.core import portable as _portable
from amrita_sense.exceptions import InvalidOperand

ROW_WIDTH = _opcodes.ROW_WIDTH
_TABLES_PER_PROGRAM = 64
"""Pool shapes whose plan tables one program keeps (`_table_for` clears them beyond it)."""


class CallPlan:
    """A shared injection plan as the core runs it: where each argument comes from.

    `srcs` holds one entry per argument: an int (a position in the positional
    pool), a str (a name in the keyword pool, or in the call's extra
    keywords) or a 1-tuple `(name,)` (the calling interpreter's `use_cache`
    result for the parameter `name`). `names` is None for a positional call,
    else the parameter names of a keyword call. `slow` plans (providers,
    `use_cache` values) are run by the Python layer from `entry` (a
    `runtime.plans.PlanEntry`), except that a `cached` plan (its only providers
    are `use_cache` ones) is run by the core once the interpreter has their
    results (`fetch_with`). `keyed`: some argument is read from the keyword pool.
    """

    __slots__ = ("cached", "entry", "fetch", "fetch_with", "keyed", "names", "slow", "srcs")

    def __init__(self, srcs, names, slow, entry):
        if getattr(self, "srcs", None) is not None:  # the compiled loop reads `cidx` with no lock: never freed under it
            raise TypeError("a CallPlan is initialised once")
        self.srcs = srcs
        self.names = names
        self.slow = slow
        self.entry = entry
        self.fetch = _fetcher(srcs)
        self.cached = any(type(src) is tuple and len(src) == 1 for src in srcs)
        self.keyed = any(type(src) is not int and not (type(src) is tuple and len(src) == 1) for src in srcs)
        self.fetch_with = _results_fetcher(srcs) if self.cached else None
        if cython.compiled:  # per argument, as the C loop reads it: a pool position, KEYWORD or RESULT
            self.n = len(srcs)
            self.cidx = cython.cast(cython.p_Py_ssize_t, PyMem_Malloc((self.n + 1) * cython.sizeof(cython.Py_ssize_t)))
            if self.cidx == cython.NULL:
                raise MemoryError()
            for i in range(self.n):
                src = srcs[i]
                if type(src) is int and src >= 0:
                    self.cidx[i] = src
                else:
                    self.cidx[i] = RESULT if type(src) is tuple and len(src) == 1 else KEYWORD

    def __dealloc__(self):
        if cython.compiled:
            PyMem_Free(self.cidx)


def _fetcher(srcs):
    """`fetch(pool, kwargs)` -> the argument values, specialised for up to two positional sources."""
    if not srcs:
        return lambda pool, kwargs: ()
    if all(type(src) is int for src in srcs):
        if len(srcs) == 1:
            (i,) = srcs
            return lambda pool, kwargs: (pool[i],)
        if len(srcs) == 2:
            i, j = srcs
            return lambda pool, kwargs: (pool[i], pool[j])
    return lambda pool, kwargs: tuple(kwargs[src] if type(src) is str else pool[src] for src in srcs)


def _results_fetcher(srcs):
    """`fetch_with(pool, kwargs, results)` -> the argument values of a plan with `use_cache` sources."""

    def value(src, pool, kwargs, results):
        if type(src) is int:
            return pool[src]
        return results[src[0]] if type(src) is tuple else kwargs[src]

    return lambda pool, kwargs, results: tuple(value(src, pool, kwargs, results) for src in srcs)


NO_ARGUMENTS: CallPlan = CallPlan((), None, False, None)
"""The plan of a function without parameters: the same for every pool."""
UNSHARED: CallPlan = CallPlan((), None, True, None)
"""A table's mark for a node whose plan cannot be shared: the Python layer resolves it per interpreter."""


class SuspendFlag:
    """A cell that says whether a suspend request is outstanding on a stream (`pending`, a bool),
    and, when the stream's gates park by the request's tag filter alone, that filter (`tags`: a
    tuple of tags, empty for every gate; None: the core asks the gate whatever its tag). While
    `pending`, a gate whose tag `tags` excludes does not park: the core does not call it."""

    __slots__ = ("pending", "tags")

    def __init__(self) -> None:
        self.pending = False
        self.tags: tuple[str, ...] | None = None


def wake(fut: Any, owner: int, value: Any = None) -> None:
    """Resolve `fut`, awaited on a loop running in thread `owner`, from any thread: on the owner
    thread directly (unless it is done), from elsewhere through its loop (`call_soon_threadsafe`;
    a closed loop has nobody left to wake)."""
    if _thread_ident() == owner:
        if not fut.done():
            fut.set_result(value)
        return
    try:
        fut.get_loop().call_soon_threadsafe(settle, fut, value)
    except RuntimeError:  # the loop is closed: nobody is left to wake
        pass


def settle(fut: Any, value: Any) -> None:
    """Set `fut`'s result to `value` unless it is done (a callback of its own loop)."""
    if not fut.done():
        fut.set_result(value)


def _thread_ident() -> int:
    """The running thread's ident (the pure build binds the name to `threading.get_ident` itself)."""
    if cython.compiled:
        return PyThread_get_thread_ident()
    return threading.get_ident()


if not cython.compiled:  # the pure build: `threading.get_ident` itself, without a call around it
    _thread_ident = threading.get_ident


class StreamGate(SuspendFlag):
    """A stream's suspend gate (`SuspendObjectStream._suspend_flag`): the flag the step loop reads,
    and the state of the gate behind a lock of its own, which every method here takes.

    The outstanding request is its requester's future (`request`, None: no request), the thread
    whose loop awaits it (`owner`), its tag filter (`request_tags`) and whether a gate has taken it
    (`fired`). A wave of parked gates is a list of (future, thread) pairs (`parked`, None: none),
    with the request it was parked for (`parked_for`). `by_tags`: the stream's gate methods are
    `SuspendObjectStream`'s own, so its gates park by the request's tag filter alone (the flag's
    `tags` is then set with each request, and `wait` tests the filter here, else it asks the
    stream's `_request_to_park_for`).

    threads: the lock is a thread lock (compiled: a `PyThread` lock, waited for without the GIL),
    so a section may run Python code (a subclass's `_request_to_park_for`, a future's callbacks
    being scheduled). A future is resolved on its own loop's thread (`wake`)."""

    __slots__ = ("_lock", "by_tags", "fired", "owner", "parked", "parked_for", "request", "request_tags")

    def __cinit__(self) -> None:  # the compiled build only
        if cython.compiled:
            self._mutex = PyThread_allocate_lock()
            if self._mutex == cython.NULL:
                raise MemoryError("no lock for a StreamGate")

    def __dealloc__(self) -> None:  # the compiled build only
        if cython.compiled:
            if self._mutex != cython.NULL:
                PyThread_free_lock(self._mutex)

    def __init__(self, by_tags: bool) -> None:
        super().__init__()
        if not cython.compiled:
            self._lock = threading.Lock()
        self.by_tags = by_tags
        self.request: asyncio.Future | None = None
        self.owner = 0
        self.request_tags: tuple[str, ...] = ()
        self.fired = False
        self.parked: list[tuple[asyncio.Future, int]] | None = None
        self.parked_for: asyncio.Future | None = None

    def _acquire(self) -> None:
        if cython.compiled:
            if not PyThread_acquire_lock(self._mutex, NOWAIT_LOCK):
                with cython.nogil:
                    PyThread_acquire_lock(self._mutex, WAIT_LOCK)
        else:
            self._lock.acquire()

    def _release(self) -> None:
        if cython.compiled:
            PyThread_release_lock(self._mutex)
        else:
            self._lock.release()

    # ----- the requester's side ------------------------------------------------------------

    def post(self, tags: tuple) -> Any:
        """Make the request `tags` (a future on the running loop, returned), unless another one is
        still waiting for a gate (None)."""
        request = asyncio.get_running_loop().create_future()
        self._acquire()
        try:
            if self.request is not None and not self.fired:
                return None
            self.request = request
            self.owner = _thread_ident()
            self.request_tags = tags
            self.fired = False
            # the step loop skips the gates whose tag the filter excludes, when it alone decides
            self.tags = tags if self.by_tags else None
            self.pending = True
        finally:
            self._release()
        return request

    def taken(self, request: Any) -> bool:
        """Whether a gate took `request` (or it was replaced, which only a taken one ever is)."""
        self._acquire()
        try:
            return self.request is not request or self.fired
        finally:
            self._release()

    def clear_answered(self, request: Any) -> None:
        """`request` was answered (a gate took it): clear it if it is still the current one."""
        self._acquire()
        try:
            if self.request is request:
                self.request = None
                self.pending = False
        finally:
            self._release()

    def withdraw(self, request: Any, release: bool) -> None:
        """Clear `request` if it is still the current one. With `release` (the requester gave up),
        gates that parked for it are released too: nobody is left who knows they are parked."""
        orphans = None
        self._acquire()
        try:
            if self.request is not request:
                return
            self.request = None
            self.pending = False
            if release and self.parked_for is request:
                orphans, self.parked = self.parked, None
        finally:
            self._release()
        if orphans is not None:
            for fut, owner in orphans:
                wake(fut, owner)

    def resume(self) -> None:
        """Release every parked gate (nothing parked: nothing to do)."""
        self._acquire()
        try:
            parked = self.parked
            if parked is None:
                return
            self.parked = None
        finally:
            self._release()
        for fut, owner in parked:
            wake(fut, owner)

    # ----- the gate's side -------------------------------------------------------------------

    def request_for(self, tag: Any) -> Any:
        """The pending request a gate tagged `tag` parks for, or None (call with the lock held)."""
        request = self.request
        if request is None:
            return None
        tags = self.request_tags
        if tags and (tag is None or tag not in tags):
            return None
        if not self.fired and request.done():
            return None  # the requester was cancelled or timed out: nobody would resume a gate
        return request

    def _request_of(self, stream: Any, tag: Any) -> Any:
        """`request_for(tag)`, or the stream's own `_request_to_park_for` (call with the lock held)."""
        if self.by_tags:
            return self.request_for(tag)
        return stream._request_to_park_for(tag)

    def would_park(self, stream: Any, tag: Any) -> bool:
        """Whether `stream`'s gate `tag` would park now."""
        if not self.pending:
            return False
        self._acquire()
        try:
            return self._request_of(stream, tag) is not None
        finally:
            self._release()

    async def wait(self, stream: Any, tag: Any) -> bool:
        """`stream`'s gate: park here if a pending request matches `tag`, until `resume()`; True
        only if it parked. The stream's output watchers are told when it parks and resumes."""
        if not self.pending:
            return False
        self._acquire()
        try:
            request = self._request_of(stream, tag)
            if request is None:
                return False
            fut = asyncio.get_running_loop().create_future()
            here = _thread_ident()
            entry = (fut, here)
            parked = self.parked
            if parked is None:
                parked = self.parked = [entry]
                self.parked_for = request
            else:
                parked.append(entry)
            if not self.fired:
                self.fired = True
                wake(request, self.owner)  # on this thread (the requester's loop runs here): at once
        finally:
            self._release()
        if stream._output_watchers is not None:
            stream._tell_watchers(True)
        try:
            await fut
        except BaseException:
            self._unpark(parked, entry)
            raise
        finally:
            if stream._output_watchers is not None:
                stream._tell_watchers(False)
        return True

    def _unpark(self, parked: list, entry: tuple) -> None:
        """A parked gate gave up (cancelled): take its `entry` out of its wave `parked`."""
        self._acquire()
        try:
            if entry in parked:
                parked.remove(entry)
                if not parked and self.parked is parked:
                    self.parked = None
        finally:
            self._release()


NEVER_PENDING: SuspendFlag = SuspendFlag()
ALWAYS_PENDING: SuspendFlag = SuspendFlag()
ALWAYS_PENDING.pending = True


class Program:
    """The flat node table of one rendered graph.

    One row per executable slot in depth-first order (a node, or an empty
    segment that execution can land on). Plain advancement is `row + 1`:
    entering nested segments and leaving exhausted ones is already folded
    into the order. Each row has an opcode (`ops`), its operands, and the
    rows the opcode works with (`rows`); see `_opcodes` for both layouts.
    """

    __slots__ = (
        "addrs",
        "bits",
        "cbits",
        "cops",
        "crows",
        "funcs",
        "graph",
        "landings",
        "nodes",
        "nrows",
        "operands",
        "ops",
        "row_of",
        "seg_row",
        "static_plans",
        "_successor",
        "tables",
    )

    @cython.locals(i=cython.Py_ssize_t, k=cython.Py_ssize_t, nrows=cython.Py_ssize_t)
    def __init__(self, graph, nodes, funcs, bits, static_plans, ops, operands, rows, landings, addrs, row_of, seg_row):
        nrows = len(nodes)
        if getattr(self, "nodes", None) is not None:  # interpreters index the tables they were made with
            raise TypeError("a Program is initialised once")
        for table in (funcs, bits, static_plans, ops, operands, rows, landings, addrs):
            if len(table) != nrows:
                raise ValueError(f"Program: every per-row table needs {nrows} rows, one has {len(table)}")
        for plan in static_plans:
            if plan is not None and type(plan) is not CallPlan:
                raise TypeError(f"Program: a static plan is a CallPlan or None, not {type(plan).__name__}")
        # Row layout: `rows[i]` is the dense row of row i, the ROW_WIDTH fields FIRST, SECOND, EXIT, THEN
        # (`_opcodes.dense_row`, built by node.table). Each entry is a row of this table or -1
        # (`_row_index` checks it here), so the native opcodes index the tables with it once they
        # tested for -1. `cbits` / `cops` / `crows` are what the loop indexes: C arrays in the
        # compiled core (filled here, before any field is set), tuples in the pure build.
        if cython.compiled:
            self._alloc_rows(nrows)
            for i in range(nrows):
                self.cbits[i] = _checked_int(bits[i], "Program: a row's bits")
                self.cops[i] = _checked_int(ops[i], "Program: a row's opcode")
                for k in range(ROW_WIDTH):
                    self.crows[ROW_WIDTH * i + k] = _row_index(rows[i][k], nrows, -1)
        else:
            dense = tuple(_row_index(rows[i][k], nrows, -1) for i in range(nrows) for k in range(ROW_WIDTH))
            for i in range(nrows):
                _checked_int(bits[i], "Program: a row's bits")
                _checked_int(ops[i], "Program: a row's opcode")
        self.graph = graph
        self.nodes = tuple(nodes)
        self.funcs = tuple(funcs)
        self.bits = tuple(bits)
        self.static_plans = tuple(static_plans)
        self.ops = tuple(ops)
        self.operands = tuple(operands)
        self.landings = tuple(landings)
        self.addrs = tuple(addrs)
        self.row_of = None if row_of is None else _row_map(row_of, nrows)
        self.seg_row = _row_map(seg_row, nrows)
        if not cython.compiled:
            self.cbits = self.bits
            self.cops = self.ops
            self.crows = dense  # the dense rows one after another, ROW_WIDTH ints per row
        self.nrows = nrows
        self._successor = None
        self.tables = {}

    def _alloc_rows(self, nrows):
        """The C arrays for `nrows` rows (the compiled core); those of an initialisation that
        failed are freed first."""
        if cython.compiled:
            PyMem_Free(self.cbits)
            PyMem_Free(self.cops)
            PyMem_Free(self.crows)
            self.cbits = cython.cast(cython.p_int, PyMem_Malloc((nrows + 1) * cython.sizeof(cython.int)))
            self.cops = cython.cast(cython.p_int, PyMem_Malloc((nrows + 1) * cython.sizeof(cython.int)))
            self.crows = cython.cast(cython.p_int, PyMem_Malloc((ROW_WIDTH * nrows + 1) * cython.sizeof(cython.int)))
            if self.cbits == cython.NULL or self.cops == cython.NULL or self.crows == cython.NULL:
                raise MemoryError()

    def __dealloc__(self):
        if cython.compiled:
            PyMem_Free(self.cbits)
            PyMem_Free(self.cops)
            PyMem_Free(self.crows)

    @property
    def successor(self):
        """The program this one was recompiled into (a hot-swapped slot), or None."""
        return self._successor

    @successor.setter
    def successor(self, value):
        if value is not None and not isinstance(value, Program):
            raise TypeError(f"Program.successor must be a Program or None, not {type(value).__name__}")
        prog = value
        while prog is not None:  # followed to its end by every interpreter of this program
            if prog is self:
                raise ValueError("Program.successor would make a cycle")
            prog = prog._successor
        # threads: the swap sets it once, under node.core's program lock; readers follow it lock-free
        self._successor = value

    @successor.deleter
    def successor(self):
        _refuse_delete("successor")

    def table_for(self, shape):
        """A copy of the row table of plans for pools of `shape` (the core's own is kept from Python,
        as in the compiled core, whose loop runs its plans unchecked)."""
        return tuple(self._table_for(shape))

    def _table_for(self, shape):
        """The row table of plans for pools of `shape` (shared by every interpreter of that shape)."""
        # threads: a race only recomputes the same value: two interpreters of one shape missing at once
        # each make a table, the last store wins and the other interpreter fills its own (equal plans,
        # made once more). A table's slots go from None to a CallPlan in one store (`_row_plan`); the
        # table itself is never resized, only dropped from `tables` by the clear (which another thread
        # may run while this one looks it up: the compiled look-up takes its reference itself)
        if cython.compiled:
            table = dict_get(self.tables, shape)
        else:
            table = self.tables.get(shape)
        if table is None:
            if len(self.tables) >= _TABLES_PER_PROGRAM:
                self.tables.clear()
            table = self.tables[shape] = [None] * self.nrows
        return table

    def _publish_row_of(self, built):
        """`row_of`, set to `built` unless another thread set it first; the map that stays."""
        # threads: published once. The first map stored stays, so a thread that read it (a reference
        # taken after the load, in the compiled core) never sees it freed by a second store.
        if cython.compiled:
            with cython.critical_section(self):
                if self.row_of is None:
                    self.row_of = built
                return self.row_of
        if self.row_of is None:
            self.row_of = built
        return self.row_of

    def locate(self, items):
        """Row for an address list: `(row, exact)`, or `(-1, False)` if none.

        `exact` is False when the address names a non-empty segment whose
        first executable row is `row`.
        """
        key = tuple(items)
        row_of = self.row_of
        if row_of is None:
            row_of = self._publish_row_of({addr: row for row, addr in enumerate(self.addrs)})
        row = row_of.get(key)
        if row is not None:
            return row, True
        row = self.seg_row.get(key)
        if row is not None:
            return row, False
        return -1, False


_EMPTY_POINTER = (
    "{}() on an empty pointer: after a finished run, reset(), pop() or clear() there is no current slot to move"
)


def address_list(value, what):
    """`value` (a PointerVector, or a list or tuple of ints) as a new list; `TypeError` naming `what`
    otherwise."""
    if isinstance(value, PointerVector):
        return _checked_items(list(cython.cast(PointerVector, value)._list()), what)
    if isinstance(value, (list, tuple)):
        return _checked_items(list(value), what)
    raise InvalidOperand(
        f"{what} needs an address (a list or tuple of ints, or a PointerVector), not {type(value).__name__}"
    )


# Thread safety, the contract of 1.1.3: each method of a PointerVector or a Stack is atomic with
# respect to other threads (a sequence of calls is not). The compiled core gets that from the GIL (each
# method is one C call that runs no Python code between its check and its write) and, on a free-threaded
# build, from the object's critical section, taken wherever a field is written or read and kept (the
# `cython.critical_section` blocks: nothing with the GIL); here one lock for all of them does it, not one
# per object, so the objects carry only their state (they copy and pickle alike in both cores). Nothing
# is released or called back while it is held.
_ATOMIC = threading.Lock()


class PointerVector:
    """The program counter: a list of indices from the root segment down.

    While bound to a program it is a lazy view: the core moves `_row` and
    the list is materialised only when someone reads it. Every write is
    checked (a list of ints; `offset` / `near_to` need a current slot).
    """

    # No lock of its own: the module's `_ATOMIC` makes each mutator atomic (see there).
    __slots__ = ("_items", "_prog", "_row")

    def __init__(self, base=None):
        if base is None:
            self._items = [0]
        elif isinstance(base, list):  # kept, not copied, as in 1.1.3
            self._items = _checked_items(base, "PointerVector(base)") or [0]
        else:
            self._items = address_list(base, "PointerVector(base)") or [0]
        self._row = -1
        self._prog = None

    @staticmethod
    def _at_row(prog, row):
        """A vector bound to `row` of `prog`, as the loop leaves the pointer (restoring a saved one)."""
        _check_bindable(prog, row)
        return _bound_pointer(prog, row)

    def _list(self):
        # The view is materialised here, at the first read or write from Python (base_addr,
        # indexing, a mutator); the loop itself only rebinds (`_sense_core._bind`) and compares rows, so a
        # run nobody inspects builds no list. Once built, `_items` is the address: `_row` / `_prog`
        # are kept only for `_still_at`.
        if cython.compiled:
            with cython.critical_section(self):
                return self._materialised()
        return self._materialised()

    def _materialised(self):
        items = self._items
        if items is None:
            items = list(self._bound_addr())
            self._items = items
        return items

    def _set_list(self, items):
        """Make the vector the unbound address `items` (a list of ints)."""
        if cython.compiled:
            with cython.critical_section(self):
                self._items = items
        else:
            self._items = items

    def _bound_addr(self):
        if self._prog is None:  # made by __new__ without __init__ (the pure build: an unset slot)
            raise TypeError("PointerVector was created without __init__ and holds no address")
        return self._prog.addrs[self._row]

    @property
    def base_addr(self):
        return self._list()

    @base_addr.setter
    def base_addr(self, value):
        if isinstance(value, list):
            self._set_list(_checked_items(value, "PointerVector.base_addr"))
        else:
            self._set_list(address_list(value, "PointerVector.base_addr"))

    @base_addr.deleter
    def base_addr(self):
        _refuse_delete("base_addr")

    def offset(self, offset):
        _check_index(offset, "PointerVector.offset(offset)")
        with _ATOMIC:
            items = self._list()
            if not items:
                raise IndexError(_EMPTY_POINTER.format("PointerVector.offset"))
            items[-1] += offset
            return self

    def offset_far(self, offset):
        offset = address_list(offset, "PointerVector.offset_far(offset)")
        with _ATOMIC:
            items = self._list()
            items[:] = _offset_far(items, offset)
            return self

    def near_to(self, short_offset):
        _check_index(short_offset, "PointerVector.near_to(short_offset)")
        with _ATOMIC:
            items = self._list()
            if not items:
                raise IndexError(_EMPTY_POINTER.format("PointerVector.near_to"))
            items[-1] = short_offset
            return self

    def far_to(self, addr):
        addr = address_list(addr, "PointerVector.far_to(addr)")
        with _ATOMIC:
            self._list()[:] = addr
            return self

    def pop(self):
        with _ATOMIC:
            return self._list().pop()

    def append(self, node_ip):
        _check_index(node_ip, "PointerVector.append(node_ip)")
        with _ATOMIC:
            self._list().append(node_ip)

    def clear(self):
        with _ATOMIC:
            self._set_list([])

    def copy(self):
        if cython.compiled:
            with cython.critical_section(self):
                return self._copied()
        return self._copied()

    def _copied(self):
        if self._items is None:
            self._bound_addr()  # an uninitialised vector raises here
            return _bound_pointer(self._prog, self._row)
        return PointerVector(list(self._items))

    def __reduce__(self):
        # copy, deepcopy and pickle keep the address, unbound, and load on either core (`_portable`)
        return _portable.pointer_reduce(self, list(self._list()))

    def __add__(self, other):
        if not isinstance(other, PointerVector):
            raise InvalidOperand(f"PointerVector + needs a PointerVector, not {type(other).__name__}")
        return self.copy().offset_far(other.base_addr)

    def __sub__(self, other):
        if not isinstance(other, PointerVector):
            raise InvalidOperand(f"PointerVector - needs a PointerVector, not {type(other).__name__}")
        return self.copy().offset_far([-i for i in other.base_addr])

    def __bool__(self):
        if cython.compiled:
            with cython.critical_section(self):
                return self._items is None or bool(self._items)
        return self._items is None or bool(self._items)

    def __eq__(self, value):
        if not isinstance(value, type(self)):
            return False
        return self._list() == cython.cast(PointerVector, value)._list()

    def __hash__(self):
        return hash(tuple(self._list()))

    def __repr__(self):
        return f"PointerVector({self._list()})"

    def __getitem__(self, index):
        return self._list()[index]

    def __setitem__(self, index, value):
        if isinstance(index, slice):
            value = address_list(value, "PointerVector[...] = value")
        else:
            _check_index(value, "PointerVector[index] = value")
        with _ATOMIC:
            self._list()[index] = value

    def __iter__(self):
        return iter(list(self._list()))

    def __len__(self):
        if cython.compiled:
            with cython.critical_section(self):
                return len(self._bound_addr()) if self._items is None else len(self._items)
        return len(self._bound_addr()) if self._items is None else len(self._items)

    def __delitem__(self, key):
        raise ValueError("Cannot delete items from PointerVector")


def _bound_pointer(prog, row):
    """A vector bound to `row` of `prog` (the core's own, unchecked)."""
    vec = PointerVector.__new__(PointerVector)
    vec._items = None  # type: ignore[assignment]  # bound: no list until `_list` makes one
    vec._row = row
    vec._prog = prog
    return vec


def _check_bindable(prog, row):
    if not isinstance(prog, Program):
        raise InvalidOperand(f"PointerVector._at_row(prog) needs a Program, not {type(prog).__name__}")
    _check_index(row, "PointerVector._at_row(row)")
    if not 0 <= row < prog.nrows:
        raise IndexError(f"row {row} is outside the node table of {prog.nrows} rows")


def _offset_far(base, offset):
    """Element-wise sum after zero-padding; cut at the first negative coordinate."""
    width = max(len(base), len(offset))
    base = base + [0] * (width - len(base))
    offset = offset + [0] * (width - len(offset))
    result = []
    for a, b in zip(base, offset):
        if a + b < 0:
            break
        result.append(a + b)
    return result


class Stack:
    """A bounded LIFO stack; `push` past the limit raises `OverflowError`."""

    __slots__ = ("_items", "_limit")

    def __init__(self, ovf=1024):
        _check_index(ovf, "Stack(ovf)")
        self._items = []
        self._limit = _ssize(ovf)

    def _items_ref(self):
        """The item list, read under the stack's critical section (threads: see `_ATOMIC`)."""
        if cython.compiled:
            with cython.critical_section(self):
                return self._items
        return self._items

    @property
    def stack(self):
        """The items, bottom first (a list)."""
        return self._items_ref()

    @stack.setter
    def stack(self, value):
        if not isinstance(value, list):
            raise InvalidOperand(f"Stack.stack must be a list, not {type(value).__name__}")
        if cython.compiled:
            with cython.critical_section(self):
                self._items = value
        else:
            self._items = value

    @stack.deleter
    def stack(self):
        _refuse_delete("stack")

    @property
    def ovf(self):
        """The capacity: `push` on a stack this long raises `OverflowError`."""
        return self._limit

    @ovf.setter
    def ovf(self, value):
        _check_index(value, "Stack.ovf")
        self._limit = _ssize(value)

    @ovf.deleter
    def ovf(self):
        _refuse_delete("ovf")

    def __class_getitem__(cls, item):
        return cls

    def __len__(self):
        return len(self._items_ref())

    def __repr__(self):
        return repr(self._items_ref())

    def __str__(self):
        return str(self._items_ref())

    def __bool__(self):
        return bool(self._items_ref())

    def push(self, item):
        if cython.compiled:  # atomic: no Python code runs between the check and the write (see `_ATOMIC`)
            with cython.critical_section(self):
                self._push(item)
        else:
            with _ATOMIC:
                self._push(item)

    def pop(self):
        if cython.compiled:
            with cython.critical_section(self):
                return self._pop()
        with _ATOMIC:
            return self._pop()

    def _push(self, item):
        if cython.compiled:  # the compiled core's loop pushes its return addresses the same way
            bounded_push(self._items, self._limit, item)
        elif len(self._items) >= self._limit:
            raise OverflowError("Stack overflow")
        else:
            self._items.append(item)

    def _pop(self):
        if cython.compiled:
            return checked_pop(self._items)
        if not self._items:
            raise IndexError("Stack is empty")
        return self._items.pop()

    def clear(self):
        items = self._items_ref()
        with _ATOMIC:
            dropped = items[:]  # the items' last references go after the lock: a __del__ may push
            items.clear()
        del dropped

    def resize(self, size):
        _check_index(size, "Stack.resize(size)")
        self.ovf = size

    def copy(self):
        """A shallow copy, a `Stack` also for a subclass (as 1.1.3 and `list.copy`); `copy.copy` keeps the class."""
        copied = Stack(self._limit)
        copied.stack = self._items_ref().copy()
        return copied

    def __reduce__(self):
        return _portable.stack_reduce(self, self._limit, self._items_ref())


class InterpretLock:
    """The interpreter lock: FIFO, owned by a task, handed over on release.

    Uncontended acquire and release are a few field writes. A contended
    acquirer parks on a future; `release` hands the lock straight to the
    first live waiter, so the main loop cannot take it back before an
    injected call has run.
    """

    __slots__ = ("_owner", "_queue")

    def __init__(self):
        self._owner = None
        self._queue = []  # (future, owner) in arrival order; a list or None, as the compiled core's field

    @property
    def owner(self):
        return self._owner

    @property
    def _waiters(self):
        """The parked acquirers, `(future, owner)` in arrival order (a list), or None before the first."""
        return self._queue

    @_waiters.setter
    def _waiters(self, value):
        self._queue = _optional(value, list, "_waiters", "a list")

    @_waiters.deleter
    def _waiters(self):
        _refuse_delete("_waiters")

    def locked(self):
        return self._owner is not None

    def async_owned(self):
        return self._owner is not None and self._owner is _current_task()

    def _try_take(self, owner):
        if self._owner is None and not self._queue:
            self._owner = owner
            return True
        return False

    async def async_acquire(self, blocking=True, timeout=None):
        owner = _current_task()
        if owner is not None and self._owner is owner:
            raise RuntimeError("the current task is already holding this lock")
        if self._try_take(owner):
            return True
        if not blocking:
            return False
        return await self._park(owner, timeout)

    async def _park(self, owner, timeout):
        fut = asyncio.get_running_loop().create_future()
        entry = (fut, owner)
        if self._queue is None:
            self._queue = []
        self._queue.append(entry)
        try:
            if timeout is None:
                await fut
            else:
                await asyncio.wait_for(asyncio.shield(fut), timeout)
            return True
        except BaseException:
            self._abandon(entry)
            raise

    def _abandon(self, entry):
        fut = entry[0]
        if fut.done() and not fut.cancelled():
            self.async_release()
            return
        fut.cancel()
        try:
            self._queue.remove(entry)
        except ValueError:
            pass

    def async_release(self):
        self._release()

    def _release(self):
        # Each step leaves a state `_release_held_by` can finish if an asynchronous exception
        # (KeyboardInterrupt) stops the release half-way: a waiter is woken before it is made the
        # owner and removed, so a woken waiter is never lost.
        waiters = self._queue
        while waiters:
            fut, owner = waiters[0]
            if fut.done():  # cancelled: it gave up waiting
                waiters.pop(0)
                continue
            fut.set_result(True)
            self._owner = owner
            waiters.pop(0)
            break
        else:
            self._owner = None

    def _release_held_by(self, holder):
        """Release the lock if `holder` (a run that has ended) still owns it, that is, its last
        release was cut short; a waiter it had already woken becomes the owner."""
        if holder is None or self._owner is not holder:
            return
        waiters = self._queue
        if waiters and waiters[0][0].done() and not waiters[0][0].cancelled():
            self._owner = waiters.pop(0)[1]
            return
        self._release()

    acquire = async_acquire
    release = async_release

    async def __aenter__(self):
        await self.async_acquire()
        return self

    async def __aexit__(self, exc_type, exc, tb):
        self.async_release()


def _new_lock():
    """`InterpretLock()` without the call protocol; its waiter list is made by the first waiter."""
    lock = InterpretLock.__new__(InterpretLock)
    lock._owner = None
    lock._queue = None  # type: ignore[assignment]  # no waiter list until the first waiter
    return lock


def _new_stack():
    """`Stack()` without the call protocol."""
    stack = Stack.__new__(Stack)
    stack._items = []
    stack._limit = 1024
    return stack


def _task_table():
    """asyncio's table of each running loop's current task when `asyncio.current_task` is the Python
    function that only reads it (Python 3.10 and 3.11; from 3.12 it is C code, called as it is), else None."""
    table = getattr(asyncio.tasks, "_current_tasks", None)
    reader = asyncio.current_task
    if (
        type(table) is dict
        and getattr(reader, "__code__", None) is not None
        and reader.__globals__.get("_current_tasks") is table
    ):
        return table
    return None


_TASK_TABLE = _task_table()  # threads: asyncio's own table, one entry per running loop; only read here
_running_loop = asyncio.get_running_loop


def _current_task():
    """The running task, or None outside a running loop (a RecursionError, a RuntimeError too, is raised):
    `asyncio.current_task()`, without its Python frame where it has one (`_task_table`)."""
    try:
        if _TASK_TABLE is None:
            return asyncio.current_task()
        return _TASK_TABLE.get(_running_loop())
    except RecursionError:
        raise
    except RuntimeError:
        return None


def _start_pointer(prog):
    """`[0]`, bound to the first row when that row is the top-level slot 0."""
    if prog.nrows and len(prog.addrs[0]) == 1:
        return _bound_pointer(prog, 0)
    return PointerVector([0])


def _still_at(ptr, prog, row):
    """True when the pointer designates `row` of `prog` (bound to it, or a list equal to its address)."""
    if ptr._prog is not prog or ptr._row != row:
        return False
    return ptr._items is None or tuple(ptr._list()) == prog.addrs[row]
