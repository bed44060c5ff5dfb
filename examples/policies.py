"""Node policies: a per-node timeout, retries with backoff, a fallback, and the events they report.

    python examples/policies.py

Each node declares what happens when it is slow or fails, where it is declared:

- `lookup` is slow on its first attempt: `timeout=` cancels it (`NodeTimeout`, a `TimeoutError`)
  and `retry=` tries again.
- `charge` fails twice with `ConnectionError`: `Retry(attempts=3, delay=..., factor=2)` waits
  0.05 s, then 0.1 s, and the third attempt succeeds.
- `recommend` always fails: after its attempts, `fallback=` runs instead, injected like a CATCH
  handler (`exc_val` is the last failure).
- `complete` streams chunks and fails once midway: `mark_void=True` puts markers on the stream,
  and `drop_voided` removes what the failed attempt had sent.

Every timeout, retry, fallback and final failure is a `PolicyEvent`, handled here by a handler
registered with `on_event(POLICY_EVENT)`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from amrita_sense import Node, NodeCompose, WorkflowInterpreter, on_event
from amrita_sense.policies import POLICY_EVENT, PolicyEvent, Retry, drop_voided
from amrita_sense.streaming import SuspendObjectStream


@dataclass
class Request:
    attempts: dict[str, int] = field(default_factory=dict)
    results: dict[str, str] = field(default_factory=dict)

    def attempt(self, name: str) -> int:
        self.attempts[name] = self.attempts.get(name, 0) + 1
        return self.attempts[name]


@on_event(POLICY_EVENT).handle()
async def report(event: PolicyEvent) -> None:  # one handler for every node's policy events
    delay = f", next attempt in {event.delay:.2f} s" if event.delay is not None else ""
    extra = f", fallback {event.fallback}" if event.fallback else ""
    print(f"  event {event.kind}: {event.node} attempt {event.attempt} ({type(event.error).__name__}){delay}{extra}")


@Node(timeout=0.2, retry=Retry(attempts=2, retry_on=TimeoutError, delay=0, jitter=0))
async def lookup(request: Request) -> None:
    if request.attempt("lookup") == 1:
        await asyncio.sleep(10)  # a hung connection: the timeout cancels the attempt
    request.results["lookup"] = "found"


@Node(retry=Retry(attempts=3, retry_on=ConnectionError, delay=0.05, factor=2, jitter=0))
async def charge(request: Request) -> None:
    if request.attempt("charge") < 3:
        raise ConnectionError("payment service unavailable")
    request.results["charge"] = "charged"


@Node(wrap_to_async=False)
def cached_recommendation(request: Request, exc_val: Exception) -> None:  # injected like a CATCH handler
    request.results["recommend"] = f"cached list (after {exc_val})"


@Node(retry=Retry(attempts=2, delay=0, jitter=0), fallback=cached_recommendation)
async def recommend(request: Request) -> None:
    request.attempt("recommend")
    raise RuntimeError("model overloaded")


@Node(retry=Retry(attempts=2, delay=0, jitter=0), mark_void=True)
async def complete(request: Request, pc: WorkflowInterpreter) -> None:
    first = request.attempt("complete") == 1
    for chunk in ("Your ", "order ", "ships ", "today."):
        await pc.object_io.yield_response(chunk)
        if first and chunk == "order ":
            raise ConnectionError("stream reset")


@Node()
async def done(pc: WorkflowInterpreter) -> None:
    await pc.object_io.set_queue_done()


GRAPH = NodeCompose(lookup, charge, recommend, complete, done).render()


async def main() -> None:
    request = Request()
    stream = SuspendObjectStream[object]()  # chunks (str) and the attempt markers
    run = asyncio.ensure_future(WorkflowInterpreter(GRAPH, object_io=stream, extra_args=(request,)).run())
    items = [item async for item in stream.get_response_generator()]
    await run
    print("attempts:", request.attempts)
    for name, result in request.results.items():
        print(f"{name}: {result}")
    raw = "".join(item for item in items if isinstance(item, str))
    print(f"streamed: {raw!r}; without the voided attempt: {''.join(drop_voided(items))!r}")


if __name__ == "__main__":
    asyncio.run(main())
