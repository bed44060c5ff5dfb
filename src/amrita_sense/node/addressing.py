"""Address resolution over a rendered graph."""

from __future__ import annotations

from typing import Any

from amrita_sense.exceptions import NullPointerException
from amrita_sense.node.abc_base import AbstractAddressCalculator, is_rendered_compose


class AddressCalculator(AbstractAddressCalculator):
    """Resolves aliases and addresses of one top-level rendered graph."""

    __slots__ = ("_graph",)

    def __init__(self, graph: Any):
        self._graph = graph

    def resolve_alias(self, alias: str) -> list[int]:
        """The address registered for `alias` (a copy); `NullPointerException` if unknown."""
        addr = self._graph.alias2vector_map.get(alias)
        if addr is None:
            raise NullPointerException(f"alias '{alias}' not found")
        return list(addr)

    def find_addr_safe(self, addr: list[int]) -> Any:
        """The node or segment at `addr`, or None when the address leads nowhere."""
        current = self._graph
        for idx in addr:
            if not is_rendered_compose(current) or idx >= len(current):
                return None
            current = current[idx]
        return current

    def find_addr(self, addr: list[int]) -> Any:
        """Like `find_addr_safe`, but a missing or empty target raises `NullPointerException`."""
        found = self.find_addr_safe(addr)
        if not found:
            raise NullPointerException(f"address {list(addr)} not found")
        return found

    def _container(self, path) -> Any:
        current = self._graph
        for idx in path:
            if not is_rendered_compose(current):
                return None
            current = current[idx]
        return current if is_rendered_compose(current) else None

    def advance(self, pointer: Any) -> bool:
        """Move `pointer` in place to the next executable position; False at the end.

        A non-empty segment at the pointer (or as the next sibling) is entered;
        an exhausted segment is left for its parent's next sibling.
        """
        if not pointer:
            return False
        container = self._container(pointer.base_addr[:-1])
        if container is None:
            return False
        here = container[pointer[-1]]
        if is_rendered_compose(here) and here:
            pointer.append(0)
            return True
        while pointer:
            nxt = pointer[-1] + 1
            if nxt < len(container):
                pointer[-1] = nxt
                sibling = container[nxt]
                if is_rendered_compose(sibling) and sibling:
                    pointer.append(0)
                return True
            pointer.pop()
            if not pointer:
                return False
            container = self._container(pointer.base_addr[:-1])
            if container is None:
                return False
        return False
