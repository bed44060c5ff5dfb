"""Breakpoints: by tag, by address or alias, each with an optional condition.

Setting the first breakpoint on an interpreter wraps its middleware in a
debug middleware. Before a node runs (in the main loop and in `call_sub`),
the debug middleware looks the current slot up in an index of the enabled
breakpoints and raises `BreakpointHit` when one matches. `BreakpointHit` is
a `BaseException`: the run stops without recording a panic, and the state
stays resumable. The middleware then calls the user's middleware, if any,
or the node itself.

The check costs a dictionary lookup or two per node: the index maps table
rows (address breakpoints) and tags (tag breakpoints) to breakpoints, and is
rebuilt only when the breakpoints or the interpreter's node table change.
An interpreter with no debugger attached runs exactly as before.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from amrita_sense.debugger._checks import require_interpreter
from amrita_sense.exceptions import InvalidOperand

if TYPE_CHECKING:
    from amrita_sense.runtime.workflow import WorkflowInterpreter

_generation = itertools.count(1)
_edits = [0]
"""Bumped whenever a breakpoint's target, kind or enabled flag changes, to refresh the indexes."""
# threads: `_edits[0] = next(_generation)`: the count is atomic and a value never comes twice, so an
# index is rebuilt after any edit of any thread (a stale store only makes one more rebuild)


@dataclass
class Breakpoint:
    """A breakpoint attached to one interpreter.

    Attributes:
        target: The tag (`kind="tag"`) or the address (`kind="addr"`) to stop at.
        kind: `"tag"` matches the node's `tag`; `"addr"` matches the slot's address.
        condition: Optional `(interpreter) -> bool`; the breakpoint stops only
            when it returns true (an exception in it counts as false).
        hit_count: How many times the breakpoint has stopped a run.
        enabled: A disabled breakpoint never stops.
    """

    target: str | list[int]
    kind: Literal["tag", "addr"]
    condition: Callable[[WorkflowInterpreter], bool] | None = None
    hit_count: int = 0
    enabled: bool = True

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in ("target", "kind", "enabled"):
            _edits[0] = next(_generation)

    def __str__(self) -> str:
        cond = " cond" if self.condition else ""
        if self.kind == "tag":
            return f"tag='{self.target}' hits={self.hit_count}{cond}"
        return f"addr={self.target} hits={self.hit_count}{cond}"


class BreakpointHit(BaseException):
    """Raised by the debug middleware when a breakpoint matches; `bp` is the breakpoint.

    `addr` is the address of the slot that was about to run (inside a
    `call_sub` it differs from the pointer the run is left at).
    """

    def __init__(self, bp: Breakpoint, addr: list[int] | None = None) -> None:
        super().__init__(bp)
        self.bp = bp
        self.addr = addr

    def __str__(self) -> str:
        return str(self.bp)


class _Index:
    """Enabled breakpoints keyed by table row and by tag, for one node table."""

    __slots__ = ("by_row", "by_tag", "edits", "prog")

    def __init__(self, prog: Any, edits: int, by_row: dict, by_tag: dict):
        self.prog = prog
        self.edits = edits
        self.by_row = by_row
        self.by_tag = by_tag


class _DebugState:
    """Debugger state of one interpreter."""

    __slots__ = ("breakpoints", "debug_active", "debug_mw", "index", "owner", "resume_at", "saved_user_mw", "stepping")

    def __init__(self, inter: WorkflowInterpreter):
        self.owner = weakref.ref(inter)
        self.breakpoints: list[Breakpoint] = []
        self.saved_user_mw: Callable | None = None
        self.debug_mw: Callable | None = None
        self.debug_active = False
        self.stepping = False
        self.resume_at: tuple[int, ...] | None = None
        self.index: _Index | None = None

    def changed(self) -> None:
        self.index = None


_debug_state: dict[str, _DebugState] = {}
# threads: per interpreter (keyed by its id); an interpreter is driven by one thread at a time, and
# different interpreters never share an entry. Single setitem / get / pop are atomic


def _get_state(inter: WorkflowInterpreter) -> _DebugState:
    state = _debug_state.get(inter.id)
    if state is None or state.owner() is not inter:
        state = _debug_state[inter.id] = _DebugState(inter)
    return state


# ----- the check ----------------------------------------------------------------------


def _index_for(state: _DebugState, prog: Any) -> _Index:
    index = state.index
    if index is None or index.prog is not prog or index.edits != _edits[0]:
        index = state.index = _build_index(state.breakpoints, prog)
    return index


def _build_index(breakpoints: list[Breakpoint], prog: Any) -> _Index:
    by_row: dict[int, list[tuple[int, Breakpoint]]] = {}
    by_tag: dict[str, list[tuple[int, Breakpoint]]] = {}
    for order, bp in enumerate(breakpoints):
        if not bp.enabled:
            continue
        if bp.kind == "tag":
            by_tag.setdefault(bp.target, []).append((order, bp))  # type: ignore[arg-type]  # a tag is a str
            continue
        row = _row_of(prog, bp.target)
        if row is not None:
            by_row.setdefault(row, []).append((order, bp))
    return _Index(prog, _edits[0], by_row, by_tag)


def _row_of(prog: Any, target: Any) -> int | None:
    """The table row an address breakpoint stops at; a segment address stops at its first node."""
    try:
        row, _ = prog.locate(list(target))
    except TypeError:
        return None
    return row if row >= 0 else None


def _candidates(index: _Index, row: int, node: Any) -> list[tuple[int, Breakpoint]]:
    found = index.by_row.get(row)
    if index.by_tag:
        tagged = index.by_tag.get(node.tag)
        if tagged:
            found = sorted(found + tagged, key=lambda pair: pair[0]) if found else tagged
    return found or []


def _condition_holds(bp: Breakpoint, pc: WorkflowInterpreter) -> bool:
    if bp.condition is None:
        return True
    try:
        return bool(bp.condition(pc))
    except Exception:
        return False


def _check(state: _DebugState, pc: WorkflowInterpreter) -> None:
    """Raise `BreakpointHit` when an enabled breakpoint matches the slot about to run."""
    row = pc._descend_current()
    prog = pc._prog
    if state.resume_at is not None and tuple(prog.addrs[row]) == state.resume_at:
        state.resume_at = None
        return
    index = _index_for(state, prog)
    if not (index.by_row or index.by_tag):
        return
    for _, bp in _candidates(index, row, prog.nodes[row]):
        if _condition_holds(bp, pc):
            bp.hit_count += 1
            raise BreakpointHit(bp, list(prog.addrs[row]))


def _make_debug_middleware(state: _DebugState, user_mw: Callable | None) -> Callable:
    """Breakpoint check, then the user's middleware (or the node itself)."""

    async def debug_mw(pc: WorkflowInterpreter) -> Any:
        if not state.stepping and (state.breakpoints or state.resume_at is not None) and state.owner() is pc:
            _check(state, pc)
        if user_mw is not None:
            return await user_mw(pc)
        return await pc._call()

    return debug_mw


def _ensure_debug_middleware(inter: WorkflowInterpreter) -> _DebugState:
    """Install the debug middleware on `inter` once, keeping its own middleware behind it."""
    state = _get_state(inter)
    if not state.debug_active:
        state.saved_user_mw = inter._middleware
        state.debug_mw = _make_debug_middleware(state, inter._middleware)
        inter._middleware = state.debug_mw
        state.debug_active = True
    return state


# ----- public API ---------------------------------------------------------------------


def _resolve_addr(inter: WorkflowInterpreter, addr: list[int] | str) -> list[int]:
    """An alias resolved through the graph (`NullPointerException` if unknown), or the address as a list."""
    if isinstance(addr, str):
        return list(inter.get_graph().calc.resolve_alias(addr))
    if isinstance(addr, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool) for i in addr):
        return list(addr)
    if hasattr(addr, "base_addr"):
        return list(addr.base_addr)
    raise InvalidOperand(f"a breakpoint address is an alias or a list of ints, not {addr!r}")


def _check_condition(condition: Any) -> None:
    if condition is not None and not callable(condition):
        raise InvalidOperand(f"condition must be a callable taking the interpreter, not {condition!r}")


def _add(inter: WorkflowInterpreter, bp: Breakpoint) -> Breakpoint:
    state = _ensure_debug_middleware(inter)
    state.breakpoints.append(bp)
    state.changed()
    print(f"🔴 Breakpoint: {bp}")
    return bp


def break_at_tag(
    inter: WorkflowInterpreter,
    tag: str,
    *,
    condition: Callable[[WorkflowInterpreter], bool] | None = None,
) -> Breakpoint:
    """Stop before any node whose tag is `tag` runs; returns the `Breakpoint`."""
    require_interpreter(inter, "break_at_tag")
    if not isinstance(tag, str):
        raise InvalidOperand(f"tag must be a str, not {type(tag).__name__}")
    _check_condition(condition)
    return _add(inter, Breakpoint(target=tag, kind="tag", condition=condition))


def break_at_addr(
    inter: WorkflowInterpreter,
    addr: list[int] | str,
    *,
    condition: Callable[[WorkflowInterpreter], bool] | None = None,
) -> Breakpoint:
    """Stop before the node at `addr` runs; `addr` is an address list or an alias.

    The alias is resolved now. A segment address stops at the first node of
    the segment.
    """
    require_interpreter(inter, "break_at_addr")
    _check_condition(condition)
    resolved = _resolve_addr(inter, addr)
    return _add(inter, Breakpoint(target=resolved, kind="addr", condition=condition))


def _remove(inter: WorkflowInterpreter, kind: str, target: Any) -> None:
    state = _get_state(inter)
    removed = [bp for bp in state.breakpoints if bp.kind == kind and bp.target == target]
    gone = {id(bp) for bp in removed}
    state.breakpoints = [bp for bp in state.breakpoints if id(bp) not in gone]
    state.changed()
    for bp in removed:
        print(f"✖  Removed: {bp}")


def clear_break_tag(inter: WorkflowInterpreter, tag: str) -> None:
    """Remove every tag breakpoint on `tag`."""
    require_interpreter(inter, "clear_break_tag")
    _remove(inter, "tag", tag)


def clear_break_addr(inter: WorkflowInterpreter, addr: list[int] | str) -> None:
    """Remove every address breakpoint at `addr` (an address list or an alias)."""
    require_interpreter(inter, "clear_break_addr")
    _remove(inter, "addr", _resolve_addr(inter, addr))


def _condition_name(condition: Any) -> str:
    return getattr(condition, "__name__", "<lambda>")


def list_breaks(inter: WorkflowInterpreter) -> None:
    """Print the breakpoints of `inter`, numbered from 1."""
    require_interpreter(inter, "list_breaks")
    breakpoints = _get_state(inter).breakpoints
    if not breakpoints:
        print("(no breakpoints)")
        return
    for number, bp in enumerate(breakpoints, 1):
        cond = f" cond={_condition_name(bp.condition)}" if bp.condition else ""
        status = "" if bp.enabled else " [DISABLED]"
        print(f"  {number}. {bp.kind.upper()}  {bp.target!r}  hits={bp.hit_count}{cond}{status}")


def cleanup(inter: WorkflowInterpreter) -> None:
    """Forget the debug state of `inter` and give it back its original middleware.

    The middleware is restored only if the debug middleware is still the
    installed one; a middleware set by the user since then is left alone.
    """
    require_interpreter(inter, "cleanup")
    state = _debug_state.pop(inter.id, None)
    if state is None:
        return
    state.breakpoints = []
    state.resume_at = None
    state.changed()
    if state.debug_active and inter._middleware is state.debug_mw:
        inter._middleware = state.saved_user_mw


__all__ = [
    "Breakpoint",
    "BreakpointHit",
    "break_at_addr",
    "break_at_tag",
    "cleanup",
    "clear_break_addr",
    "clear_break_tag",
    "list_breaks",
]
