"""A run drawn over its graph: a live interpreter, a recorder of the path, a snapshot, a run's
checkpoint history, and the debugger's `draw` of the rows around the pointer."""

from __future__ import annotations

import pytest

from amrita_sense import CALL, SUSPEND, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import Checkpointing, MemoryCheckpointStore
from amrita_sense.instructions import FN, NATIVE_WHILE, PUSH_CONTEXT
from amrita_sense.node.wrapper import Node
from amrita_sense.pictures import Overlay, OverlayMismatch, draw, neighbourhood, picture_of, to_dot, to_mermaid
from support.pictures_support import parse_dot, parse_mermaid


@Node()
def first() -> None:
    """A step."""


@Node()
def second() -> None:
    """Another step."""


def _counter(limit: int):
    calls = {"n": 0}

    @Node()
    def more() -> bool:
        calls["n"] += 1
        return calls["n"] <= limit

    return more


def _looping_graph():
    return NodeCompose(first, NATIVE_WHILE(_counter(3)).ACTION(NodeCompose(second)), SUSPEND, first).render()


@pytest.mark.asyncio
async def test_a_suspended_interpreter_marks_its_pointer():
    graph = _looping_graph()
    interp = WorkflowInterpreter(graph)
    await interp.run()
    overlay = Overlay.of(interp)
    assert overlay.pointer == (2,)
    marks = overlay.marks(picture_of(graph))
    assert marks["n2"].style == "pointer" and marks["n2"].lines == ("=> pointer",)
    text = to_mermaid(graph, overlay=overlay)
    assert "class n2 pointer" in text and '<br>=#62; pointer"' in text
    assert 'fillcolor="#ffe066"' in to_dot(graph, overlay=overlay)


@pytest.mark.asyncio
async def test_the_recorder_counts_the_path_and_shades_it():
    graph = _looping_graph()
    interp = WorkflowInterpreter(graph)
    recorder = Overlay.recorder()
    await recorder.run(interp)
    counts = recorder.counts
    assert counts[(0,)] == 1 and counts[(1, 2, 0)] == 3 and counts[(1, 0)] == 4
    overlay = recorder.overlay(interp)
    marks = overlay.marks(picture_of(graph))
    assert marks["n1_2_0"].style == "visited2" and "visits: 3" in marks["n1_2_0"].lines
    assert marks["n0"].style == "visited1"
    assert marks["n2"].style == "pointer"  # SUSPEND: the run stands there
    texts = [to_mermaid(graph, overlay=overlay)]
    assert parse_mermaid(texts) == [None]
    assert parse_dot([to_dot(graph, overlay=overlay)]) == [None]


@pytest.mark.asyncio
async def test_return_and_context_addresses_are_marked():
    graph = NodeCompose(CALL("r"), first, FN("r", NodeCompose(PUSH_CONTEXT([1]), SUSPEND))).render()
    interp = WorkflowInterpreter(graph)
    await interp.run()
    overlay = Overlay.of(interp)
    assert overlay.returns == ((0,),) and overlay.contexts == ((1,),)
    marks = overlay.marks(picture_of(graph))
    assert marks["n0"].style == "returnaddr" and marks["n0"].lines == ("return #1",)
    assert marks["n1"].style == "contextaddr" and marks["n1"].lines == ("context #1",)
    assert marks["n2_2_1"].style == "pointer"


@pytest.mark.asyncio
async def test_a_snapshot_gives_the_same_overlay_as_its_interpreter():
    graph = NodeCompose(CALL("r"), first, FN("r", NodeCompose(PUSH_CONTEXT([1]), SUSPEND))).render()
    interp = WorkflowInterpreter(graph)
    await interp.run()
    data = interp.snapshot()
    assert Overlay.of_snapshot(data, graph) == Overlay.of(interp)
    with pytest.raises(OverlayMismatch):
        Overlay.of_snapshot(data, _looping_graph())


@pytest.mark.asyncio
async def test_the_history_of_a_run_gives_its_path():
    graph = NodeCompose(first, second, SUSPEND, first).render()
    store = MemoryCheckpointStore()
    interp = WorkflowInterpreter(graph)
    interp.checkpointing = Checkpointing(store, "run-1", every_nodes=1, history=True)
    await interp.run()
    overlay = Overlay.of_history(store, "run-1", graph)
    visited = dict(overlay.visits)
    assert visited and all(count >= 1 for count in visited.values())
    assert overlay.pointer == Overlay.of(interp).pointer
    assert to_mermaid(graph, overlay=overlay).count("visits#58; ") == len(visited)
    with pytest.raises(OverlayMismatch):
        Overlay.of_history(store, "run-1", _looping_graph())
    with pytest.raises(TypeError):
        Overlay.of_history(object(), "run-1", graph)


@pytest.mark.asyncio
async def test_draw_shows_the_rows_around_the_pointer(capsys):
    graph = NodeCompose(*[Node(tag=f"s{i}")(lambda: None) for i in range(10)], SUSPEND, first, second).render()
    interp = WorkflowInterpreter(graph)
    await interp.run()
    text = neighbourhood(interp, 2)
    ids = [line.split("[", 1)[0].strip() for line in text.splitlines() if line.startswith("  n") and "-->" not in line]
    assert ids == ["n8", "n9", "n10", "n11", "n12"]
    assert "class n10 pointer" in text
    draw(interp, 1, format="dot")
    printed = capsys.readouterr().out
    assert printed.startswith("digraph") and "n9 " in printed and "n8 " not in printed
    assert parse_dot([printed]) == [None] and parse_mermaid([text]) == [None]
    with pytest.raises(ValueError):
        neighbourhood(interp, -1)
    with pytest.raises(ValueError):
        neighbourhood(interp, 2, format="svg")
    with pytest.raises(TypeError):
        neighbourhood(object())


def test_a_fresh_interpreter_draws_its_first_rows():
    graph = NodeCompose(first, second, first).render()
    text = neighbourhood(WorkflowInterpreter(graph), 1)
    assert "n0[" in text and "n1[" in text and "n2[" not in text and "class n0 pointer" in text
