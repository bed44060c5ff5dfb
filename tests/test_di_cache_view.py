"""`interp._di_cache`: 1.1.3's DI cache record, as a view computed when read (README, "DI cache").

The view lists what 1.1.3's payload would hold (an entry per node resolved through the cache,
keyed `hash((id(func), args_hash))`, valued `(static_kwargs, per_call_factories)`), built from our
plans and the current pools; `rehash_args()` keeps it when the fingerprint is unchanged and clears
it otherwise. Reading it is the only thing that costs: an interpreter never read that way keeps no
record.
"""

from __future__ import annotations

import pytest

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense._unsafe import _Flags
from amrita_sense.hook.matcher import Depends, DependsFactory
from amrita_sense.types import DICache, PointerVector
from amrita_sense.utils import _fingerprint_args
from support.dual import install_flags


class Config:
    def __init__(self, name: str = "cfg"):
        self.name = name


def inline(func):
    return Node(wrap_to_async=False)(func)


@pytest.fixture
def flags(monkeypatch):
    fresh = _Flags()
    install_flags(monkeypatch, fresh)
    return fresh


def two_nodes(seen: list):
    @inline
    def first(cfg: Config):
        seen.append(("first", cfg.name))

    @inline
    def second(pc: WorkflowInterpreter, label: str):
        seen.append(("second", label))

    return first, second


def key(interp, node) -> int:
    return hash((id(node.func), interp.args_hash))


def test_the_view_is_a_dicache_of_the_pools_fingerprint_and_stays_one_object():
    interp = WorkflowInterpreter(NodeCompose(inline(lambda: None)).render(), extra_args=(Config(),))
    cache = interp._di_cache
    assert isinstance(cache, DICache) and cache is interp._di_cache
    assert cache.hash_trustable is True
    assert cache.args_hash == interp.args_hash == _fingerprint_args((interp, Config()), {})
    assert len(cache.payload) == 0 and cache.payload.maxsize == 2048


@pytest.mark.asyncio
async def test_an_interpreter_whose_view_is_never_read_keeps_no_record():
    first, second = two_nodes([])
    interp = WorkflowInterpreter(
        NodeCompose(first, second).render(), extra_args=(Config(),), extra_kwargs={"label": "x"}
    )
    assert interp._di_record is None
    await interp.run()
    assert interp._di_record is None


@pytest.mark.asyncio
async def test_a_call_lists_the_node_it_resolved_with_its_values_from_the_pools():
    first, second = two_nodes([])
    interp = WorkflowInterpreter(
        NodeCompose(first, second).render(), extra_args=(Config("a"),), extra_kwargs={"label": "x"}
    )
    interp._pointer = PointerVector([1])
    await interp._call()
    assert dict(interp._di_cache.payload) == {key(interp, second): ({"pc": interp, "label": "x"}, {})}
    interp._pointer = PointerVector([0])
    await interp._call()
    assert set(interp._di_cache.payload) == {key(interp, first), key(interp, second)}


@pytest.mark.asyncio
async def test_a_run_lists_every_node_and_a_per_call_provider_as_a_factory():
    def provider() -> int:
        return 1

    @inline
    def with_provider(made: int = Depends(provider)):
        pass

    first, _ = two_nodes([])
    interp = WorkflowInterpreter(NodeCompose(first, with_provider).render(), extra_args=(Config("a"),))
    await interp.run()
    payload = interp._di_cache.payload
    assert payload[key(interp, first)][0]["cfg"].name == "a"
    static, factories = payload[key(interp, with_provider)]
    assert static == {} and list(factories) == ["made"] and isinstance(factories["made"], DependsFactory)


@pytest.mark.asyncio
async def test_a_use_cache_entry_appears_with_the_providers_result_once_it_ran():
    calls = []

    def cached() -> int:
        calls.append(1)
        return 7

    @inline
    def node(c: int = Depends(cached, use_cache=True)):
        pass

    interp = WorkflowInterpreter(NodeCompose(node).render())
    interp._pointer = PointerVector([0])
    assert len(interp._di_cache.payload) == 0
    await interp._call()
    assert interp._di_cache.payload[key(interp, node)] == ({"c": 7}, {})
    assert calls == [1]


@pytest.mark.asyncio
async def test_the_view_shows_the_current_pool_values_not_those_of_the_first_call():
    first, _ = two_nodes([])
    interp = WorkflowInterpreter(NodeCompose(first).render(), extra_args=(Config("a"),))
    await interp.run()
    interp._ava_args = (interp, Config("b"))
    interp.rehash_args()  # same fingerprint: the listing stays
    assert interp._di_cache.payload[key(interp, first)][0]["cfg"].name == "b"


@pytest.mark.asyncio
async def test_rehash_keeps_the_view_on_the_same_fingerprint_and_clears_it_on_another():
    seen = []
    first, _ = two_nodes(seen)
    interp = WorkflowInterpreter(NodeCompose(first).render(), extra_args=(Config(),))
    await interp.run()
    interp._di_cache.payload[1] = ({"data": "written"}, {})
    before = interp.args_hash
    interp.rehash_args()
    assert interp.args_hash == before and set(interp._di_cache.payload) == {key(interp, first), 1}

    interp._ava_args = (interp, Config(), "more")
    assert interp.args_hash == before and not interp._di_cache.hash_trustable  # 1.1.3's stale hash
    interp.rehash_args()
    assert interp.args_hash != before and len(interp._di_cache.payload) == 0
    await interp.run()
    assert set(interp._di_cache.payload) == {key(interp, first)}
    assert len(seen) == 2


@pytest.mark.asyncio
async def test_written_entries_are_shown_and_never_injected():
    seen = []
    first, _ = two_nodes(seen)
    interp = WorkflowInterpreter(NodeCompose(first).render(), extra_args=(Config("real"),))
    interp._di_cache.payload[key(interp, first)] = ({"cfg": Config("written")}, {})
    await interp.run()
    assert seen == [("first", "real")]


@pytest.mark.asyncio
async def test_clearing_the_payload_forgets_use_cache_results(flags):
    calls = []

    def cached() -> int:
        calls.append(1)
        return len(calls)

    @inline
    def node(c: int = Depends(cached, use_cache=True)):
        pass

    interp = WorkflowInterpreter(NodeCompose(node).render())
    await interp.run()
    await interp.run()
    assert calls == [1]
    interp._di_cache.payload.clear()
    assert len(interp._di_cache.payload) == 0
    await interp.run()
    assert calls == [1, 1] and interp._di_cache.payload[key(interp, node)] == ({"c": 2}, {})


@pytest.mark.asyncio
async def test_deleting_an_entry_between_runs_unlists_it_until_the_next_run():
    first, second = two_nodes([])
    interp = WorkflowInterpreter(
        NodeCompose(first, second).render(), extra_args=(Config(),), extra_kwargs={"label": "x"}
    )
    await interp.run()
    del interp._di_cache.payload[key(interp, first)]
    assert set(interp._di_cache.payload) == {key(interp, second)}
    with pytest.raises(KeyError):
        del interp._di_cache.payload[key(interp, first)]
    await interp.run()
    assert set(interp._di_cache.payload) == {key(interp, first), key(interp, second)}


@pytest.mark.asyncio
async def test_no_cache_calls_list_nothing_and_the_preload_lists_every_node(flags):
    first, second = two_nodes([])
    flags.WORKFLOW_DI_NO_CACHE = True
    interp = WorkflowInterpreter(
        NodeCompose(first, second).render(), extra_args=(Config(),), extra_kwargs={"label": "x"}
    )
    interp._pointer = PointerVector([0])
    await interp._call()
    assert len(interp._di_cache.payload) == 0
    flags.WORKFLOW_DI_NO_CACHE = False
    await interp._refresh_di_cache_full()
    assert set(interp._di_cache.payload) == {key(interp, first), key(interp, second)}


def test_untrusting_through_the_view_bypasses_the_cache_until_rehash():
    interp = WorkflowInterpreter(NodeCompose(inline(lambda: None)).render())
    interp._di_cache.hash_trustable = False
    assert interp.args_hash_trustable is False
    interp._di_cache.hash_trustable = True
    assert interp.args_hash_trustable is True
    with pytest.raises(AttributeError, match="rehash_args"):
        interp._di_cache.args_hash = 5


def test_assigning_a_dicache_takes_its_entries_and_trust():
    interp = WorkflowInterpreter(NodeCompose(inline(lambda: None)).render())
    given = DICache(args_hash=0, hash_trustable=False)
    given.payload[3] = ({"x": 1}, {})
    interp._di_cache = given
    assert dict(interp._di_cache.payload) == {3: ({"x": 1}, {})}
    assert interp._di_cache.hash_trustable is False
    with pytest.raises(TypeError, match="_di_cache"):
        interp._di_cache = {}
    with pytest.raises(AttributeError, match="_di_cache"):
        del interp._di_cache
