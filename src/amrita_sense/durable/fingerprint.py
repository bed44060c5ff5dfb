"""Graph identity: a stable fingerprint of a rendered graph and a per-slot outline.

Every row of the graph's node table (`Program`: one row per executable slot,
depth-first) is described by a line of text: its address, the node's class and
function (module and qualified name), its tag, the aliases that land on it and
the fingerprints of the sub-graphs it runs (FUN_BLOCK, BATCH_RUN). Nothing in
it depends on `id()`, hash randomisation, the process or the core, so two
renders of the same source give the same lines anywhere.

The fingerprint is the first 128 bits of SHA-256 over the lines. The outline
is one CRC-32 per row; a snapshot carries it so that a restore against another
graph can name the first slot that differs, and can tell whether every edit
lies before the point the run has reached.
"""

from __future__ import annotations

import hashlib
import struct
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from amrita_sense import core as _core
from amrita_sense.durable.errors import GraphMismatch
from amrita_sense.durable.node_state import attempt_rows, memo_rows, sub_graphs
from amrita_sense.node.core import program_of

_CACHE_SIZE = 64
_cache: OrderedDict[int, tuple[Any, GraphOutline]] = OrderedDict()
_cache_lock = threading.Lock()


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


def graph_fingerprint(graph: Any) -> str:
    """The stable fingerprint of a rendered graph (32 hex digits), the same in every process and core."""
    return outline_of(graph).fingerprint


def outline_of(graph: Any) -> GraphOutline:
    """The outline of a rendered graph's current node table (cached per table)."""
    return outline_of_program(program_of(graph))


def outline_of_program(prog: Any) -> GraphOutline:
    with _cache_lock:
        hit = _cache.get(id(prog))
        if hit is not None and hit[0] is prog:
            _cache.move_to_end(id(prog))
            return hit[1]
    outline = _build_outline(prog)
    with _cache_lock:
        _cache[id(prog)] = (prog, outline)
        while len(_cache) > _CACHE_SIZE:
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
        node = prog.nodes[row]
        addr = ".".join(map(str, prog.addrs[row]))
        if prog.bits[row] & _core.ROW_EMPTY:
            parts = [addr, "<empty>"]
        else:
            kind = getattr(type(node), "_outline_type", type(node))  # a policy node is named as its plain node
            parts = [addr, _type_name(kind), _callable_name(getattr(node, "func", None)), _tag(node)]
        parts.extend(aliases.get(row, ()))
        parts.extend(f"sub={graph_fingerprint(graph)}" for graph in sub_graphs(node))
        lines.append("\x1f".join(parts))
    return lines


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
