"""Run state that lives on nodes of the graph rather than on the interpreter.

Two kinds:

- sub-interpreters of a step in flight: FUN_BLOCK and BATCH_RUN keep the children
  they forked for each interpreter that runs them (`_children` / `_forked`, keyed
  by that interpreter); a snapshot taken while such a step waits (for example
  while a child is parked at a suspend gate) stores the children's state, and
  restore forks new children for the restored interpreter the way the node's
  `_pre_check` does and gives them that state;
- return addresses computed at a node's first execution and then kept: INT
  without `ret_to` and PUSH_CONTEXT(None).

Instruction classes are imported lazily: they import the interpreter module.
"""

from __future__ import annotations

from typing import Any

RUNNING, RETURNED, PENDING = "running", "returned", "pending"
"""How a child stood when its parent's step was snapshotted: mid-run, its run had returned, not started."""


def _func_block() -> Any:
    from amrita_sense.instructions.func_block import FuncBlock

    return FuncBlock


def _batch_run() -> Any:
    from amrita_sense.instructions.batch import BatchRun

    return BatchRun


def sub_graphs(node: Any) -> list[Any]:
    """The rendered graphs a node runs in sub-interpreters (part of the graph's identity)."""
    if isinstance(node, _func_block()):
        return [node._comp_rendered]
    if isinstance(node, _batch_run()):
        return list(getattr(node, "_graphs", ()))
    return []


def step_children(node: Any, interp: Any) -> tuple[str, list[Any]] | None:
    """`(kind, children)` when `node` is a FUN_BLOCK / BATCH_RUN step with sub-interpreters of `interp`, else None."""
    if isinstance(node, _func_block()):
        child = node._children.get(interp)
        return ("fun_block", [child]) if child is not None else None
    if isinstance(node, _batch_run()):
        children = node._forked.get(interp)
        return ("batch", list(children)) if children else None
    return None


def child_standing(child: Any) -> str:
    """RUNNING, RETURNED or PENDING; None-safe only for interpreters."""
    if child.is_running:
        return RUNNING
    ptr = child._pointer
    finished = ptr._items is not None and not ptr._items
    return RETURNED if finished or child._flag_bits & 2 else PENDING


def check_children_free(node: Any, kind: str, count: int) -> str | None:
    """Why `node` cannot take `count` restored children of `kind` (None when it can).

    Children are kept per interpreter, so a freshly restored interpreter never
    finds the slot taken: only the kind and the number of graphs are checked.
    """
    if kind == "fun_block":
        if not isinstance(node, _func_block()):
            return "the slot is not a FUN_BLOCK"
        if count != 1:
            return "a FUN_BLOCK has one sub-interpreter"
        return None
    if not isinstance(node, _batch_run()):
        return "the slot is not a BATCH_RUN"
    if count != len(node._graphs):
        return f"the BATCH_RUN has {len(node._graphs)} graphs, the snapshot {count} children"
    return None


def child_graphs(node: Any, kind: str) -> list[Any]:
    return [node._comp_rendered] if kind == "fun_block" else list(node._graphs)


def fork_children(node: Any, kind: str, parent: Any) -> list[Any]:
    """New children for `node`'s step, forked from `parent` as its `_pre_check` would, and installed for `parent`."""
    if kind == "fun_block":
        child = parent.fork_interpreter(compose=node._comp_rendered, middleware=node._mdw, object_io=node._io)
        node._children[parent] = node._interpreter = child
        return [child]
    children = [parent.fork_interpreter(graph, node._mdw, node._io or parent.object_io) for graph in node._graphs]
    node._forked[parent] = children
    return children


# ----- return addresses kept by nodes ----------------------------------------------------


def _memo_field(node: Any) -> str | None:
    """The attribute in which `node` keeps a return address computed at its first execution."""
    from amrita_sense.instructions.interrupt import InterruptIntoNode, PushContextNode

    if isinstance(node, InterruptIntoNode) and node._ret_target is None:
        return "_ret_addr"
    if isinstance(node, PushContextNode) and node._target is None:
        return "_addr"
    return None


def memo_rows(prog: Any) -> tuple[int, ...]:
    """The rows of `prog` whose node can keep a computed return address."""
    return tuple(row for row in range(prog.nrows) if _memo_field(prog.nodes[row]) is not None)


def capture_memos(prog: Any, rows: tuple[int, ...]) -> list[list]:
    """`[[address of the node, kept address], ...]` for the nodes at `rows` (see `memo_rows`) that have one."""
    memos = []
    for row in rows:
        node = prog.nodes[row]
        kept = getattr(node, _kept_field(node))
        if kept is not None:
            memos.append([list(prog.addrs[row]), list(kept)])
    return memos


def memo_conflict(node: Any, value: list[int]) -> str | None:
    """Why `value` cannot be given to `node` (None when it can)."""
    field = _memo_field(node)
    if field is None:
        return "the slot holds no INT / PUSH_CONTEXT(None) node"
    current = getattr(node, field)
    if current is not None and list(current) != value:
        return f"the node already keeps {list(current)} in this process"
    return None


def apply_memo(node: Any, value: list[int]) -> None:
    setattr(node, _kept_field(node), list(value))


def _kept_field(node: Any) -> str:
    """`_memo_field` of a node known to keep a return address."""
    field = _memo_field(node)
    if field is None:
        raise TypeError(f"{node!r} keeps no return address")
    return field
