"""Read-only views of an interpreter for the REPL; every function prints."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amrita_sense.debugger._checks import require_interpreter
from amrita_sense.node.abc_base import is_rendered_compose
from amrita_sense.node.core import BaseNode

if TYPE_CHECKING:
    from amrita_sense.runtime.workflow import WorkflowInterpreter

_RULE = "═" * 58


def _current_node(inter: WorkflowInterpreter) -> BaseNode | None:
    """The node the pointer addresses, or None (an empty pointer, a segment, a bad address)."""
    node = inter.get_graph().calc.find_addr_safe(inter._pointer.base_addr)
    return node if isinstance(node, BaseNode) else None


def _fmt_ptr(inter: WorkflowInterpreter) -> str:
    return str(list(inter._pointer.base_addr))


def _func_name(node: BaseNode) -> str:
    func = node.func
    return getattr(func, "__name__", None) or type(func).__name__


def _short_id(inter: WorkflowInterpreter) -> str:
    return f"{inter.id[:12]}…"


def _walk_graph(graph: Any, prefix: list[int] | None = None) -> list[tuple[list[int], BaseNode]]:
    """Every node of `graph` with its address, depth first (containers read by `len` and index)."""
    prefix = prefix or []
    found: list[tuple[list[int], BaseNode]] = []
    for index in range(max(len(graph), 0)):
        item = graph[index]
        addr = [*prefix, index]
        if isinstance(item, BaseNode):
            found.append((addr, item))
        elif is_rendered_compose(item):
            found.extend(_walk_graph(item, addr))
    return found


def where(inter: WorkflowInterpreter) -> None:
    """Print the pointer, the tag of the node there and the return-stack depth on one line."""
    require_interpreter(inter, "where")
    node = _current_node(inter)
    label = node.tag if node is not None else "<INVALID>"
    addr = ", ".join(map(str, inter._pointer.base_addr))
    print(f"📍 [{addr}]  {label}  stack_depth={len(inter._ret_addr_stack)}")


def inspect(inter: WorkflowInterpreter) -> None:
    """Print the interpreter's state: identity, pointer and node, stacks, panic, sub-interpreters."""
    require_interpreter(inter, "inspect")
    print(_RULE)
    _print_identity(inter)
    _print_position(inter)
    _print_return_stack(inter)
    _print_context_stack(inter)
    _print_panic(inter)
    _print_children(inter)
    print(_RULE)


def _print_identity(inter: WorkflowInterpreter) -> None:
    print(f"🆔  Interpreter: {_short_id(inter)}")
    if inter.parent is not None:
        print(f"👆 Parent:       {_short_id(inter.parent)}")
    if inter.top_interpreter is not inter:
        print(f"🌳 Root:         {_short_id(inter.top_interpreter)}")


def _print_position(inter: WorkflowInterpreter) -> None:
    node = _current_node(inter)
    print(f"📍 Pointer:      {_fmt_ptr(inter)}")
    if node is not None:
        print(f"🔍 Node:         {node.tag}")
        print(f"   Function:     {_func_name(node)}")
    else:
        print("🔍 Node:         <INVALID>")
    print(f"🏃 Running:      {'yes' if inter.is_running else 'no'}")
    print(f"🚩 Pending stop: {'yes' if inter.pending_stop else 'no'}")


def _print_return_stack(inter: WorkflowInterpreter) -> None:
    entries = list(inter._ret_addr_stack.stack)
    print(f"📚 Return stack: depth={len(entries)}")
    for depth in range(len(entries) - 1, -1, -1):
        print(f"   [{depth}] {entries[depth]}")


def _print_context_stack(inter: WorkflowInterpreter) -> None:
    entries = list(inter._context_stack.stack)
    print(f"📦 Context stack: depth={len(entries)}")
    for depth in range(len(entries) - 1, -1, -1):
        ctx = entries[depth]
        exc = type(ctx.exception).__name__ if ctx.exception else None
        print(f"   [{depth}] ptr={ctx.ptr}  exc={exc}")


def _print_panic(inter: WorkflowInterpreter) -> None:
    exc = inter.get_exception()
    if exc is not None:
        print(f"⚠️  Panic:        {type(exc).__name__}: {exc}")
    else:
        print("⚠️  Panic:        (none)")


def _print_children(inter: WorkflowInterpreter) -> None:
    children = inter.sub_interpreters
    print(f"👶 Sub-interpreters: {len(children)}")
    for child in list(children.values()):
        marker = "🟢" if child.is_running else "⏸️"
        print(f"   {marker} {_short_id(child)}  ptr={_fmt_ptr(child)}")


def backtrace(inter: WorkflowInterpreter) -> None:
    """Print the interpreter chain (root first), the return stack, the context stack and the node."""
    require_interpreter(inter, "backtrace")
    _print_chain(inter)
    print("Returning Stack:")
    entries = list(inter._ret_addr_stack.stack)
    for depth, entry in enumerate(entries):
        print(f"    {depth}. {entry}")
    print(f"    {len(entries)}. {inter._pointer} (Current)")
    print()
    print("Context Stack:")
    contexts = list(inter._context_stack.stack)
    for depth, ctx in enumerate(contexts):
        print(f"    {depth}. {ctx.ptr}")
    if not contexts:
        print("    (EMPTY_STACK)")
    print()
    node = _current_node(inter)
    described = f"{node.tag} -> {_func_name(node)}" if node is not None else "<INVALID>"
    print(f"Current node: {described}")


def _print_chain(inter: WorkflowInterpreter) -> None:
    chain = []
    current: WorkflowInterpreter | None = inter
    while current is not None:
        label = current.id
        if current is inter:
            label += " [Current]"
        if current.top_interpreter is current:
            label += " [Root]"
        chain.append(f"Interpreter → {label} at 0x{id(current):x}")
        current = current.parent
    for line in reversed(chain):
        print(line)
    print()


def list_nodes(inter: WorkflowInterpreter) -> None:
    """Print every node of the graph with its address, tag and function name."""
    require_interpreter(inter, "list_nodes")
    nodes = _walk_graph(inter.get_graph())
    if not nodes:
        print("(empty graph)")
        return
    for addr, node in nodes:
        addr_str = "[" + ", ".join(map(str, addr)) + "]"
        print(f"  {addr_str:>12s}  {node.tag:<40s}  {_func_name(node)}")


def list_sub_intp(inter: WorkflowInterpreter, indent: int = 0) -> None:
    """Print the tree of sub-interpreters under `inter`: status, pointer and panic, one per line."""
    require_interpreter(inter, "list_sub_intp")
    _print_tree(inter, indent)


def _print_tree(inter: WorkflowInterpreter, depth: int) -> None:
    marker = "🟢" if inter.is_running else "⏸️"
    parts = [f"{'  ' * depth}{marker} {_short_id(inter)}", f"ptr={_fmt_ptr(inter)}"]
    exc = inter.get_exception()
    if exc is not None:
        parts.append(f"exc={type(exc).__name__}")
    print("  ".join(parts))
    for child in list(inter.sub_interpreters.values()):
        _print_tree(child, depth + 1)


__all__ = ["backtrace", "inspect", "list_nodes", "list_sub_intp", "where"]
