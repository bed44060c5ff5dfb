"""Plain-Python floors: the same bodies as the engine scenarios, called without the engine.

No `from __future__ import annotations`: the bodies are those of the engine scenarios, whose
annotations dependency injection reads as real objects.
"""

import asyncio
from typing import Any

from .bodies import (
    ALPHA,
    BETA,
    NODES_PER_INTERPRETER,
    REQUEST_NODES,
    context_pair,
    counting_body,
    counting_provider,
    depends_factories,
    if_bodies,
    if_expected,
    jmp_bodies,
    make_contexts,
    named_body,
    request_bodies,
    request_event_api,
    try_bodies,
    try_request_bodies,
    typed_body,
    while_bodies,
    yielding_body,
)
from .framework import Plan, Tally, expect, scenario


@scenario(
    "floor_call", "floor: sync bodies called from a plain loop", unit="call", size=10_000, quick=500, kind="floor"
)
def floor_call(n: int) -> Plan:
    tally = Tally()
    bodies = [counting_body(tally)] * n

    def timed() -> None:
        for body in bodies:
            body()

    return Plan(n, timed, tally.reset, lambda: expect("calls", tally.n, n))


@scenario("floor_await", "floor: async bodies awaited in a loop", unit="await", size=10_000, quick=500, kind="floor")
def floor_await(n: int) -> Plan:
    tally = Tally()

    async def body() -> None:
        tally.n += 1

    bodies = [body] * n

    async def timed() -> None:
        for coro_fn in bodies:
            await coro_fn()

    return Plan(n, timed, tally.reset, lambda: expect("awaits", tally.n, n))


@scenario(
    "floor_to_thread",
    "floor: each body awaited through asyncio.to_thread",
    unit="call",
    size=2_000,
    quick=100,
    kind="floor",
)
def floor_to_thread(n: int) -> Plan:
    tally = Tally()
    body = counting_body(tally)
    to_thread = asyncio.to_thread

    async def timed() -> None:
        for _ in range(n):
            await to_thread(body)

    return Plan(n, timed, tally.reset, lambda: expect("calls", tally.n, n))


@scenario(
    "floor_call_kw2",
    "floor: sync body called with 2 keyword arguments",
    unit="call",
    size=10_000,
    quick=500,
    kind="floor",
)
def floor_call_kw2(n: int) -> Plan:
    tally = Tally()
    body = typed_body(tally)

    def timed() -> None:
        for _ in range(n):
            body(first=ALPHA, second=BETA)

    return Plan(n, timed, tally.reset, lambda: expect("injected values", tally.n, 2 * n))


@scenario(
    "floor_factories", "floor: 2 factories called, then the body", unit="call", size=10_000, quick=500, kind="floor"
)
def floor_factories(n: int) -> Plan:
    tally, made = Tally(), Tally()
    make_first, make_second = depends_factories(made)
    body = named_body(tally)

    def reset() -> None:
        tally.reset()
        made.reset()

    def timed() -> None:
        for _ in range(n):
            body(first=make_first(), second=make_second())

    def check() -> None:
        expect("injected values", tally.n, 2 * n)
        expect("factory calls", made.aux, 2 * n)

    return Plan(n, timed, reset, check)


@scenario("floor_while", "floor: while cond(): body()", unit="iteration", size=100_000, quick=2_000, kind="floor")
def floor_while(n: int) -> Plan:
    tally = Tally()
    cond, body = while_bodies(tally, n)

    def timed() -> None:
        while cond():
            body()

    return Plan(n, timed, tally.reset, lambda: expect("loop bodies run", tally.n, n))


@scenario("floor_if", "floor: if/elif/else calling the same bodies", unit="IF", size=10_000, quick=500, kind="floor")
def floor_if(n: int) -> Plan:
    tally = Tally()
    hits = [0, 0, 0]
    first, second, on_first, on_second, on_else = if_bodies(tally, hits)
    want = if_expected(n)

    def reset() -> None:
        tally.reset()
        hits[:] = [0, 0, 0]

    def timed() -> None:
        for _ in range(n):
            if first():
                on_first()
            elif second():
                on_second()
            else:
                on_else()

    return Plan(n, timed, reset, lambda: expect("branches taken", hits, want))


@scenario(
    "floor_jmp", "floor: head(); step(); loop while again()", unit="iteration", size=10_000, quick=500, kind="floor"
)
def floor_jmp(n: int) -> Plan:
    tally = Tally()
    head, step, again = jmp_bodies(tally, n)

    def timed() -> None:
        while True:
            head()
            step()
            if not again():
                break

    return Plan(n, timed, tally.reset, lambda: expect("loop bodies run", tally.n, n))


@scenario("floor_try", "floor: try/except calling the handler", unit="exception", size=10_000, quick=500, kind="floor")
def floor_try(n: int) -> Plan:
    tally = Tally()
    raiser, handler = try_bodies(tally)

    def timed() -> None:
        for _ in range(n):
            try:
                raiser()
            except ValueError:
                handler()

    return Plan(n, timed, tally.reset, lambda: expect("exceptions handled", tally.n, n))


@scenario("floor_pingpong", "floor: two-task asyncio ping-pong", unit="round trip", size=1_000, quick=100, kind="floor")
def floor_pingpong(n: int) -> Plan:
    tally = Tally()

    async def timed() -> None:
        ping, pong = asyncio.Event(), asyncio.Event()

        async def responder() -> None:
            for _ in range(n):
                await ping.wait()
                ping.clear()
                tally.n += 1
                pong.set()

        task = asyncio.get_running_loop().create_task(responder())
        for _ in range(n):
            ping.set()
            await pong.wait()
            pong.clear()
        await task

    return Plan(n, timed, tally.reset, lambda: expect("round trips", tally.n, n))


@scenario(
    "floor_pingpong_future",
    "floor: two-task ping-pong through bare futures (the stream's primitive)",
    unit="round trip",
    size=1_000,
    quick=100,
    kind="floor",
)
def floor_pingpong_future(n: int) -> Plan:
    """Each side parks on a future of its own loop that the other side resolves: what one
    `resume()` + `wait_to_suspend()` round trip of a `SuspendObjectStream` does at the least."""
    tally = Tally()

    async def timed() -> None:
        loop = asyncio.get_running_loop()
        box = [loop.create_future(), loop.create_future()]  # [ping, pong]

        async def responder() -> None:
            for _ in range(n):
                value = await box[0]
                box[0] = loop.create_future()
                tally.n += 1
                box[1].set_result(value)

        task = loop.create_task(responder())
        for i in range(n):
            box[0].set_result(i)
            await box[1]
            box[1] = loop.create_future()
        await task

    return Plan(n, timed, tally.reset, lambda: expect("round trips", tally.n, n))


@scenario(
    "floor_gather", "floor: tasks x 100 yielding bodies, gathered", unit="node", size=1_000, quick=50, kind="floor"
)
def floor_gather(n: int) -> Plan:
    tally = Tally()
    bodies = [yielding_body(tally)] * NODES_PER_INTERPRETER
    ops = n * NODES_PER_INTERPRETER

    async def worker() -> None:
        for body in bodies:
            await body()

    async def timed() -> None:
        await asyncio.gather(*[worker() for _ in range(n)])

    return Plan(ops, timed, tally.reset, lambda: expect("bodies run", tally.n, ops))


@scenario(
    "floor_per_request",
    f"floor: the {REQUEST_NODES} per_request bodies called from a plain loop",
    unit="request",
    size=500,
    quick=50,
    kind="floor",
)
def floor_per_request(n: int) -> Plan:
    tally = Tally()
    contexts = make_contexts()
    calls = [
        (body, contexts[i], contexts[j])
        for body, (i, j) in zip(request_bodies(tally, REQUEST_NODES), map(context_pair, range(REQUEST_NODES)))
    ]

    def timed() -> None:
        for _ in range(n):
            for body, a, b in calls:
                body(a, b)

    return Plan(n, timed, tally.reset, lambda: expect("calls", tally.n, n * REQUEST_NODES))


@scenario(
    "floor_per_request_depends",
    "floor: the per_request_depends bodies, each after its provider",
    unit="request",
    size=200,
    quick=20,
    kind="floor",
)
def floor_per_request_depends(n: int) -> Plan:
    tally = Tally()
    contexts = make_contexts()
    provider = counting_provider(tally)
    bodies = request_bodies(tally, REQUEST_NODES, 0)
    calls = [(body, contexts[i], contexts[j]) for body, (i, j) in zip(bodies, map(context_pair, range(REQUEST_NODES)))]
    first = contexts[0]

    def timed() -> None:
        for _ in range(n):
            for body, a, b in calls:
                body(a, b, provider(first))

    return Plan(n, timed, tally.reset, lambda: expect("calls", tally.n, n * REQUEST_NODES))


@scenario(
    "floor_try_request",
    "floor: try/except over the try_request bodies",
    unit="request",
    size=200,
    quick=20,
    kind="floor",
)
def floor_try_request(n: int) -> Plan:
    tally = Tally()
    contexts = make_contexts()
    calls = [
        (raiser, handler, contexts[i], contexts[j])
        for (raiser, handler), (i, j) in zip(
            try_request_bodies(tally, REQUEST_NODES), map(context_pair, range(REQUEST_NODES))
        )
    ]

    def timed() -> None:
        for _ in range(n):
            for raiser, handler, a, b in calls:
                try:
                    raiser(a)
                except ValueError as exc:
                    handler(exc, b)

    return Plan(n, timed, tally.reset, lambda: expect("exceptions handled", tally.n, n * REQUEST_NODES))


@scenario(
    "floor_event_request",
    "floor: the event_request handler awaited directly",
    unit="event",
    size=2_000,
    quick=100,
    kind="floor",
)
def floor_event_request(n: int) -> Plan:
    tally = Tally()
    RequestEvent, _, handler = request_event_api(Tally())
    contexts = make_contexts()
    event = RequestEvent()

    async def counted(*args: Any) -> None:
        await handler(*args)
        tally.n += 1

    async def timed() -> None:
        for _ in range(n):
            await counted(event, None, contexts[2], contexts[7])

    return Plan(n, timed, tally.reset, lambda: expect("handler calls", tally.n, n))


@scenario(
    "floor_thread_request",
    "floor: the thread_request bodies, each awaited through asyncio.to_thread",
    unit="request",
    size=20,
    quick=3,
    kind="floor",
)
def floor_thread_request(n: int) -> Plan:
    tally = Tally()
    contexts = make_contexts()
    calls = [
        (body, contexts[i], contexts[j])
        for body, (i, j) in zip(request_bodies(tally, REQUEST_NODES), map(context_pair, range(REQUEST_NODES)))
    ]
    to_thread = asyncio.to_thread

    async def timed() -> None:
        for _ in range(n):
            for body, a, b in calls:
                await to_thread(body, a, b)

    return Plan(n, timed, tally.reset, lambda: expect("calls", tally.n, n * REQUEST_NODES))
