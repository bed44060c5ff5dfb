"""Differential test of the shared injection plans: random pools, random node signatures (types,
names, defaults, `Depends`, providers with `use_cache`), many interpreters over one shared graph.

Every node of every run must receive exactly what a fresh, uncached resolution gives it: the same
graph run on the same pool objects with `WORKFLOW_DI_NO_CACHE` (every call matched anew). Runs
of different pool shapes are interleaved, so a plan leaking from one interpreter or shape to
another shows up; `test_the_check_catches_a_cache_that_ignores_the_pool_shape` proves it would.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.hook.matcher import Depends
from amrita_sense.runtime import workflow
from support.dual import new_loop
from support.sampling import sized

LOOPS = ["asyncio", "uvloop"]


class Item:
    """A pool value; `label` names it in the traces."""

    def __init__(self, label: str):
        self.label = label


class A(Item):
    pass


class B(Item):
    pass


class C(Item):
    pass


class SubB(B):
    pass


CLASSES = [A, B, C, SubB]
HINTS = [A, B, C, SubB, int, str]
NAMES = ["alpha", "beta", "gamma", "delta"]


def describe(value: Any) -> Any:
    if isinstance(value, Item):
        return ("item", value.label)
    return value


# ----- specs (plain data) -------------------------------------------------------------------

PROVIDER = st.tuples(
    st.sampled_from(NAMES),  # the provider's own parameter name
    st.integers(0, len(HINTS) - 1),  # its annotation
    st.booleans(),  # has a default
    st.booleans(),  # use_cache
)
PARAM = st.tuples(
    st.sampled_from(NAMES),
    st.integers(0, len(HINTS) - 1),
    st.sampled_from(["required", "required", "default", "depends"]),
    PROVIDER,
)
NODE = st.tuples(
    st.sampled_from(["inline", "inline", "thread", "async"]),
    st.lists(PARAM, min_size=0, max_size=3, unique_by=lambda p: p[0]),
)
POOL = st.tuples(
    st.lists(st.integers(0, len(CLASSES) - 1), min_size=0, max_size=5),
    st.lists(st.sampled_from(NAMES), max_size=3, unique=True),
)
PROGRAM = st.tuples(
    st.lists(NODE, min_size=1, max_size=5),
    st.lists(st.integers(0, 4), min_size=1, max_size=7),  # slots: which node goes where
    st.lists(POOL, min_size=2, max_size=4),
)


def make_provider(spec: tuple, tag: str):
    name, hint, has_default, cached = spec
    annotation = HINTS[hint]
    default = f"{tag}-default"

    def provider(**kwargs: Any) -> Any:
        return ("made", tag, describe(kwargs.get(name, default)))

    params = f"{name}: annotation" + (" = default" if has_default else "")
    scope = {"annotation": annotation, "default": default, "impl": provider}
    exec(f"def {tag}({params}):\n    return impl({name}={name})\n", scope)
    return Depends(scope[tag], use_cache=cached)


def make_node(spec: tuple, index: int, log: list):
    mode, params = spec
    scope: dict[str, Any] = {"log": log, "describe": describe}
    parts = []
    for k, (name, hint, kind, provider) in enumerate(params):
        scope[f"hint_{k}"] = HINTS[hint]
        if kind == "required":
            parts.append(f"{name}: hint_{k}")
        elif kind == "default":
            scope[f"default_{k}"] = f"n{index}-{name}-default"
            parts.append(f"{name}: hint_{k} = default_{k}")
        else:
            scope[f"dep_{k}"] = make_provider(provider, f"p{index}_{k}")
            parts.append(f"{name}: hint_{k} = dep_{k}")
    kinds = [kind for _, _, kind, _ in params]
    if "required" in kinds[1:] and any(k != "required" for k in kinds[: len(kinds) - kinds[::-1].index("required")]):
        first_default = next(i for i, k in enumerate(kinds) if k != "required")
        parts.insert(first_default, "*")  # keyword-only from there: a required one may follow a default
    record = ", ".join(f"{name!r}: describe({name})" for name, *_ in params)
    prefix = "async def" if mode == "async" else "def"
    exec(f"{prefix} node_{index}({', '.join(parts)}):\n    log.append(({index}, {{{record}}}))\n", scope)
    func = scope[f"node_{index}"]
    return Node()(func) if mode != "inline" else Node(wrap_to_async=False)(func)


def make_pools(specs: list) -> list[tuple[tuple, dict]]:
    pools = []
    for p, (classes, names) in enumerate(specs):
        args = tuple(CLASSES[c](f"pool{p}-arg{i}") for i, c in enumerate(classes))
        kwargs = {name: f"pool{p}-kw-{name}" for name in names}
        pools.append((args, kwargs))
    return pools


@contextlib.contextmanager
def uncached():
    flags = workflow.__flags__
    flags.WORKFLOW_DI_NO_CACHE = True
    try:
        yield
    finally:
        flags.WORKFLOW_DI_NO_CACHE = False


async def run_once(graph: Any, log: list, args: tuple, kwargs: dict) -> tuple:
    log.clear()
    try:
        await WorkflowInterpreter(graph, extra_args=args, extra_kwargs=dict(kwargs)).run()
        outcome = None
    except Exception as exc:  # noqa: BLE001 - compared between the two resolutions
        outcome = (type(exc).__name__, str(exc))
    return list(log), outcome


async def mismatches(program: tuple) -> list:
    """Runs whose nodes did not receive what a fresh, uncached resolution gives them."""
    node_specs, slots, pool_specs = program
    log: list = []
    nodes = [make_node(spec, i, log) for i, spec in enumerate(node_specs)]
    graph = NodeCompose(*[nodes[s % len(nodes)] for s in slots]).render()
    pools = make_pools(pool_specs)
    found = []
    for round_ in range(2):
        for p, (args, kwargs) in enumerate(pools):
            got = await run_once(graph, log, args, kwargs)
            with uncached():
                want = await run_once(graph, log, args, kwargs)
            if got != want:
                found.append((round_, p, got, want))
    return found


@pytest.mark.parametrize("loop_name", LOOPS)
@settings(max_examples=sized(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=PROGRAM)
def test_every_node_receives_what_a_fresh_resolution_gives(loop_name, program):
    loop = new_loop(loop_name)
    try:
        assert loop.run_until_complete(mismatches(program)) == []
    finally:
        loop.close()


def test_the_check_catches_a_cache_that_ignores_the_pool_shape(monkeypatch):
    first_shape: list = []
    real = workflow.shape_of

    def broken(args, kwargs):
        if not first_shape:
            first_shape.append(real(args, kwargs))
        return first_shape[0]

    monkeypatch.setattr(workflow, "shape_of", broken)
    program = (
        [("inline", [("alpha", 1, "required", ("beta", 0, False, False))])],
        [0],
        [([0, 1], []), ([1, 0], [])],
    )
    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(mismatches(program)) != []
    finally:
        loop.close()
