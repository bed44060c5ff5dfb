"""Per request, as applications run the engine: a graph rendered once, a new interpreter for
every request with about ten context objects in its pools, distinct node functions (each its
own code object, as functions written one by one in modules are).

No `from __future__ import annotations`: node bodies are analysed for dependency injection,
and their annotations must be real objects.
"""

import threading

from .bodies import (
    REQUEST_NODES,
    api,
    context_pair,
    counting_provider,
    distinct_function,
    make_contexts,
    request_bodies,
    request_event_api,
    request_graph,
    request_plan,
    sync_node,
    try_request_bodies,
)
from .framework import Holder, Plan, Tally, Target, expect, need, scenario

_REQUEST = (Target("vs_ref", ">=", 50), Target("x_floor", "<=", 5))


@scenario(
    "per_request",
    f"new interpreter per request, {REQUEST_NODES} distinct nodes x 2 typed contexts of 10",
    unit="request",
    size=500,
    quick=50,
    floor="floor_per_request",
    targets=_REQUEST,
    family="request",
)
def per_request(n: int) -> Plan:
    Node, _, _ = api()
    tally = Tally()
    graph = request_graph([sync_node(Node, body) for body in request_bodies(tally, REQUEST_NODES)])
    return request_plan(graph, n, lambda: expect("node bodies run", tally.n, n * REQUEST_NODES), tally.reset)


@scenario(
    "per_request_first",
    "per_request, the first request of a fresh process (nothing made yet)",
    unit="request",
    size=1,
    quick=1,
    floor="floor_per_request",
)
def per_request_first(n: int) -> Plan:
    """Every measurement builds new functions and a new graph, so nothing is cached for them."""
    Node, _, WorkflowInterpreter = api()
    tally = Tally()
    holder = Holder()
    contexts = make_contexts()

    def prepare() -> None:
        tally.reset()
        holder.graph = request_graph([sync_node(Node, body) for body in request_bodies(tally, REQUEST_NODES)])

    async def timed() -> None:
        for _ in range(n):
            await WorkflowInterpreter(holder.graph, extra_args=contexts).run()

    return Plan(n, timed, prepare, lambda: expect("node bodies run", tally.n, n * REQUEST_NODES))


@scenario(
    "per_request_depends",
    "per_request with one Depends(...) provider per node",
    unit="request",
    size=200,
    quick=20,
    floor="floor_per_request_depends",
    targets=(Target("vs_ref", ">=", 25),),
    family="request",
)
def per_request_depends(n: int) -> Plan:
    Node, _, _ = api()
    Depends = need("amrita_sense.hook.matcher", "Depends")
    tally = Tally()
    bodies = request_bodies(tally, REQUEST_NODES, Depends(counting_provider(tally)))
    graph = request_graph([sync_node(Node, body) for body in bodies])

    def check() -> None:
        expect("node bodies run", tally.n, n * REQUEST_NODES)
        expect("provider calls", tally.aux, n * REQUEST_NODES)

    return request_plan(graph, n, check, tally.reset)


@scenario(
    "try_request",
    f"new interpreter per request, {REQUEST_NODES} distinct Try blocks, CATCH handler taking exc_val: ValueError",
    unit="request",
    size=200,
    quick=20,
    floor="floor_try_request",
    targets=(Target("vs_ref", ">=", 50),),
)
def try_request(n: int) -> Plan:
    Node, _, _ = api()
    Try = need("amrita_sense", "Try")
    tally = Tally()
    clauses = [
        Try(sync_node(Node, raiser)).CATCH(ValueError, sync_node(Node, handler))
        for raiser, handler in try_request_bodies(tally, REQUEST_NODES)
    ]

    def check() -> None:
        expect("exceptions raised", tally.aux, n * REQUEST_NODES)
        expect("exceptions handled", tally.n, n * REQUEST_NODES)

    return request_plan(request_graph(clauses), n, check, tally.reset)


@scenario(
    "event_request",
    "event dispatch: a dataclass event, a handler injected with it and 2 contexts of 10",
    unit="event",
    size=2_000,
    quick=100,
    floor="floor_event_request",
    targets=(Target("vs_ref", ">=", 20),),
    family="event",
)
def event_request(n: int) -> Plan:
    tally = Tally()
    RequestEvent, trigger, _ = request_event_api(tally)
    event = RequestEvent()
    contexts = make_contexts()

    async def timed() -> None:
        for _ in range(n):
            await trigger(event, *contexts)

    return Plan(n, timed, tally.reset, lambda: expect("handler calls", tally.n, n))


@scenario(
    "thread_request",
    f"new interpreter per request, {REQUEST_NODES} distinct default @Node() sync nodes (worker thread)",
    unit="request",
    size=20,
    quick=3,
    floor="floor_thread_request",
    targets=(Target("vs_ref", ">=", 5),),
    family="request",
)
def thread_request(n: int) -> Plan:
    Node, _, _ = api()
    tally = Tally()
    loop_thread = threading.get_ident()
    bodies = []
    for k in range(REQUEST_NODES):
        first, second = context_pair(k)
        source = (
            f"def body_{k}(a: Context{first}, b: Context{second}):\n"
            f"    tally.n += 1\n    tally.aux += get_ident() != loop_thread\n"
        )
        bodies.append(
            distinct_function(
                source, f"body_{k}", {"tally": tally, "get_ident": threading.get_ident, "loop_thread": loop_thread}
            )
        )
    graph = request_graph([Node()(body) for body in bodies])

    def check() -> None:
        expect("node bodies run", tally.n, n * REQUEST_NODES)
        expect("bodies run off the event-loop thread", tally.aux, n * REQUEST_NODES)

    return request_plan(graph, n, check, tally.reset)
