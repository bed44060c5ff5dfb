"""Compile-time guards shared by the `call_sub`-based loops (WHILE, DO)."""

from __future__ import annotations

from amrita_sense.node.abc_base import AbstractComposeOriginal


def reject_composition_body(body: object, loop_name: str) -> None:
    """Raise `TypeError` for a source-composition loop body.

    These loops enter their body with one `call_sub`, which runs exactly one
    node: a composition would silently run only its first child.
    """
    if isinstance(body, AbstractComposeOriginal):
        raise TypeError(
            f"{loop_name} body must be a single node, got {type(body).__name__}. "
            "A call_sub-based loop enters its body with a single call, so a composition "
            "would silently run only its first child. Use NATIVE_WHILE / NATIVE_DO for a multi-node body."
        )
