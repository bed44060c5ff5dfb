"""`AddressCalculator`: alias resolution, address lookup and pointer advancement (rules 8 and 11)."""

from __future__ import annotations

import pytest

from amrita_sense import Node, NodeCompose, NullPointerException, PointerVector
from amrita_sense.instructions.alias import ALIAS
from amrita_sense.node.abc_base import AbstractAddressCalculator
from amrita_sense.node.addressing import AddressCalculator


def make(name: str):
    return Node(tag=name, wrap_to_async=False)(lambda: name)


def walk(calc: AddressCalculator, start: list[int]) -> list[list[int]]:
    """Every position `advance` visits from `start`, start included."""
    ptr = PointerVector(list(start))
    seen = [list(ptr)]
    while calc.advance(ptr):
        seen.append(list(ptr))
    assert list(ptr) == []
    return seen


@pytest.fixture
def nodes():
    return {name: make(name) for name in "abcdefg"}


# ----- resolve_alias ----------------------------------------------------------------------


def test_calculator_is_an_address_calculator(nodes):
    graph = (nodes["a"] >> nodes["b"]).render()
    assert isinstance(graph.calc, AbstractAddressCalculator)


def test_resolve_alias_returns_the_registered_path(nodes):
    graph = (nodes["a"] >> (nodes["b"] >> ALIAS(nodes["c"], "here"))).render()
    assert graph.calc.resolve_alias("here") == [1, 1]


def test_resolve_alias_returns_a_copy(nodes):
    graph = (nodes["a"] >> ALIAS(nodes["b"], "here")).render()
    first = graph.calc.resolve_alias("here")
    first.append(99)
    first[0] = 42
    assert graph.calc.resolve_alias("here") == [1]
    assert graph.alias2vector_map["here"] == [1]


def test_resolve_unknown_alias_raises(nodes):
    graph = (nodes["a"] >> ALIAS(nodes["b"], "here")).render()
    with pytest.raises(NullPointerException, match="nowhere"):
        graph.calc.resolve_alias("nowhere")


def test_calculator_over_a_hand_built_graph(nodes):
    graph = (nodes["a"] >> nodes["b"]).render()
    calc = AddressCalculator(graph)
    assert calc.find_addr([1]) is nodes["b"]


# ----- find_addr_safe / find_addr -----------------------------------------------------------


def test_find_addr_safe_walks_from_the_root(nodes):
    graph = (nodes["a"] >> (nodes["b"] >> (nodes["c"] >> nodes["d"]))).render()
    calc = graph.calc
    assert calc.find_addr_safe([0]) is nodes["a"]
    assert calc.find_addr_safe([1, 0]) is nodes["b"]
    assert calc.find_addr_safe([1, 1, 1]) is nodes["d"]
    assert calc.find_addr_safe([1]) is graph[1]
    assert calc.find_addr_safe([1, 1]) is graph[1][1]


def test_find_addr_safe_empty_address_is_the_root(nodes):
    graph = (nodes["a"] >> nodes["b"]).render()
    assert graph.calc.find_addr_safe([]) is graph


def test_find_addr_safe_out_of_range_is_none(nodes):
    graph = (nodes["a"] >> (nodes["b"] >> nodes["c"])).render()
    assert graph.calc.find_addr_safe([2]) is None
    assert graph.calc.find_addr_safe([1, 2]) is None
    assert graph.calc.find_addr_safe([7, 0]) is None


def test_find_addr_safe_through_a_node_is_none(nodes):
    graph = (nodes["a"] >> (nodes["b"] >> nodes["c"])).render()
    assert graph.calc.find_addr_safe([0, 0]) is None
    assert graph.calc.find_addr_safe([1, 0, 0]) is None


def test_find_addr_safe_negative_index_follows_list_rules(nodes):
    graph = (nodes["a"] >> (nodes["b"] >> nodes["c"])).render()
    assert graph.calc.find_addr_safe([-1]) is graph[1]
    assert graph.calc.find_addr_safe([1, -1]) is nodes["c"]


def test_find_addr_safe_returns_an_empty_segment(nodes):
    graph = (nodes["a"] >> NodeCompose() >> nodes["b"]).render()
    assert graph.calc.find_addr_safe([1]) is graph[1]


def test_find_addr_returns_nodes_and_segments(nodes):
    graph = (nodes["a"] >> (nodes["b"] >> nodes["c"])).render()
    assert graph.calc.find_addr([1, 1]) is nodes["c"]
    assert graph.calc.find_addr([1]) is graph[1]
    assert graph.calc.find_addr([]) is graph


def test_find_addr_missing_target_raises(nodes):
    graph = (nodes["a"] >> (nodes["b"] >> nodes["c"])).render()
    for bad in ([2], [1, 5], [0, 0]):
        with pytest.raises(NullPointerException, match="not found"):
            graph.calc.find_addr(bad)


def test_find_addr_empty_segment_raises(nodes):
    graph = (nodes["a"] >> NodeCompose() >> nodes["b"]).render()
    with pytest.raises(NullPointerException):
        graph.calc.find_addr([1])


def test_find_addr_message_names_the_address(nodes):
    graph = (nodes["a"] >> nodes["b"]).render()
    with pytest.raises(NullPointerException, match=r"\[4, 2\]"):
        graph.calc.find_addr([4, 2])


# ----- advance ------------------------------------------------------------------------------


def test_advance_empty_pointer_is_false(nodes):
    graph = (nodes["a"] >> nodes["b"]).render()
    ptr = PointerVector([0])
    ptr.clear()
    assert graph.calc.advance(ptr) is False
    assert list(ptr) == []


def test_advance_to_next_sibling_node(nodes):
    graph = (nodes["a"] >> nodes["b"] >> nodes["c"]).render()
    ptr = PointerVector([0])
    assert graph.calc.advance(ptr) is True
    assert ptr == PointerVector([1])


def test_advance_mutates_in_place(nodes):
    graph = (nodes["a"] >> nodes["b"]).render()
    ptr = PointerVector([0])
    before = ptr
    graph.calc.advance(ptr)
    assert ptr is before
    assert list(ptr) == [1]


def test_advance_flat_walk(nodes):
    graph = (nodes["a"] >> nodes["b"] >> nodes["c"]).render()
    assert walk(graph.calc, [0]) == [[0], [1], [2]]


def test_advance_descends_into_a_segment_at_the_pointer(nodes):
    graph = (nodes["a"] >> (nodes["b"] >> nodes["c"])).render()
    ptr = PointerVector([1])
    assert graph.calc.advance(ptr) is True
    assert list(ptr) == [1, 0]


def test_advance_enters_a_sibling_segment_at_once(nodes):
    graph = (nodes["a"] >> (nodes["b"] >> nodes["c"])).render()
    ptr = PointerVector([0])
    assert graph.calc.advance(ptr) is True
    assert list(ptr) == [1, 0]


def test_advance_enters_only_one_level_of_a_sibling(nodes):
    graph = (nodes["a"] >> NodeCompose(nodes["b"] >> nodes["c"], nodes["d"])).render()
    assert walk(graph.calc, [0]) == [[0], [1, 0], [1, 0, 0], [1, 0, 1], [1, 1]]


def test_advance_leaves_an_exhausted_segment(nodes):
    graph = (nodes["a"] >> (nodes["b"] >> nodes["c"]) >> nodes["d"]).render()
    ptr = PointerVector([1, 1])
    assert graph.calc.advance(ptr) is True
    assert list(ptr) == [2]


def test_advance_leaves_several_levels_at_once(nodes):
    graph = (nodes["a"] >> (nodes["b"] >> (nodes["c"] >> nodes["d"])) >> nodes["e"]).render()
    ptr = PointerVector([1, 1, 1])
    assert graph.calc.advance(ptr) is True
    assert list(ptr) == [2]


def test_advance_leaving_enters_the_parents_next_segment(nodes):
    graph = (nodes["a"] >> (nodes["b"] >> nodes["c"]) >> (nodes["d"] >> nodes["e"])).render()
    ptr = PointerVector([1, 1])
    assert graph.calc.advance(ptr) is True
    assert list(ptr) == [2, 0]


def test_advance_past_the_end_empties_the_pointer(nodes):
    graph = (nodes["a"] >> nodes["b"]).render()
    ptr = PointerVector([1])
    assert graph.calc.advance(ptr) is False
    assert list(ptr) == []
    assert not ptr


def test_advance_past_the_end_of_nested_segments(nodes):
    graph = (nodes["a"] >> (nodes["b"] >> (nodes["c"] >> nodes["d"]))).render()
    ptr = PointerVector([1, 1, 1])
    assert graph.calc.advance(ptr) is False
    assert list(ptr) == []


def test_advance_does_not_enter_an_empty_segment(nodes):
    graph = (nodes["a"] >> NodeCompose() >> nodes["b"]).render()
    assert walk(graph.calc, [0]) == [[0], [1], [2]]
    ptr = PointerVector([1])
    assert graph.calc.advance(ptr) is True
    assert list(ptr) == [2]


def test_advance_full_walk_with_empty_segments(nodes):
    a, b, c = nodes["a"], nodes["b"], nodes["c"]
    graph = (
        a >> NodeCompose() >> b >> (NodeCompose() >> NodeCompose()) >> (c >> NodeCompose()) >> NodeCompose()
    ).render()
    assert walk(graph.calc, [0]) == [[0], [1], [2], [3, 0], [4, 0], [4, 1], [5]]


def test_advance_empty_segment_at_the_end(nodes):
    graph = (nodes["a"] >> (nodes["b"] >> NodeCompose())).render()
    assert walk(graph.calc, [0]) == [[0], [1, 0], [1, 1]]


def test_advance_through_a_node_path_is_false(nodes):
    graph = (nodes["a"] >> nodes["b"]).render()
    ptr = PointerVector([0, 0])
    assert graph.calc.advance(ptr) is False
    assert list(ptr) == [0, 0]


def test_advance_out_of_range_raises(nodes):
    graph = (nodes["a"] >> nodes["b"]).render()
    with pytest.raises(NullPointerException):
        graph.calc.advance(PointerVector([9]))


def test_deep_walk_visits_every_node_in_order(nodes):
    a, b, c, d, e, f, g = (nodes[k] for k in "abcdefg")
    graph = (a >> (b >> (c >> (d >> e)) >> f) >> g).render()
    positions = walk(graph.calc, [0])
    leaves = [graph.calc.find_addr(p) for p in positions]
    assert [x for x in leaves if x in nodes.values()] == [a, b, c, d, e, f, g]
    assert positions == [[0], [1, 0], [1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 1], [1, 2], [2]]
