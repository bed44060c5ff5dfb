"""What a node keeps during a run, as the node itself exposes it to snapshots, restore and the debugger.

Three kinds of node keep run state of their own, outside the interpreter:

- a `ForkingStep` (FUN_BLOCK, BATCH_RUN) runs sub-graphs in interpreters it forks for each
  interpreter that runs it; while its step is in flight those children are part of the run;
- an `AddressKeeper` (INT without `ret_to`, PUSH_CONTEXT(None)) computes a return address at its
  first execution and keeps it for the later ones;
- an `AttemptKeeper` (a node with a policy) counts the failed attempts of the step in flight and
  keeps the deadline of the backoff before the next one.

The durable layer and the debugger call these methods instead of reading the classes' fields.
"""

from __future__ import annotations

from typing import Any, ClassVar


class ForkingStep:
    """A node whose step runs sub-graphs in child interpreters, forked per running interpreter."""

    __slots__ = ()

    fork_kind: ClassVar[str]
    """The name snapshots store for this kind of step ("fun_block", "batch")."""

    def sub_graphs(self) -> list[Any]:
        """The rendered graphs the step runs in its children (part of the graph's identity)."""
        raise NotImplementedError

    def step_children(self, interp: Any) -> list[Any] | None:
        """The children forked for `interp`'s step in flight, or None when it has none."""
        raise NotImplementedError

    def children_misfit(self, count: int) -> str | None:
        """Why `count` restored children cannot be this step's (None when they can)."""
        graphs = len(self.sub_graphs())
        return None if count == graphs else f"the step runs {graphs} graphs, the snapshot has {count} children"

    def fork_children(self, parent: Any) -> list[Any]:
        """Fork new children for `parent`'s step as running it would, install them, return them."""
        raise NotImplementedError


class AddressKeeper:
    """A node that may compute a return address at its first execution and keep it."""

    __slots__ = ()

    def keeps_address(self) -> bool:
        """True when this node computes its return address at run time (and then keeps it)."""
        raise NotImplementedError

    def kept_address(self) -> list[int] | None:
        """The return address kept so far, or None before the first execution."""
        raise NotImplementedError

    def keep_address(self, address: list[int]) -> None:
        """Keep `address` as if the node had computed it (a restored run)."""
        raise NotImplementedError


class AttemptKeeper:
    """A node with a policy (`amrita_sense.policies`): per interpreter, the attempts that failed so far
    and the wall-clock time its backoff before the next attempt ends."""

    __slots__ = ()

    def attempt_state(self, interp: Any) -> tuple[int, float | None] | None:
        """`(failed attempts, backoff deadline or None)` of `interp`'s step at this node, or None."""
        raise NotImplementedError

    def keep_attempt_state(self, interp: Any, failures: int, deadline: float | None) -> None:
        """Give `interp` this standing (a restored run: its next attempt is `failures + 1`)."""
        raise NotImplementedError

    def backing_off(self, interp: Any) -> bool:
        """True while `interp` waits out a backoff at this node (a point a snapshot can be taken at)."""
        raise NotImplementedError
