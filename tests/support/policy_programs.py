"""A workflow whose middle node has a retry policy, for the policy tests, in this process or another.

Run as a script (`python policy_programs.py SNAPSHOT_FILE`), it restores the snapshot in the file on a
freshly built graph, runs it, and prints one JSON line: the attempts the restored run made and how the
run ended. The node's calls are counted in the `Attempts` object injected from the pools (pickled
with the snapshot), so the restored run counts on from where the snapshot was taken.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import sys
from typing import Any

from amrita_sense import NodeCompose, WorkflowInterpreter
from amrita_sense.node.wrapper import Node
from amrita_sense.policies import Retry

ATTEMPTS = 4


class Attempts:
    """How often the flaky node ran, and after how many calls it starts to succeed (0: never)."""

    def __init__(self, succeed_at: int = 0) -> None:
        self.calls = 0
        self.succeed_at = succeed_at
        self.trace: list[str] = []


@Node(wrap_to_async=False)
def before(state: Attempts) -> None:
    state.trace.append("before")


@Node(retry=Retry(attempts=ATTEMPTS, retry_on=ConnectionError, delay=0.001, jitter=0))
async def flaky(state: Attempts) -> str:
    state.calls += 1
    state.trace.append(f"attempt {state.calls}")
    if state.succeed_at and state.calls >= state.succeed_at:
        return "answer"
    raise ConnectionError(f"attempt {state.calls} failed")


@Node(wrap_to_async=False)
def after(state: Attempts) -> None:
    state.trace.append("after")


def graph() -> Any:
    return NodeCompose(before, flaky, after).render()


async def _resume(data: bytes) -> dict:
    interp = WorkflowInterpreter.restore(graph(), data, codec=pickle, allow_unsigned=True)
    state = interp._ava_args[1]
    calls_before = state.calls
    try:
        await interp.run()
        ended = "finished"
    except ConnectionError as exc:
        ended = f"failed: {exc}"
    return {"calls_here": state.calls - calls_before, "trace": state.trace, "ended": ended}


def main(path: str) -> None:
    with open(path, "rb") as f:
        print("POLICY " + json.dumps(asyncio.run(_resume(f.read()))))


if __name__ == "__main__":
    from support import policy_programs  # the graph's nodes and the pickled state live in this module's name

    policy_programs.main(sys.argv[1])
