"""A typed workflow: what a type checker sees of amrita_sense (CI runs mypy on this file).

    PYTHONPATH=src python examples/typed_usage.py
    mypy                         # the package and this example, configured in pyproject.toml

`@Node(...)` keeps the decorated function's parameters and result: `greet` is a
`NodeType[str, [user: User]]`, `fetch_score` a `NodeType[int, [user: User]]` (the result of
the coroutine), and both can still be called directly, with their own signatures. The
interpreter takes a rendered graph (`WorkflowInterpreter(42)` is a type error), and
context objects are injected into the nodes by their annotated types.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from amrita_sense import IF, Node, NodeCompose, NodeComposeRendered, WorkflowInterpreter
from amrita_sense.node import NodeType


@dataclass
class User:
    name: str
    score: int = 0


@dataclass
class Log:
    lines: list[str] = field(default_factory=list)


@Node(wrap_to_async=False)
def greet(user: User, log: Log) -> str:
    log.lines.append(f"hello {user.name}")
    return user.name


@Node()
async def fetch_score(user: User) -> int:
    await asyncio.sleep(0)
    user.score = len(user.name) * 10
    return user.score


@Node(wrap_to_async=False)
def is_high(user: User) -> bool:
    return user.score >= 50


@Node(wrap_to_async=False)
def celebrate(log: Log) -> None:
    log.lines.append("a high score")


def build() -> NodeComposeRendered:
    """greet, fetch the score, and celebrate a high one."""
    first: NodeType[str] = greet  # 1.1.3's one-parameter form still reads as NodeType[result]
    return NodeCompose(first, fetch_score, IF(is_high, celebrate)).render()


async def main() -> list[str]:
    user, log = User("Ada Lovelace"), Log()
    await WorkflowInterpreter(build(), extra_args=(user, log)).run()
    direct: str = greet(User("direct"), Log())  # a node is still its function
    log.lines.append(f"score {user.score}, called directly: {direct}")
    return log.lines


if __name__ == "__main__":
    for line in asyncio.run(main()):
        print(line)
