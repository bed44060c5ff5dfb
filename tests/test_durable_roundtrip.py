"""Round trip at every boundary of random workflows, across the two cores.

A random program (an instruction or a raw one, see `durable_programs`) runs with a checkpoint
after every node, at the end of every run and, with `gates`, at every suspend
gate (a consumer asks the run to park at whatever gate comes next); every
one of those snapshots is then restored in a fresh interpreter on a freshly
built graph, alternately on the compiled core and on the pure build, and run to
the end. Each restored run must finish with exactly the record of the original
(trace, error, pointer, flags, runs), and checkpointing itself must not change
what a run does. AMRITA_SENSE_ROUNDTRIP_EXAMPLES sets the number of programs (per loop).
"""

from __future__ import annotations

import asyncio
import os
import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from support.dual import SenseCopy, run_on
from support.durable_programs import (
    CONTINUING,
    PROGRAMS,
    RAW_PROGRAMS,
    RawStateBuilder,
    RunState,
    StateBuilder,
    drive,
    passthrough,
)
from support.durable_support import KEYS
from support.sampling import sized

LOOPS = ["asyncio", "uvloop"]
EXAMPLES = int(os.environ.get("AMRITA_SENSE_ROUNDTRIP_EXAMPLES") or sized(40))
MAX_TRACE = 150  # every checkpoint is run to the end: the test is quadratic in the run's length


def history_store(sense: SenseCopy) -> Any:
    """A store (the copy's `MemoryCheckpointStore`) that also keeps every checkpoint ever saved."""

    class HistoryStore(sense.sub("durable").MemoryCheckpointStore):
        def __init__(self) -> None:
            super().__init__()
            self.history: list[bytes] = []

        def save(self, run_id: str, data: bytes, **kw: Any) -> Any:
            self.history.append(data)
            return super().save(run_id, data, **kw)

    return HistoryStore()


def _graph(sense: SenseCopy, spec: dict) -> Any:
    """The spec's graph: an instruction program, or a raw one (it has no "driver" key)."""
    builder = StateBuilder if "driver" in spec else RawStateBuilder
    return builder(sense, spec).program().render()


def _interpreter(sense: SenseCopy, spec: dict, state: RunState) -> Any:
    graph = _graph(sense, spec)
    middleware = passthrough if spec["middleware"] else None
    return sense.sub("runtime.workflow").WorkflowInterpreter(graph, extra_args=(state,), middleware=middleware)


async def _plain(sense: SenseCopy, spec: dict) -> tuple:
    state = RunState()
    return await drive(_interpreter(sense, spec, state), state)


async def _checkpointed(sense: SenseCopy, job: tuple[dict, bool]) -> tuple[tuple, list[bytes]]:
    """The run with a checkpoint after every node; with `gates`, parked (and resumed) at every gate too."""
    spec, gates = job
    state = RunState()
    interp = _interpreter(sense, spec, state)
    store = history_store(sense)
    interp.checkpointing = sense.sub("durable").Checkpointing(store, "run", codec=pickle, keyring=KEYS)
    if not gates:
        return await drive(interp, state), store.history
    stream = interp.object_io
    parking = asyncio.ensure_future(_park_everywhere(stream))
    try:
        return await drive(interp, state), store.history
    finally:
        parking.cancel()
        await asyncio.gather(parking, return_exceptions=True)


async def _park_everywhere(stream: Any) -> None:
    """Ask the run to park at whatever gate comes next, let it go on, again and again."""
    while True:
        await stream.wait_to_suspend()
        stream.resume()


async def _resumed(sense: SenseCopy, job: tuple[dict, bytes]) -> tuple:
    spec, data = job
    graph = _graph(sense, spec)
    workflow = sense.sub("runtime.workflow")
    middleware = passthrough if spec["middleware"] else None
    interp = workflow.WorkflowInterpreter.restore(graph, data, codec=pickle, allow_unsigned=True, middleware=middleware)
    status = sense.sub("durable").inspect_snapshot(data).status
    return await drive(interp, interp._ava_args_v[1], continuing=status in CONTINUING)


@pytest.mark.parametrize("loop_name", LOOPS)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=st.one_of(PROGRAMS, RAW_PROGRAMS), gates=st.booleans())
def test_every_checkpoint_resumes_to_the_same_end(cores, loop_name, spec, gates):
    compiled, pure = cores
    try:
        plain = run_on(compiled, _plain, spec, loop_name)
    except Exception:  # noqa: BLE001 - a spec the builder refuses (the differential tests cover those)
        assume(False)
    assume(len(plain[0]) <= MAX_TRACE)
    record, history = run_on(compiled, _checkpointed, (spec, gates), loop_name)
    assert record == plain
    assert history, "a run saves at least its final checkpoint"
    for index, data in enumerate(history):
        sense = pure if index % 2 == 0 else compiled
        assert run_on(sense, _resumed, (spec, data), loop_name) == record, f"checkpoint {index}"


async def _plain_documents_checked(sense: SenseCopy, job: tuple[dict, bool]) -> int:
    """The checkpointed run, with every snapshot the plain paths write compared with the general
    path's of the same state: the compiled one (`_plain_snapshot`: the packed bytes, signed, against
    `format.encode` of the general path's document) and the Python one (`_plain_document`: the
    document's text and status). How many the plain paths wrote."""
    capture = sense.sub("durable.snapshots.capture")
    fmt = sense.sub("durable.snapshots.format")
    plain_document, plain_snapshot = capture._plain_document, capture._plain_snapshot
    written = [0]

    def general(interp: Any, outline: Any, codec: Any) -> tuple[str, bytes, list]:
        durable = capture._durable_document(interp)
        blobs: list = []
        state, parked = capture._capture(interp, outline, codec, blobs, with_pools=True)
        text = capture._document_text(state, codec, capture.anchors_text(outline, state), None, durable)
        return capture._status(interp, state["position"], state["ptr"], parked), text, blobs

    def compared(interp: Any, outline: Any, codec: Any, blobs: list) -> Any:
        found = plain_document(interp, outline, codec, blobs)
        if found is not None:
            status, text, general_blobs = general(interp, outline, codec)
            assert found == (status, text)
            assert blobs == general_blobs
            written[0] += 1
        return found

    def compared_snapshot(interp: Any, codec: Any, seal: Any) -> Any:
        found = plain_snapshot(interp, codec, seal)
        if found is not None:
            outline = capture._outline(interp)
            status, text, blobs = general(interp, outline, codec)
            assert found == fmt.encode(status, outline.fingerprint, text, outline.packed, blobs, seal)
            written[0] += 1
        return found

    capture._plain_document, capture._plain_snapshot = compared, compared_snapshot
    try:
        await _checkpointed(sense, job)
    finally:
        capture._plain_document, capture._plain_snapshot = plain_document, plain_snapshot
    return written[0]


@pytest.mark.parametrize("loop_name", LOOPS)
@settings(
    max_examples=max(EXAMPLES // 2, 5),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=st.one_of(PROGRAMS, RAW_PROGRAMS), gates=st.booleans())
def test_the_plain_snapshot_path_writes_what_the_general_one_writes(cores, loop_name, spec, gates):
    for sense in cores:
        try:
            run_on(sense, _plain, spec, loop_name)
        except Exception:  # noqa: BLE001 - a spec the builder refuses
            assume(False)
        run_on(sense, _plain_documents_checked, (spec, gates), loop_name)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_chain_between_its_nodes_takes_the_plain_path(cores, loop_name):
    spec = {"driver": "chain"}
    for sense in cores:

        async def chain(sense: SenseCopy, _: Any) -> int:
            capture = sense.sub("durable.snapshots.capture")
            api = sense.sub("runtime.workflow")
            node = sense.sub("node.wrapper").Node
            graph = sense.sub("node.core").NodeCompose(*(node()(lambda: None) for _ in range(3))).render()
            interp = api.WorkflowInterpreter(graph)
            store = sense.sub("durable").MemoryCheckpointStore()
            interp.checkpointing = sense.sub("durable").Checkpointing(store, "run", codec=pickle)
            plain_snapshot, taken = capture._plain_snapshot, []
            capture._plain_snapshot = lambda *args: taken.append(plain_snapshot(*args)) or taken[-1]
            try:
                await interp.run()
            finally:
                capture._plain_snapshot = plain_snapshot
            return [found is not None for found in taken]

        assert run_on(sense, chain, spec, loop_name) == [True] * 3  # after each node (the last: at the end)
