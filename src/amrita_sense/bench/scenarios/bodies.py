"""What several families of scenarios build from: the API lookup, the plans that run a fresh
interpreter per measurement or per request, and the node bodies a scenario and its plain-Python
floor share (the floor calls the very same functions without the engine).

No `from __future__ import annotations`: node bodies are analysed for dependency injection,
and their annotations must be real objects.
"""

import asyncio
import dataclasses
from typing import Any, Callable, Tuple

from .framework import Holder, Plan, Tally, expect, need, unique_ids


def api() -> Tuple[Any, Any, Any]:
    return need("amrita_sense", "Node", "NodeCompose", "WorkflowInterpreter")


def sync_node(Node: Any, func: Callable[..., Any]) -> Any:
    return Node(wrap_to_async=False)(func)


def counting_body(tally: Tally) -> Callable[[], None]:
    def body() -> None:
        tally.n += 1

    return body


def run_plan(make_interp: Callable[[], Any], ops: int, check: Callable[[], None], reset: Callable[[], None]) -> Plan:
    """A plan whose timed part is one `run()` of a fresh interpreter."""
    holder = Holder()

    def prepare() -> None:
        reset()
        holder.interp = make_interp()

    async def timed() -> None:
        await holder.interp.run()

    return Plan(ops, timed, prepare, check)


def chain_plan(nodes: list, tally: Tally, want: int, **interp_kwargs: Any) -> Plan:
    Node, NodeCompose, WorkflowInterpreter = api()
    graph = NodeCompose(*nodes).render()
    return run_plan(
        lambda: WorkflowInterpreter(graph, **interp_kwargs),
        len(nodes),
        lambda: expect("node bodies run", tally.n, want),
        tally.reset,
    )


def while_bodies(tally: Tally, n: int) -> Tuple[Callable[[], bool], Callable[[], None]]:
    def cond() -> bool:
        tally.aux += 1
        return tally.n < n

    def body() -> None:
        tally.n += 1

    return cond, body


def if_bodies(tally: Tally, hits: list) -> Tuple[Callable[..., Any], ...]:
    def first() -> bool:
        tally.aux += 1
        return tally.aux % 3 == 0

    def second() -> bool:
        return tally.aux % 3 == 1

    def on_first() -> None:
        hits[0] += 1

    def on_second() -> None:
        hits[1] += 1

    def on_else() -> None:
        hits[2] += 1

    return first, second, on_first, on_second, on_else


def if_expected(n: int) -> list:
    want = [0, 0, 0]
    for k in range(1, n + 1):
        want[0 if k % 3 == 0 else 1 if k % 3 == 1 else 2] += 1
    return want


def jmp_bodies(tally: Tally, n: int) -> Tuple[Callable[..., Any], ...]:
    def head() -> None:
        tally.aux += 1

    def step() -> None:
        tally.n += 1

    def again() -> bool:
        return tally.n < n

    return head, step, again


def try_bodies(tally: Tally) -> Tuple[Callable[[], None], Callable[[], None]]:
    def raiser() -> None:
        tally.aux += 1
        raise ValueError("bench")

    def handler() -> None:
        tally.n += 1

    return raiser, handler


class Alpha:
    """Injected by type in the DI scenarios."""


class Beta:
    """Injected by type in the DI scenarios."""


ALPHA, BETA = Alpha(), Beta()


def typed_body(tally: Tally) -> Callable[..., None]:
    def body(first: Alpha, second: Beta) -> None:
        tally.n += (first is ALPHA) + (second is BETA)

    return body


def named_body(tally: Tally) -> Callable[..., None]:
    def body(first: int, second: str) -> None:
        tally.n += (first == 1) + (second == "s")

    return body


def depends_factories(tally: Tally) -> Tuple[Callable[[], int], Callable[[], str]]:
    def make_first() -> int:
        tally.aux += 1
        return 1

    def make_second() -> str:
        tally.aux += 1
        return "s"

    return make_first, make_second


NODES_PER_INTERPRETER = 100


def yielding_body(tally: Tally) -> Callable[[], Any]:
    async def body() -> None:
        await asyncio.sleep(0)
        tally.n += 1

    return body


REQUEST_NODES = 20
CONTEXTS = tuple(type(f"Context{i}", (), {"__doc__": "A context object injected by type."}) for i in range(10))


def make_contexts() -> tuple:
    return tuple(kind() for kind in CONTEXTS)


def context_pair(k: int) -> Tuple[int, int]:
    """The two context types node `k` takes."""
    return k % len(CONTEXTS), (3 * k + 1) % len(CONTEXTS)


def distinct_function(source: str, name: str, scope: dict) -> Callable[..., Any]:
    """A function of its own code object, compiled from `source` (defines `name`) in `scope`."""
    namespace = {**scope, **{kind.__name__: kind for kind in CONTEXTS}}
    exec(compile(source, f"<bench {name}>", "exec"), namespace)
    return namespace[name]


def request_bodies(tally: Tally, n: int, *depends: Any, prefix: str = "def") -> list:
    """`n` distinct bodies (`prefix` "async def" for coroutine functions) taking two typed
    contexts and, for each of `depends`, a parameter defaulting to it (a provider value)."""
    bodies = []
    scope = {"tally": tally, **{f"depends_{i}": value for i, value in enumerate(depends)}}
    extra = "".join(f", made_{i}: int = depends_{i}" for i in range(len(depends)))
    for k in range(n):
        first, second = context_pair(k)
        source = f"{prefix} body_{k}(a: Context{first}, b: Context{second}{extra}):\n    tally.n += 1\n"
        bodies.append(distinct_function(source, f"body_{k}", scope))
    return bodies


def counting_provider(tally: Tally) -> Callable[..., int]:
    def provider(a: CONTEXTS[0]) -> int:  # type: ignore[valid-type]  # a runtime type for injection
        tally.aux += 1
        return 1

    return provider


def request_plan(graph: Any, n: int, want: Callable[[], None], reset: Callable[[], None]) -> Plan:
    """A plan whose timed part serves `n` requests: a new interpreter over `graph` for each."""
    _, _, WorkflowInterpreter = api()
    contexts = make_contexts()

    async def timed() -> None:
        for _ in range(n):
            await WorkflowInterpreter(graph, extra_args=contexts).run()

    return Plan(n, timed, reset, want)


def request_graph(nodes: list) -> Any:
    _, NodeCompose, _ = api()
    return NodeCompose(*nodes).render()


def try_request_bodies(tally: Tally, n: int) -> list:
    """`n` distinct (raiser, handler) pairs; each handler takes `exc_val: ValueError` and a context."""
    pairs = []
    for k in range(n):
        first, second = context_pair(k)
        raiser = distinct_function(
            f"def raiser_{k}(a: Context{first}):\n    tally.aux += 1\n    raise ValueError({k})\n",
            f"raiser_{k}",
            {"tally": tally},
        )
        handler = distinct_function(
            f"def handler_{k}(exc_val: ValueError, b: Context{second}):\n    tally.n += exc_val.args[0] == {k}\n",
            f"handler_{k}",
            {"tally": tally},
        )
        pairs.append((raiser, handler))
    return pairs


def request_event_api(tally: Tally) -> Tuple[Any, Any, Callable[..., Any]]:
    """A dataclass event type of its own, and a handler injected with the event, its matcher and two contexts."""
    BaseEvent: Any
    Matcher: Any
    BaseEvent, on_event, MatcherFactory = need("amrita_sense", "BaseEvent", "on_event", "MatcherFactory")
    Matcher = need("amrita_sense.hook.matcher", "Matcher")
    event_type = f"bench.request.{next(unique_ids)}"

    @dataclasses.dataclass
    class RequestEvent(BaseEvent):
        payload: str = "ping"

        def get_event_type(self) -> str:
            return event_type

        @property
        def event_type(self) -> str:
            return event_type

    async def handler(event: RequestEvent, matcher: Matcher, a: CONTEXTS[2], b: CONTEXTS[7]) -> None:  # type: ignore[valid-type]  # runtime types
        tally.n += event.payload == "ping"

    on_event(event_type).handle()(handler)
    return RequestEvent, MatcherFactory.trigger_event, handler
