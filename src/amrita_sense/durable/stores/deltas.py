"""Incremental checkpoints: a snapshot stored as the changes from the run's previous one.

A run that appends to its context changes a little of its snapshot at every save. A store keeps
such a run's snapshots as *frames*: a full snapshot (a keyframe), then per save a delta frame that
rebuilds the new snapshot from the previous one, so a save writes about what changed.

A delta frame is `MAGIC` followed by operations, each a tag byte and little-endian u32s:

    0, offset, length   copy `length` bytes of the previous snapshot from `offset`
    1, length, bytes    insert the `length` bytes that follow

`diff` makes one (or says a keyframe is better); `rebuild` applies a chain of them to the
keyframe they start from. Rebuilding composes the chain as a list of pieces of the frames and
copies the bytes once at the end, so its cost grows with the chain's length and the snapshot's
size, not with their product. Frames come from a store: `rebuild` checks every operation against
what it refers to and the size of what it makes, and raises `CorruptSnapshot`, never anything else.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from itertools import accumulate

from amrita_sense.durable.errors import CorruptSnapshot

MAGIC = b"ASRD"
_COPY = struct.Struct("<BII")
_INSERT = struct.Struct("<BI")
MIN_COPY = 16
"""The shortest run of old bytes a delta copies (shorter runs are inserted)."""
_PROBES = (0, 8, 16, 32, 64, 256, 1024, 4096, 16384)
"""How far past a mismatch `diff` looks in the old snapshot for the next common bytes."""
MAX_REBUILT = 1 << 30
"""The largest snapshot `rebuild` makes (a delta from a store is untrusted)."""


def diff(old: bytes, new: bytes, worth: float = 0.5) -> bytes | None:
    """A delta frame that rebuilds `new` from `old`; None when it would not be smaller than
    `worth` times `new` (then store `new` whole)."""
    parts = [MAGIC]
    size, budget = len(MAGIC), int(len(new) * worth)
    i = j = literal = 0
    while i < len(new):
        run = _common(old, j, new, i)
        if run >= MIN_COPY or (run and i + run == len(new)):
            if literal < i:
                parts += (_INSERT.pack(1, i - literal), new[literal:i])
                size += _INSERT.size + i - literal
            parts.append(_COPY.pack(0, j, run))
            size += _COPY.size
            i, j, literal = i + run, j + run, i + run
        else:
            found = _resync(old, j, new, i + max(run, 1))
            if found is None:
                break
            i, j = found
        if size > budget:
            return None
    if literal < len(new):
        parts += (_INSERT.pack(1, len(new) - literal), new[literal:])
        size += _INSERT.size + len(new) - literal
    return b"".join(parts) if size <= budget else None


def _common(a: bytes, i: int, b: bytes, j: int) -> int:
    """How many bytes `a[i:]` and `b[j:]` have in common at their start (galloping, then halving)."""
    limit = min(len(a) - i, len(b) - j)
    low, step = 0, 64
    while low < limit:
        high = min(limit, low + step)
        if a[i + low : i + high] != b[j + low : j + high]:
            break
        low, step = high, step * 4
    else:
        return limit
    while high - low > 1:  # the bytes before `low` match; the first mismatch is before `high`
        middle = (low + high) // 2
        if a[i + low : i + middle] == b[j + low : j + middle]:
            low = middle
        else:
            high = middle
    return low


def _resync(old: bytes, j: int, new: bytes, i: int) -> tuple[int, int] | None:
    """The earliest place at or after `i` in `new` where `MIN_COPY` bytes of `old` (from a little
    past `j`, or from anywhere) come again: `(position in new, position in old)`, or None."""
    best: tuple[int, int] | None = None
    for skip in _PROBES:
        at = j + skip
        if at + MIN_COPY > len(old):
            break
        found = new.find(old[at : at + MIN_COPY], i, None if best is None else best[0] + MIN_COPY)
        if found >= 0 and (best is None or found < best[0]):
            best = (found, at)
    if i + MIN_COPY <= len(new) and (best is None or best[0] > i):
        moved = old.find(new[i : i + MIN_COPY])
        if moved >= 0:
            best = (i, moved)
    return best


def rebuild(keyframe: bytes, deltas: Sequence[bytes]) -> bytes:
    """The snapshot `deltas` (oldest first) make from `keyframe`; `CorruptSnapshot` when one is damaged."""
    pieces: list[tuple[bytes, int, int]] = [(keyframe, 0, len(keyframe))]
    for delta in deltas:
        pieces = _apply(pieces, delta)
    return b"".join(source[start:end] for source, start, end in pieces)


def rebuild_frames(frames: Sequence[tuple[int, int | None, bytes]], run_id: str, version: int) -> bytes:
    """The snapshot of `run_id` at `version` from its stored frames, `(version, base, data)` rows from
    its keyframe on, oldest first; `CorruptSnapshot` when they do not lead from a keyframe to it."""
    versions = [row[0] for row in frames]
    if not frames or versions != list(range(versions[0], version + 1)) or frames[0][1] is not None:
        raise CorruptSnapshot(f"the stored frames of run {run_id!r}, version {version}, are incomplete")
    if any(base != at - 1 for at, base, _ in frames[1:]):
        raise CorruptSnapshot(f"the stored frames of run {run_id!r}, version {version}, do not follow each other")
    return rebuild(bytes(frames[0][2]), [bytes(frame) for _, _, frame in frames[1:]])


def chain_of(frames: Sequence[tuple[int, int | None, bytes]]) -> tuple[int, int]:
    """`(deltas, their bytes)` after the keyframe of `frames` (what `Bases.keep` takes)."""
    return len(frames) - 1, sum(len(frame) for _, _, frame in frames[1:])


def _apply(pieces: list[tuple[bytes, int, int]], delta: bytes) -> list[tuple[bytes, int, int]]:
    ends = list(accumulate(end - start for _, start, end in pieces))
    total = ends[-1] if ends else 0
    made: list[tuple[bytes, int, int]] = []
    size = 0
    for kind, first, second in _operations(delta):
        if kind == 0:
            if first + second > total:
                raise CorruptSnapshot("a delta frame copies past the end of the snapshot it starts from")
            made += _slice(pieces, ends, first, first + second)
            size += second
        elif second:
            made.append((delta, first, first + second))
            size += second
        if size > MAX_REBUILT:
            raise CorruptSnapshot("a delta frame makes a snapshot larger than a reader accepts")
    return made


def _operations(delta: bytes) -> Iterator[tuple[int, int, int]]:
    """`(0, offset, length)` per copy, `(1, start in delta, length)` per insert."""
    if delta[: len(MAGIC)] != MAGIC:
        raise CorruptSnapshot("a stored delta frame does not start with its magic")
    at = len(MAGIC)
    while at < len(delta):
        if delta[at] == 0 and at + _COPY.size <= len(delta):
            _, offset, length = _COPY.unpack_from(delta, at)
            at += _COPY.size
            yield 0, offset, length
        elif delta[at] == 1 and at + _INSERT.size <= len(delta):
            _, length = _INSERT.unpack_from(delta, at)
            at += _INSERT.size
            if at + length > len(delta):
                raise CorruptSnapshot("a delta frame ends inside the bytes it inserts")
            yield 1, at, length
            at += length
        else:
            raise CorruptSnapshot("a delta frame holds an unknown or cut operation")


def _slice(pieces: list[tuple[bytes, int, int]], ends: list[int], low: int, high: int) -> list:
    """The pieces that make bytes `low` .. `high` of what `pieces` make."""
    out = []
    index = bisect_right(ends, low)
    while low < high:
        source, start, end = pieces[index]
        begins = ends[index] - (end - start)
        take_from, take_to = start + low - begins, start + min(high, ends[index]) - begins
        out.append((source, take_from, take_to))
        low = begins + (take_to - start)
        index += 1
    return out


MAX_CHAIN = 1024
"""The most delta frames after a keyframe (rebuilding a snapshot reads at most this many)."""
CHAIN_GROWTH = 4
"""A keyframe also comes when the deltas since the last one add up to this many times the snapshot
(a run that rewrites its context rather than appending to it)."""
INCREMENTAL_ABOVE = 8 * 1024
"""A snapshot saved with history is stored as frames from this size on (every version is kept: a
delta saves the store what the whole snapshot would cost again)."""
FRAMES_ALWAYS_ABOVE = 64 * 1024
"""A snapshot saved without history is stored as frames from this size on (only the latest is kept:
below it, one statement writing it whole costs less than a delta and its transaction)."""


def as_frames(size: int, history: bool, framed: bool) -> bool:
    """Whether a store keeps a save of `size` bytes as a frame (`framed`: the run's last one was)."""
    return framed or size >= FRAMES_ALWAYS_ABOVE or (history and size >= INCREMENTAL_ABOVE)


class Bases:
    """The last snapshot a store wrote or read per run, the base of the run's next delta frame.

    Kept in memory, newest runs first, up to `max_bytes` in all; a run not here (another process
    saved it last, or it was evicted) gets a keyframe at its next save. Not thread-safe: the store
    calls it under its own lock.
    """

    def __init__(self, max_bytes: int = 64 << 20) -> None:
        self.max_bytes = max_bytes
        self._runs: dict[str, tuple[int, bytes, int, int]] = {}
        self._bytes = 0

    def frame(self, run_id: str, current: int, data: bytes) -> tuple[bytes, int | None, int, int]:
        """`(frame, base version or None, chain length, chain bytes)` to store `data` as the version
        after `current`: a delta from the kept snapshot of `current`, else `data` whole (a keyframe)."""
        kept = self._runs.get(run_id)
        if kept is not None and kept[0] == current and kept[2] < MAX_CHAIN:
            _, base, chain, chain_bytes = kept
            delta = diff(base, data)
            if delta is not None and chain_bytes + len(delta) <= CHAIN_GROWTH * len(data):
                return delta, current, chain + 1, chain_bytes + len(delta)
        return data, None, 0, 0

    def framed(self, run_id: str) -> bool:
        """Whether the run's last save here was stored as frames."""
        return run_id in self._runs

    def keep(self, run_id: str, version: int, data: bytes, chain: int, chain_bytes: int) -> None:
        self.forget(run_id)
        self._runs[run_id] = (version, data, chain, chain_bytes)
        self._bytes += len(data)
        while self._bytes > self.max_bytes and len(self._runs) > 1:
            self.forget(next(iter(self._runs)))

    def forget(self, run_id: str) -> None:
        kept = self._runs.pop(run_id, None)
        if kept is not None:
            self._bytes -= len(kept[1])
