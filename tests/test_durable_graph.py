"""Graph identity: the fingerprint, and restoring against a graph that is not the snapshot's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from amrita_sense import ALIAS, IF, JMP, SUSPEND, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import GraphMismatch, graph_fingerprint
from amrita_sense.instructions import FUN_BLOCK
from support.durable_support import rec
from support.runtime_path import RUNTIME_DIR

ROOT = Path(__file__).resolve().parents[1]


def build(variant: str = "") -> object:
    """A small graph; each variant changes one thing the fingerprint must see."""
    trace: list = []
    last = rec(trace, "z") if variant != "function" else rec(trace, "other")
    alias = "end" if variant != "alias" else "finish"
    tag_node = rec(trace, "c")
    if variant == "tag":
        tag_node.tag = "Custom::c"
    inner = NodeCompose(rec(trace, "x"), rec(trace, "y" if variant != "sub" else "yy")).render()
    nodes = [rec(trace, "a"), IF(rec(trace, "cond"), tag_node), FUN_BLOCK(inner), ALIAS(last, alias), JMP(alias)]
    if variant == "structure":
        nodes.insert(1, rec(trace, "extra"))
    return NodeCompose(*nodes).render()


VARIANTS = ["tag", "function", "alias", "sub", "structure"]


def test_the_same_source_gives_the_same_fingerprint_and_every_change_another():
    base = graph_fingerprint(build())
    assert base == graph_fingerprint(build()) and len(base) == 32
    seen = {base}
    for variant in VARIANTS:
        fingerprint = graph_fingerprint(build(variant))
        assert fingerprint not in seen, variant
        seen.add(fingerprint)


FINGERPRINT_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from test_durable_graph import build
from amrita_sense.durable import graph_fingerprint
print(graph_fingerprint(build()))
"""


@pytest.mark.parametrize("core", ["cython", "python"])
@pytest.mark.parametrize("seed", ["0", "12345"])
def test_the_fingerprint_is_the_same_in_another_process_and_core(core, seed):
    env = dict(os.environ, PYTHONPATH=RUNTIME_DIR, PYTHONHASHSEED=seed)
    env.pop("AMRITA_SENSE_REQUIRE_EXTENSIONS", None)
    if core == "python":
        env["AMRITA_SENSE_NO_EXTENSIONS"] = "1"
    else:
        env.pop("AMRITA_SENSE_NO_EXTENSIONS", None)
    script = FINGERPRINT_SCRIPT.format(tests=str(ROOT / "tests"))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == graph_fingerprint(build())


def chain(trace: list, names: str) -> object:
    return NodeCompose(*(rec(trace, n) for n in names.split())).render()


async def halted_at(names: str, halt_after: int) -> bytes:
    trace: list = []
    nodes = [rec(trace, n) for n in names.split()]
    nodes.insert(halt_after, SUSPEND)
    interp = WorkflowInterpreter(NodeCompose(*nodes).render())
    await interp.run()
    return interp.snapshot()


def halted_graph(names: str, halt_after: int, trace: list) -> object:
    nodes = [rec(trace, n) for n in names.split()]
    nodes.insert(halt_after, SUSPEND)
    return NodeCompose(*nodes).render()


@pytest.mark.asyncio
async def test_another_graph_is_refused_naming_the_first_difference():
    data = await halted_at("a b c d", 2)
    with pytest.raises(GraphMismatch) as caught:
        WorkflowInterpreter.restore(halted_graph("a b X d", 2, []), data)
    error = caught.value
    assert error.address == [3] and error.row == 3
    assert "[3] (row 3)" in str(error) and "NodeSuspend::X" in str(error)
    assert error.expected != error.actual
    with pytest.raises(GraphMismatch, match="only 4"):
        WorkflowInterpreter.restore(halted_graph("a b c", 2, []), data)
    with pytest.raises(GraphMismatch, match="snapshot's graph only 5"):
        WorkflowInterpreter.restore(halted_graph("a b c d e", 2, []), data)


@pytest.mark.asyncio
async def test_edits_where_the_run_has_passed_are_accepted_when_asked():
    data = await halted_at("a b c d", 2)
    edited = halted_graph("A B c d", 2, trace := [])
    with pytest.raises(GraphMismatch, match=r"\[0\] \(row 0\)"):
        WorkflowInterpreter.restore(edited, data)
    again = WorkflowInterpreter.restore(edited, data, accept_passed_edits=True)
    await again.run()
    assert trace == ["c", "d"]
    for ahead in ("a b X d", "a b c X", "a b c d e", "a b c"):
        with pytest.raises(GraphMismatch):
            WorkflowInterpreter.restore(halted_graph(ahead, 2, []), data, accept_passed_edits=True)
