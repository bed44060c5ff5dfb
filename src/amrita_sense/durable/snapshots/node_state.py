"""Run state that lives on nodes of the graph rather than on the interpreter.

Two kinds:

- sub-interpreters of a step in flight: FUN_BLOCK and BATCH_RUN keep the children
  they forked for each interpreter that runs them (`_children` / `_forked`, keyed
  by that interpreter); a snapshot taken while such a step waits (for example
  while a child is parked at a suspend gate) stores the children's state, and
  restore forks new children for the restored interpreter the way the node's
  `_pre_check` does and gives them that state;
- return addresses computed at a node's first execution and then kept: INT
  without `ret_to` and PUSH_CONTEXT(None);
- the attempts of a node with a policy: how many failed, and the deadline of
  the backoff before the next one.

All are read and rebuilt through the nodes' own protocol (`amrita_sense.node.run_state`).
"""

from __future__ import annotations

from typing import Any

from amrita_sense.node.run_state import AddressKeeper, AttemptKeeper, ForkingStep

RUNNING, RETURNED, PENDING = "running", "returned", "pending"
"""How a child stood when its parent's step was snapshotted: mid-run, its run had returned, not started."""

_KIND_NAMES = {"fun_block": "FUN_BLOCK", "batch": "BATCH_RUN"}


def sub_graphs(node: Any) -> list[Any]:
    """The rendered graphs a node runs in sub-interpreters (part of the graph's identity)."""
    return node.sub_graphs() if isinstance(node, ForkingStep) else []


def step_children(node: Any, interp: Any) -> tuple[str, list[Any]] | None:
    """`(kind, children)` when `node` is a forking step with sub-interpreters of `interp`, else None."""
    if not isinstance(node, ForkingStep):
        return None
    children = node.step_children(interp)
    return (node.fork_kind, children) if children else None


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
    if not isinstance(node, ForkingStep) or node.fork_kind != kind:
        return f"the slot is not a {_KIND_NAMES.get(kind, kind)}"
    return node.children_misfit(count)


def child_graphs(node: Any, kind: str) -> list[Any]:
    return node.sub_graphs()


def fork_children(node: Any, kind: str, parent: Any) -> list[Any]:
    """New children for `node`'s step, forked from `parent` as its `_pre_check` would, and installed for `parent`."""
    return node.fork_children(parent)


# ----- return addresses kept by nodes ----------------------------------------------------


def _keeps(node: Any) -> bool:
    return isinstance(node, AddressKeeper) and node.keeps_address()


def memo_rows(prog: Any) -> tuple[int, ...]:
    """The rows of `prog` whose node can keep a computed return address."""
    return tuple(row for row in range(prog.nrows) if _keeps(prog.nodes[row]))


def capture_memos(prog: Any, rows: tuple[int, ...]) -> list[list]:
    """`[[address of the node, kept address], ...]` for the nodes at `rows` (see `memo_rows`) that have one."""
    memos = []
    for row in rows:
        kept = prog.nodes[row].kept_address()
        if kept is not None:
            memos.append([list(prog.addrs[row]), list(kept)])
    return memos


def memo_conflict(node: Any, value: list[int]) -> str | None:
    """Why `value` cannot be given to `node` (None when it can)."""
    if not _keeps(node):
        return "the slot holds no INT / PUSH_CONTEXT(None) node"
    current = node.kept_address()
    if current is not None and list(current) != value:
        return f"the node already keeps {list(current)} in this process"
    return None


def apply_memo(node: Any, value: list[int]) -> None:
    if not _keeps(node):
        raise TypeError(f"{node!r} keeps no return address")
    node.keep_address(value)


# ----- attempts of nodes with a policy ----------------------------------------------------------


def attempt_rows(prog: Any) -> tuple[int, ...]:
    """The rows of `prog` whose node has a policy (keeps attempts)."""
    return tuple(row for row in range(prog.nrows) if isinstance(prog.nodes[row], AttemptKeeper))


def backing_off(node: Any, interp: Any) -> bool:
    """True when `node` is a policy node that `interp` waits at, between two attempts."""
    return isinstance(node, AttemptKeeper) and node.backing_off(interp)


def capture_attempts(prog: Any, rows: tuple[int, ...], interp: Any) -> list[list]:
    """`[[address of the node, failed attempts, deadline or None], ...]` for `interp`'s steps in flight."""
    found = []
    for row in rows:
        state = prog.nodes[row].attempt_state(interp)
        if state is not None:
            found.append([list(prog.addrs[row]), state[0], state[1]])
    return found


def attempts_conflict(node: Any) -> str | None:
    """Why restored attempts cannot be given to `node` (None when they can)."""
    return None if isinstance(node, AttemptKeeper) else "the slot holds no node with a policy"


def apply_attempts(node: Any, interp: Any, failures: int, deadline: float | None) -> None:
    node.keep_attempt_state(interp, failures, deadline)
