"""GDB-style disassembly of a rendered workflow graph.

A rendered graph is an address-mapped program: every slot has an address
(`[1, 0]`), and the program counter walks the slots depth first. The listing
prints one line per slot, and every nested container as its own `segment`
block, so deep graphs stay flat::

    segment [root]:
    =>[0]      alpha; demo.py:7
      [1]      *segment [1]
      [2] (bb) ALIAS bb; alias for Beta

    segment [1]:
      [1, 0] Beta; Beta

Each leaf line shows the address, its alias (if any), the mnemonic and a
comment. A node describes its own line through two optional attributes, read
with `getattr` so a class attribute, a property or an instance attribute all
work:

- `__sdb_dis__`: the mnemonic text (`"JMP [3]"`);
- `__sdb_cmt__`: the comment after `;`.

Missing (or `None`) values are derived from the tag and the function; see
`resolve_dis` and `resolve_cmt`.

Colour uses plain ANSI escape codes. `COLOR = None` colours only when stdout
is a terminal, so a listing written to a pipe or a file is plain text.
"""

from __future__ import annotations

import os
import re
import sys
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from amrita_sense.debugger._checks import require_interpreter
from amrita_sense.exceptions import InvalidOperand
from amrita_sense.instructions.enum import AUTO_PREFIX
from amrita_sense.node.abc_base import is_rendered_compose
from amrita_sense.node.core import BaseNode

if TYPE_CHECKING:
    from amrita_sense.runtime.workflow import WorkflowInterpreter

DIS_ATTR = "__sdb_dis__"
"""Name of the attribute holding a node's mnemonic."""

CMT_ATTR = "__sdb_cmt__"
"""Name of the attribute holding a node's comment."""

AUTO_DIS: bool = True
"""Whether the stepping commands print the listing around the program counter."""

DEFAULT_WINDOW: int = 5
"""Slots shown before and after the program counter by `dis`."""

COLOR: bool | None = None
"""True / False forces colour on or off; None colours only when stdout is a terminal."""

_ESC = "\x1b["
_BRIGHT = _ESC + "1m"
_DIM = _ESC + "2m"
_RESET = _ESC + "0m"
_RED = _ESC + "31m"
_GREEN = _ESC + "32m"
_YELLOW = _ESC + "33m"
_BLUE = _ESC + "34m"
_MAGENTA = _ESC + "35m"
_CYAN = _ESC + "36m"

C_PC = _BRIGHT + _GREEN
"""The program-counter arrow."""
C_ADDR = _CYAN
"""Slot addresses."""
C_ALIAS = _GREEN
"""Alias names next to an address."""
C_MNEMONIC = _BRIGHT
"""The first word of the mnemonic."""
C_OPERAND = _YELLOW
"""The rest of the mnemonic."""
C_COMMENT = _DIM
"""The `;` separator and the comment."""
C_SEGMENT = _BRIGHT + _MAGENTA
"""The `segment` keyword of a block header."""
C_REF = _CYAN
"""`*segment [n]` lines that point at a nested block."""
C_CLASS = _BLUE
"""The container class shown on a header when it is not a NodeComposeRendered."""
C_NOTE = _YELLOW
"""Notes such as `<end of workflow>`."""
C_ANOMALY = _RED
"""Entries that are not nodes, and containers that cannot be read."""

_ARROW = "=>"
_PAD = "  "
_SEP = "; "
_PLAIN_CONTAINER = "NodeComposeRendered"
_DECORATED_TAG = re.compile(r"^__([A-Z0-9_]+)__$")


# ----- colour -------------------------------------------------------------------------


def _color_enabled() -> bool:
    """Resolve `COLOR`: forced on or off, or on only when stdout is a terminal."""
    enabled = bool(COLOR) if COLOR is not None else _stdout_is_tty()
    if enabled and not _console_ready:
        _prepare_console()
    return enabled


def _stdout_is_tty() -> bool:
    stream = sys.stdout
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):
        return False


_console_ready = False
# threads: set once; a race only turns the console mode on twice
_STD_OUTPUT_HANDLE = -11
_ENABLE_VIRTUAL_TERMINAL_PROCESSING = 0x0004


def _prepare_console() -> None:
    """Turn on escape-code processing once on a Windows console (a no-op elsewhere)."""
    global _console_ready
    _console_ready = True
    if sys.platform != "win32":
        return
    try:
        import ctypes

        kernel32 = ctypes.windll.kernel32
        handle = kernel32.GetStdHandle(_STD_OUTPUT_HANDLE)
        mode = ctypes.c_ulong()
        if kernel32.GetConsoleMode(handle, ctypes.byref(mode)):
            kernel32.SetConsoleMode(handle, mode.value | _ENABLE_VIRTUAL_TERMINAL_PROCESSING)
    except Exception:
        pass


def _paint(text: str, style: str, color: bool) -> str:
    return f"{style}{text}{_RESET}" if color else text


# ----- what a node says about itself --------------------------------------------------


def _text_attr(node: Any, name: str) -> str | None:
    """`node.<name>` when it is a non-empty string; a failing property counts as absent."""
    try:
        value = getattr(node, name, None)
    except Exception:
        return None
    return value if isinstance(value, str) and value else None


def resolve_dis(node: BaseNode) -> str:
    """The mnemonic of `node`.

    `__sdb_dis__` when set; otherwise an explicit tag, with a `__NAME__`
    decoration reduced to `NAME`; for a generated `NodeSuspend::` tag, the
    function name without leading underscores.
    """
    if not isinstance(node, BaseNode):
        raise InvalidOperand(f"resolve_dis(node) needs a node, not {type(node).__name__}")
    explicit = _text_attr(node, DIS_ATTR)
    if explicit is not None:
        return explicit
    tag = node.tag
    if tag.startswith(AUTO_PREFIX):
        return _func_name(node.func).lstrip("_") or tag
    decorated = _DECORATED_TAG.match(tag)
    return decorated.group(1) if decorated else str(tag)


def resolve_cmt(node: BaseNode) -> str:
    """The comment of `node`: `__sdb_cmt__`, else an explicit tag, else `file:line` of its function."""
    if not isinstance(node, BaseNode):
        raise InvalidOperand(f"resolve_cmt(node) needs a node, not {type(node).__name__}")
    explicit = _text_attr(node, CMT_ATTR)
    if explicit is not None:
        return explicit
    tag = node.tag
    return _source_location(node.func) if tag.startswith(AUTO_PREFIX) else str(tag)


def _func_name(func: Any) -> str:
    return getattr(func, "__name__", None) or type(func).__name__


def _source_location(func: Any) -> str:
    """`file.py:line` where `func` was defined, or its name when it has no code object."""
    code = getattr(func, "__code__", None)
    if code is None:
        return getattr(func, "__qualname__", None) or _func_name(func)
    return f"{os.path.basename(code.co_filename) or code.co_filename}:{code.co_firstlineno}"


# ----- flattening the graph -----------------------------------------------------------


@dataclass
class _Entry:
    """One slot of a block: a node (`leaf`), a nested container (`ref`) or anything else (`opaque`)."""

    addr: list[int]
    kind: str
    node: Any = None
    child: int | None = None


@dataclass
class _Block:
    """One container of the graph and its direct slots."""

    addr: list[int]
    kind: str
    entries: list[_Entry] = field(default_factory=list)
    readable: bool = True


@dataclass
class _Walk:
    """The blocks in listing order, and every leaf as `(address, block index)` in execution order."""

    blocks: list[_Block]
    leaves: list[tuple[list[int], int]]
    _leaf_entries: list[_Entry] = field(default_factory=list, repr=False)
    _positions: dict[tuple[int, ...], int] | None = field(default=None, repr=False)

    def position(self, addr: list[int]) -> int | None:
        """Index in `leaves` of the leaf at `addr`, or None."""
        if self._positions is None:
            self._positions = {tuple(a): i for i, (a, _) in enumerate(self.leaves)}
        return self._positions.get(tuple(addr))

    def first_leaf_under(self, prefix: list[int]) -> int | None:
        """Index of the first leaf inside the container at `prefix`, or None."""
        size = len(prefix)
        for index, (addr, _) in enumerate(self.leaves):
            if len(addr) > size and addr[:size] == prefix:
                return index
        return None


def _read_children(container: Any) -> list[Any] | None:
    """The children of a container, or None when it refuses to be read (an unbuilt proxy)."""
    try:
        return [container[offset] for offset in range(len(container))]
    except Exception:
        return None


def _walk(graph: Any) -> _Walk:
    """Flatten `graph` into blocks (each container after its parent's slots) and ordered leaves."""
    blocks: list[_Block] = []

    def build(container: Any, addr: list[int]) -> int:
        index = len(blocks)
        block = _Block(addr=addr, kind=type(container).__name__)
        blocks.append(block)
        children = _read_children(container)
        if children is None:
            block.readable = False
            return index
        nested = []
        for offset, item in enumerate(children):
            kind = _kind_of(item)
            entry = _Entry(addr=[*addr, offset], kind=kind, node=item if kind == "leaf" else None)
            block.entries.append(entry)
            if kind == "ref":
                nested.append((entry, item))
        for entry, item in nested:
            entry.child = build(item, entry.addr)
        return index

    build(graph, [])
    walk = _Walk(blocks=blocks, leaves=[])
    _collect_leaves(walk, 0)
    return walk


def _kind_of(item: Any) -> str:
    if isinstance(item, BaseNode):
        return "leaf"
    if is_rendered_compose(item):
        return "ref"
    return "opaque"


def _collect_leaves(walk: _Walk, block_index: int) -> None:
    """Leaves in pointer order: a nested container's leaves come before its parent's next slot."""
    for entry in walk.blocks[block_index].entries:
        if entry.kind == "leaf":
            walk.leaves.append((entry.addr, block_index))
            walk._leaf_entries.append(entry)
        elif entry.child is not None:
            _collect_leaves(walk, entry.child)


_walk_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# threads: a race only recomputes the same value (one get, one setitem of a (program, walk) tuple; it
# is never iterated)


def _cached_walk(graph: Any) -> _Walk:
    """`_walk(graph)`, reused until the graph's node table is rebuilt (a hot-swapped slot)."""
    program = _current_program(graph)
    try:
        cached = _walk_cache.get(graph)
    except TypeError:
        return _walk(graph)
    if cached is not None and program is not None and cached[0] is program:
        return cached[1]
    walk = _walk(graph)
    if program is not None:
        _walk_cache[graph] = (program, walk)
    return walk


def _current_program(graph: Any) -> Any:
    program = getattr(graph, "_program", None)
    while program is not None and getattr(program, "successor", None) is not None:
        program = program.successor
    return program


def _alias_map(graph: Any) -> dict[tuple[int, ...], str]:
    """Address -> alias (the first alias registered for an address); empty when the graph has none."""
    mapping = getattr(graph, "alias2vector_map", None)
    if not isinstance(mapping, dict):
        return {}
    reverse: dict[tuple[int, ...], str] = {}
    for name, addr in mapping.items():
        reverse.setdefault(tuple(addr), name)
    return reverse


# ----- rendering ----------------------------------------------------------------------


class _Painter:
    """Renders lines for one listing; colour is decided once per listing."""

    def __init__(self, aliases: dict[tuple[int, ...], str], color: bool):
        self.aliases = aliases
        self.color = color

    def paint(self, text: str, style: str) -> str:
        return _paint(text, style, self.color)

    def plain_addr(self, addr: list[int], with_alias: bool = True) -> str:
        text = "[" + ", ".join(map(str, addr)) + "]"
        name = self.aliases.get(tuple(addr)) if with_alias else None
        return text if name is None else f"{text} ({name})"

    def addr_cell(self, addr: list[int], width: int) -> str:
        """The address column, padded on its plain width so colour never shifts the columns."""
        pad = " " * (width - len(self.plain_addr(addr)))
        text = self.paint("[" + ", ".join(map(str, addr)) + "]", C_ADDR)
        name = self.aliases.get(tuple(addr))
        if name is not None:
            text += " " + self.paint(f"({name})", C_ALIAS)
        return text + pad

    def body(self, entry: _Entry) -> str:
        if entry.kind == "leaf":
            return self.leaf_body(entry.node)
        if entry.kind == "ref":
            return self.paint(f"*segment {self.plain_addr(entry.addr, False)}", C_REF)
        return self.paint("<opaque>", C_ANOMALY)

    def leaf_body(self, node: BaseNode) -> str:
        mnemonic = resolve_dis(node)
        comment = resolve_cmt(node)
        if not self.color:
            return f"{mnemonic}{_SEP}{comment}"
        head, _, operand = mnemonic.partition(" ")
        text = self.paint(head, C_MNEMONIC)
        if operand:
            text += " " + self.paint(operand, C_OPERAND)
        return text + self.paint(_SEP, C_COMMENT) + self.paint(f"{comment}", C_COMMENT)

    def line(self, entry: _Entry, current: bool, width: int) -> str:
        marker = self.paint(_ARROW, C_PC) if current else _PAD
        return f"{marker}{self.addr_cell(entry.addr, width)} {self.body(entry)}"

    def header(self, block: _Block) -> str:
        label = self.paint("[root]", C_MNEMONIC) if not block.addr else self.paint(self.plain_addr(block.addr), C_ADDR)
        parts = [label]
        if block.kind != _PLAIN_CONTAINER:
            parts.append(self.paint(f"<{block.kind}>", C_CLASS))
        if not block.readable:
            parts.append(self.paint("(unreadable)", C_ANOMALY))
        return f"{self.paint('segment', C_SEGMENT)} {' '.join(parts)}:"

    def width(self, entries: list[_Entry]) -> int:
        return max((len(self.plain_addr(e.addr)) for e in entries), default=0)


def _is_inside(pc: list[int], addr: list[int]) -> bool:
    return len(addr) < len(pc) and pc[: len(addr)] == addr


def _render_blocks(walk: _Walk, painter: _Painter, pc: list[int]) -> list[str]:
    """Every block in turn, the slot holding the program counter (or its container) marked."""
    lines: list[str] = []
    for block in walk.blocks:
        if lines:
            lines.append("")
        lines.append(painter.header(block))
        if not block.readable:
            lines.append(painter.paint(f"{_PAD}<unbuilt container>", C_ANOMALY))
            continue
        width = painter.width(block.entries)
        for entry in block.entries:
            current = entry.addr == pc or (entry.kind == "ref" and _is_inside(pc, entry.addr))
            lines.append(painter.line(entry, current, width))
    return lines


def _window_center(walk: _Walk, pc: list[int]) -> int | None:
    """Leaf index of the program counter; a pointer on a container counts as its first leaf."""
    if not pc:
        return None
    found = walk.position(pc)
    return found if found is not None else walk.first_leaf_under(pc)


def _render_window(walk: _Walk, painter: _Painter, pc: list[int], around: int) -> list[str]:
    """`around` leaves on each side of the program counter, with their segment headers."""
    center = _window_center(walk, pc)
    finished = center is None
    index = len(walk.leaves) if center is None else center
    low = max(0, index - around)
    high = min(len(walk.leaves), index + around + 1)
    window = [(walk._leaf_entries[i], walk.leaves[i][1]) for i in range(low, high)]
    width = painter.width([entry for entry, _ in window])
    lines = [painter.paint(f"{_PAD}...", C_COMMENT)] if low > 0 else []
    owner: int | None = None
    for position, (entry, block_index) in enumerate(window, start=low):
        if block_index != owner:
            if owner is not None:
                lines.append("")
            lines.append(painter.header(walk.blocks[block_index]))
            owner = block_index
        lines.append(painter.line(entry, position == center, width))
    if finished:
        lines.append(painter.paint(f"{_ARROW} <end of workflow>", C_NOTE))
    return lines


# ----- public API ---------------------------------------------------------------------


def disassemble(inter: WorkflowInterpreter, *, around: int | None = None) -> str:
    """The listing of `inter`'s graph, with the program counter marked `=>`.

    Args:
        inter: The interpreter whose graph is listed.
        around: None lists every segment; an int lists only that many slots
            before and after the program counter.

    Returns:
        The listing, one slot per line; it holds ANSI colour codes when
        `COLOR` resolves to true.
    """
    require_interpreter(inter, "disassemble", "get_graph", "_pointer")
    if around is not None and (isinstance(around, bool) or not isinstance(around, int) or around < 0):
        raise ValueError(f"around must be None or a non-negative int, not {around!r}")
    graph = inter.get_graph()
    if not graph:
        return "(empty graph)"
    walk = _cached_walk(graph)
    if not walk.leaves:
        return "(empty graph)"
    pointer = inter._pointer
    pc = list(pointer.base_addr) if pointer else []
    painter = _Painter(_alias_map(graph), _color_enabled())
    if around is None:
        return "\n".join(_render_blocks(walk, painter, pc))
    return "\n".join(_render_window(walk, painter, pc, around))


def dis(inter: WorkflowInterpreter, *, around: int | None = DEFAULT_WINDOW) -> None:
    """Print the listing of `inter`'s graph around the program counter (`around=None`: all of it)."""
    require_interpreter(inter, "dis", "get_graph", "_pointer")
    print(disassemble(inter, around=around))


__all__ = [
    "AUTO_DIS",
    "CMT_ATTR",
    "COLOR",
    "C_ADDR",
    "C_ALIAS",
    "C_ANOMALY",
    "C_CLASS",
    "C_COMMENT",
    "C_MNEMONIC",
    "C_NOTE",
    "C_OPERAND",
    "C_PC",
    "C_REF",
    "C_SEGMENT",
    "DEFAULT_WINDOW",
    "DIS_ATTR",
    "dis",
    "disassemble",
    "resolve_cmt",
    "resolve_dis",
]
