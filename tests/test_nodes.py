"""`Node` (decorator and class), `BaseNode` subclasses and their hooks, `NodeType`."""

from __future__ import annotations

import inspect
import types

import pytest

import amrita_sense
from amrita_sense import Node, NodeCompose, NodeType, WorkflowInterpreter
from amrita_sense.instructions.alias import ALIAS
from amrita_sense.node import core as node_core
from amrita_sense.node import wrapper as node_wrapper
from amrita_sense.node.core import BaseNode
from amrita_sense.utils import isabstractmethod

# ----- the decorator ----------------------------------------------------------------------


def test_root_names_point_at_the_decorator_and_the_class():
    assert amrita_sense.Node is node_wrapper.Node
    assert amrita_sense.NodeType is node_core.Node
    assert amrita_sense.node.Node is node_wrapper.Node
    assert amrita_sense.node.NodeType is node_core.Node


def test_decorator_defaults():
    @Node()
    def step():
        return 1

    assert isinstance(step, NodeType)
    assert isinstance(step, BaseNode)
    assert step.tag == "NodeSuspend::step"
    assert step.wrap_to_async is True
    assert step.address_able is True
    assert step.func.__name__ == "step"


def test_decorator_positional_tag():
    @Node("custom::tag")
    def step():
        return 1

    assert step.tag == "custom::tag"


def test_decorator_keyword_arguments():
    @Node(tag="kw", wrap_to_async=False, address_able=False)
    def step():
        return 1

    assert (step.tag, step.wrap_to_async, step.address_able) == ("kw", False, False)


def test_decorator_all_positional_arguments():
    @Node("pos", False, False)
    def step():
        return 1

    assert (step.tag, step.wrap_to_async, step.address_able) == ("pos", False, False)


def test_empty_tag_falls_back_to_the_default():
    @Node(tag="")
    def named():
        return 1

    assert named.tag == "NodeSuspend::named"


def test_lambda_tag_uses_its_name():
    node = Node()(lambda: 1)
    assert node.tag == "NodeSuspend::<lambda>"


def test_builtin_function_can_be_wrapped():
    assert Node()(print).tag == "NodeSuspend::print"


def test_calling_a_sync_node_calls_the_function():
    seen = []

    @Node()
    def add(a: int, b: int = 10) -> int:
        seen.append((a, b))
        return a + b

    assert add(1) == 11
    assert add(1, b=2) == 3
    assert seen == [(1, 10), (1, 2)]


@pytest.mark.asyncio
async def test_calling_an_async_node_returns_its_coroutine():
    @Node()
    async def double(x: int) -> int:
        return 2 * x

    coro = double(4)
    assert inspect.iscoroutine(coro)
    assert await coro == 8


def test_call_attribute_is_the_function():
    def body():
        return "x"

    node = Node()(body)
    assert node.__call__ is body
    assert node.func is body


def test_coroutine_flag():
    @Node()
    async def a():
        return None

    @Node()
    def b():
        return None

    assert a.is_coro is True
    assert b.is_coro is False


def test_signature_metadata_is_collected_at_creation():
    @Node()
    def step(x: int, y: str = "d"):
        return None

    params = step.fun_sign["params"]
    assert list(params) == ["x", "y"]
    assert params["x"]["type_hint"] is int
    assert params["x"]["kind"] == "required"
    assert params["y"]["kind"] == "optional"
    assert params["y"]["default"] == "d"
    assert step.fun_sign["factory_map"] == {}


def test_frame_is_captured():
    @Node()
    def step():
        return None

    assert isinstance(step.fun_frame, types.FrameType)


def test_repr_and_str():
    @Node(tag="shown")
    def step():
        return None

    assert repr(step) == f"<Node at {id(step)}:shown>"
    assert str(step) == "shown"


def test_node_class_direct_construction():
    def body():
        return 7

    node = NodeType(body, None, False, True)
    assert node.tag == "NodeSuspend::body"
    assert node.wrap_to_async is False
    assert node() == 7


def test_node_class_accepts_a_frame():
    frame = inspect.currentframe()
    node = NodeType(lambda: 1, "t", True, True, frame)
    assert node.fun_frame is frame


def test_default_hooks_are_abstract():
    @Node()
    def step():
        return None

    assert isabstractmethod(step._pre_check)
    assert isabstractmethod(step._post_compile)


# ----- composition from a node ----------------------------------------------------------


def test_rshift_between_nodes_makes_a_compose():
    a, b = Node()(lambda: 1), Node()(lambda: 2)
    comp = a >> b
    assert isinstance(comp, NodeCompose)
    assert list(comp) == [a, b]


def test_as_compose_wraps_the_node_alone():
    a = Node()(lambda: 1)
    comp = a.as_compose()
    assert isinstance(comp, NodeCompose)
    assert list(comp) == [a]


# ----- BaseNode subclasses ----------------------------------------------------------------


class Counter(BaseNode):
    """A custom node built through `_init`."""

    def __init__(self, log: list, name: str, *, tag: str | None = None):
        self.log = log
        self.name = name
        self._init(self._run, tag, False, True)

    def _run(self) -> str:
        self.log.append(self.name)
        return self.name

    def __call__(self, *args, **kwargs):
        return self._run()


class Checked(Counter):
    """Counts `_pre_check` calls and records the interpreter it receives."""

    def __init__(self, log: list, name: str):
        super().__init__(log, name)
        self.checked_with: list = []

    def _pre_check(self, interpreter) -> None:
        self.checked_with.append(interpreter)
        self.log.append(f"check:{self.name}")


class Hooked(Counter):
    """Records `_post_compile` calls; optionally resolves an alias declared anywhere."""

    def __init__(self, log: list, name: str, resolve: str | None = None):
        super().__init__(log, name)
        self.resolve = resolve
        self.compiled_with: list = []
        self.resolved: list[int] | None = None

    def _post_compile(self, compose) -> None:
        self.compiled_with.append(compose)
        self.log.append(f"compile:{self.name}")
        if self.resolve is not None:
            self.resolved = compose.calc.resolve_alias(self.resolve)


def test_init_sets_every_field():
    node = Counter([], "n")
    assert node.tag == "NodeSuspend::_run"
    assert node.wrap_to_async is False
    assert node.address_able is True
    assert node.is_coro is False
    assert "params" in node.fun_sign
    assert isinstance(node.fun_frame, types.FrameType)


def test_init_explicit_tag():
    assert Counter([], "n", tag="Custom::x").tag == "Custom::x"


def test_subclass_repr_and_str():
    node = Counter([], "n")
    assert repr(node) == f"<Node at {id(node)}:NodeSuspend::_run>"
    assert str(node) == "NodeSuspend::_run"


def test_subclass_rshift():
    a, b = Counter([], "a"), Counter([], "b")
    assert list(a >> b) == [a, b]
    assert list(a.as_compose()) == [a]


@pytest.mark.asyncio
async def test_subclass_node_runs_its_function():
    log: list = []
    interp = WorkflowInterpreter((Counter(log, "a") >> Counter(log, "b")).render())
    await interp.run()
    assert log == ["a", "b"]


@pytest.mark.asyncio
async def test_pre_check_runs_before_each_execution():
    log: list = []
    checked = Checked(log, "c")
    graph = (checked >> Counter(log, "x") >> checked).render()
    interp = WorkflowInterpreter(graph)
    await interp.run()
    assert log == ["check:c", "c", "x", "check:c", "c"]
    assert checked.checked_with == [interp, interp]


@pytest.mark.asyncio
async def test_pre_check_runs_on_every_run():
    log: list = []
    checked = Checked(log, "c")
    interp = WorkflowInterpreter(checked.as_compose().render())
    await interp.run()
    await interp.run()
    assert log == ["check:c", "c", "check:c", "c"]


@pytest.mark.asyncio
async def test_pre_check_runs_for_a_sub_call():
    log: list = []
    checked = Checked(log, "c")

    @Node(wrap_to_async=False)
    async def caller(pc: WorkflowInterpreter):
        log.append("caller")
        await pc.call_offset(1)
        pc.jump_offset(2)

    interp = WorkflowInterpreter((caller >> checked >> Counter(log, "end")).render())
    await interp.run()
    assert log == ["caller", "check:c", "c", "end"]


@pytest.mark.asyncio
async def test_pre_check_failure_stops_the_node():
    log: list = []

    class Refusing(Counter):
        def _pre_check(self, interpreter) -> None:
            raise ValueError("refused")

    interp = WorkflowInterpreter((Counter(log, "a") >> Refusing(log, "r")).render())
    with pytest.raises(ValueError, match="refused"):
        await interp.run()
    assert log == ["a"]
    assert interp._pointer == amrita_sense.PointerVector([1])


def test_post_compile_runs_once_with_the_top_graph():
    log: list = []
    inner = Hooked(log, "inner")
    outer = Hooked(log, "outer")
    graph = (outer >> (Counter(log, "x") >> inner)).render()
    assert inner.compiled_with == [graph]
    assert outer.compiled_with == [graph]
    assert log == ["compile:outer", "compile:inner"]


def test_post_compile_runs_after_the_whole_graph_is_built():
    log: list = []
    early = Hooked(log, "early", resolve="later")
    target = Counter(log, "t")
    graph = (early >> Counter(log, "x") >> (Counter(log, "y") >> ALIAS(target, "later"))).render()
    assert early.resolved == [2, 1]
    assert graph.alias2vector_map == {"later": [2, 1]}


def test_post_compile_sees_the_address_calculator():
    seen = []

    class Probe(Counter):
        def _post_compile(self, compose) -> None:
            seen.append(compose.calc.find_addr([1]))

    tail = Counter([], "tail")
    (Probe([], "p") >> tail).render()
    assert seen == [tail]


def test_post_compile_of_an_aliased_node_is_forwarded():
    log: list = []
    hooked = Hooked(log, "h")
    graph = (Counter(log, "x") >> ALIAS(hooked, "named")).render()
    assert hooked.compiled_with == [graph]


def test_post_compile_does_not_run_before_render():
    log: list = []
    hooked = Hooked(log, "h")
    NodeCompose(hooked, Counter(log, "x"))
    assert hooked.compiled_with == []


def test_post_compile_error_propagates_from_render():
    class Broken(Counter):
        def _post_compile(self, compose) -> None:
            raise RuntimeError("cannot compile")

    with pytest.raises(RuntimeError, match="cannot compile"):
        (Counter([], "a") >> Broken([], "b")).render()
