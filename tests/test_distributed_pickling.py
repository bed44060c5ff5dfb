"""Shipping graphs: a pickled rendered graph is the same graph (fingerprint, behaviour) without its frames.

Random programs of every instruction (the differential generators of
`durable_programs`, nodes made in closures, so they travel by value) go through
`amrita_sense.distributed.pickling` and back; the copy must have the
original's fingerprint and run to exactly the original's record. Needs Ray
installed (its cloudpickle), not a Ray instance.
"""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import graph_fingerprint
from amrita_sense.instructions import FUN_BLOCK
from support.durable_programs import PROGRAMS, RAW_PROGRAMS, RawStateBuilder, RunState, StateBuilder, drive, passthrough
from support.worker_support import ThisPackage

pytestmark = pytest.mark.ray
EXAMPLES = int(os.environ.get("AMRITA_SENSE_PICKLE_EXAMPLES", "60"))


@pytest.fixture(scope="module")
def pickling():
    if os.environ.get("AMRITA_SENSE_REQUIRE_RAY", "") in ("", "0"):
        pytest.importorskip("ray", reason="Ray is not installed (pip install 'amrita-sense-turbo[ray]')")
    from amrita_sense.distributed import pickling

    return pickling


def _graph(spec: dict):
    builder = StateBuilder if "driver" in spec else RawStateBuilder
    return builder(ThisPackage(), spec).program().render()


def _record(graph, spec: dict, loop_name: str) -> tuple:
    from support.dual import new_loop

    state = RunState()
    middleware = passthrough if spec["middleware"] else None
    interp = WorkflowInterpreter(graph, extra_args=(state,), middleware=middleware)
    loop = new_loop(loop_name)
    try:
        return loop.run_until_complete(drive(interp, state))
    finally:
        loop.close()


@pytest.mark.parametrize("loop_name", ["asyncio", "uvloop"])
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=st.one_of(PROGRAMS, RAW_PROGRAMS))
def test_a_pickled_graph_is_the_same_graph(pickling, loop_name, spec):
    try:
        original = _graph(spec)
        expected = _record(original, spec, loop_name)
    except Exception:  # noqa: BLE001 - a spec the builder refuses (the differential tests cover those)
        assume(False)
    copy = pickling.loads(pickling.dumps_graph(_graph(spec)))
    assert graph_fingerprint(copy) == graph_fingerprint(original)
    assert _record(copy, spec, loop_name) == expected


@Node()
async def plain(value: int) -> int:
    return value


def test_frames_node_tables_and_weak_maps_stay_behind(pickling):
    import weakref

    graph = (plain >> NodeCompose(plain)).render()
    WorkflowInterpreter(graph)  # compiles its node table
    assert graph._program is not None and plain.fun_frame is not None
    anchor = WorkflowInterpreter(graph)
    live = weakref.WeakKeyDictionary({anchor: 1})
    copy = pickling.loads(pickling.dumps_graph(graph))
    live_copy = pickling.loads(pickling.dumps(live))
    assert copy._program is None and copy[0].fun_frame is None
    assert plain.fun_frame is not None  # the original keeps its frame
    assert type(live_copy) is weakref.WeakKeyDictionary and len(live_copy) == 0 and len(live) == 1
    assert asyncio.run(_run_one(copy)) == [1]


async def _run_one(graph) -> list:
    seen = []

    async def collect(interp):
        seen.append(await interp._call())

    await WorkflowInterpreter(graph, extra_args=(1,), middleware=collect).run()
    return seen[:1]


def test_an_unpicklable_node_is_named_with_its_part(pickling):
    from amrita_sense.distributed.errors import NotPicklable

    lock = threading.Lock()

    @Node()
    async def holder() -> None:
        with lock:
            pass

    sub = (plain >> holder).render()
    graph = (plain >> FUN_BLOCK(sub)).render()
    with pytest.raises(NotPicklable) as caught:
        pickling.dumps_graph(graph)
    message = str(caught.value)
    assert "in the sub-graph of [1] (row 1)" in message
    assert "the node at [1] (row 1)" in message and "holder" in message
    assert "closure variable 'lock'" in message and "_thread.lock" in message
    with pytest.raises(NotPicklable, match="the run's input"):
        pickling.dumps_checked(lock, "the run's input")
