"""Moving a parked run onto an edited graph: every address its snapshot holds, found again by identity.

A deploy replaces a graph with a new version; the runs parked on the old one
(halted at SUSPEND, parked at a gate, panicked, between nodes) hold addresses
of the old graph. `WorkflowInterpreter.restore(graph, data, migrate=True)`
moves each of them onto the new graph, or refuses with `GraphMismatch`; it
never guesses. `plan_migration(graph, data)` says what it would do (or raises
the same error) without restoring anything, for a deploy pipeline.

Identity. Each row of a node table has an identity that does not depend on
where the row is (`fingerprint.RowIdentities`: the node's class, function, tag,
sub-graph fingerprints and compiled operands), and an occurrence: how many
earlier rows have the same identity. A row of the old graph is the row of the
new graph with the same identity and occurrence.

What a snapshot carries (the engine document's optional "identity" key, see
`amrita_sense.durable.snapshots.capture`): one ANCHOR per distinct address of the root
interpreter's state, so a snapshot costs a few hundred bytes more however
large the graph::

    ANCHOR = [address, kind: "row" | "first" | "after", depth: int,
              frames: how many frame segments (see below) hold the address,
              row: the anchor row in the snapshot's graph, identity: 16 hex digits,
              occurrence: int, count: how many rows have that identity,
              gap: null (a unique identity) or [identity of the nearest unique row before it or null,
                   of the nearest unique row after it or null, index among the rows of that gap
                   with its identity, their number],
              enters: the frame segment the row enters after pushing a return entry, or null,
              node: what the row holds (class, function, tag), for error messages]

`kind` says how the address relates to its anchor row: "row", it is the row's
address; "first", it names a segment whose first row is the anchor, `depth`
levels down (`at + [0] * depth`); "after", it is one past the last item of a
segment whose last row is the anchor, `depth` levels below `at`'s length (a
pointer that ran past the end). An address that is none of these (an address
of nothing) gets no anchor and cannot be moved. Snapshots written before this
key existed restore as before and are not migratable.

Mapping. Every address the snapshot holds is moved (its slots, named in
errors and in `MigrationPlan.moves`: "pointer", "return address k" (bottom
first), "context k", "saved stack j address k", "memo k node", "memo k address",
"attempts k", "step in flight"). An address maps through its anchor row; the
refusals, each a `GraphMismatch` naming the slot, the old address, the old
row's node and why:

- the anchor's identity is not in the new graph: the node is gone (a FUN_BLOCK /
  BATCH_RUN step in flight whose sub-graph changed is gone too: the sub-graph is
  part of its identity, and its children's state is restored unchanged);
- the identity occurs a different number of times in the two graphs: which one
  is meant cannot be told (never guessed by position);
- the identity occurs several times and the row found by occurrence does not sit
  between the same unique rows with the same number of duplicates before it in
  its gap: the duplicates were reordered, so again which one is meant cannot be told;
- "first" and "after" addresses keep their relation exactly: the new anchor row
  must again be the first row of a segment `depth` levels down, or the last row
  of the segment the pointer ran past, at the same depth;
- the frames must still fit: a frame segment is one a CALL (its FN) or a loop
  head (its body) enters after pushing a return entry (`fingerprint.Frames`).
  Every address of a stack (the return stack and the pointer above it, a
  context's stack and its pointer) must lie in as many frame segments as
  before, and the address above a CALL or loop head entry must still lie in the
  segment that entry entered (a run moved into a loop or an FN it was not
  called into, or out of one it was, is refused). Above an entry of another
  kind (PUSH_RET) the address must keep lying, or not lying, in the entry's own
  segment. Contexts pushed by INT are checked only through their addresses.

What lies between. The pointer keeps its node, not its position: a node
inserted before the pointer's node does not run (the run continues at its
node), a node inserted after it runs; a halted run steps past its node onto
whatever now follows it. A return address is the CALL's (or loop head's) own
row, so a node inserted just after a CALL in flight runs when the call returns.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from amrita_sense.durable.errors import CorruptSnapshot, GraphMismatch
from amrita_sense.durable.snapshots import format as fmt
from amrita_sense.durable.snapshots.fingerprint import GraphOutline, RowIdentities, describe_node

ROW, FIRST, AFTER = "row", "first", "after"
"""How an address relates to its anchor row (see the module docstring)."""
_KINDS = (ROW, FIRST, AFTER)
_ANCHOR_FIELDS = 11
_HEX_DIGITS = frozenset("0123456789abcdef")
_NO_IDENTITY = (
    "the snapshot predates migration support (it carries no row identities): it restores only on its own graph"
)


@dataclass(frozen=True)
class MigrationPlan:
    """Where a snapshot's run would go on a graph (`plan_migration`, `restore(..., migrate=True)`)."""

    old_fingerprint: str
    """The fingerprint of the graph the snapshot was taken on."""
    new_fingerprint: str
    """The fingerprint of the graph it would be restored on."""
    moves: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...]
    """`(slot, old address, new address)` for every address the snapshot holds, also those that stay
    where they were (empty for a snapshot that predates migration support, on its own graph)."""
    identical: bool
    """True when the graph is the snapshot's own and nothing moves: a plain restore."""


@dataclass(frozen=True)
class Anchor:
    """A decoded ANCHOR: the row of the snapshot's graph an address hangs on, and how."""

    kind: str
    depth: int
    frames: int
    row: int
    identity: int
    nth: int
    of: int
    gap: tuple[int | None, int | None, int, int] | None
    enters: tuple[int, ...] | None
    node: str


# ----- the addresses a state holds ------------------------------------------------------------


def held_addresses(state: dict) -> Iterator[tuple[tuple[str, int, int], list[int]]]:
    """`(slot, address)` for every address of a (checked) root STATE; see `slot_name` for the slots."""
    yield ("pointer", 0, 0), state["ptr"]
    for k, addr in enumerate(state["ret"]["items"]):
        yield ("return address", k, 0), addr
    for k, ctx in enumerate(state["ctx"]["items"]):
        yield ("context", k, 0), ctx["ptr"]
    for j, stack in enumerate(state["stacks"]):
        for k, addr in enumerate(stack["items"]):
            yield ("saved stack", j, k), addr
    for k, (node, value) in enumerate(state["memo"]):
        yield ("memo node", k, 0), node
        yield ("memo address", k, 0), value
    for k, item in enumerate(state.get("attempts", ())):
        yield ("attempts", k, 0), item[0]
    if state["children"] is not None:
        yield ("step in flight", 0, 0), state["children"]["at"]


def slot_name(slot: tuple[str, int, int]) -> str:
    kind, k, j = slot
    if kind in ("pointer", "step in flight"):
        return kind
    if kind == "saved stack":
        return f"saved stack {k} address {j}"
    if kind.startswith("memo"):
        return f"memo {k} {kind[5:]}"
    return f"{kind} {k}"


# ----- at snapshot time: the anchors ---------------------------------------------------------------


_ANCHOR_TEXTS_KEPT = 1024
"""How many sets of addresses a graph keeps the encoded anchors of (a run visits few)."""


def anchors_text(outline: GraphOutline, state: dict) -> str:
    """`anchors_of(outline, state)` as JSON text, kept per graph by the addresses it names."""
    return _kept_anchors_text(outline, tuple(map(tuple, _addresses(state))))


def pointer_anchors_text(outline: GraphOutline, ptr: list[int]) -> str:
    """`anchors_text` of a state whose only address is its pointer `ptr` (nothing on its stacks)."""
    return _kept_anchors_text(outline, (tuple(ptr),))


def _kept_anchors_text(outline: GraphOutline, addresses: tuple[tuple[int, ...], ...]) -> str:
    kept = outline.anchor_texts
    text = kept.get(addresses)
    if text is None:
        if len(kept) >= _ANCHOR_TEXTS_KEPT:
            kept.clear()
        text = kept[addresses] = fmt.json_text(_anchors(outline, addresses))
    return text


def anchors_of(outline: GraphOutline, state: dict) -> list[list]:
    """The ANCHOR of every distinct address of `state` that lands on `outline`'s graph."""
    return _anchors(outline, map(tuple, _addresses(state)))


def _anchors(outline: GraphOutline, addresses: Any) -> list[list]:
    anchors: list[list] = []
    seen: set[tuple] = set()
    for key in addresses:
        if not key or key in seen:
            continue
        seen.add(key)
        found = _anchor_row(outline.program, key)
        if found is not None:
            row, kind, depth = found
            anchors.append([list(key), kind, depth, outline.frames.around(key), *_row_anchor(outline, row)])
    return anchors


def _addresses(state: dict) -> list[list[int]]:
    """The addresses of `held_addresses`, without their slots (the snapshot's fast path)."""
    found = [state["ptr"], *state["ret"]["items"]]
    found.extend(ctx["ptr"] for ctx in state["ctx"]["items"])
    for stack in state["stacks"]:
        found.extend(stack["items"])
    for node, value in state["memo"]:
        found += (node, value)
    found.extend(item[0] for item in state.get("attempts", ()))
    if state["children"] is not None:
        found.append(state["children"]["at"])
    return found


def _anchor_row(prog: Any, addr: tuple) -> tuple[int, str, int] | None:
    """`(row, kind, depth)` of the row `addr` hangs on (see the module docstring), or None."""
    row, exact = prog.locate(addr)
    if row >= 0:
        return (row, ROW, 0) if exact else (row, FIRST, len(prog.addrs[row]) - len(addr))
    if addr[-1] <= 0:
        return None
    last_item = (*addr[:-1], addr[-1] - 1)
    row, _ = prog.locate(last_item)
    if row < 0:
        return None  # `addr` is not one past the last item of a segment: it names nothing
    row = _last_row_under(prog, row, addr[:-1])
    return row, AFTER, len(prog.addrs[row]) - len(addr)


def _last_row_under(prog: Any, row: int, prefix: tuple) -> int:
    """The last row from `row` on whose address starts with `prefix` (the end of that segment)."""
    addrs, size = prog.addrs, len(prefix)
    while row + 1 < prog.nrows and addrs[row + 1][:size] == prefix:
        row += 1
    return row


def _row_anchor(outline: GraphOutline, row: int) -> list:
    """The part of an ANCHOR that depends on its row only (made once per row, then kept with the outline)."""
    kept = outline.row_cache.get(row)
    if kept is None:
        kept = outline.row_cache[row] = _make_row_anchor(outline, row)
    return kept


def _make_row_anchor(outline: GraphOutline, row: int) -> list:
    ids = outline.identities
    ident = ids.hashes[row]
    of = ids.count(ident)
    gap = None
    if of > 1:
        before, after = ids.before[row], ids.after[row]
        gap = [_hex(ids, before), _hex(ids, after), ids.gap_index[row], ids.gap_count[row]]
    enters = outline.frames.entered.get(row)
    segment = None if enters is None else list(enters)
    return [row, f"{ident:016x}", ids.occurrence[row], of, gap, segment, describe_node(outline.program, row)]


def _hex(ids: RowIdentities, row: int) -> str | None:
    return None if row < 0 else f"{ids.hashes[row]:016x}"


# ----- reading the anchors back ----------------------------------------------------------------


def read_anchors(decoded: fmt.Decoded) -> dict[tuple, Anchor] | None:
    """The snapshot's anchors by address, or None when it has none (it predates migration support).

    Raises `CorruptSnapshot` naming the "identity" key when it is malformed.
    """
    value = decoded.document.get("identity")
    if value is None:
        return None
    if type(value) is not list:
        raise CorruptSnapshot("identity: expected a list of anchors")
    rows = len(decoded.outline) // 4
    anchors: dict[tuple, Anchor] = {}
    for i, item in enumerate(value):
        where = f"identity[{i}]"
        if type(item) is not list or len(item) != _ANCHOR_FIELDS:
            raise CorruptSnapshot(f"{where}: expected an anchor (a list of {_ANCHOR_FIELDS} fields)")
        at = item[0]
        if type(at) is not list or not at or not all(type(x) is int for x in at):
            raise CorruptSnapshot(f"{where}[0]: expected a non-empty address")
        anchors[tuple(at)] = _read_anchor(item, where, rows)
    return anchors


def _read_anchor(item: list, where: str, rows: int) -> Anchor:
    _, kind, depth, frames, row, identity, nth, of, gap, enters, node = item
    if kind not in _KINDS:
        raise CorruptSnapshot(f"{where}[1]: expected one of {', '.join(_KINDS)}")
    depth = _count(depth, f"{where}[2]")
    if (kind == ROW and depth) or (kind == FIRST and not depth):
        raise CorruptSnapshot(f"{where}[2]: a depth of {depth} does not fit the kind {kind!r}")
    frames = _count(frames, f"{where}[3]", len(item[0]))
    row = _count(row, f"{where}[4]", rows - 1)
    of = _count(of, f"{where}[7]", rows, low=1)
    nth = _count(nth, f"{where}[6]", of - 1)
    gap = _read_gap(gap, f"{where}[8]", of)
    if enters is not None and (type(enters) is not list or not all(type(x) is int for x in enters)):
        raise CorruptSnapshot(f"{where}[9]: expected a segment address or null")
    if type(node) is not str:
        raise CorruptSnapshot(f"{where}[10]: expected a description")
    segment = None if enters is None else tuple(enters)
    return Anchor(kind, depth, frames, row, _identity(identity, f"{where}[5]"), nth, of, gap, segment, node)


def _read_gap(value: Any, where: str, of: int) -> tuple[int | None, int | None, int, int] | None:
    if of == 1:
        if value is not None:
            raise CorruptSnapshot(f"{where}: a unique row has no gap")
        return None
    if type(value) is not list or len(value) != 4:
        raise CorruptSnapshot(f"{where}: expected [identity or null, identity or null, index, count]")
    before = None if value[0] is None else _identity(value[0], where + "[0]")
    after = None if value[1] is None else _identity(value[1], where + "[1]")
    count = _count(value[3], where + "[3]", of)
    return before, after, _count(value[2], where + "[2]", count - 1), count


def _count(value: Any, where: str, high: int = 2**31, low: int = 0) -> int:
    if type(value) is not int or not low <= value <= high:
        raise CorruptSnapshot(f"{where}: expected an integer in [{low}, {high}]")
    return value


def _identity(value: Any, where: str) -> int:
    if type(value) is not str or len(value) != 16 or not set(value) <= _HEX_DIGITS:
        raise CorruptSnapshot(f"{where}: expected an identity (16 hex digits)")
    return int(value, 16)


# ----- mapping ------------------------------------------------------------------------------------


def plan(live: GraphOutline, expected: str, state: dict, anchors: dict[tuple, Anchor] | None) -> tuple:
    """`(MigrationPlan, state moved onto live's graph)` for a checked root STATE; `GraphMismatch` if it cannot move.

    The addresses are mapped even when the fingerprints are equal: the fingerprint does not
    see compiled operands (two graphs that differ only in which FN a CALL calls have the same
    one), the identities do.
    """
    same = live.fingerprint == expected
    if anchors is None:
        if same:
            return MigrationPlan(expected, live.fingerprint, (), True), state
        raise GraphMismatch(_NO_IDENTITY, row=None, address=None, expected=expected, actual=live.fingerprint)
    mover = _Mover(live, expected, anchors, in_flight=state["children"] is not None)
    moved = mover.state(state)
    _check_frames(mover, state, moved)
    stays = all(old == new for _, old, new in mover.moves)
    return MigrationPlan(expected, live.fingerprint, tuple(mover.moves), same and stays), moved


class _Mover:
    """Moves the addresses of one state onto the live graph, recording each move."""

    def __init__(self, live: GraphOutline, expected: str, anchors: dict[tuple, Anchor], in_flight: bool) -> None:
        self.in_flight = in_flight
        """The pointer's node is a FUN_BLOCK / BATCH_RUN step with sub-interpreters."""
        self.prog = live.program
        self.ids = live.identities
        self.frames = live.frames
        self.expected = expected
        self.actual = live.fingerprint
        self.anchors = anchors
        self.moves: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = []

    def state(self, state: dict) -> dict:
        """A copy of the root STATE with every address moved (the sub-interpreters' states unchanged)."""
        slots = {slot: self.address(slot, addr) for slot, addr in held_addresses(state)}
        moved = dict(state)
        moved["ptr"] = slots["pointer", 0, 0]
        moved["ret"] = {
            **state["ret"],
            "items": [slots["return address", k, 0] for k in range(len(state["ret"]["items"]))],
        }
        moved["ctx"] = {
            **state["ctx"],
            "items": [{**ctx, "ptr": slots["context", k, 0]} for k, ctx in enumerate(state["ctx"]["items"])],
        }
        moved["stacks"] = [
            {**stack, "items": [slots["saved stack", j, k] for k in range(len(stack["items"]))]}
            for j, stack in enumerate(state["stacks"])
        ]
        moved["memo"] = [[slots["memo node", k, 0], slots["memo address", k, 0]] for k in range(len(state["memo"]))]
        if "attempts" in state:
            moved["attempts"] = [[slots["attempts", k, 0], *item[1:]] for k, item in enumerate(state["attempts"])]
        if state["children"] is not None:
            moved["children"] = {**state["children"], "at": slots["step in flight", 0, 0]}
        return moved

    def address(self, slot: tuple, addr: list[int]) -> list[int]:
        """Where `addr` (held in `slot`) goes on the live graph."""
        if not addr:
            moved: list[int] = []  # an ended run's pointer names no row on either graph
        else:
            anchor = self.anchors.get(tuple(addr))
            if anchor is None:
                raise self.refuse(slot, addr, None, "it lands on no row of the snapshot's graph")
            moved = self._through(slot, addr, anchor, self.row(slot, addr, anchor))
        self.moves.append((slot_name(slot), tuple(addr), tuple(moved)))
        return moved

    def row(self, slot: tuple, addr: list[int], anchor: Anchor) -> int:
        """The live row with the anchor's identity and occurrence (checked to be the same row)."""
        rows = self.ids.rows_of.get(anchor.identity, ())
        if not rows:
            gone = "its node is not in this graph"
            if self.in_flight and slot[0] in ("pointer", "step in flight"):
                gone += " (a step in flight moves only with its sub-graphs unchanged)"
            raise self.refuse(slot, addr, anchor, gone)
        if len(rows) != anchor.of:
            why = (
                f"its node appears {_times(anchor.of)} in the snapshot's graph and {_times(len(rows))} in this one, "
                "so which one it is cannot be told"
            )
            raise self.refuse(slot, addr, anchor, why)
        row = rows[anchor.nth]
        if anchor.gap is not None and not self._same_gap(anchor.gap, row, rows):
            why = (
                f"its node appears {_times(anchor.of)} in both graphs, but the rows around occurrence {anchor.nth} "
                "changed, so which one it is cannot be told"
            )
            raise self.refuse(slot, addr, anchor, why)
        return row

    def _same_gap(self, gap: tuple, row: int, rows: tuple[int, ...]) -> bool:
        """True when `row` sits between the live rows of the gap's unique neighbours, with as many
        duplicates before it in that stretch as the old row had in its gap."""
        before, after, index, count = gap
        low = -1 if before is None else self._unique_row(before)
        high = self.prog.nrows if after is None else self._unique_row(after)
        if low is None or high is None:
            return False
        start, end = bisect_right(rows, low), bisect_left(rows, high)
        return end - start == count and rows[start + index] == row

    def _unique_row(self, identity: int) -> int | None:
        rows = self.ids.rows_of.get(identity, ())
        return rows[0] if len(rows) == 1 else None

    def _through(self, slot: tuple, addr: list[int], anchor: Anchor, row: int) -> list[int]:
        """The live address that stands to `row` as `addr` stood to the anchor row."""
        here = self.prog.addrs[row]
        if anchor.kind == ROW:
            return list(here)
        depth = anchor.depth
        if anchor.kind == FIRST:
            if len(here) > depth and not any(here[len(here) - depth :]):
                return list(here[: len(here) - depth])
            why = f"it names the segment its node starts; in this graph its node does not start a segment {depth} up"
            raise self.refuse(slot, addr, anchor, why)
        size = len(addr)
        if len(here) == size + depth and self._last_of_segment(row, here[: size - 1]):
            return [*here[: size - 1], here[size - 1] + 1]
        why = "it is past the end of the segment its node ends; in this graph its node does not end that segment"
        raise self.refuse(slot, addr, anchor, why)

    def _last_of_segment(self, row: int, prefix: tuple) -> bool:
        addrs, size = self.prog.addrs, len(prefix)
        return row + 1 == self.prog.nrows or addrs[row + 1][:size] != prefix

    def refuse(self, slot: tuple, addr: list[int], anchor: Anchor | None, why: str) -> GraphMismatch:
        """The error for a slot that cannot move (`row` and `address` are the snapshot's)."""
        where = f"the {slot_name(slot)} {list(addr)}"
        if anchor is not None:
            where += f" (row {anchor.row} of the snapshot's graph: {anchor.node})"
        detail = f"cannot move {where} onto this graph: {why}"
        row = None if anchor is None else anchor.row
        return GraphMismatch(detail, row=row, address=list(addr), expected=self.expected, actual=self.actual)


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


# ----- consistency: the frames of the stacks ----------------------------------------------------------


Link = tuple[tuple, list[int]]
"""`(slot, address)`: one address of a stack chain."""


def _chains(state: dict) -> Iterator[list[Link]]:
    """Per stack (the live one, then each context's), its entries bottom first and the pointer above them."""
    live = [(("return address", k, 0), addr) for k, addr in enumerate(state["ret"]["items"])]
    yield [*live, (("pointer", 0, 0), state["ptr"])]
    for k, ctx in enumerate(state["ctx"]["items"]):
        ref = ctx["stack"]
        if ref is None:
            continue
        own = [(("saved stack", ref, i), a) for i, a in enumerate(state["stacks"][ref]["items"])]
        yield [*(live if ref == -1 else own), (("context", k, 0), ctx["ptr"])]


def _check_frames(mover: _Mover, old: dict, new: dict) -> None:
    """`GraphMismatch` when a stack's addresses no longer sit in the frames their entries made (module docstring)."""
    for chain, moved in zip(_chains(old), _chains(new)):
        for i, ((slot, addr), (_, moved_addr)) in enumerate(zip(chain, moved)):
            if not addr:
                continue
            anchor = mover.anchors[tuple(addr)]
            around = mover.frames.around(moved_addr)
            if around != anchor.frames:
                why = (
                    f"it lies in {anchor.frames} frames (FN or loop bodies) in the snapshot's graph and in {around} "
                    "in this one, so its stack would not fit"
                )
                raise mover.refuse(slot, addr, anchor, why)
            if i + 1 < len(chain):
                _check_entry(mover, slot, addr, anchor, moved_addr, chain[i + 1 :], moved[i + 1 :])


def _check_entry(
    mover: _Mover,
    slot: tuple,
    addr: list[int],
    anchor: Anchor,
    moved_addr: list[int],
    above: list[Link],
    moved_above: list[Link],
) -> None:
    """The address just above a stack entry lies in the frame the entry entered, in both graphs or in neither;
    above an entry that entered no frame, every address keeps lying (or not) in the entry's own segment."""
    row, exact = mover.prog.locate(moved_addr)
    enters = mover.frames.entered.get(row) if exact else None
    if anchor.enters is not None or enters is not None:
        pairs = [(above[0], moved_above[0], anchor.enters, enters)]
        what = "the segment the entry entered (an FN, a loop body)"
    else:
        own = tuple(addr[:-1])
        pairs = [(a, m, own, tuple(moved_addr[:-1])) for a, m in zip(above, moved_above)]
        what = "its segment"
    for (other, old_addr), (_, new_addr), old_segment, new_segment in pairs:
        was, now = _inside(old_segment, old_addr), _inside(new_segment, new_addr)
        if was != now:
            where = "lies" if was else "does not lie"
            why = f"in the snapshot's graph the {slot_name(other)} {where} in {what}, in this graph that changed"
            raise mover.refuse(slot, addr, anchor, why)


def _inside(segment: tuple[int, ...] | None, addr: list[int]) -> bool:
    """True when `addr` lies in `segment` (None: no segment)."""
    return segment is not None and bool(addr) and tuple(addr[: len(segment)]) == segment
