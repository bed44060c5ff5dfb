"""The peers' work: the same three requests written for every runtime in the comparison
(`--peers`; the peers' versions are in `bench/peers/`, which read this module's names through
the package). A request takes an input x and returns a number; every node's step is
order-sensitive (`peer_mix`), so a node skipped, repeated or run out of order changes the
result, and every request's result is checked.

No `from __future__ import annotations`: node bodies are analysed for dependency injection,
and their annotations must be real objects.
"""

import dataclasses
from typing import Any, Callable, Dict, Optional

from .bodies import api, distinct_function
from .framework import Plan, expect_results, need, scenario

PEER_CHAIN_NODES = 20
PEER_AGENT_ITERATIONS = 10
PEER_MODULUS = 1_000_003


def peer_mix(value: int, k: int) -> int:
    """One node's work: fold `k` into `value`."""
    return (value * 31 + k) % PEER_MODULUS


def peer_chain_result(x: int) -> int:
    """The chain: node k (0..19) folds k into the value, starting from x."""
    value = x
    for k in range(PEER_CHAIN_NODES):
        value = peer_mix(value, k)
    return value


def peer_agent_result(x: int) -> int:
    """The agent loop: each iteration is a model step (step += 1; a tool call while step < 10),
    then the tool (acc = mix(acc, step)) or, on the last, the answer (mix(acc, step))."""
    acc = x
    for step in range(1, PEER_AGENT_ITERATIONS + 1):
        acc = peer_mix(acc, step)
    return acc


def peer_branch_result(x: int) -> int:
    """IF x is even: x // 2, ELSE: 3x + 1."""
    return x // 2 if x % 2 == 0 else 3 * x + 1


PEER_RETRY_KEY = 7


def peer_retry_result(x: int) -> int:
    """The flaky call: its first attempt fails (`PeerTransient`), the retry folds 7 into x."""
    return peer_mix(x, PEER_RETRY_KEY)


class PeerTransient(Exception):
    """What the flaky call's first attempt raises (the only failure its retry policy retries)."""


def peer_flaky_call() -> Callable[[int], int]:
    """`call(x)`: raises `PeerTransient` on every other call, starting with the first, else returns
    the retry's result; one request is two calls, whichever runtime retries it."""
    fail = [True]

    def call(x: int) -> int:
        if fail[0]:
            fail[0] = False
            raise PeerTransient(f"the first attempt for {x} failed")
        fail[0] = True
        return peer_retry_result(x)

    return call


@dataclasses.dataclass(frozen=True)
class PeerWork:
    """One of the peers' three requests: its title and the result expected for input x."""

    name: str
    title: str
    expected: Callable[[int], int]


PEER_WORKS: Dict[str, PeerWork] = {
    work.name: work
    for work in (
        PeerWork("peer_chain", f"{PEER_CHAIN_NODES}-node request chain", peer_chain_result),
        PeerWork(
            "peer_agent",
            f"{PEER_AGENT_ITERATIONS}-iteration agent loop (model step, then tool or finish)",
            peer_agent_result,
        ),
        PeerWork("peer_if_else", "IF/ELSE on the request", peer_branch_result),
        PeerWork("peer_retry", "one call that fails once, retried by the node's retry policy", peer_retry_result),
    )
}


def peer_plan(name: str, n: int, serve: Callable[[int], Any]) -> Plan:
    """A plan whose timed part serves `n` requests of the peers' work `name`, one `await
    serve(x)` each (x = 0..n-1, one new run per request); every result is checked. Before each
    measurement one request is served untimed (and checked), so a first request's one-time
    costs (plans made, caches filled: `per_request_first` measures those) stay off the clock
    on every system alike, also in a quick run without warm-up rounds."""
    work = PEER_WORKS[name]
    want = [work.expected(x) for x in range(n)]
    got: list = [None] * n

    async def timed() -> None:
        for x in range(n):
            got[x] = await serve(x)

    async def prepare() -> None:
        got[:] = [None] * n
        expect_results(f"{name} (untimed request)", [await serve(n)], [work.expected(n)])

    return Plan(n, timed, prepare, lambda: expect_results(name, got, want))


class ChainRequest:
    """The chain's request, injected by type into every node."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value


class AgentRequest:
    """The agent loop's request: the model's step count, the tools' accumulator, the answer."""

    __slots__ = ("acc", "result", "step")

    def __init__(self, x: int) -> None:
        self.step = 0
        self.acc = x
        self.result: Optional[int] = None


class BranchRequest:
    """The IF/ELSE request."""

    __slots__ = ("result", "x")

    def __init__(self, x: int) -> None:
        self.x = x
        self.result: Optional[int] = None


def _peer_chain_graph() -> Any:
    """20 distinct async nodes (each its own code object), each taking the request by type."""
    Node, NodeCompose, _ = api()
    scope = {"ChainRequest": ChainRequest, "mix": peer_mix}
    nodes = []
    for k in range(PEER_CHAIN_NODES):
        source = f"async def step_{k}(request: ChainRequest):\n    request.value = mix(request.value, {k})\n"
        nodes.append(Node()(distinct_function(source, f"step_{k}", scope)))
    return NodeCompose(*nodes).render()


def _peer_agent_graph() -> Any:
    """WHILE the model asks for a tool, run the tool; then the answer. The model step is the
    loop's condition (a node returning whether it called a tool)."""
    Node, NodeCompose, _ = api()
    WHILE = need("amrita_sense", "WHILE")

    async def model(request: AgentRequest) -> bool:
        request.step += 1
        return request.step < PEER_AGENT_ITERATIONS

    async def tool(request: AgentRequest) -> None:
        request.acc = peer_mix(request.acc, request.step)

    async def finish(request: AgentRequest) -> None:
        request.result = peer_mix(request.acc, request.step)

    return NodeCompose(WHILE(Node()(model)).ACTION(Node()(tool)), Node()(finish)).render()


def _peer_branch_graph() -> Any:
    Node, NodeCompose, _ = api()
    IF = need("amrita_sense", "IF")

    async def is_even(request: BranchRequest) -> bool:
        return request.x % 2 == 0

    async def half(request: BranchRequest) -> None:
        request.result = request.x // 2

    async def triple(request: BranchRequest) -> None:
        request.result = 3 * request.x + 1

    return NodeCompose(IF(Node()(is_even), Node()(half)).ELSE(Node()(triple))).render()


def _peer_retry_graph() -> Any:
    """One async node with a declared retry policy (no backoff); n/a on builds without policies."""
    Node, NodeCompose, _ = api()
    Retry = need("amrita_sense.policies", "Retry")
    call = peer_flaky_call()

    async def flaky(request: ChainRequest) -> None:
        request.value = call(request.value)

    retry = Retry(attempts=2, retry_on=PeerTransient, delay=0, jitter=0)
    return NodeCompose(Node(retry=retry)(flaky)).render()


def _serve_on(graph: Any, make_request: Callable[[int], Any], result: Callable[[Any], int]) -> Callable[[int], Any]:
    """One request: a new interpreter over `graph`, the request object in its pool."""
    _, _, WorkflowInterpreter = api()

    async def serve(x: int) -> int:
        request = make_request(x)
        await WorkflowInterpreter(graph, extra_args=(request,)).run()
        return result(request)

    return serve


def _peer_scenario(name: str) -> Callable[[Callable[[int], Plan]], Callable[[int], Plan]]:
    return scenario(name, PEER_WORKS[name].title, unit="request", size=100, quick=10, kind="peer")


@_peer_scenario("peer_chain")
def peer_chain(n: int) -> Plan:
    return peer_plan("peer_chain", n, _serve_on(_peer_chain_graph(), ChainRequest, lambda request: request.value))


@_peer_scenario("peer_agent")
def peer_agent(n: int) -> Plan:
    return peer_plan("peer_agent", n, _serve_on(_peer_agent_graph(), AgentRequest, lambda request: request.result))


@_peer_scenario("peer_if_else")
def peer_if_else(n: int) -> Plan:
    return peer_plan("peer_if_else", n, _serve_on(_peer_branch_graph(), BranchRequest, lambda request: request.result))


@_peer_scenario("peer_retry")
def peer_retry(n: int) -> Plan:
    return peer_plan("peer_retry", n, _serve_on(_peer_retry_graph(), ChainRequest, lambda request: request.value))
