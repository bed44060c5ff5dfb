"""A rendered graph walked into plain data: nodes, edges with kinds, clusters.

`picture_of(graph)` reads the graph's node table (`Program`: one row per executable slot,
depth first) and the operand record each row compiles to (`node.table.compile_instructions`:
the rows a row calls and jumps to), and describes every row as a `PictureNode`, every transfer
of control as a `PictureEdge` and every nested segment (and every sub-graph a FUN_BLOCK or
BATCH_RUN runs) as a `PictureCluster`. The exporters (`mermaid`, `dot`) only print this data.

Invariant: nothing here depends on `id()`, hash order, the process or the core. Node and
cluster ids are made of addresses and the order sub-graphs are met in; labels of tags, function
names and mnemonics (`debugger.code_disp.resolve_dis`); every list is built in row order.

Edge kinds (the exporters style each one):

- `next`: the pointer advances to the following row;
- `branch`: an outcome of a test (`true`, `false`, `else`, `break`);
- `merge`: where the run goes once a called body (or Try part) returned;
- `subcall`: a node called and returned from (a condition, an INVOKEd node, a Try body);
- `jump`: JMP / GOTO and the jumps clauses compile to (forward);
- `back`: a jump or branch to an earlier row (a loop's back edge);
- `call`: CALL / INT into a routine; `return`: where the run continues once it returned;
- `catch`: from a Try body to a CATCH handler;
- `fork`: a FUN_BLOCK / BATCH_RUN into the sub-graph it runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from amrita_sense import core as _core
from amrita_sense.core import opcodes as ops
from amrita_sense.debugger.code_disp import resolve_dis
from amrita_sense.instructions.alias import AliasNode
from amrita_sense.instructions.enum import AUTO_PREFIX, BuiltinTags
from amrita_sense.instructions.func_block import FuncBlock, _fn_escape
from amrita_sense.instructions.if_clause import ConditionJumpNode, ELSENode
from amrita_sense.instructions.interrupt import InterruptIntoNode, InterruptReturnNode
from amrita_sense.instructions.jump import JumpNode
from amrita_sense.instructions.loop.do_while import DONode
from amrita_sense.instructions.loop.while_clause import WhileNode
from amrita_sense.instructions.native._core import (
    NativeBranchExitNode,
    NativeBubbleEnterNode,
    NativeIfJumpNode,
    NativeWhileNode,
    _LoopControlNode,
)
from amrita_sense.instructions.subprogram import SubprogramJumpNode
from amrita_sense.instructions.try_catch import TryNode
from amrita_sense.instructions.workfl_ctrl import RESET, SUSPEND
from amrita_sense.node.abc_base import is_rendered_compose
from amrita_sense.node.core import BaseNode, program_of
from amrita_sense.node.run_state import ForkingStep
from amrita_sense.node.table import compile_instructions
from amrita_sense.pictures.errors import NotARenderedGraph

MAX_SUB_GRAPH_DEPTH = 16
"""How deep FUN_BLOCK / BATCH_RUN sub-graphs are drawn inside each other."""

EDGE_KINDS = ("next", "branch", "merge", "subcall", "jump", "back", "call", "return", "catch", "fork")
NODE_KINDS = ("step", "test", "else", "loop", "jump", "call", "ret", "try", "nop", "fork", "stop", "empty")
CLUSTER_KINDS = (
    "segment",
    "if",
    "while",
    "do",
    "try",
    "archived",
    "native_if",
    "native_while",
    "native_do",
    "fn",
    "fun_block",
    "batch_run",
    "graph",
)


@dataclass(frozen=True)
class PictureNode:
    """One row of a graph: `id` (stable), `label` (lines joined by newlines), `kind` (a
    `NODE_KINDS` name), the cluster it is drawn in (None: the top level), its address in its
    graph, `graph` (0: the graph drawn, k: the k-th sub-graph met) and its row there."""

    id: str
    label: str
    kind: str
    cluster: str | None
    address: tuple[int, ...]
    graph: int
    row: int


@dataclass(frozen=True)
class PictureEdge:
    """A transfer of control from one node to another (`kind`: one of `EDGE_KINDS`)."""

    source: str
    target: str
    kind: str
    label: str = ""


@dataclass(frozen=True)
class PictureCluster:
    """A box drawn around nodes: a segment, a clause, a sub-graph (`kind`: `CLUSTER_KINDS`)."""

    id: str
    label: str
    kind: str
    parent: str | None


@dataclass(frozen=True)
class GraphPicture:
    """A rendered graph as plain data, in row order (sub-graph rows right after their fork node)."""

    nodes: tuple[PictureNode, ...]
    edges: tuple[PictureEdge, ...]
    clusters: tuple[PictureCluster, ...]
    _by_address: dict[tuple[int, ...], PictureNode] = field(default_factory=dict, repr=False, compare=False)

    def node_for(self, address: Any) -> PictureNode | None:
        """The node of the drawn graph (not of a sub-graph) the pointer stands on at `address`: the
        node there, or the first node of the segment there; None when nothing is there."""
        if not self._by_address:
            for node in self.nodes:
                if node.graph == 0:
                    self._by_address[node.address] = node
                    for size in range(1, len(node.address)):
                        self._by_address.setdefault(node.address[:size], node)
        return self._by_address.get(tuple(address))

    def members(self) -> dict[str | None, list[tuple[str, str]]]:
        """Per cluster id (None: the top level), what is drawn directly in it, in order:
        `("node", id)` and `("cluster", id)` entries, a cluster where its first node is."""
        parents = {c.id: c.parent for c in self.clusters}
        found: dict[str | None, list[tuple[str, str]]] = {None: []}
        for node in self.nodes:
            for cluster in _chain(parents, node.cluster):
                if cluster not in found:
                    found[cluster] = []
                    found[parents[cluster]].append(("cluster", cluster))
            found[node.cluster].append(("node", node.id))
        return found


def _chain(parents: dict[str, str | None], cluster: str | None) -> list[str]:
    """The clusters from the top level down to `cluster`."""
    chain: list[str] = []
    while cluster is not None:
        chain.append(cluster)
        cluster = parents[cluster]
    chain.reverse()
    return chain


def picture_of(graph: Any) -> GraphPicture:
    """Walk a top-level rendered graph into a `GraphPicture`; `NotARenderedGraph` for anything else."""
    require_rendered_graph(graph)
    builder = _PictureBuilder()
    builder.add_graph(graph, 0, None, ())
    return GraphPicture(tuple(builder.nodes), tuple(builder.edges), tuple(builder.clusters))


def require_rendered_graph(graph: Any) -> None:
    """`NotARenderedGraph` unless `graph` is a built top-level rendered graph."""
    if isinstance(graph, type) or not is_rendered_compose(graph):
        raise NotARenderedGraph(
            f"a picture needs a rendered graph (NodeCompose(...).render()), not {type(graph).__name__}"
        )
    try:
        graph.calc  # noqa: B018 - only the top-level rendered graph has one
    except AttributeError:
        raise NotARenderedGraph("a picture needs a top-level rendered graph, not a nested segment of one") from None
    if not graph:
        raise NotARenderedGraph("the rendered graph is not built (or empty)")


# ----- one graph ------------------------------------------------------------------------------


def _addr_text(addr: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, addr)) + "]"


def _key(addr: tuple[int, ...]) -> str:
    return "_".join(map(str, addr))


def _func_name(func: Any) -> str:
    return getattr(func, "__name__", None) or type(func).__name__


def _exc_name(spec: Any) -> str:
    if isinstance(spec, tuple):
        return "(" + ", ".join(getattr(e, "__name__", "?") for e in spec) + ")"
    return getattr(spec, "__name__", "?")


class _Table:
    """One graph's rows as the picture reads them: node, address, bits, opcode and operands."""

    def __init__(self, graph: Any, prefix: str):
        prog = program_of(graph)
        self.graph = graph
        self.prefix = prefix
        self.nodes = list(prog.nodes)
        self.addrs = [tuple(a) for a in prog.addrs]
        self.bits = list(prog.bits)
        self.ops, self.operands = compile_instructions(graph)
        self.row_of = {a: i for i, a in enumerate(self.addrs)}
        self.first_row: dict[tuple[int, ...], int] = {}
        self.last_row: dict[tuple[int, ...], int] = {}
        self.direct: dict[tuple[int, ...], list[int]] = {}
        for row, addr in enumerate(self.addrs):
            self.direct.setdefault(addr[:-1], []).append(row)
            for size in range(1, len(addr)):
                self.first_row.setdefault(addr[:size], row)
                self.last_row[addr[:size]] = row
        self.aliases: dict[tuple[int, ...], str] = {}
        for name in sorted(getattr(graph, "alias2vector_map", None) or {}):
            self.aliases.setdefault(tuple(graph.alias2vector_map[name]), name)

    def node_id(self, row: int) -> str:
        return f"{self.prefix}n{_key(self.addrs[row])}"

    def cluster_id(self, addr: tuple[int, ...]) -> str:
        return f"{self.prefix}s{_key(addr)}"

    def is_empty(self, row: int) -> bool:
        return bool(self.bits[row] & _core.ROW_EMPTY)

    def row_at(self, addr: Any) -> int:
        """The row the pointer is at for `addr`: the node's, or the first row of a segment; -1."""
        key = tuple(addr)
        row = self.row_of.get(key)
        return row if row is not None else self.first_row.get(key, -1)

    def exact_row(self, addr: tuple[int, ...]) -> int:
        return self.row_of.get(addr, -1)

    def row_after_segment(self, segment: tuple[int, ...]) -> int:
        """The first row after the rows of `segment` (-1: none)."""
        last = self.last_row.get(segment, -1)
        return last + 1 if 0 <= last < len(self.addrs) - 1 else -1


class _PictureBuilder:
    """Collects nodes, edges and clusters over the drawn graph and the sub-graphs it runs."""

    def __init__(self) -> None:
        self.nodes: list[PictureNode] = []
        self.edges: list[PictureEdge] = []
        self.clusters: list[PictureCluster] = []
        self._graphs = 0
        self._open: list[Any] = []  # the graphs being drawn (a sub-graph never contains itself)

    def add_graph(self, graph: Any, number: int, cluster: str | None, depth: tuple[Any, ...]) -> str | None:
        """Draw `graph` as graph `number` inside `cluster`; the id of its entry node."""
        table = _Table(graph, f"g{number}" if number else "")
        self._open.append(graph)
        try:
            segments = self._add_segments(table, cluster)
            rows = _RowEdges(table)
            for row in range(len(table.addrs)):
                self._add_row(table, row, segments, cluster)
                self._add_sub_graphs(table, row, segments.get(table.addrs[row][:-1], cluster))
            self.edges.extend(rows.edges())
        finally:
            self._open.pop()
        return table.node_id(0) if table.addrs else None

    def _add_segments(self, table: _Table, top: str | None) -> dict[tuple[int, ...], str | None]:
        """One cluster per nested segment, in row order; address -> cluster id (`()`: `top`)."""
        found: dict[tuple[int, ...], str | None] = {(): top}
        for addr in table.addrs:
            for size in range(1, len(addr)):
                segment = addr[:size]
                if segment not in found:
                    cid = table.cluster_id(segment)
                    kind, name = _segment_kind(table, segment)
                    label = f"{name} {_addr_text(segment)}"
                    self.clusters.append(PictureCluster(cid, label, kind, found[segment[:-1]]))
                    found[segment] = cid
        return found

    def _add_row(self, table: _Table, row: int, segments: dict, top: str | None) -> None:
        addr = table.addrs[row]
        cluster = segments.get(addr[:-1], top)
        node = table.nodes[row]
        graph_number = int(table.prefix[1:]) if table.prefix else 0
        if table.is_empty(row):
            label, kind = f"{_addr_text(addr)}\n(empty segment)", "empty"
        else:
            label, kind = _node_label(table, row), _node_kind(table, row, node)
        self.nodes.append(PictureNode(table.node_id(row), label, kind, cluster, addr, graph_number, row))

    def _add_sub_graphs(self, table: _Table, row: int, cluster: str | None) -> None:
        node = table.nodes[row]
        if table.is_empty(row) or not isinstance(node, ForkingStep):
            return
        graphs = list(node.sub_graphs())
        addr = table.addrs[row]
        batch = not isinstance(node, FuncBlock)
        holder = cluster
        if batch:
            holder = f"{table.prefix}b{_key(addr)}"
            self.clusters.append(PictureCluster(holder, f"BATCH_RUN {_addr_text(addr)}", "batch_run", cluster))
        for index, sub in enumerate(graphs, start=1):
            self._add_fork(table.node_id(row), sub, holder, addr, index if batch else 0)

    def _add_fork(self, source: str, sub: Any, holder: str | None, addr: tuple[int, ...], index: int) -> None:
        if any(sub is g for g in self._open) or len(self._open) > MAX_SUB_GRAPH_DEPTH or not sub:
            return
        self._graphs += 1
        number = self._graphs
        if index:
            label, kind = f"graph {index}", "graph"
        else:
            label, kind = f"FUN_BLOCK {_addr_text(addr)}", "fun_block"
        self.clusters.append(PictureCluster(f"g{number}", label, kind, holder))
        entry = self.add_graph(sub, number, f"g{number}", ())
        if entry is not None:
            self.edges.append(PictureEdge(source, entry, "fork", f"run {index}" if index else "run"))


# ----- what a row is ----------------------------------------------------------------------------


def _node_label(table: _Table, row: int) -> str:
    """`[address] mnemonic`, the alias that names the address, and the function of a tagged node."""
    node = table.nodes[row]
    addr = table.addrs[row]
    if not isinstance(node, BaseNode):
        return f"{_addr_text(addr)} <{type(node).__name__}>"
    lines = [f"{_addr_text(addr)} {resolve_dis(node)}"]
    alias = table.aliases.get(addr)
    if isinstance(node, AliasNode):
        lines.append(resolve_dis(node.node))
    elif alias is not None:
        lines.append(f"alias {alias}")
    plain = getattr(node, "__sdb_dis__", None) is None and not hasattr(node.func, "__self__")  # a user's node
    if plain and not str(node.tag).startswith(AUTO_PREFIX):
        name = _func_name(node.func)
        if name != node.tag:
            lines.append(name)
    return "\n".join(lines)


_KIND_OF_OP = {
    ops.OP_BRANCH: "test",
    ops.OP_WHILE: "test",
    ops.OP_DO_CHECK: "test",
    ops.OP_NATIVE_IF: "test",
    ops.OP_LOOP_HEAD: "test",
    ops.OP_ELSE: "else",
    ops.OP_DO: "loop",
    ops.OP_JUMP: "jump",
    ops.OP_LOOP_CONTROL: "jump",
    ops.OP_CALLSUB: "call",
    ops.OP_INVOKE: "call",
    ops.OP_RET: "ret",
    ops.OP_TRY: "try",
    ops.OP_NOP: "nop",
}


def _node_kind(table: _Table, row: int, node: Any) -> str:
    if isinstance(node, NativeBubbleEnterNode):
        return "jump"
    kind = _KIND_OF_OP.get(table.ops[row])
    if kind is not None:
        return kind
    if isinstance(node, ForkingStep):
        return "fork"
    if isinstance(node, InterruptIntoNode):
        return "call"
    if isinstance(node, InterruptReturnNode):
        return "ret"
    if node is RESET or node is SUSPEND:
        return "stop"
    if node is _fn_escape or isinstance(node, JumpNode):
        return "jump"
    return "step"


def _segment_kind(table: _Table, segment: tuple[int, ...]) -> tuple[str, str]:
    """`(cluster kind, title)` of a segment, from the node at its slot 0 (and its direct rows)."""
    head = table.exact_row((*segment, 0))
    node = table.nodes[head] if head >= 0 else None
    direct = [table.nodes[r] for r in table.direct.get(segment, ())]
    if isinstance(node, ConditionJumpNode):
        tests = sum(isinstance(n, ConditionJumpNode) for n in direct)
        return "if", " ".join(
            ["IF", *["ELIF"] * (tests - 1), *(["ELSE"] if any(isinstance(n, ELSENode) for n in direct) else [])]
        )
    if isinstance(node, NativeIfJumpNode):
        return "native_if", "NATIVE_IF"
    if isinstance(node, WhileNode):
        return "while", "WHILE"
    if isinstance(node, DONode):
        return "do", "DO WHILE"
    if isinstance(node, NativeWhileNode):
        return "native_while", "NATIVE_WHILE"
    if isinstance(node, NativeBubbleEnterNode) and node._push:
        return "native_do", "NATIVE_DO"
    if isinstance(node, TryNode):
        return "try", _try_title(node)
    if isinstance(node, SubprogramJumpNode):
        return "archived", "ARCHIVED_NODES"
    if node is not None and getattr(node, "tag", None) == BuiltinTags.ARCHIVED_SEGMENT:
        return "archived", "ARCHIVED_SEGMENT"
    if node is _fn_escape:
        return "fn", _routine_title(direct)
    return "segment", "segment"


def _try_title(node: TryNode) -> str:
    parts = ["Try", *(f"CATCH {_exc_name(exc)}" for exc, _ in node._catch_addr_chain)]
    if node._else_addr is not None:
        parts.append("THEN")
    if node._finally_addr is not None:
        parts.append("FINALLY")
    return " ".join(parts)


def _routine_title(direct: list[Any]) -> str:
    entry = direct[1] if len(direct) > 1 else None
    name = getattr(entry, "alias", None)
    kind = "INTER_FN" if any(isinstance(n, InterruptReturnNode) for n in direct) else "FN"
    return f"{kind} {name}" if name else kind


# ----- where control goes -------------------------------------------------------------------------

_FALLS_THROUGH = {ops.OP_CALL, ops.OP_NOP, ops.OP_INVOKE}
"""The opcodes after which the pointer advances to the next row (the others always jump)."""


class _RowEdges:
    """The edges of one graph's rows. A row gets a `next` edge only when the pointer can reach it
    by flow (the first row, a jump, branch or return target, or the row after such a row): a
    condition or body that its clause only calls never falls through into the next slot."""

    def __init__(self, table: _Table):
        self.table = table
        self.found: list[PictureEdge] = []
        self.entries: set[int] = {0}

    def edges(self) -> Iterator[PictureEdge]:
        count = len(self.table.addrs)
        for row in range(count):
            self._row(row)
        reached = False  # whether the flow reaches `row` (every entry is known by now)
        for row in range(count):
            reached = reached or row in self.entries
            if reached and row + 1 < count and self._falls_through(row):
                self._add(row, row + 1, "next", "", entry=False)
            else:
                reached = False
        return iter(self.found)

    def _falls_through(self, row: int) -> bool:
        table = self.table
        if table.is_empty(row):
            return True
        if table.ops[row] not in _FALLS_THROUGH:
            return False
        node = table.nodes[row]
        if node is RESET or node is _fn_escape or isinstance(node, (InterruptReturnNode, JumpNode)):
            return False
        return not isinstance(node, InterruptIntoNode) or not node._compiled

    def _add(self, source: int, target: int, kind: str, label: str, entry: bool = True) -> None:
        if source < 0 or target < 0:
            return
        if kind in ("jump", "branch") and target <= source:
            kind = "back"
        if entry:
            self.entries.add(target)
        table = self.table
        self.found.append(PictureEdge(table.node_id(source), table.node_id(target), kind, label))

    def _row(self, row: int) -> None:
        table = self.table
        if table.is_empty(row):
            return
        op, args = table.ops[row], table.operands[row]
        handler = _OP_EDGES.get(op)
        if handler is not None and args is not None:
            handler(self, row, args)
        else:
            self._generic(row)

    def _generic(self, row: int) -> None:
        """Rows that run their function: the instructions without an opcode, and forks."""
        table = self.table
        node = table.nodes[row]
        if node is _fn_escape:
            segment = table.addrs[row][:-1]
            self._add(row, table.row_after_segment(segment), "jump", "skip")
        elif isinstance(node, InterruptIntoNode) and node._compiled:
            self._add(row, table.row_at(node._jump_addr), "call", "INT")
            ret = table.addrs[row] if node._ret_addr is None else tuple(node._ret_addr)
            self._add(row, _next_row(table, table.row_at(ret)), "return", "IRET")

    # -- one method per opcode --

    def _jump(self, row: int, args: tuple) -> None:
        node = self.table.nodes[row]
        label = ""
        if isinstance(node, JumpNode):
            target = node._alias_or_idata
            label = target if isinstance(target, str) else "goto"
        elif isinstance(node, SubprogramJumpNode) or getattr(node, "tag", None) == BuiltinTags.ARCHIVED_SEGMENT:
            label = "skip"
        elif isinstance(node, NativeBubbleEnterNode):
            label = "enter"
        elif isinstance(node, NativeBranchExitNode):
            label = "merge"
        self._add(row, _target_row(args[ops.THEN]), "jump", label)

    def _branch(self, row: int, args: tuple) -> None:
        self._add(row, args[ops.FIRST], "subcall", "test", entry=False)
        self._add(row, args[ops.SECOND], "branch", "true", entry=False)
        self._add(args[ops.SECOND], _target_row(args[ops.THEN]), "merge", "")
        self._add(row, _target_row(args[ops.EXIT]), "branch", "false")

    def _else(self, row: int, args: tuple) -> None:
        self._add(row, args[ops.FIRST], "branch", "else", entry=False)
        self._add(args[ops.FIRST], _target_row(args[ops.THEN]), "merge", "")

    def _do(self, row: int, args: tuple) -> None:
        self._add(row, args[ops.FIRST], "subcall", "do", entry=False)
        self._add(args[ops.FIRST], _target_row(args[ops.THEN]), "merge", "")
        self._add(row, _target_row(args[ops.EXIT]), "branch", "break")

    def _do_check(self, row: int, args: tuple) -> None:
        self._add(row, args[ops.FIRST], "subcall", "test", entry=False)
        self._add(row, _target_row(args[ops.THEN]), "branch", "true")
        self._add(row, _target_row(args[ops.EXIT]), "branch", "false")

    def _native_if(self, row: int, args: tuple) -> None:
        self._add(row, args[ops.FIRST], "subcall", "test", entry=False)
        if args[ops.SECOND] >= 0:
            self._add(row, args[ops.SECOND], "branch", "true", entry=False)
            self._add(args[ops.SECOND], _target_row(args[ops.THEN]), "merge", "")
        else:
            self._add(row, _target_row(args[ops.THEN]), "branch", "true")
        self._add(row, _target_row(args[ops.EXIT]), "branch", "false")

    def _loop_head(self, row: int, args: tuple) -> None:
        self._add(row, args[ops.FIRST], "subcall", "test", entry=False)
        self._add(row, _target_row(args[ops.THEN]), "branch", "true")
        self._add(row, _target_row(args[ops.EXIT]), "branch", "false")

    def _callsub(self, row: int, args: tuple) -> None:
        node = self.table.nodes[row]
        if isinstance(node, NativeBubbleEnterNode):
            self._add(row, _target_row(args[ops.THEN]), "jump", "enter")
            return
        self._add(row, _target_row(args[ops.THEN]), "call", "CALL")
        self._add(row, _next_row(self.table, args[ops.SECOND]), "return", "RET")

    def _invoke(self, row: int, args: tuple) -> None:
        self._add(row, args[ops.FIRST], "subcall", "invoke", entry=False)

    def _loop_control(self, row: int, args: tuple) -> None:
        table = self.table
        node = table.nodes[row]
        loop = _enclosing_native_loop(table, table.addrs[row])
        if loop is None or not isinstance(node, _LoopControlNode):
            return
        target = table.row_at((*loop, args[ops.EXTRA][0]))
        is_continue = node.tag == BuiltinTags.CONTINUE
        self._add(row, target, "back" if is_continue else "jump", "continue" if is_continue else "break")

    def _try(self, row: int, args: tuple) -> None:
        body, on_success, on_exit, catches = args[ops.EXTRA]
        escape = _target_row(args[ops.THEN])
        last = on_exit[1] if on_exit is not None else escape
        after_body = on_success[1] if on_success is not None else last
        self._add(row, body[1], "subcall", "try", entry=False)
        self._add(body[1], after_body, "merge", "ok", entry=False)
        for spec, handler in catches:
            self._add(body[1], handler[1], "catch", f"catch {_exc_name(spec)}", entry=False)
            self._add(handler[1], last, "merge", "", entry=False)
        if on_success is not None:
            self._add(on_success[1], last, "merge", "", entry=False)
        if on_exit is not None:
            self._add(on_exit[1], escape, "merge", "finally")
        else:
            self.entries.add(escape)


_OP_EDGES = {
    ops.OP_JUMP: _RowEdges._jump,
    ops.OP_BRANCH: _RowEdges._branch,
    ops.OP_ELSE: _RowEdges._else,
    ops.OP_WHILE: _RowEdges._branch,
    ops.OP_DO: _RowEdges._do,
    ops.OP_DO_CHECK: _RowEdges._do_check,
    ops.OP_NATIVE_IF: _RowEdges._native_if,
    ops.OP_LOOP_HEAD: _RowEdges._loop_head,
    ops.OP_CALLSUB: _RowEdges._callsub,
    ops.OP_INVOKE: _RowEdges._invoke,
    ops.OP_LOOP_CONTROL: _RowEdges._loop_control,
    ops.OP_TRY: _RowEdges._try,
}
"""The edges of each opcode, read from its operand record (see `core.opcodes`)."""


def _target_row(descriptor: Any) -> int:
    """The row a jump-target descriptor `(row, exact, address)` lands on (-1: none)."""
    return -1 if descriptor is None else descriptor[0]


def _next_row(table: _Table, row: int) -> int:
    """The row after `row` (where a return to `row` continues), -1 past the end."""
    return row + 1 if 0 <= row < len(table.addrs) - 1 else -1


def _enclosing_native_loop(table: _Table, addr: tuple[int, ...]) -> tuple[int, ...] | None:
    """The segment of the native loop a CONTINUE / BREAK_LOOP at `addr` belongs to: the nearest
    enclosing segment headed by a loop head or a bubble entry (as the loop configures them)."""
    for size in range(len(addr) - 1, 0, -1):
        head = table.exact_row((*addr[:size], 0))
        if head >= 0 and isinstance(table.nodes[head], (NativeWhileNode, NativeBubbleEnterNode)):
            return addr[:size]
    return None


__all__ = [
    "CLUSTER_KINDS",
    "EDGE_KINDS",
    "NODE_KINDS",
    "GraphPicture",
    "PictureCluster",
    "PictureEdge",
    "PictureNode",
    "picture_of",
    "require_rendered_graph",
]
