"""OpenTelemetry traces and metrics of workflow runs (extra ``[otel]``: ``opentelemetry-api``).

Switched on for the process with `instrument()` and off again with `uninstrument()`; off (the
default) no span is made and runs take the loops they take without this module.

- **A span per run** (``amrita_sense.run``): the interpreter id, the graph fingerprint, the
  checkpointed run's id, the outcome (``finished``, ``halted``, ``interrupted``, ``panicked``,
  ``cancelled``, ``aborted``). A panic sets the status ERROR and records the exception. The span
  is the current one while the run runs, so a node's own spans (an HTTP client's instrumentation),
  a sub-interpreter's run (FUN_BLOCK, BATCH_RUN) and a worker-thread node all see it.
- **Span events**: ``amrita_sense.suspend`` / ``amrita_sense.resume`` (a gate parked the run),
  ``amrita_sense.interrupt`` (an outside `call_sub(..., interrupt=True)`), ``amrita_sense.recover``
  (the run started from a recorded panic), ``amrita_sense.checkpoint.saved`` and
  ``amrita_sense.policy`` (the retries, timeouts and fallbacks of `amrita_sense.policies`).
- **Node spans** (``amrita_sense.node <tag>``) only when asked (`node_spans`): a span costs
  hundreds of times what a node costs here. Runs with node spans go through the general step loop.
- **Continuity**: a snapshot carries the run's trace (W3C ``traceparent``); the run restored from
  it, in any process, continues the same trace under the same parent, with a link to the span it
  left. Nodes completed before the snapshot are never reported again: the engine restores state,
  it does not replay code.
- **Metrics**: ``amrita_sense.runs.started``, ``amrita_sense.runs.finished`` (by outcome),
  ``amrita_sense.runs.panicked``, ``amrita_sense.runs.active``, ``amrita_sense.node.duration``
  (the nodes with spans), ``amrita_sense.checkpoint.save.duration``.
"""

from __future__ import annotations

import asyncio
import inspect
import random
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from amrita_sense import core as _core
from amrita_sense.exceptions import InterruptKeepContext, InterruptNotice
from amrita_sense.runtime import observe as _observe

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics, trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError(
        "amrita_sense.telemetry needs the OpenTelemetry API: pip install 'amrita-sense-turbo[otel]'"
    ) from exc

__all__ = ["RUN_SPAN", "instrument", "instrumented", "uninstrument"]

RUN_SPAN = "amrita_sense.run"
NODE_SPAN = "amrita_sense.node"
SCOPE = "amrita_sense"
_PROPAGATOR = TraceContextTextMapPropagator()
_PASSING = (InterruptNotice,)  # a node ending the run on purpose is not an error of the node


# ----- which nodes get spans ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Choice:
    """The `node_spans` setting: `every` run's nodes, or the ones `pick(node)` accepts, in the
    fraction `ratio` of runs."""

    pick: Callable[[Any], bool] | None
    ratio: float

    def for_run(self) -> bool:
        return self.ratio >= 1.0 or random.random() < self.ratio


def _node_choice(node_spans: Any) -> _Choice | None:
    """Check `node_spans`: None/False (no node spans), True/"all", "async" (coroutine nodes), tags
    (an iterable of strings), a fraction of runs (a float in (0, 1]), or a predicate on the node."""
    if node_spans is None or node_spans is False:
        return None
    if node_spans is True or node_spans == "all":
        return _Choice(None, 1.0)
    if node_spans == "async":
        return _Choice(_is_async_node, 1.0)
    if isinstance(node_spans, float):
        if not 0.0 < node_spans <= 1.0:
            raise ValueError(f"instrument(node_spans): a fraction of runs must be in (0, 1], not {node_spans!r}")
        return _Choice(None, node_spans)
    if isinstance(node_spans, str):
        raise ValueError(f'instrument(node_spans): "all", "async", tags, a fraction or a predicate, not {node_spans!r}')
    if callable(node_spans):
        return _Choice(node_spans, 1.0)
    if isinstance(node_spans, Iterable):
        tags = frozenset(node_spans)
        if not tags or not all(isinstance(tag, str) for tag in tags):
            raise TypeError("instrument(node_spans): tags must be a non-empty collection of strings")
        return _Choice(lambda node: getattr(node, "tag", None) in tags, 1.0)
    raise TypeError(f"instrument(node_spans): unsupported value of type {type(node_spans).__name__}")


def _is_async_node(node: Any) -> bool:
    return inspect.iscoroutinefunction(getattr(node, "func", None))


def _current_node(interp: Any) -> Any:
    """The node the next step runs (the pointer moved onto it), or None under a middleware that
    the pointer must be left to."""
    if interp._middleware is not None:
        return None
    return interp._prog.nodes[interp._descend_current()]


def _label(node: Any) -> str:
    tag = getattr(node, "tag", None)
    if tag:
        return str(tag)
    func = getattr(node, "func", None)
    return getattr(func, "__qualname__", None) or type(node).__name__


# ----- the parts of a run's trace ----------------------------------------------------------------


def _traceparent(span_context: Any) -> dict[str, str]:
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(trace.NonRecordingSpan(span_context)))
    return carrier


def _span_context(traceparent: str | None, tracestate: str | None = None) -> Any:
    """The span context a traceparent names, or None (absent or malformed)."""
    if not traceparent:
        return None
    carrier = {"traceparent": traceparent}
    if tracestate:
        carrier["tracestate"] = tracestate
    span_context = trace.get_current_span(_PROPAGATOR.extract(carrier)).get_span_context()
    return span_context if span_context.is_valid else None


@dataclass
class _Run:
    """One run's open span: the context token it made current, its parent (for the snapshot)."""

    span: Any
    token: Any
    attached: Any
    parent: Any


def _outcome(interp: Any, outcome: BaseException | None) -> str:
    if outcome is None:
        return "halted" if interp._flag_bits & _core.FLAG_HLT else "finished"
    if isinstance(outcome, InterruptKeepContext):
        return "halted"
    if isinstance(outcome, InterruptNotice):  # a WAIT / SLEEP parks the run with one (durable.waits)
        return "waiting" if getattr(interp, "_durable_wait", None) is not None else "interrupted"
    if isinstance(outcome, asyncio.CancelledError):
        return "cancelled"
    return "panicked" if isinstance(outcome, Exception) else "aborted"


# ----- the observer ------------------------------------------------------------------------------


class _Metrics:
    """The instruments, made once per `instrument()`."""

    def __init__(self, meter: Any) -> None:
        self.started = meter.create_counter("amrita_sense.runs.started", unit="{run}", description="Runs started")
        self.finished = meter.create_counter("amrita_sense.runs.finished", unit="{run}", description="Runs ended")
        self.panicked = meter.create_counter(
            "amrita_sense.runs.panicked", unit="{run}", description="Runs that panicked"
        )
        self.active = meter.create_up_down_counter(
            "amrita_sense.runs.active", unit="{run}", description="Runs in flight"
        )
        self.node_duration = meter.create_histogram(
            "amrita_sense.node.duration", unit="s", description="Duration of the nodes that have spans"
        )
        self.save_duration = meter.create_histogram(
            "amrita_sense.checkpoint.save.duration", unit="s", description="Duration of a checkpoint save"
        )


class _NodeSpans:
    """The step hook of the runs with node spans: a span around each chosen node's step."""

    __slots__ = ("metrics", "pick", "tracer")

    def __init__(self, tracer: Any, metrics: _Metrics, pick: Callable[[Any], bool] | None) -> None:
        self.tracer, self.metrics, self.pick = tracer, metrics, pick

    async def run_step(self, interp: Any) -> Any:
        node = _current_node(interp)
        if node is not None and self.pick is not None and not self.pick(node):
            return await interp._run_current()
        label = "step" if node is None else _label(node)
        attributes = {"amrita_sense.node.tag": label, "amrita_sense.node.address": str(interp._pointer.base_addr)}
        func = getattr(node, "func", None)
        if func is not None:
            attributes["amrita_sense.node.function"] = getattr(func, "__qualname__", type(func).__name__)
        started = time.perf_counter()
        with self.tracer.start_as_current_span(
            f"{NODE_SPAN} {label}", attributes=attributes, record_exception=False, set_status_on_exception=False
        ) as span:
            try:
                return await interp._run_current()
            except _PASSING:
                span.set_attribute("amrita_sense.node.outcome", "interrupted")
                raise
            except Exception as exc:
                span.set_status(trace.Status(trace.StatusCode.ERROR, repr(exc)))
                span.record_exception(exc)
                raise
            finally:
                self.metrics.node_duration.record(time.perf_counter() - started, {"amrita_sense.node.tag": label})


class _Telemetry(_observe.RunObserver):
    """The installed observer: one open span per running interpreter, held weakly."""

    __slots__ = ("carried", "choice", "guard", "last", "metrics", "node_spans", "open", "tracer")

    def __init__(self, tracer: Any, metrics: _Metrics, choice: _Choice | None) -> None:
        self.tracer, self.metrics, self.choice = tracer, metrics, choice
        self.node_spans = None if choice is None else _NodeSpans(tracer, metrics, choice.pick)
        # threads: one observer serves the runs of every thread. Each entry of `open` / `last` /
        # `carried` is one interpreter's (one run at a time, on one loop), and single WeakKeyDictionary
        # gets and sets are atomic; `guard` makes the insert and removal of an open run atomic with
        # `close`, which iterates `open` (another thread's insert would break the iteration)
        self.guard = threading.Lock()
        self.open: weakref.WeakKeyDictionary[Any, _Run] = weakref.WeakKeyDictionary()
        self.last: weakref.WeakKeyDictionary[Any, tuple] = weakref.WeakKeyDictionary()
        self.carried: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()

    def node_steps(self, interp: Any) -> Any:
        choice = self.choice
        return self.node_spans if choice is not None and choice.for_run() else None

    def run_begun(self, interp: Any, recovered: bool) -> None:
        if interp in self.open:  # a run of this interpreter still open (begun elsewhere): closed
            self.run_over(interp, None)
        context, parent, links = self._placement(interp)
        span = self.tracer.start_span(RUN_SPAN, context=context, attributes=self._run_attributes(interp), links=links)
        if recovered:
            span.add_event("amrita_sense.recover")
        attached = trace.set_span_in_context(span)
        run = _Run(span, otel_context.attach(attached), attached, parent)
        with self.guard:
            self.open[interp] = run
        self.metrics.started.add(1)
        self.metrics.active.add(1)

    def _placement(self, interp: Any) -> tuple[Any, Any, list]:
        """Where a run's span goes: `(context to start it in, its parent's span context, links)`.
        A restored run continues the trace it carries (under the same parent, linked to the span
        it left); a run after an earlier one of the same interpreter links to that one."""
        carried = self.carried.pop(interp, None)
        if carried is not None:
            left = _span_context(carried.get("traceparent"), carried.get("tracestate"))
            parent = _span_context(carried.get("parent")) or left
            if parent is not None:
                context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
                links = [] if left is None else [trace.Link(left, {"amrita_sense.link": "restored_from"})]
                return context, parent, links
        current = trace.get_current_span().get_span_context()
        parent = current if current.is_valid else None
        earlier = self.last.get(interp)
        links = [] if earlier is None else [trace.Link(earlier[0], {"amrita_sense.link": "continues"})]
        return None, parent, links

    @staticmethod
    def _run_attributes(interp: Any) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "amrita_sense.interpreter.id": interp.id,
            "amrita_sense.graph.fingerprint": interp.graph_fingerprint,
        }
        parent = interp.parent
        if parent is not None:
            attributes["amrita_sense.interpreter.parent"] = parent.id
        policy = interp.top_interpreter.checkpointing
        if policy is not None:
            attributes["amrita_sense.run.id"] = str(policy.run_id)
        return attributes

    def run_over(self, interp: Any, outcome: BaseException | None) -> None:
        with self.guard:
            run = self.open.pop(interp, None)
        if run is None:
            return
        span = run.span
        kind = _outcome(interp, outcome)
        span.set_attribute("amrita_sense.run.outcome", kind)
        if kind in ("panicked", "aborted"):
            span.set_status(trace.Status(trace.StatusCode.ERROR, repr(outcome)))
            span.record_exception(outcome)
            if kind == "panicked":
                self.metrics.panicked.add(1)
        span.end()
        self.last[interp] = (span.get_span_context(), run.parent)
        if otel_context.get_current() is run.attached:
            otel_context.detach(run.token)  # else the run ended in another context than it began in
        self.metrics.finished.add(1, {"amrita_sense.run.outcome": kind})
        self.metrics.active.add(-1)

    def event(self, interp: Any, name: str, attributes: dict[str, Any]) -> None:
        span = trace.get_current_span() if name == _observe.EVENT_POLICY else None
        if span is None or not span.is_recording():
            run = self.open.get(interp)
            if run is None:
                return
            span = run.span
        span.add_event(name, attributes)

    def checkpoint_saved(self, interp: Any, record: Any, seconds: float) -> None:
        self.metrics.save_duration.record(seconds)
        run = self.open.get(interp)
        if run is not None:
            version = getattr(record, "version", None)
            attributes = {"amrita_sense.run.id": str(getattr(record, "run_id", ""))}
            if version is not None:
                attributes["amrita_sense.checkpoint.version"] = version
            run.span.add_event("amrita_sense.checkpoint.saved", attributes)

    def trace_carrier(self, interp: Any) -> dict[str, str] | None:
        run = self.open.get(interp)
        if run is not None:
            left, parent = run.span.get_span_context(), run.parent
        elif interp in self.last:
            left, parent = self.last[interp]
        else:
            return self.carried.get(interp)  # restored and not run since: what it carries
        carrier = _traceparent(left)
        if parent is not None:
            carrier["parent"] = _traceparent(parent)["traceparent"]
        return carrier

    def carry_trace(self, interp: Any, carrier: dict[str, str], replace: bool = True) -> None:
        if replace or interp not in self.carried:
            self.carried[interp] = dict(carrier)

    def caller_carrier(self) -> dict[str, str] | None:
        current = trace.get_current_span().get_span_context()
        return {"parent": _traceparent(current)["traceparent"]} if current.is_valid else None

    def close(self) -> None:
        """End the spans of the runs still open (they were begun under this configuration)."""
        with self.guard:
            runs = list(self.open.values())
            self.open.clear()
        for run in runs:
            run.span.set_attribute("amrita_sense.run.outcome", "uninstrumented")
            run.span.end()


# ----- switching it on and off -------------------------------------------------------------------


def instrument(tracer_provider: Any = None, meter_provider: Any = None, node_spans: Any = None) -> None:
    """Trace and measure every workflow run of this process from now on.

    `tracer_provider` / `meter_provider`: the providers to use (None: the global ones, set with
    `opentelemetry.trace.set_tracer_provider` and `opentelemetry.metrics.set_meter_provider`).
    `node_spans`: which nodes get a span of their own: None (none, the default), ``"all"`` (or
    True), ``"async"`` (coroutine nodes), a collection of tags, a fraction of runs (a float in
    (0, 1]: the runs drawn get a span for every node), or a predicate taking the node.

    Calling it again replaces the configuration (the runs in flight end their spans)."""
    choice = _node_choice(node_spans)
    tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
    meter = (meter_provider or metrics.get_meter_provider()).get_meter(SCOPE)
    previous = _observe.install(_Telemetry(tracer, _Metrics(meter), choice))
    if isinstance(previous, _Telemetry):
        previous.close()


def uninstrument() -> None:
    """Stop tracing runs: no span is made from now on (the runs in flight end their spans)."""
    current = _observe.current
    # threads: only the telemetry read here is removed; an `instrument()` of another thread since wins
    if isinstance(current, _Telemetry) and _observe.install_if(current, None):
        current.close()


def instrumented() -> bool:
    """Whether `instrument()` is in effect."""
    return isinstance(_observe.current, _Telemetry)
