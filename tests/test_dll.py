"""DLLCompose / DLLComposeProxy: a rendered slot whose payload is swapped in place with `apply()`."""

from __future__ import annotations

import pytest

from amrita_sense import GraphBuildError, NodeCompose, NullPointerException, WorkflowInterpreter
from amrita_sense.instructions import ALIAS, CALL, FN, JMP, NATIVE_WHILE, NOP
from amrita_sense.node import DLLCompose
from amrita_sense.node.dll import DLLComposeProxy
from support.dual import Recorder, run_program


def test_construction_and_source_protocol():
    rec = Recorder()
    a, b = rec.act("a"), rec.act("b")
    dll = DLLCompose(NodeCompose(a))
    assert dll >> b is dll and list(dll) == [a, b]
    assert DLLCompose.get_builder() is DLLComposeProxy
    with pytest.raises(GraphBuildError, match="Only NodeCompose is allowed"):
        DLLCompose(a)
    with pytest.raises(GraphBuildError, match="render\\(\\) is not allowed"):
        dll.render()
    with pytest.raises(GraphBuildError, match="never been built"):
        dll.get_proxy()
    with pytest.raises(GraphBuildError, match="No proxy to apply to"):
        dll.apply(NodeCompose())


def test_proxy_before_build():
    proxy = DLLComposeProxy(DLLCompose(NodeCompose(NOP)))
    with pytest.raises(GraphBuildError, match="not been built"):
        proxy[0]
    with pytest.raises(NullPointerException):
        len(proxy)
    with pytest.raises(NullPointerException):
        bool(proxy)
    with pytest.raises(AttributeError, match="does not have a calculator"):
        proxy.calc
    with pytest.raises(GraphBuildError, match="cannot be a root compose"):
        proxy._build(None, None)


def test_render_places_a_forwarding_proxy():
    rec = Recorder()
    d1, d2 = rec.act("d1"), rec.act("d2")
    dll = DLLCompose(NodeCompose(d1, ALIAS(d2, "in_dll")))
    graph = NodeCompose(rec.act("a"), dll, rec.act("b")).render()
    proxy = graph[1]
    assert proxy is dll.get_proxy() and isinstance(proxy, DLLComposeProxy)
    assert len(proxy) == 2 and bool(proxy) and proxy[0] is d1 and proxy[1].node is d2
    assert graph.alias2vector_map == {"in_dll": [1, 1]}
    assert graph.calc.find_addr([1, 0]) is d1


def test_a_dll_binds_to_one_proxy():
    dll = DLLCompose(NodeCompose(NOP))
    NodeCompose(dll).render()
    with pytest.raises(RuntimeError, match="only be used once"):
        NodeCompose(dll).render()


def test_payload_hooks_run_after_the_host_build():
    rec = Recorder()
    jump = JMP("later")
    graph = NodeCompose(DLLCompose(NodeCompose(jump)), ALIAS(rec.act("t"), "later")).render()
    assert jump._node_addr == [1]
    assert graph.alias2vector_map == {"later": [1]}


def test_apply_swaps_symbols_and_runs_new_hooks_at_once():
    rec = Recorder()
    dll = DLLCompose(NodeCompose(ALIAS(rec.act("old"), "old")))
    graph = NodeCompose(ALIAS(rec.act("t"), "t"), dll).render()
    jump = JMP("t")
    dll.apply(NodeCompose(jump, ALIAS(rec.act("new"), "new")))
    assert graph.alias2vector_map == {"t": [0], "new": [1, 1]}
    assert jump._node_addr == [0] and len(graph[1]) == 2
    with pytest.raises(GraphBuildError, match="Only NodeCompose"):
        dll.apply([NOP])


def test_apply_with_a_duplicate_alias_fails_and_keeps_the_host_consistent():
    rec = Recorder()
    dll = DLLCompose(NodeCompose(rec.act("x")))
    NodeCompose(ALIAS(rec.act("t"), "t"), dll).render()
    with pytest.raises(GraphBuildError, match="already exists"):
        dll.apply(NodeCompose(ALIAS(rec.act("y"), "t")))
    with pytest.raises(GraphBuildError, match="not been built"):
        dll.get_proxy()[0]


@pytest.mark.asyncio
async def test_running_through_a_dll_slot():
    rec = Recorder()
    dll = DLLCompose(NodeCompose(rec.act("d1", 1), rec.act("d2", 2)))
    interp = WorkflowInterpreter(NodeCompose(rec.act("a", 0), dll, rec.act("b", 3)).render())
    out = await run_program(interp, rec)
    assert out.trace == ["a", "d1", "d2", "b"] and out.yields == [0, 1, 2, 3]


@pytest.mark.asyncio
async def test_apply_between_runs_and_during_a_run():
    rec = Recorder()
    dll = DLLCompose(NodeCompose(rec.act("old1"), rec.act("old2")))

    @rec._node(wrap_to_async=False)
    def swap():
        rec.trace.append("swap")
        dll.apply(NodeCompose(rec.act("new1"), rec.act("new2"), rec.act("new3")))

    interp = WorkflowInterpreter(NodeCompose(swap, dll, rec.act("end")).render())
    out = await run_program(interp, rec)
    assert out.trace == ["swap", "new1", "new2", "new3", "end"]


@pytest.mark.asyncio
async def test_a_function_in_a_dll_can_be_called_and_replaced():
    rec = Recorder()
    dll = DLLCompose(NodeCompose(FN("f", rec.act("v1"))))
    interp = WorkflowInterpreter(NodeCompose(CALL("f"), rec.act("after"), dll).render())
    first = await run_program(interp, rec)
    dll.apply(NodeCompose(FN("f", rec.act("v2") >> rec.act("v2b"))))
    second = await run_program(interp, rec)
    assert first.trace == ["v1", "after"] and second.trace == ["v2", "v2b", "after"]


@pytest.mark.asyncio
async def test_an_empty_payload_renders_but_running_into_it_fails():
    rec = Recorder()
    interp = WorkflowInterpreter(NodeCompose(rec.act("a"), DLLCompose(NodeCompose()), rec.act("b")).render())
    out = await run_program(interp, rec)
    assert out.trace == ["a"] and isinstance(out.error, NullPointerException) and out.pointer == [1]


def test_native_loops_do_not_configure_controls_inside_a_dll():
    from amrita_sense.instructions import BREAK_LOOP

    rec = Recorder()
    inner = BREAK_LOOP()
    NATIVE_WHILE(rec.act("c")).ACTION(NodeCompose(DLLCompose(NodeCompose(inner)))).extract()
    assert inner._configured is False
    with pytest.raises(TypeError, match="Unsupported payload type: DLLCompose"):
        NATIVE_WHILE(rec.act("c")).ACTION(DLLCompose(NodeCompose(rec.act("x")))).extract()
