"""A run drawn over its graph: where the pointer is, the return and context stacks, the path taken.

An `Overlay` is plain data about one run of the drawn graph (addresses of the graph's own
slots, never of a sub-graph): read from a live interpreter (`Overlay.of`), from a snapshot
(`Overlay.of_snapshot`, read-only: nothing is restored or run), from a run's checkpoint history
(`Overlay.of_history`), or recorded while the run goes (`Overlay.recorder()`). The exporters
mark the pointer's node, the return addresses and saved contexts, and shade visited nodes with
their counts (`marks`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from amrita_sense.debugger._checks import require_interpreter
from amrita_sense.durable import inspect_snapshot
from amrita_sense.durable.snapshots.fingerprint import graph_fingerprint
from amrita_sense.durable.snapshots.format import decode
from amrita_sense.pictures.errors import OverlayMismatch
from amrita_sense.pictures.model import GraphPicture
from amrita_sense.runtime.steps import step_loop

Address = tuple[int, ...]

VISIT_SHADES = ((10, "visited3"), (2, "visited2"), (1, "visited1"))
"""The shade of a visited node by its count: the first whose threshold the count reaches."""


@dataclass(frozen=True)
class NodeMark:
    """How one node is drawn under an overlay: its style class and the lines added to its label."""

    style: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Overlay:
    """One run over the drawn graph. `pointer` (None: not started or finished), `returns` and
    `contexts` bottom first, `visits` as `(address, count)` pairs in address order."""

    pointer: Address | None = None
    returns: tuple[Address, ...] = ()
    contexts: tuple[Address, ...] = ()
    visits: tuple[tuple[Address, int], ...] = ()

    @classmethod
    def of(cls, interp: Any, *, visits: Any = None) -> Overlay:
        """The state of a live interpreter (pointer, return stack, context stack), with the
        `visits` of a recorder (or an address -> count mapping) when given."""
        require_interpreter(interp, "Overlay.of", "_pointer", "_ret_addr_stack", "_context_stack")
        pointer = tuple(interp._pointer.base_addr) or None
        returns = tuple(tuple(entry.base_addr) for entry in interp._ret_addr_stack.stack)
        contexts = tuple(tuple(ctx.ptr.base_addr) for ctx in interp._context_stack.stack)
        return cls(pointer, returns, contexts, _visit_pairs(visits))

    @classmethod
    def of_snapshot(cls, data: bytes, graph: Any) -> Overlay:
        """The run a snapshot (`interp.snapshot()`) holds, checked and read without restoring it.
        `OverlayMismatch` when it was taken on another graph; `SnapshotFormatError` if unreadable."""
        _check_fingerprint(inspect_snapshot(data).fingerprint, graph, "the snapshot")
        return cls(*_state_addresses(decode(data).document["interp"]))

    @classmethod
    def of_history(cls, store: Any, run_id: str, graph: Any) -> Overlay:
        """The path of a run through its kept checkpoints (`store.history(run_id)`, then the latest):
        each checkpoint's pointer counts as one visit; pointer and stacks are the latest's."""
        history = getattr(store, "history", None)
        if history is None:
            raise TypeError(f"Overlay.of_history needs a store that keeps history, not {type(store).__name__}")
        latest = store.load(run_id)
        versions = [record.version for record in history(run_id)]
        if latest.record.version not in versions:
            versions.append(latest.record.version)
        counts: dict[Address, int] = {}
        state: tuple[Address | None, tuple[Address, ...], tuple[Address, ...]] = (None, (), ())
        for version in versions:
            loaded = latest if version == latest.record.version else store.load(run_id, version=version)
            _check_fingerprint(loaded.record.fingerprint, graph, f"checkpoint {version} of run {run_id!r}")
            state = _state_addresses(decode(loaded.data).document["interp"])
            if state[0] is not None:
                counts[state[0]] = counts.get(state[0], 0) + 1
        pointer, returns, contexts = state
        return cls(pointer, returns, contexts, _visit_pairs(counts))

    @staticmethod
    def recorder() -> RunRecorder:
        """A recorder of the nodes a run steps through (see `RunRecorder`)."""
        return RunRecorder()

    def marks(self, picture: GraphPicture) -> dict[str, NodeMark]:
        """Per node id of `picture`, how this overlay draws it (nodes it does not touch are absent)."""
        lines: dict[str, list[str]] = {}
        styles: dict[str, str] = {}
        for address, count in self.visits:
            node = picture.node_for(address)
            if node is not None:
                lines.setdefault(node.id, []).append(f"visits: {count}")
                styles[node.id] = next(style for floor, style in VISIT_SHADES if count >= floor)
        self._mark_stack(picture, self.contexts, "context", "contextaddr", lines, styles)
        self._mark_stack(picture, self.returns, "return", "returnaddr", lines, styles)
        if self.pointer is not None:
            node = picture.node_for(self.pointer)
            if node is not None:
                lines.setdefault(node.id, []).insert(0, "=> pointer")
                styles[node.id] = "pointer"
        return {nid: NodeMark(styles[nid], tuple(lines[nid])) for nid in sorted(styles)}

    @staticmethod
    def _mark_stack(picture: GraphPicture, stack: tuple, name: str, style: str, lines: dict, styles: dict) -> None:
        """Mark each address of a stack, the top as #1."""
        for depth, address in enumerate(reversed(stack), start=1):
            node = picture.node_for(address)
            if node is not None:
                lines.setdefault(node.id, []).append(f"{name} #{depth}")
                styles[node.id] = style


def _visit_pairs(visits: Any) -> tuple[tuple[Address, int], ...]:
    if visits is None:
        return ()
    if isinstance(visits, RunRecorder):
        visits = visits.counts
    items: Iterable = visits.items() if hasattr(visits, "items") else visits
    return tuple(sorted((tuple(address), int(count)) for address, count in items))


def _state_addresses(state: dict) -> tuple[Address | None, tuple[Address, ...], tuple[Address, ...]]:
    """`(pointer, returns, contexts)` of a snapshot's interpreter state object (checked already)."""
    pointer = tuple(state["ptr"]) or None
    returns = tuple(tuple(item) for item in state["ret"]["items"])
    contexts = tuple(tuple(item["ptr"]) for item in state["ctx"]["items"])
    return pointer, returns, contexts


def _check_fingerprint(fingerprint: str, graph: Any, what: str) -> None:
    if fingerprint != graph_fingerprint(graph):
        raise OverlayMismatch(f"{what} was taken on another graph (fingerprint {fingerprint})")


class RunRecorder:
    """Counts the main-loop nodes a run steps through, by address.

    `await recorder.run(interp)` runs `interp` through the general step loop with the recorder
    as its step runner (`runtime.steps.step_loop`); or pass the recorder as the step runner of
    your own loop. Conditions and bodies a clause calls are part of their clause's step: only the
    nodes the pointer stands on count. `overlay(interp)` gives the overlay with these visits.
    """

    __slots__ = ("counts", "steps")

    def __init__(self) -> None:
        self.counts: dict[Address, int] = {}
        self.steps = 0

    def see(self, address: Any) -> None:
        """Count one visit of `address`."""
        key = tuple(address)
        self.counts[key] = self.counts.get(key, 0) + 1
        self.steps += 1

    async def run_step(self, interp: Any) -> Any:
        """Run the step the pointer stands on (the step runner protocol of `step_loop`), counted."""
        self.see(interp._pointer.base_addr)
        return await interp._run_current()

    async def run(self, interp: Any) -> None:
        """Run `interp` to its end (or a suspend) through the step loop, counting every step."""
        require_interpreter(interp, "RunRecorder.run", "_run_current")
        steps = step_loop(interp, None, self)
        try:
            async for _ in steps:
                pass
        finally:
            await steps.aclose()

    def overlay(self, interp: Any = None) -> Overlay:
        """The visits as an overlay; with `interp`, also its pointer and stacks."""
        if interp is not None:
            return Overlay.of(interp, visits=self.counts)
        return Overlay(visits=_visit_pairs(self.counts))


__all__ = ["VISIT_SHADES", "NodeMark", "Overlay", "RunRecorder"]
