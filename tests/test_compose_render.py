"""`NodeCompose`, `>>`, `SelfCompileInstruction`, `render()` and `NodeComposeRendered`."""

from __future__ import annotations

import pytest

from amrita_sense import (
    GraphBuildError,
    Node,
    NodeCompose,
    NodeComposeRendered,
    NullPointerException,
    WorkflowInterpreter,
)
from amrita_sense.instructions.alias import ALIAS
from amrita_sense.instructions.workfl_ctrl import NOP
from amrita_sense.node.abc_base import AbstractCompose, AbstractComposeOriginal, is_rendered_compose
from amrita_sense.node.addressing import AddressCalculator
from amrita_sense.node.self_compile import SelfCompileInstruction


def make(name: str):
    """A distinct sync node tagged with `name`."""
    return Node(tag=name, wrap_to_async=False)(lambda: name)


class Macro(SelfCompileInstruction):
    """A self-compiling instruction that expands to the given children."""

    def __init__(self, *children):
        self.children = children

    def extract(self):
        return NodeCompose(*self.children)


# ----- source composes --------------------------------------------------------------------


def test_compose_keeps_its_children_in_order():
    a, b, c = make("a"), make("b"), make("c")
    comp = NodeCompose(a, b, c)
    assert list(comp) == [a, b, c]
    assert isinstance(comp, AbstractComposeOriginal)


def test_empty_compose():
    assert list(NodeCompose()) == []


def test_rshift_on_compose_appends_in_place_and_returns_it():
    a, b, c = make("a"), make("b"), make("c")
    comp = NodeCompose(a)
    same = comp >> b
    assert same is comp
    same >> c
    assert list(comp) == [a, b, c]


def test_chained_rshift_is_flat():
    a, b, c, d = make("a"), make("b"), make("c"), make("d")
    assert list(a >> b >> c >> d) == [a, b, c, d]


def test_parenthesised_rshift_nests():
    a, b, c = make("a"), make("b"), make("c")
    comp = a >> (b >> c)
    children = list(comp)
    assert children[0] is a
    assert isinstance(children[1], NodeCompose)
    assert list(children[1]) == [b, c]


def test_compose_rshift_compose_appends_one_child():
    a, b, c = make("a"), make("b"), make("c")
    inner = b >> c
    outer = NodeCompose(a) >> inner
    assert list(outer) == [a, inner]


def test_get_builder_is_the_rendered_class():
    assert NodeCompose.get_builder() is NodeComposeRendered


def test_rendered_graph_refused_in_compose_constructor():
    rendered = (make("a") >> make("b")).render()
    with pytest.raises(TypeError, match="rendered composition"):
        NodeCompose(make("x"), rendered)


def test_rendered_graph_refused_on_node_rshift():
    rendered = (make("a") >> make("b")).render()
    with pytest.raises(TypeError, match="rendered composition"):
        make("x") >> rendered


def test_rendered_graph_refused_on_compose_rshift():
    rendered = (make("a") >> make("b")).render()
    with pytest.raises(TypeError, match="rendered composition"):
        NodeCompose(make("x")) >> rendered


class _DuckRendered:
    """Not an AbstractCompose, but says it is a rendered graph (the duck test reads the class)."""

    __rendered_compose__ = True


class _DynamicDuck:
    """Says so only through `__getattr__`, per object."""

    def __init__(self, rendered: bool):
        self.rendered = rendered

    def __getattr__(self, name):
        if name == "__rendered_compose__":
            return self.rendered
        raise AttributeError(name)


@pytest.mark.parametrize("shape", ["constructor", "node >>", "compose >>", "among many"])
@pytest.mark.parametrize("bad", [_DuckRendered, lambda: _DynamicDuck(True)], ids=["class", "getattr"])
def test_duck_rendered_graphs_are_refused_in_every_way_of_composing(shape, bad):
    item = bad()
    with pytest.raises(TypeError, match="rendered composition"):
        if shape == "constructor":
            NodeCompose(make("x"), item)
        elif shape == "node >>":
            make("x") >> item
        elif shape == "compose >>":
            NodeCompose(make("x")) >> item
        else:
            NodeCompose(*[make(f"n{i}") for i in range(50)], item, make("y"))


def test_an_object_whose_getattr_denies_being_rendered_is_accepted_once_per_object():
    # the verdict of a class with `__getattr__` is taken per object, never cached for the class
    assert len(NodeCompose(make("x"), _DynamicDuck(False))._graph) == 2
    with pytest.raises(TypeError, match="rendered composition"):
        NodeCompose(make("x"), _DynamicDuck(True))


# ----- self-compiling instructions --------------------------------------------------------


def test_self_compile_rshift_puts_a_nop_in_front():
    macro = Macro(make("m"))
    tail = make("t")
    comp = macro >> tail
    assert isinstance(comp, NodeCompose)
    assert list(comp) == [NOP, macro, tail]


def test_self_compile_renders_as_one_nested_segment():
    m1, m2, tail = make("m1"), make("m2"), make("t")
    graph = (Macro(m1, m2) >> tail).render()
    assert len(graph) == 3
    assert graph[0] is NOP
    assert isinstance(graph[1], NodeComposeRendered)
    assert (graph[1][0], graph[1][1]) == (m1, m2)
    assert graph[2] is tail


def test_self_compile_inside_a_compose():
    a, m = make("a"), make("m")
    graph = NodeCompose(a, Macro(m)).render()
    assert len(graph) == 2
    assert len(graph[1]) == 1
    assert graph[1][0] is m


@pytest.mark.asyncio
async def test_interpreter_accepts_a_self_compile_instruction():
    log = []

    @Node(wrap_to_async=False)
    def step():
        log.append("step")

    interp = WorkflowInterpreter(Macro(step, step))
    assert isinstance(interp.get_graph(), NodeComposeRendered)
    await interp.run()
    assert log == ["step", "step"]


# ----- render -----------------------------------------------------------------------------


def test_render_returns_a_built_rendered_graph():
    a, b = make("a"), make("b")
    graph = (a >> b).render()
    assert isinstance(graph, NodeComposeRendered)
    assert isinstance(graph, AbstractCompose)
    assert is_rendered_compose(graph)
    assert len(graph) == 2
    assert (graph[0], graph[1]) == (a, b)


def test_render_nests_source_composes_as_rendered_segments():
    a, b, c, d = make("a"), make("b"), make("c"), make("d")
    graph = (a >> (b >> (c >> d))).render()
    assert len(graph) == 2
    assert len(graph[1]) == 2
    assert graph[1][0] is b
    assert len(graph[1][1]) == 2
    assert graph[1][1][1] is d
    assert is_rendered_compose(graph[1][1])


def test_render_can_be_called_twice_on_one_source():
    comp = make("a") >> make("b")
    first, second = comp.render(), comp.render()
    assert first is not second
    assert len(first) == len(second) == 2


def test_plain_node_can_appear_in_two_graphs():
    shared = make("s")
    g1 = (shared >> make("x")).render()
    g2 = (make("y") >> shared).render()
    assert g1[0] is shared and g2[1] is shared


def test_empty_compose_renders_to_an_empty_graph():
    graph = NodeCompose().render()
    assert len(graph) == 0
    assert not graph


def test_empty_nested_segment_is_kept():
    a, b = make("a"), make("b")
    graph = (a >> NodeCompose() >> b).render()
    assert len(graph) == 3
    assert is_rendered_compose(graph[1])
    assert len(graph[1]) == 0
    assert not graph[1]


def test_is_rendered_compose_duck_test():
    assert not is_rendered_compose(make("a"))
    assert not is_rendered_compose(NodeCompose(make("a")))
    assert is_rendered_compose(NodeCompose(make("a")).render())


# ----- the rendered graph -----------------------------------------------------------------


def test_indexing_and_negative_indexing():
    a, b, c = make("a"), make("b"), make("c")
    graph = (a >> b >> c).render()
    assert graph[0] is a
    assert graph[2] is c
    assert graph[-1] is c
    assert graph[-3] is a


def test_out_of_range_index_raises_null_pointer():
    graph = (make("a") >> make("b")).render()
    with pytest.raises(NullPointerException, match="out of range"):
        graph[2]
    with pytest.raises(NullPointerException):
        graph[-3]


def test_negative_index_on_one_element_graph():
    a = make("a")
    graph = a.as_compose().render()
    assert graph[-1] is a
    with pytest.raises(NullPointerException):
        graph[-2]


def test_out_of_range_is_not_an_index_error():
    graph = make("a").as_compose().render()
    with pytest.raises(NullPointerException) as info:
        graph[5]
    assert not isinstance(info.value, IndexError)


def test_unbuilt_graph_has_length_minus_one_and_is_falsy():
    pending = NodeComposeRendered(make("a") >> make("b"))
    assert pending.__len__() == -1
    assert not pending
    pending._build()
    assert len(pending) == 2
    assert pending


def test_bool_follows_contents():
    assert (make("a") >> make("b")).render()
    assert not NodeCompose().render()


def test_second_build_raises_graph_build_error():
    graph = (make("a") >> make("b")).render()
    with pytest.raises(GraphBuildError, match="already built"):
        graph._build()


def test_build_without_an_original_raises():
    with pytest.raises(GraphBuildError):
        NodeComposeRendered([])._build()


def test_build_from_a_plain_list():
    a, b = make("a"), make("b")
    graph = NodeComposeRendered([a, b])
    graph._build()
    assert (len(graph), graph[0], graph[1]) == (2, a, b)


def test_calc_only_on_the_top_level():
    graph = (make("a") >> (make("b") >> make("c"))).render()
    assert isinstance(graph.calc, AddressCalculator)
    with pytest.raises(AttributeError):
        graph[1].calc


def test_calc_resolves_against_its_graph():
    c = make("c")
    graph = (make("a") >> (make("b") >> c)).render()
    assert graph.calc.find_addr([1, 1]) is c


def test_alias_map_holds_full_paths_on_the_top_graph():
    a, b, c = make("a"), make("b"), make("c")
    graph = (ALIAS(a, "first") >> (b >> ALIAS(c, "deep"))).render()
    assert graph.alias2vector_map == {"first": [0], "deep": [1, 1]}
    assert graph[1].alias2vector_map == {}


def test_alias_in_a_self_compile_segment_is_registered_at_its_path():
    a, m = make("a"), make("m")
    graph = (Macro(make("x"), ALIAS(m, "inside")) >> a).render()
    assert graph.alias2vector_map == {"inside": [1, 1]}


def test_alias_map_is_empty_without_aliases():
    assert (make("a") >> make("b")).render().alias2vector_map == {}


def test_duplicate_alias_raises_graph_build_error():
    with pytest.raises(GraphBuildError, match="dup"):
        (ALIAS(make("a"), "dup") >> (make("b") >> ALIAS(make("c"), "dup"))).render()
