"""The first workflow: `@Node` functions joined with `>>`, an IF/ELSE, context injected by type.

    python examples/quickstart.py

Each node asks for what it needs by annotation (`Order` here); the interpreter injects the objects
given in `extra_args`. `IF(condition, body).ELSE(body)` branches on a node returning a bool.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import amrita_sense
from amrita_sense import IF, Node, WorkflowInterpreter


@dataclass
class Order:
    """The per-run context: injected into every node that annotates a parameter with `Order`."""

    items: list[int]
    total: int = 0
    notes: list[str] = field(default_factory=list)


@Node(wrap_to_async=False)  # a small sync function: run inline on the event loop
def add_up(order: Order) -> None:
    order.total = sum(order.items)


@Node(wrap_to_async=False)
def is_large(order: Order) -> bool:  # an IF condition is a node returning a bool
    return order.total >= 100


@Node(wrap_to_async=False)
def discount(order: Order) -> None:
    order.total = order.total * 90 // 100
    order.notes.append("10% off")


@Node(wrap_to_async=False)
def shipping(order: Order) -> None:
    order.total += 5
    order.notes.append("shipping 5")


@Node()  # `async def` nodes are awaited; a default sync `@Node()` runs on a worker thread
async def receipt(order: Order) -> None:
    await asyncio.sleep(0)  # an I/O call would go here
    order.notes.append(f"total {order.total}")


# `>>` joins nodes and instructions into a compose; render() compiles it once, and the rendered
# graph can run any number of times (one interpreter per run).
graph = (add_up >> IF(is_large, discount).ELSE(shipping) >> receipt).render()


async def main() -> None:
    for items in ([40, 70], [10, 20]):
        order = Order(items)
        await WorkflowInterpreter(graph, extra_args=(order,)).run()
        print(f"order {items}: {', '.join(order.notes)}")
    print("core:", amrita_sense.IMPLEMENTATION)


if __name__ == "__main__":
    asyncio.run(main())
