"""Event dispatch's hot path: the per-event-type dispatch lock, and one coroutine that dispatches an
event without extra arguments to handlers whose injection is a plain keyword call (issue 43).

Everything else (extra arguments, keyword arguments, `Depends`, providers, unresolved handlers, a
contended lock, a plan not made yet or no longer fitting, a handler re-signed or expired meanwhile)
is the hook layer's: `hook.matcher` gives its slow paths and tables through `install`, and makes the
plans this module runs (`remember`). A plan here is the hook layer's own `_DispatchPlan`, each step
with what its call needs ready: the keyword names and, per argument, the matcher or the event.

One source for both builds: Cython compiles it with `_events.pxd` into `amrita_sense.core._events`
(the lock's state and the plans' fields are C fields there, the lock a `PyThread` lock); the pure
build runs it as `amrita_sense.core.pure_events`.
"""

from __future__ import annotations

import asyncio
import threading
import types
from collections import deque
from typing import Any

try:
    import cython
except ModuleNotFoundError:  # a pure build without Cython installed
    from amrita_sense.core import cython_shim as cython  # type: ignore[no-redef,unused-ignore]

if not cython.compiled and __name__.rpartition(".")[2] == "_events":
    # imported as Python under the compiled module's name: the extension is not built here
    raise ImportError("the compiled core is not built here; the pure build is amrita_sense.core.pure_events")

if not cython.compiled:  # the pure build (type checkers read these)
    from amrita_sense.core.pure_structures import _current_task  # type: ignore[attr-defined]
else:
    from cython.cimports.amrita_sense.core._capi import (
        FREE_THREADED,
        PyCoro_CheckExact,
        coro_start,
        has_code,
        keyword_call,
        picks_call,
        rest_type_ready,
    )
    from cython.cimports.amrita_sense.core._capi_events import class_tag, is_true, same_items

    rest_type_ready()
    from cython.cimports.amrita_sense.core._structures import _current_task
    from cython.cimports.cpython.object import Py_SIZE
    from cython.cimports.cpython.pythread import (
        NOWAIT_LOCK,
        PyThread_acquire_lock,
        PyThread_allocate_lock,
        PyThread_free_lock,
        PyThread_get_thread_ident,
        PyThread_release_lock,
    )

_GUARD = threading.Lock()
"""threads: guards the queue of waiters (`_waiters`) of every DispatchLock against the check-then-act of a
waiter queueing itself and a holder handing the lock over (one lock for all: held for a few field reads
and writes, never across an await or a call out). Taken only on the contended path: a take of a free lock
and the release of a lock nobody waits for never take it (see `DispatchLock`)."""


class DispatchLock:
    """A FIFO async lock that serialises the dispatches of one event type.

    Held means its thread lock is acquired (compiled: a `PyThread` lock; pure: a
    `threading.Lock`). Taking a free lock is one non-blocking acquire of it
    (`try_take`): an atomic test-and-set in every build, free-threaded included,
    so the uncontended take, from any thread, needs no guard. `release` with
    nobody queued is one release; with waiters it hands the lock straight to the
    first one (it stays acquired: ownership moves, nobody can barge in). Futures
    are created on the running loop only when someone has to wait, so one lock
    serves any event loop: a waiter of another thread's loop is woken through
    that loop (`call_soon_threadsafe`), never by setting its future from here.

    threads: a waiter queues itself (under `_GUARD`), then tries the take again;
    a releaser that saw no waiter frees the lock, then looks at the queue again.
    Either the waiter's second try comes after the free (it takes the lock, or
    whoever took it first will see the waiter when it releases), or the
    releaser's second look comes after the queueing (it takes the lock back and
    hands it over): no waiter is left waiting on a free lock. A dispatch arriving
    in that window may take the lock ahead of such a waiter; the waiters queued
    before a release are always served in their order.

    A dispatch that triggers the same event type again from inside itself (same
    task) would wait for itself forever; `acquire` finds that the lock is held by
    its own task and raises `RuntimeError` instead. The holder is `_owner`, the
    task that took the lock through `try_take` or `acquire`, or, for the core's
    fast dispatch (which asks for no task), `_running` on thread `_thread`: the
    coroutine of the handler it awaits. While that coroutine runs on this thread,
    whatever runs on this thread runs inside it, so in the holder's task.
    threads: written by the holder only; another thread compares them with its
    own task and thread, which they can never be, so a stale read changes nothing.
    """

    __slots__ = ("__weakref__", "_held", "_owner", "_running", "_thread", "_waiters")

    def __cinit__(self) -> None:  # the compiled build only
        if cython.compiled:
            self._mutex = PyThread_allocate_lock()
            if self._mutex == cython.NULL:
                raise MemoryError("no lock for a DispatchLock")

    def __dealloc__(self) -> None:  # the compiled build only
        if cython.compiled:
            if self._mutex != cython.NULL:
                PyThread_free_lock(self._mutex)

    def __init__(self) -> None:
        if not cython.compiled:
            self._held = threading.Lock()
        self._owner = None
        self._running = None
        self._thread = 0
        self._waiters: deque[asyncio.Future] = deque()

    def try_take(self) -> bool:
        """Take the lock if it is free (without waiting); whether it did."""
        if self._take():
            self._owner = _current_task()
            return True
        return False

    def locked(self) -> bool:
        if cython.compiled:
            return self._is_held
        return self._held.locked()

    def _take(self) -> bool:
        """One non-blocking acquire: with the GIL, a test-and-set of `_is_held` (nothing else runs
        between the test and the set); without it, of the thread lock."""
        if cython.compiled:
            if not FREE_THREADED:
                if self._is_held:
                    return False
                self._is_held = True
                return True
            if PyThread_acquire_lock(self._mutex, NOWAIT_LOCK):
                self._is_held = True
                return True
            return False
        return self._held.acquire(False)

    def _free(self) -> None:
        """Release (`RuntimeError` when it is not held, as `threading.Lock`'s)."""
        if cython.compiled:
            if not self._is_held:
                raise RuntimeError("release unlocked lock")
            self._is_held = False
            if FREE_THREADED:
                PyThread_release_lock(self._mutex)
        else:
            self._held.release()

    async def acquire(self) -> bool:
        if self._take():
            self._owner = _current_task()
            return True
        owner = _current_task()
        if self._held_by(owner):
            raise RuntimeError(
                "an event of this type is already being dispatched by the current task; "
                "triggering it again from its own handler would wait forever"
            )
        fut = asyncio.get_running_loop().create_future()
        with _GUARD:
            self._waiters.append(fut)
        if self._take():  # freed meanwhile (see the class): ours, unless handed to `fut` too
            self._withdraw(fut)
            self._owner = owner
            return True
        try:
            await fut
        except BaseException:
            self._abandon(fut)
            raise
        self._owner = owner
        return True

    def _hold_here(self) -> None:
        """The lock was taken by the fast dispatch of this thread (no task asked for)."""
        if cython.compiled:
            self._thread = PyThread_get_thread_ident()
        else:
            self._thread = threading.get_ident()

    def _held_by(self, owner: Any) -> bool:
        """Whether the lock is held by the task `owner` (the current one), which is running."""
        if owner is not None and self._owner is owner:
            return True
        if self._thread != threading.get_ident():
            return False
        running = self._running
        return running is not None and bool(
            getattr(running, "cr_running", False) or getattr(running, "gi_running", False)
        )

    def _withdraw(self, fut: asyncio.Future) -> None:
        """Unqueue `fut` after its task took the lock by itself."""
        with _GUARD:
            try:
                self._waiters.remove(fut)
                return
            except ValueError:
                pass
        # A releaser popped `fut` before its own re-take succeeded: impossible, since we hold the lock
        # and a releaser only pops a waiter while it holds it (it hands over, never frees then).
        raise AssertionError("a dispatch lock waiter was handed a lock its task had taken")  # pragma: no cover

    def _abandon(self, fut: asyncio.Future) -> None:
        if fut.done() and not fut.cancelled():
            self.release()
            return
        with _GUARD:
            try:
                self._waiters.remove(fut)
            except ValueError:
                pass

    def release(self) -> None:
        """Hand the lock to the first waiter still waiting, or free it."""
        self._release()

    def _release(self) -> None:
        self._owner = self._running = None
        self._thread = 0
        if cython.compiled and not FREE_THREADED:
            # with the GIL nothing can queue from the look to the free; a deque's length is its size field
            if Py_SIZE(self._waiters) == 0:
                self._free()
            else:
                self._serve()
        elif not self._waiters:
            self._free()
            if self._waiters and self._take():  # queued meanwhile: take the lock back to serve them
                self._serve()
        else:
            self._serve()

    def _serve(self) -> None:
        """Hand the held lock to the first waiter still waiting, or free it."""
        while not self._hand_over():
            self._free()
            if not self._waiters or not self._take():
                return

    def _hand_over(self) -> bool:
        """Give the held lock to the first waiter still waiting; False when none is (the lock still held)."""
        waiters = self._waiters
        while True:
            with _GUARD:
                if not waiters:
                    return False
                fut = waiters.popleft()
            if fut.done():  # cancelled: its task gives up without the lock
                continue
            loop = fut.get_loop()
            if loop is asyncio._get_running_loop():
                fut.set_result(True)
                return True
            try:
                loop.call_soon_threadsafe(self._wake, fut)
                return True
            except RuntimeError:  # that loop is closed: nobody waits on it any more
                continue

    def _wake(self, fut: asyncio.Future) -> None:
        """On the waiter's own loop: give it the lock, or pass the lock on if it was cancelled meanwhile."""
        if fut.done():
            self.release()
        else:
            fut.set_result(True)

    async def __aenter__(self) -> DispatchLock:
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()


# ----- the fast dispatch ---------------------------------------------------------------

MAX_FAST_ARGS = 8  # _capi.MAX_STACK_ARGS
"""A handler taking more parameters than this is dispatched by the hook layer."""


class FastStep:
    """One handler of a fast plan: its function, its matcher and that matcher's `block`, and how to
    call it: its keyword names, bit `i` of `picks` set when the `i`-th argument is the matcher (else
    the event). Valid while the registry's version has not moved (the hook layer bumps it when a
    handler's data, a matcher or an engine flag is written).

    `code`: when the names are the function's first parameters, in order, none positional-only (so a
    positional call binds exactly as the keyword call does), the function's code object then; the
    call is positional while the function still has it. Else None."""

    __slots__ = ("block", "code", "function", "matcher", "names", "nargs", "picks")

    def __init__(self, function: Any, matcher: Any, block: bool, names: tuple, picks: int) -> None:
        self.function, self.matcher, self.block = function, matcher, block
        self.names, self.picks, self.nargs = names, picks, len(names)
        self.code = _positional_code(function, names)


def _positional_code(function: Any, names: tuple) -> Any:
    """`function.__code__` when `function(*values)` binds as `function(**dict(zip(names, values)))`
    does: a plain function whose first parameters are `names`, in order, none positional-only."""
    if type(function) is not types.FunctionType:
        return None
    code = function.__code__
    n = len(names)
    if code.co_posonlyargcount or n > code.co_argcount or code.co_varnames[:n] != names:
        return None
    return code


class FastPlan:
    """The hook layer's plan of an argument-less dispatch of `event_type` for events of `event_class`,
    whose every handler is a plain keyword call: valid while the registry's version is `version`, its
    table is `table` and each priority group of `groups` still holds the handlers of `copies`.

    threads: immutable once published; stored in one setitem of `_plans`, read in one get."""

    __slots__ = (
        "copies",
        "event_class",
        "event_type",
        "groups",
        "lock",
        "no_exc_ignored",
        "slow_steps",
        "steps",
        "table",
        "version",
    )

    def __init__(self, event_type: str, event_class: type, lock: DispatchLock, state: tuple, steps: tuple) -> None:
        self.event_type, self.event_class, self.lock = event_type, event_class, lock
        self.version, self.table, self.groups, self.no_exc_ignored, self.slow_steps = state
        self.copies = tuple(tuple(handlers) for handlers in self.groups)
        self.steps = steps
        """`state`: the registry's version and table, the priority groups, whether the flag
        DISABLE_EXC_IGNORED is set, and the hook layer's steps (`run_rest` runs the rest of them)."""
        if cython.compiled:
            hook = _hook[0]
            self.table_tag = 0 if hook is None else _table_tag(cython.cast(_Hook, hook).registry, self.table)


_plans: dict = {}
"""event class -> the FastPlan of its last argument-less dispatch (emptied past `_PLAN_LIMIT`).
threads: see FastPlan."""
_last: list = [None]
"""`[plan]`: the plan `remember` stored last, or None: a dispatch of an event of its class finds it
without a look-up in `_plans` (it is also there). threads: one item read and written whole (a
free-threaded build's list keeps its reference safe; `forget` and `install` reset it)."""
_PLAN_LIMIT = 1024

_hook: list = [None]
"""`[_Hook]`: what the hook layer gave through `install` (None until then: every dispatch is its)."""


class _Hook:
    """The hook layer's parts: its slow dispatch, its registry, and the handler exceptions."""

    __slots__ = ("cancel", "log_failure", "matcher_error", "passed", "registry", "run_rest", "slow", "version")

    def __init__(self, parts: dict) -> None:
        self.slow, self.run_rest, self.log_failure = parts["slow"], parts["run_rest"], parts["log_failure"]
        self.registry, self.version = parts["registry"], parts["version"]
        self.passed, self.cancel, self.matcher_error = parts["passed"], parts["cancel"], parts["matcher_error"]


def install(**parts: Any) -> None:
    """Give the fast path the hook layer's parts (every name of `_Hook.__slots__`): `slow(cls, event,
    args, exception_ignored, kwargs, event_type)` dispatches what the fast path does not (`event_type`
    None when not read yet); `run_rest(steps, event, exception_ignored)` runs a plan's remaining
    steps; `log_failure(data, exc)`; the registry class and its version cell (`[version]`); the handler
    exceptions `passed`, `cancel`, `matcher_error`."""
    _hook[0] = _Hook(parts)
    _plans.clear()
    _last[0] = None


def remember(plan: FastPlan) -> None:
    """Keep `plan` for the next argument-less dispatch of an event of its class."""
    if len(_plans) >= _PLAN_LIMIT:
        _plans.clear()
    _plans[plan.event_class] = plan
    _last[0] = plan


def forget(event_class: type) -> None:
    _plans.pop(event_class, None)
    _last[0] = None


@cython.locals(hook=_Hook, lock=DispatchLock, plan=FastPlan, steps=tuple, index=cython.Py_ssize_t, step=FastStep)
async def trigger_event(cls: Any, event: Any, *args: Any, exception_ignored: tuple = (), **kwargs: Any) -> None:
    """`MatcherFactory.trigger_event`: an argument-less event whose plan fits is dispatched here, in
    this one coroutine (`_run_steps` of the hook layer, for plain keyword calls); anything else by the
    hook layer's own dispatch."""
    # The same steps in both builds, each build's own way: compiled, the casts skip a type test and
    # `is_true` reads `not event` without a call for the usual event class (no __bool__, no __len__);
    # the pure build takes the values as they are (a cast is a call there, and Cython's own
    # `cython.cast`, where Cython is installed, an expensive one). Only events have plans (the hook
    # layer checked their class).
    if cython.compiled:
        hook = cython.cast(_Hook, _hook[0])  # None or a _Hook (`install`)
        plan = cython.cast(FastPlan, _last[0])  # None or a FastPlan (`remember`)
        if plan is None or plan.event_class is not type(event):
            plan = cython.cast(FastPlan, _plans.get(type(event)))
        if args or kwargs or hook is None or plan is None or not is_true(event):
            return await _slow(cls, event, args, exception_ignored, kwargs, None)
    else:
        hook, plan = _hook[0], _last[0]
        if plan is None or plan.event_class is not type(event):
            plan = _plans.get(type(event))
        if args or kwargs or hook is None or plan is None or not event:
            return await _slow(cls, event, args, exception_ignored, kwargs, None)
    event_type = event.get_event_type()
    if not _fits(hook, plan, event_type):
        return await hook.slow(cls, event, args, exception_ignored, kwargs, event_type)
    lock = plan.lock
    if not lock._take():
        return await hook.slow(cls, event, args, exception_ignored, kwargs, event_type)
    lock._hold_here()
    try:
        if plan.no_exc_ignored:
            exception_ignored = ()
        steps = plan.steps
        for index in range(len(steps)):
            if index and not _current(hook, plan):  # a handler wrote a matcher, a handler's data or a flag
                # (not before the first: `_fits` has just seen the version, and nothing ran since)
                lock._owner = _current_task()  # the hook layer's handlers run in no coroutine of ours
                await hook.run_rest(plan.slow_steps[index:], event, exception_ignored)
                return
            step = _step_at(steps, index) if cython.compiled else steps[index]
            try:
                if cython.compiled:
                    rest = _start(_call(lock, step, event))
                    if rest is not None:
                        await rest
                else:
                    await _call(lock, step, event)
            except hook.passed:
                continue
            except hook.cancel:
                return
            except hook.matcher_error:
                raise
            except Exception as exc:
                if exception_ignored and isinstance(exc, exception_ignored):
                    raise
                hook.log_failure(plan.slow_steps[index][0], exc)
                continue
            current = _current(hook, plan) if cython.compiled else hook.version[0] == plan.version
            if step.block if current else step.matcher.block:
                return
    finally:
        lock._release()


@cython.locals(hook=_Hook)
async def _slow(cls: Any, event: Any, args: tuple, exception_ignored: Any, kwargs: dict, event_type: Any) -> None:
    hook = _hook[0]
    if hook is None:
        raise RuntimeError("event dispatch is not installed (import amrita_sense.hook.matcher)")
    await hook.slow(cls, event, args, exception_ignored, kwargs, event_type)


@cython.boundscheck(False)  # `index` is below len(steps): the dispatch's loop runs over range(len(steps))
@cython.wraparound(False)
def _step_at(steps: tuple, index: cython.Py_ssize_t) -> FastStep:
    """Compiled: the plan's step `index` (a FastStep: `remember`'s plans hold nothing else)."""
    return cython.cast(FastStep, steps[index])


@cython.boundscheck(False)  # the version cell is `[version]`
def _current(hook: _Hook, plan: FastPlan) -> bool:
    """Whether the registry's version is still the plan's."""
    version = hook.version[0]
    return version is plan.version or version == plan.version


def _fits(hook: _Hook, plan: FastPlan, event_type: Any) -> bool:
    """Whether `plan` is still the plan of an argument-less dispatch of `event_type`."""
    if plan.event_type is not event_type and plan.event_type != event_type:
        return False
    if cython.compiled:
        if not _current(hook, plan) or not _same_table(hook, plan):
            return False
        if not FREE_THREADED:  # with the GIL, one C loop over the groups' lists (`_capi.same_items`)
            return same_items(plan.groups, plan.copies)
    elif hook.version[0] != plan.version or hook.registry._event_handlers is not plan.table:
        # `_current`'s and `_same_table`'s tests, without the calls a pure build pays for
        return False
    return _same_handlers(plan.groups, plan.copies)


def _table_tag(registry: Any, table: Any) -> int:
    """Compiled: the version tag of the class `registry` (`_capi.class_tag`) while its `_event_handlers`
    is `table`, else 0. Read between two look-ups of the table: the first gives the class a tag when
    it has none, and a write after the tag was read changes the tag, so a plan's tag is never one of
    a class whose table was another."""
    if cython.compiled:
        if registry._event_handlers is table:
            tag = class_tag(registry)
            if registry._event_handlers is table:
                return tag
    return 0


def _same_table(hook: _Hook, plan: FastPlan) -> bool:
    """Compiled: whether the registry's table is still the plan's. The class's version tag unchanged
    since the plan was made means no attribute of it was written since, the table included; else
    (a tag changed or never read) the table is looked up."""
    if cython.compiled:
        if plan.table_tag != 0 and class_tag(hook.registry) == plan.table_tag:
            return True
    return hook.registry._event_handlers is plan.table


@cython.boundscheck(False)  # `groups` and `copies` have the same length; each group's is compared first
@cython.wraparound(False)
def _same_handlers(groups: tuple, copies: tuple) -> bool:
    """Each priority group still holds exactly the handlers it held (identity, in order)."""
    for g in range(len(copies)):
        if cython.compiled:  # the plan's own: lists (`groups` holds them) and tuples
            handlers, held = cython.cast(list, groups[g]), cython.cast(tuple, copies[g])
        else:  # a cast is a call in the pure build
            handlers, held = groups[g], copies[g]
        if len(handlers) != len(held):
            return False
        for i in range(len(held)):
            if handlers[i] is not held[i]:
                return False
    return True


def _call(lock: DispatchLock, step: FastStep, event: Any) -> Any:
    """The step's handler called with its keyword arguments (each the matcher or the event), or
    with them as positional ones while it keeps the code of `step.code`; its coroutine is the
    lock's `_running` while it runs (see `DispatchLock`)."""
    if cython.compiled:
        if step.code is not None and has_code(step.function, step.code):
            coro = picks_call(step.function, step.nargs, step.picks, step.matcher, event)
        else:
            coro = keyword_call(step.function, step.names, step.nargs, step.picks, step.matcher, event)
    else:
        if step.picks:
            values = [step.matcher if step.picks & (1 << i) else event for i in range(step.nargs)]
        else:  # every argument is the event (the usual handler): no loop
            values = [event] * step.nargs
        if step.code is not None and step.function.__code__ is step.code:
            coro = step.function(*values)
        else:
            coro = step.function(**dict(zip(step.names, values)))
    lock._running = coro
    return coro


def _start(awaitable: Any) -> Any:
    """What is left to await of a handler's `awaitable`: compiled, a native coroutine runs here up
    to its first suspension (None: it returned; else the rest of it, `_capi.coro_start`), as an
    `await` of it would, without the wrapper and the StopIteration such an `await` costs a compiled
    coroutine. Anything else, and in the pure build everything: `awaitable` itself."""
    if cython.compiled:
        if PyCoro_CheckExact(awaitable):
            return coro_start(awaitable)
    return awaitable
