"""The `policy` and `policy_retry` families (`--families`): a node that may fail and is retried, written by hand inside
the node (runs on every build, 1.1.3 included) and declared as a node policy (`@Node(retry=...)`,
this runtime's: n/a on 1.1.3). Each variant is a chain of async nodes, one step each; the retry's
backoff is zero, so what is measured is the machinery, not a sleep.

No `from __future__ import annotations`: node bodies are analysed for dependency injection,
and their annotations must be real objects.
"""

from typing import Any, Callable

from .bodies import api, chain_plan
from .framework import Tally, need, scenario

NODES = 100
"""Nodes per run: each fails `failures` times first (0 or 1), then succeeds."""


class Transient(Exception):
    """What a flaky node raises."""


def _flaky(tally: Tally, failures: int) -> Callable[..., Any]:
    """An async body that fails `failures` times per node, then counts one success."""
    state = {"left": failures}

    async def body() -> None:
        if state["left"]:
            state["left"] -= 1
            tally.aux += 1
            raise Transient()
        state["left"] = failures
        tally.n += 1

    return body


def _by_hand(tally: Tally, failures: int) -> Callable[..., Any]:
    """The same body with the retry loop written inside the node, as dependants do today."""
    once = _flaky(tally, failures)

    async def body() -> None:
        for attempt in range(3):
            try:
                return await once()
            except Transient:
                if attempt == 2:
                    raise

    return body


def _variant(name: str, title: str, family: str = "policy") -> Callable:
    return scenario(name, title, unit="node", size=NODES, quick=NODES, kind="variant", family=family)


def _declared(n: int, failures: int) -> Any:
    Node, _, _ = api()
    Retry = need("amrita_sense.policies", "Retry")
    tally = Tally()
    retry = Retry(attempts=3, retry_on=Transient, delay=0, jitter=0)
    nodes = [Node(retry=retry)(_flaky(tally, failures)) for _ in range(n)]
    return chain_plan(nodes, tally, n)


def _handwritten(n: int, failures: int) -> Any:
    Node, _, _ = api()
    tally = Tally()
    return chain_plan([Node()(_by_hand(tally, failures)) for _ in range(n)], tally, n)


@_variant("policy_by_hand", "async node, a retry loop written inside it, succeeds at once")
def policy_by_hand(n: int) -> Any:
    return _handwritten(n, 0)


@_variant("policy_declared", "async node, @Node(retry=Retry(...)), succeeds at once")
def policy_declared(n: int) -> Any:
    return _declared(n, 0)


@_variant("policy_by_hand_one_retry", "async node, a retry loop written inside it, fails once", "policy_retry")
def policy_by_hand_one_retry(n: int) -> Any:
    return _handwritten(n, 1)


@_variant("policy_declared_one_retry", "async node, @Node(retry=Retry(...)), fails once", "policy_retry")
def policy_declared_one_retry(n: int) -> Any:
    return _declared(n, 1)
