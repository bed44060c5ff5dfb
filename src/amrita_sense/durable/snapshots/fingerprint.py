"""Graph identity: a stable fingerprint of a rendered graph and a per-slot outline.

Every row of the graph's node table (`Program`: one row per executable slot,
depth-first) is described by a line of text: its address, the node's class and
function (module and qualified name), its tag, the aliases that land on it,
the fingerprints of the sub-graphs it runs (FUN_BLOCK, BATCH_RUN) and its
compiled operands (the rows it calls, the addresses it jumps to: a CALL of
another subroutine is another graph). Nothing in
it depends on `id()`, hash randomisation, the process or the core, so two
renders of the same source give the same lines anywhere.

The fingerprint is the first 128 bits of SHA-256 over the lines. The outline
is one CRC-32 per row; a snapshot carries it so that a restore against another
graph can name the first slot that differs, and can tell whether every edit
lies before the point the run has reached.

Each row also has an identity (`GraphOutline.identities`, computed on first use
and kept with the outline): what the row holds without where it is, so that a
run can be moved onto an edited graph (`amrita_sense.durable.snapshots.migrate`). It is a
64-bit hash of the node's class, function and tag, the fingerprints of its
sub-graphs, and its compiled operands (the rows its opcode calls or jumps to),
each operand named without an address: an alias by its name, a slot of the
node's own segment by its offset from the node, any other row by that row's
identity without operands. Two CALLs of different functions, or two IF heads
whose branches differ in shape, therefore have different identities; two NOPs
have the same one.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections import OrderedDict
from contextlib import suppress
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from amrita_sense import core as _core
from amrita_sense.core.opcodes import OP_CALLSUB, OP_LOOP_CONTROL, OP_LOOP_HEAD, OP_RET, THEN
from amrita_sense.durable.errors import GraphMismatch
from amrita_sense.durable.snapshots.node_state import attempt_rows, memo_rows, sub_graphs
from amrita_sense.node.core import program_of

_CACHE_SIZE = 64
_cache: OrderedDict[int, tuple[Any, GraphOutline]] = OrderedDict()
_last: tuple[Any, GraphOutline | None] = (None, None)
"""The table asked for last and its outline (one tuple, replaced whole: a thread reads a pair that
belongs together): a run's saves ask for the same table again and again."""
# threads: idempotent, no lock: every operation on `_cache` is one OrderedDict call (atomic), a race on
# eviction is tolerated, and two threads missing at once build equal outlines (the last store wins). No
# lock on purpose: a snapshot runs inside a run, where a KeyboardInterrupt from a signal can land right
# after a `with lock:` acquired and before its block (PEP 419; Python 3.14's eval loop does land there),
# leaving the lock held and every later snapshot of the process hung.


@dataclass(frozen=True)
class GraphOutline:
    """The identity of one compiled graph: `fingerprint` (32 hex digits) and a digest per row."""

    fingerprint: str
    digests: tuple[int, ...]
    packed: bytes
    """The digests as little-endian unsigned 32-bit integers (the snapshot's outline section)."""
    program: Any
    memo_rows: tuple[int, ...]
    """The rows whose node keeps a return address it computes at its first execution."""
    attempt_rows: tuple[int, ...] = ()
    """The rows whose node has a policy (keeps the attempts of a step in flight)."""

    def describe_row(self, row: int) -> str:
        """What this graph holds at `row`, for error messages."""
        prog = self.program
        node = prog.nodes[row]
        where = f"{list(prog.addrs[row])} (row {row})"
        if prog.bits[row] & _core.ROW_EMPTY:
            return f"{where}: an empty segment"
        func = _callable_name(getattr(node, "func", None))
        return f"{where}: {_type_name(type(node))} `{func}` tagged {_tag(node)!r}"

    @cached_property
    def anchor_texts(self) -> dict[tuple, str]:
        """The encoded anchors of the sets of addresses snapshots of this graph named (see `migrate`)."""
        return {}

    @cached_property
    def identities(self) -> RowIdentities:
        """The identity of every row (computed on first use, then kept with the outline)."""
        return row_identities(self.program)

    @cached_property
    def frames(self) -> Frames:
        """The segments this graph's CALLs and loop heads enter with a return entry (computed on first use)."""
        return frames_of(self.program)

    @cached_property
    def row_cache(self) -> dict[int, Any]:
        """Per row, data derived from this outline once and kept with it (a snapshot's anchors)."""
        return {}


@dataclass(frozen=True)
class RowIdentities:
    """Per row of one node table: its identity (see the module docstring) and how it sits among the others.

    A row whose identity no other row of the table has is *unique*; the rows between two
    consecutive unique rows form a *gap*. The gap fields let a duplicate be found again in
    an edited graph only where its surroundings still say which one it is.
    """

    hashes: tuple[int, ...]
    rows_of: dict[int, tuple[int, ...]]
    """Identity -> the rows that have it, in table order."""
    occurrence: tuple[int, ...]
    """Per row: how many earlier rows have the same identity."""
    before: tuple[int, ...]
    """Per row: the nearest earlier unique row, or -1."""
    after: tuple[int, ...]
    """Per row: the nearest later unique row, or -1."""
    gap_index: tuple[int, ...]
    """Per row: how many earlier rows of its gap have the same identity (0 for a unique row)."""
    gap_count: tuple[int, ...]
    """Per row: how many rows of its gap have its identity (1 for a unique row)."""

    def count(self, identity: int) -> int:
        """How many rows have `identity`."""
        return len(self.rows_of.get(identity, ()))


@dataclass(frozen=True)
class Frames:
    """Where a graph's stack frames are: the segments a run is in with a return entry pushed for it.

    A CALL enters its FN's segment, a native loop head its body, a bubble (NATIVE_DO...) its
    body, each after pushing a return entry; the row that pops the entry (RET, CONTINUE)
    ends that segment. A run inside such a segment needs the entry on its return stack.
    """

    entered: dict[int, tuple[int, ...]]
    """Row -> the segment its opcode enters once it pushed its return entry."""
    segments: frozenset[tuple[int, ...]]
    """Every segment some row enters that way, and every segment whose last item pops the return stack."""

    def around(self, address: Any) -> int:
        """How many of those segments hold `address` (its proper prefixes that are one)."""
        return sum(tuple(address[:size]) in self.segments for size in range(len(address)))


def frames_of(prog: Any) -> Frames:
    """The frames of `prog`: the segment the THEN target of each pushing opcode (CALL, loop head) lies in, and
    each segment ending with a popping one (RET, CONTINUE: an FN no CALL calls is a frame too)."""
    entered = {}
    ended = set()
    for row in range(prog.nrows):
        op, record = prog.ops[row], prog.operands[row]
        if op in (OP_CALLSUB, OP_LOOP_HEAD) and record is not None and record[THEN] is not None:
            entered[row] = tuple(record[THEN][2][:-1])
        elif op in (OP_RET, OP_LOOP_CONTROL) and _ends_its_segment(prog, row):
            ended.add(tuple(prog.addrs[row][:-1]))
    return Frames(entered, frozenset(ended.union(entered.values())))


def _ends_its_segment(prog: Any, row: int) -> bool:
    """True when the row is the last item of its segment (no later row shares its segment)."""
    parent = prog.addrs[row][:-1]
    return row + 1 == prog.nrows or prog.addrs[row + 1][: len(parent)] != parent


def describe_node(prog: Any, row: int) -> str:
    """What `prog` holds at `row`, without where, in short: the node's class name, function and tag."""
    if prog.bits[row] & _core.ROW_EMPTY:
        return "an empty segment"
    node = prog.nodes[row]
    return f"{type(node).__qualname__} `{_callable_name(getattr(node, 'func', None))}` tagged {_tag(node)!r}"


def graph_fingerprint(graph: Any) -> str:
    """The stable fingerprint of a rendered graph (32 hex digits), the same in every process and core."""
    return outline_of(graph).fingerprint


def outline_of(graph: Any) -> GraphOutline:
    """The outline of a rendered graph's current node table (cached per table)."""
    return outline_of_program(program_of(graph))


def outline_of_program(prog: Any) -> GraphOutline:
    global _last
    last_prog, last_outline = _last
    if last_prog is prog and last_outline is not None:
        return last_outline
    outline = _cached_outline(prog)
    _last = (prog, outline)
    return outline


def _cached_outline(prog: Any) -> GraphOutline:
    key = id(prog)
    hit = _cache.get(key)
    if hit is not None and hit[0] is prog:
        with suppress(KeyError):  # evicted by another thread since
            _cache.move_to_end(key)
        return hit[1]
    outline = _build_outline(prog)
    _cache[key] = (prog, outline)
    while len(_cache) > _CACHE_SIZE:
        with suppress(KeyError):  # another thread evicted it first
            _cache.popitem(last=False)
    return outline


def _build_outline(prog: Any) -> GraphOutline:
    lines = _row_lines(prog)
    digest = hashlib.sha256()
    digests = []
    for line in lines:
        data = line.encode("utf-8", "surrogatepass")
        digest.update(data)
        digest.update(b"\n")
        digests.append(zlib.crc32(data))
    packed = struct.pack(f"<{len(digests)}I", *digests)
    return GraphOutline(digest.hexdigest()[:32], tuple(digests), packed, prog, memo_rows(prog), attempt_rows(prog))


def _row_lines(prog: Any) -> list[str]:
    aliases = _aliases_by_row(prog)
    lines = []
    for row in range(prog.nrows):
        parts = [".".join(map(str, prog.addrs[row])), *_node_parts(prog, row)]
        parts.extend(aliases.get(row, ()))
        parts.extend(_sub_parts(prog.nodes[row]))
        if prog.operands[row] is not None:  # the rows it calls, the addresses it jumps to (not the opcode:
            parts.append(f"operands={_plain(prog.operands[row])}")  # how a node is called may differ by process)
        lines.append("\x1f".join(parts))
    return lines


def _node_parts(prog: Any, row: int) -> list[str]:
    """The node at `row` as the outline names it: its class, function and tag (`<empty>` for an empty segment)."""
    if prog.bits[row] & _core.ROW_EMPTY:
        return ["<empty>"]
    node = prog.nodes[row]
    kind = getattr(type(node), "_outline_type", type(node))  # a policy node is named as its plain node
    return [_type_name(kind), _callable_name(getattr(node, "func", None)), _tag(node)]


def _sub_parts(node: Any) -> list[str]:
    return [f"sub={graph_fingerprint(graph)}" for graph in sub_graphs(node)]


def _plain(value: Any) -> str:
    """A compiled operand record as text that is the same in every process and on both cores (row
    numbers and addresses as they are, classes by name, anything else by its type's name)."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(_plain(item) for item in value) + ")"
    if isinstance(value, type):
        return _type_name(value)
    if callable(value):
        return _callable_name(value)
    return "<" + _type_name(type(value)) + ">"


def _aliases_by_row(prog: Any) -> dict[int, list[str]]:
    """Each alias as `alias=<address>`, on the row its address lands on (row -1: it lands on nothing)."""
    found: dict[int, list[str]] = {}
    alias_map = getattr(prog.graph, "alias2vector_map", None) or {}
    for name in sorted(alias_map):
        addr = list(alias_map[name])
        row, _ = prog.locate(addr) if addr else (-1, False)
        found.setdefault(max(row, 0), []).append(f"alias={name}@{'.'.join(map(str, addr))}")
    return found


def _type_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _callable_name(func: Any) -> str:
    if func is None:
        return "-"
    func = getattr(func, "__func__", func)
    qualname = getattr(func, "__qualname__", None)
    if isinstance(qualname, str):
        return f"{getattr(func, '__module__', None) or '?'}:{qualname}"
    return "instance of " + _type_name(type(func))


def _tag(node: Any) -> str:
    tag = getattr(node, "tag", None)
    return "-" if tag is None else str(tag)


# ----- row identities ------------------------------------------------------------------------


def _hash64(parts: list[str]) -> int:
    data = "\x1f".join(parts).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def row_identities(prog: Any) -> RowIdentities:
    """The identities of `prog`'s rows and where each sits among the others (see `RowIdentities`)."""
    plain = [_hash64([*_node_parts(prog, row), *_sub_parts(prog.nodes[row])]) for row in range(prog.nrows)]
    alias_at = {tuple(addr): name for name, addr in (getattr(prog.graph, "alias2vector_map", None) or {}).items()}
    hashes = []
    for row in range(prog.nrows):
        operands = _operand_parts(prog, row, plain, alias_at)
        hashes.append(_hash64([f"{plain[row]:016x}", *operands]) if operands else plain[row])
    return _place_rows(tuple(hashes))


def _operand_parts(prog: Any, row: int, plain: list[int], alias_at: dict) -> list[str]:
    """The compiled operands of `row` (called rows, jump targets, resume slots), named without addresses (not
    the opcode: how a node is called may differ between processes, a shipped copy of a graph, say)."""
    record = prog.operands[row]
    if record is None:
        return []
    own = prog.addrs[row]
    first, second, on_exit, then, first_resume, second_resume = record[:6]
    return [
        _row_reference(prog, own, first, plain, alias_at),
        _row_reference(prog, own, second, plain, alias_at),
        _target_reference(prog, own, on_exit, plain, alias_at),
        _target_reference(prog, own, then, plain, alias_at),
        f"resume={first_resume!r},{second_resume!r}",
    ]


def _row_reference(prog: Any, own: tuple, row: int, plain: list[int], alias_at: dict) -> str:
    if row < 0:
        return "-"
    return _reference(prog, own, tuple(prog.addrs[row]), row, True, plain, alias_at)


def _target_reference(prog: Any, own: tuple, target: Any, plain: list[int], alias_at: dict) -> str:
    if target is None:
        return "-"
    row, exact, address = target
    return _reference(prog, own, tuple(address), row, exact, plain, alias_at)


def _reference(prog: Any, own: tuple, address: tuple, row: int, exact: bool, plain: list[int], alias_at: dict) -> str:
    """An operand address as identities see it: an alias, a slot near the node, or the row it lands on."""
    name = alias_at.get(address)
    if name is not None:
        return f"alias={name}"
    parent = len(own) - 1
    if len(address) > parent and address[:parent] == own[:parent]:
        return "near=" + ".".join(map(str, (address[parent] - own[parent], *address[parent + 1 :])))
    if row < 0:
        return "none"
    return f"row={plain[row]:016x}" + ("" if exact else f"+{len(prog.addrs[row]) - len(address)}")


def _place_rows(hashes: tuple[int, ...]) -> RowIdentities:
    """Occurrences, unique neighbours and gaps of a table whose rows have `hashes`."""
    found: dict[int, list[int]] = {}
    occurrence = []
    for row, ident in enumerate(hashes):
        rows = found.setdefault(ident, [])
        occurrence.append(len(rows))
        rows.append(row)
    rows_of = {ident: tuple(rows) for ident, rows in found.items()}
    unique = [len(rows_of[ident]) == 1 for ident in hashes]
    before, last = [], -1
    for row in range(len(hashes)):
        before.append(last)
        last = row if unique[row] else last
    after, nxt = [0] * len(hashes), -1
    for row in range(len(hashes) - 1, -1, -1):
        after[row] = nxt
        nxt = row if unique[row] else nxt
    gap_index, gap_count = _gaps(hashes, unique)
    return RowIdentities(hashes, rows_of, tuple(occurrence), tuple(before), tuple(after), gap_index, gap_count)


def _gaps(hashes: tuple[int, ...], unique: list[bool]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per row, its index among the rows of its gap with the same identity, and their number."""
    index = [0] * len(hashes)
    count = [1] * len(hashes)
    members: list[int] = []
    for row in range(len(hashes) + 1):
        if row < len(hashes) and not unique[row]:
            members.append(row)
            continue
        seen: dict[int, int] = {}
        for member in members:
            index[member] = seen.get(hashes[member], 0)
            seen[hashes[member]] = index[member] + 1
        for member in members:
            count[member] = seen[hashes[member]]
        members = []
    return tuple(index), tuple(count)


# ----- comparing a snapshot's outline with a graph ----------------------------------------


def unpack_digests(packed: bytes) -> tuple[int, ...]:
    return struct.unpack(f"<{len(packed) // 4}I", packed)


def differing_rows(live: GraphOutline, digests: tuple[int, ...]) -> tuple[int, int] | None:
    """`(first, last)` row whose digest differs (rows only one side has count), or None."""
    mine = live.digests
    common = min(len(mine), len(digests))
    first = next((row for row in range(common) if mine[row] != digests[row]), None)
    if first is None and len(mine) == len(digests):
        return None
    if len(mine) != len(digests):
        last = max(len(mine), len(digests)) - 1
    else:
        last = next(row for row in range(common - 1, -1, -1) if mine[row] != digests[row])
    return (common if first is None else first), last


def mismatch(live: GraphOutline, expected: str, digests: tuple[int, ...], first: int | None) -> GraphMismatch:
    """The error naming the first slot where `live` differs from the snapshot's graph."""
    if first is None:
        detail = "the graph differs from the snapshot's graph in a way its outline does not place"
        return GraphMismatch(detail, row=None, address=None, expected=expected, actual=live.fingerprint)
    theirs = len(digests)
    if first >= live.program.nrows:
        detail = (
            f"the snapshot's graph has {theirs} slots, this graph only {live.program.nrows}: "
            f"the first difference is at row {first}, past the end of this graph"
        )
        return GraphMismatch(detail, row=first, address=None, expected=expected, actual=live.fingerprint)
    what = live.describe_row(first)
    if first >= theirs:
        detail = f"this graph has {live.program.nrows} slots, the snapshot's graph only {theirs}; it ends before {what}"
    else:
        detail = f"the graph differs from the snapshot's graph first at {what} (the snapshot's has another slot there)"
    address = list(live.program.addrs[first])
    return GraphMismatch(detail, row=first, address=address, expected=expected, actual=live.fingerprint)
