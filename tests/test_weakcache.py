"""`WeakValueLRUCache`: weak values, LRU order, loose mode, mapping protocol."""

from __future__ import annotations

import gc

import pytest

from amrita_sense.weakcache import WeakValueLRUCache


class Box:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"Box({self.name})"


def make(capacity=3, loose=False, **items):
    return WeakValueLRUCache(capacity=capacity, loose_mode=loose, items=items or None)


def test_get_put_and_recency():
    a, b, c, d = Box("a"), Box("b"), Box("c"), Box("d")
    cache = make(a=a, b=b, c=c)
    assert cache.get("a") is a
    cache.put("d", d)
    assert list(cache) == ["c", "a", "d"]
    assert cache.get("b") is None
    assert cache.get("b", "default") == "default"


def test_value_dies_with_its_last_reference():
    cache = make()
    cache["k"] = Box("k")
    gc.collect()
    assert "k" not in cache
    assert len(cache) == 1
    assert cache.get("k") is None
    assert len(cache) == 0


def test_size_counts_only_live_entries():
    keep = Box("keep")
    cache = make(keep=keep)
    cache.put("gone", Box("gone"))
    gc.collect()
    assert cache.size() == 1
    assert len(cache) == 2
    assert dict(cache.items()) == {"keep": keep}
    assert len(cache) == 1


def test_loose_mode_keeps_live_entries_beyond_capacity():
    boxes = [Box(str(i)) for i in range(4)]
    cache = make(capacity=2, loose=True)
    for box in boxes:
        cache.put(box.name, box)
    assert list(cache) == ["0", "1", "2", "3"]
    assert cache.loose
    cache.set_loose(False)
    cache.put("x", boxes[0])
    assert len(cache) == 2


def test_loose_mode_evicts_dead_entries_first():
    keep = Box("keep")
    cache = make(capacity=2, loose=True, keep=keep)
    cache.put("dead", Box("dead"))
    gc.collect()
    fresh = Box("fresh")
    cache.put("fresh", fresh)
    assert list(cache) == ["keep", "fresh"]


def test_zero_capacity_keeps_the_first_item():
    box = Box("only")
    cache = make(capacity=0)
    cache.put("only", box)
    assert cache.get("only") is box
    assert cache.is_full()


def test_reput_refreshes_without_eviction():
    a, b = Box("a"), Box("b")
    cache = make(capacity=2, a=a, b=b)
    cache.put("a", a)
    assert list(cache) == ["b", "a"]


def test_none_and_negative_capacity_are_refused():
    with pytest.raises(ValueError):
        make().put("k", None)
    with pytest.raises(ValueError):
        WeakValueLRUCache(capacity=-1)


def test_mapping_protocol():
    a, b = Box("a"), Box("b")
    cache = make(a=a, b=b)
    assert cache["a"] is a
    with pytest.raises(KeyError):
        cache["missing"]
    del cache["a"]
    with pytest.raises(KeyError):
        del cache["a"]
    assert list(cache.keys()) == ["b"]
    assert list(cache.values()) == [b]
    assert "b" in cache and "a" not in cache
    assert repr(cache) == "WeakValueLRUCache(capacity=3, items={'b': Box(b)})"
    cache.clear()
    assert len(cache) == 0


def test_pop():
    a = Box("a")
    cache = make(a=a)
    assert cache.pop("a") is a
    assert cache.pop("a", None) is None
    with pytest.raises(KeyError):
        cache.pop("a")
    cache.put("dead", Box("dead"))
    gc.collect()
    assert cache.pop("dead", "d") == "d"


def test_expire_purges_dead_among_the_oldest():
    live = [Box(str(i)) for i in range(5)]
    cache = make(capacity=20)
    cache.put("dead0", Box("x"))
    cache.put("dead1", Box("y"))
    for box in live:
        cache.put(box.name, box)
    gc.collect()
    cache.expire(1)
    assert len(cache) == 6
    cache.expire()
    assert len(cache) == 5


def test_capacity_helpers():
    cache = make(capacity=2)
    assert cache.capacity == cache.get_capacity() == 2
    cache.resize(5)
    assert cache.capacity == 5
    assert not cache.is_full()
