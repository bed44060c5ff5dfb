"""Shared plumbing of the built-in instructions (private).

Every built-in instruction node is an ordinary `BaseNode` whose function
drives the interpreter through its public API (`call_offset`, `jump_*`,
`_ret_addr_stack`, `rebase_ptr`). Operands are plain attributes fixed at
construction or in `_post_compile`, so a later compiler can read them.
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable
from typing import Any

from amrita_sense import core as _core
from amrita_sense.exceptions import AliasNotFoundError, BreakLoop, InvalidOperand
from amrita_sense.node.abc_base import AbstractComposeOriginal, is_rendered_compose
from amrita_sense.node.core import BaseNode
from amrita_sense.node.self_compile import SelfCompileInstruction
from amrita_sense.types import PointerVector

NODE_SLOTS = ("address_able", "fun_frame", "fun_sign", "func", "is_coro", "tag", "wrap_to_async")
"""The attributes `BaseNode._init` sets; instruction classes add their operands to these."""


async def broke_out(body: Awaitable[Any]) -> bool:
    """Await a loop body: True when it raised `BreakLoop`."""
    try:
        await body
    except BreakLoop:
        return True
    return False


# ----- argument checks: an instruction refuses a bad operand when it is declared ---------------


def require_node(value: Any, what: str) -> Any:
    """`value` if it is a node (a `@Node` function or an instruction node), else `TypeError` naming `what`."""
    if not isinstance(value, BaseNode):
        raise InvalidOperand(f"{what} needs a node, not {type(value).__name__}")
    return value


def require_part(value: Any, what: str, *, payload: bool = False) -> Any:
    """`value` if a graph can hold it (a node, a source compose or an instruction), else `TypeError`
    (`payload`: with 1.1.3's message for a native clause's operand first)."""
    if not isinstance(value, (BaseNode, AbstractComposeOriginal, SelfCompileInstruction)):
        kind = type(value).__name__
        detail = f"{what} needs a node, a NodeCompose or an instruction, not {kind}"
        if payload:  # 1.1.3's site and type (it raises at render)
            raise TypeError(f"Unsupported payload type: {kind} ({detail})")
        raise InvalidOperand(detail)
    return value


def require_name(value: Any, what: str) -> str:
    """`value` if it is a string (an alias or an entry point name), else `TypeError` naming `what`."""
    if not isinstance(value, str):
        raise InvalidOperand(f"{what} needs a name (a string), not {type(value).__name__}")
    return value


def check_target(value: Any, what: str, optional: bool = False) -> None:
    """A jump or call target: an alias (a string) or an address (a list or tuple of ints)."""
    if value is None and optional:
        return
    if isinstance(value, str):
        return
    if isinstance(value, (list, tuple, PointerVector)) and all(type(i) is int for i in value):
        return
    raise InvalidOperand(f"{what} must be an alias (str) or an address (list of int), not {value!r}")


def already_compiled(kind: str) -> RuntimeError:
    """The error for a compile-time-resolved node placed in a second graph."""
    return RuntimeError(f"{kind} node has already been compiled; a compose-bound node can only be compiled once")


def alias_not_found(alias: str, known: Any) -> AliasNotFoundError:
    """`AliasNotFoundError` with the closest known alias as a hint, when there is one."""
    matches = difflib.get_close_matches(alias, list(known), n=1, cutoff=0.6)
    if matches:
        return AliasNotFoundError(f"{alias} not found in namespace, did you mean {matches[0]}")
    return AliasNotFoundError(f"{alias} not found in namespace, please check your alias!")


def resolve_alias_strict(compose: Any, alias: str) -> list[int]:
    """The address of `alias` in the top graph, or `AliasNotFoundError` with a hint."""
    addr = compose.alias2vector_map.get(alias)
    if addr is None:
        raise alias_not_found(alias, compose.alias2vector_map.keys())
    return addr


def _predecessor(graph: Any, addr: list[int]) -> list[int] | None:
    """The executable position that plain advancement leaves just before reaching `addr`."""
    path = list(addr)
    while path:
        if path[-1] > 0:
            path[-1] -= 1
            node = graph.calc.find_addr_safe(path)
            while is_rendered_compose(node) and node:
                path.append(len(node) - 1)
                node = node[len(node) - 1]
            return path
        path.pop()
    return None


def _park_before(pc: Any, addr: list[int]) -> None:
    before = _predecessor(pc.get_graph(), addr)
    if before is not None:
        pc.rebase_ptr(before)


def resume_near(pc: Any, slot: int) -> None:
    """Make a suspended run resume at `slot` of the current segment.

    Used when a node called through `call_sub` raised `InterruptKeepContext`:
    the run keeps its state with HLT set and the next run steps past the parked
    position, so parking on the predecessor of the target resumes exactly
    there. Does nothing when the failing call already jumped somewhere.
    """
    if not pc.jump_marked:
        _park_before(pc, [*pc._pointer.base_addr[:-1], slot])


def resume_offset(pc: Any, offset: int) -> None:
    """Like `resume_near`, for the slot `offset` after the current one."""
    if not pc.jump_marked:
        addr = list(pc._pointer.base_addr)
        addr[-1] += offset
        _park_before(pc, addr)


_core.provide(resume_near=resume_near, resume_offset=resume_offset)
