"""Injection plans shared across interpreters: made once per (function, pool shape), values always
read from the calling interpreter's own pools, exact invalidation, bounded memory."""

from __future__ import annotations

import gc
import weakref

import pytest

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.hook.matcher import Depends
from amrita_sense.instructions.func_block import FUN_BLOCK
from amrita_sense.instructions.try_catch import Try
from amrita_sense.runtime import plans as plans_module


class Ctx:
    def __init__(self, name: str):
        self.name = name


class Other:
    def __init__(self, name: str):
        self.name = name


class Disguised:
    """Reports another class as its `__class__`: `isinstance` answers per value, not per type."""

    def __init__(self, pretend: type | None):
        self._pretend = pretend

    @property
    def __class__(self):  # noqa: D401 - mimics a proxy
        return self._pretend or Disguised


def inline(func):
    return Node(wrap_to_async=False)(func)


def upper_name(calls: list):
    """A provider of the context's name in capitals that records each call."""

    def provider(ctx: Ctx) -> str:
        calls.append(ctx.name)
        return ctx.name.upper()

    return provider


@pytest.fixture
def builds(monkeypatch):
    """Counts the plans made (signature matched against pools)."""
    made = []
    real = plans_module.build_entry

    def counting(func, meta, args, kwargs):
        made.append(func)
        return real(func, meta, args, kwargs)

    monkeypatch.setattr(plans_module, "build_entry", counting)
    return made


@pytest.mark.asyncio
async def test_every_interpreter_reads_its_own_pools(builds):
    seen = []

    @inline
    def node(ctx: Ctx, label: str):
        seen.append((ctx.name, label))

    graph = NodeCompose(node, node).render()
    for i in range(5):
        await WorkflowInterpreter(graph, extra_args=(Ctx(f"c{i}"),), extra_kwargs={"label": f"l{i}"}).run()
    assert seen == [(f"c{i}", f"l{i}") for i in range(5) for _ in range(2)]
    assert builds == [node.func]


@pytest.mark.asyncio
async def test_plans_are_shared_across_graphs_and_sub_interpreters(builds):
    seen = []

    @inline
    def node(ctx: Ctx):
        seen.append(ctx.name)

    inner = NodeCompose(node).render()
    first = NodeCompose(node, FUN_BLOCK(inner)).render()
    second = NodeCompose(node).render()
    await WorkflowInterpreter(first, extra_args=(Ctx("a"),)).run()
    made = len(builds)
    await WorkflowInterpreter(first, extra_args=(Ctx("b"),)).run()
    await WorkflowInterpreter(second, extra_args=(Ctx("c"),)).run()
    assert seen == ["a", "a", "b", "b", "c"]
    assert builds.count(node.func) == 2  # the child's pools start with its parent: a shape of their own
    assert len(builds) == made


@pytest.mark.asyncio
async def test_another_pool_shape_gets_another_plan(builds):
    seen = []

    @inline
    def node(first: Ctx, second: Other):
        seen.append((first.name, second.name))

    graph = NodeCompose(node).render()
    await WorkflowInterpreter(graph, extra_args=(Ctx("a"), Other("b"))).run()
    await WorkflowInterpreter(graph, extra_args=(Other("x"), Ctx("y"))).run()
    await WorkflowInterpreter(graph, extra_args=(Ctx("c"), Other("d"))).run()
    assert seen == [("a", "b"), ("y", "x"), ("c", "d")]
    assert len(builds) == 2


@pytest.mark.asyncio
async def test_keyword_names_are_part_of_the_shape():
    seen = []

    @inline
    def node(ctx: Ctx, label: str = "default"):
        seen.append((ctx.name, label))

    graph = NodeCompose(node).render()
    await WorkflowInterpreter(graph, extra_args=(Ctx("a"),), extra_kwargs={"label": "given"}).run()
    await WorkflowInterpreter(graph, extra_args=(Ctx("b"),)).run()
    await WorkflowInterpreter(graph, extra_args=(Ctx("c"),), extra_kwargs={"ctx": Ctx("named")}).run()
    assert seen == [("a", "given"), ("b", "default"), ("named", "default")]


@pytest.mark.asyncio
async def test_an_in_place_key_does_not_reach_another_interpreter():
    seen = []

    @inline
    def writer(pc: WorkflowInterpreter):
        pc._ava_kwargs["label"] = "added"

    @inline
    def reader(ctx: Ctx, label: str = "default"):
        seen.append(label)

    graph = NodeCompose(writer, reader).render()
    await WorkflowInterpreter(graph, extra_args=(Ctx("a"),)).run()
    await WorkflowInterpreter(NodeCompose(reader).render(), extra_args=(Ctx("b"),)).run()
    assert seen == ["default", "default"]


@pytest.mark.asyncio
async def test_values_changed_in_place_are_read_at_each_call():
    seen = []

    @inline
    def bump(pc: WorkflowInterpreter):
        pc._ava_kwargs["label"] = pc._ava_kwargs["label"] + "!"

    @inline
    def reader(label: str):
        seen.append(label)

    interp = WorkflowInterpreter(NodeCompose(reader, bump, reader).render(), extra_kwargs={"label": "x"})
    await interp.run()
    assert seen == ["x", "x!"]


@pytest.mark.asyncio
async def test_a_node_made_after_the_defaults_changed_gets_a_new_plan():
    seen = []

    def body(ctx: Ctx, label: str):
        seen.append((ctx.name, label))

    before = NodeCompose(inline(body)).render()
    await WorkflowInterpreter(before, extra_args=(Ctx("a"),), extra_kwargs={"label": "kw"}).run()
    body.__defaults__ = ("d",)
    after = NodeCompose(inline(body)).render()
    await WorkflowInterpreter(after, extra_args=(Ctx("b"),), extra_kwargs={"label": "kw"}).run()
    await WorkflowInterpreter(after, extra_args=(Ctx("c"),)).run()
    assert seen == [("a", "kw"), ("b", "kw"), ("c", "d")]


@pytest.mark.asyncio
async def test_a_node_made_after_the_annotations_changed_gets_a_new_plan():
    seen = []

    def body(value: Ctx):
        seen.append(value.name)

    await WorkflowInterpreter(NodeCompose(inline(body)).render(), extra_args=(Ctx("c"), Other("o"))).run()
    body.__annotations__ = {"value": Other}
    await WorkflowInterpreter(NodeCompose(inline(body)).render(), extra_args=(Ctx("c"), Other("o"))).run()
    assert seen == ["c", "o"]


@pytest.mark.asyncio
async def test_a_disguised_value_is_matched_per_interpreter():
    seen = []

    @inline
    def node(ctx: Ctx):
        seen.append(ctx)

    graph = NodeCompose(node).render()
    proxy, second = Disguised(Ctx), Ctx("second")
    await WorkflowInterpreter(graph, extra_args=(proxy, Ctx("first"))).run()
    await WorkflowInterpreter(graph, extra_args=(Disguised(None), second)).run()
    assert seen[0] is proxy and seen[1] is second


@pytest.mark.asyncio
async def test_use_cache_results_stay_with_their_interpreter():
    calls: list = []
    provider = upper_name(calls)
    seen = []

    @inline
    def node(value: str = Depends(provider, use_cache=True)):
        seen.append(value)

    graph = NodeCompose(node, node).render()
    first = WorkflowInterpreter(graph, extra_args=(Ctx("a"),))
    await first.run()
    await WorkflowInterpreter(graph, extra_args=(Ctx("b"),)).run()
    await first.run()
    assert seen == ["A", "A", "B", "B", "A", "A"]
    assert calls == ["a", "b"]


@pytest.mark.asyncio
async def test_use_cache_results_mix_with_pool_values_in_every_call_form():
    """The core calls a node whose only providers are `use_cache` ones itself once their results
    are made: positionally, by keyword (a keyword-only parameter), and a coroutine node."""
    calls: list = []
    provider = upper_name(calls)
    seen = []

    @inline
    def positional(ctx: Ctx, value: str = Depends(provider, use_cache=True), label: str = "-"):
        seen.append(("positional", ctx.name, value, label))

    @inline
    def by_keyword(value: str = Depends(provider, use_cache=True), *, label: str, ctx: Ctx):
        seen.append(("by_keyword", ctx.name, value, label))

    @Node()
    async def coroutine(ctx: Ctx, value: str = Depends(provider, use_cache=True)):
        seen.append(("coroutine", ctx.name, value, None))

    graph = NodeCompose(positional, by_keyword, coroutine, positional, by_keyword, coroutine).render()
    first = WorkflowInterpreter(graph, extra_args=(Ctx("a"),), extra_kwargs={"label": "x"})
    await first.run()
    await WorkflowInterpreter(graph, extra_args=(Ctx("b"),), extra_kwargs={"label": "y"}).run()
    await first.run()
    runs = [("a", "A", "x"), ("b", "B", "y"), ("a", "A", "x")]
    expected = [
        (kind, name, value, None if kind == "coroutine" else label)
        for name, value, label in runs
        for _ in range(2)
        for kind in ("positional", "by_keyword", "coroutine")
    ]
    assert seen == expected
    assert calls == ["a"] * 3 + ["b"] * 3  # once per node function and interpreter


@pytest.mark.asyncio
async def test_a_use_cache_result_wins_over_a_keyword_of_the_same_name():
    """As a fresh resolution gives it: the provider's result, not the pool's keyword value."""
    seen = []

    def provider(label: str) -> str:
        return f"made from {label}"

    @inline
    def node(label: str = Depends(provider, use_cache=True), other: str = Depends(provider, use_cache=True)):
        seen.append((label, other))

    await WorkflowInterpreter(NodeCompose(node, node).render(), extra_kwargs={"label": "given"}).run()
    assert seen == [("made from given", "made from given")] * 2


@pytest.mark.asyncio
async def test_use_cache_results_are_made_again_when_the_pools_change_shape():
    calls = []

    def provider(ctx: Ctx) -> str:
        calls.append(ctx.name)
        return ctx.name

    seen = []

    @inline
    def node(value: str = Depends(provider, use_cache=True)):
        seen.append(value)

    interp = WorkflowInterpreter(NodeCompose(node, node).render(), extra_args=(Ctx("a"),))
    await interp.run()
    interp._ava_args = (Ctx("b"), Other("o"))
    interp.rehash_args()
    await interp.run()
    assert seen == ["a", "a", "b", "b"]
    assert calls == ["a", "b"]


@pytest.mark.asyncio
async def test_catch_handlers_with_injected_exceptions_share_their_plan(builds):
    seen = []

    @inline
    def boom(ctx: Ctx):
        raise ValueError(ctx.name)

    @inline
    def handler(ctx: Ctx, exc_val: ValueError, exc_type: type):
        seen.append((ctx.name, exc_val.args[0], exc_type))

    graph = NodeCompose(Try(boom).CATCH(ValueError, handler)).render()
    for name in "abc":
        await WorkflowInterpreter(graph, extra_args=(Ctx(name),)).run()
    assert seen == [(n, n, ValueError) for n in "abc"]
    assert builds.count(handler.func) == 1


@pytest.mark.asyncio
async def test_call_sub_extras_are_injected_afresh_with_a_shared_plan(builds):
    seen = []

    @inline
    def target(ctx: Ctx, extra: Other):
        seen.append((ctx.name, extra.name))
        return extra.name

    @Node()
    async def caller(pc: WorkflowInterpreter):
        first = await pc.call_offset(1, Other("x"))
        second = await pc.call_offset(1, Other("y"))
        seen.append((first, second))
        pc.jump_offset(2)

    graph = NodeCompose(caller, target, inline(lambda: None)).render()
    for name in "ab":
        await WorkflowInterpreter(graph, extra_args=(Ctx(name),)).run()
    assert seen == [("a", "x"), ("a", "y"), ("x", "y"), ("b", "x"), ("b", "y"), ("x", "y")]
    assert builds.count(target.func) == 1


@pytest.mark.asyncio
async def test_plans_of_dead_functions_are_released():
    def make():
        def body(ctx: Ctx):
            pass

        return body

    body = make()
    ref = weakref.ref(body)
    await WorkflowInterpreter(NodeCompose(inline(body)).render(), extra_args=(Ctx("a"),)).run()
    shape = plans_module.shape_of((None, Ctx("x")), {})
    del body
    gc.collect()
    assert ref() is None
    assert all(hit[0]() is not None for hit in shape.entries._entries.values())


def test_shapes_are_interned_and_exact():
    a = plans_module.shape_of((Ctx("a"), Other("b")), {"k": 1})
    assert plans_module.shape_of((Ctx("x"), Other("y")), {"k": "other type"}) is a
    assert plans_module.shape_of((Other("x"), Ctx("y")), {"k": 1}) is not a
    assert plans_module.shape_of((Ctx("x"), Other("y")), {"j": 1}) is not a
    disguised = plans_module.shape_of((Disguised(Ctx),), {})
    assert disguised.private
    assert plans_module.shape_of((Disguised(Ctx),), {}) is not disguised


@pytest.mark.asyncio
async def test_a_pool_reassigned_as_a_list_works_after_rehash():
    seen = []

    @inline
    def node(ctx: Ctx):
        seen.append(ctx.name)

    interp = WorkflowInterpreter(NodeCompose(node).render(), extra_args=(Ctx("a"),))
    await interp.run()
    interp._ava_args = [interp, Ctx("b")]
    await interp.run()
    interp.rehash_args()
    await interp.run()
    assert seen == ["a", "b", "b"]
