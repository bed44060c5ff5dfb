"""`PartialPickle`: a checkpoint keeps the injected objects that pickle; the ones that do not (a lock,
a client) come back from the pools the resuming code gives, at the same place and of the same type,
or the restore fails saying which: never a silent misplacement."""

from __future__ import annotations

import pickle
import threading
from dataclasses import dataclass, field

import pytest

from amrita_sense import SUSPEND, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.durable import Checkpointing, CodecError, Fresh, MemoryCheckpointStore, PartialPickle
from support.durable_support import KEYS


@dataclass
class Tally:
    total: int = 0
    seen: list = field(default_factory=list)


class Client:
    """Stands for a network client: it holds a lock, so it does not pickle."""

    def __init__(self, name: str):
        self.name, self.lock = name, threading.Lock()


@Node(wrap_to_async=False)
def add(tally: Tally, client: Client) -> None:
    tally.total += len(tally.seen) + 1
    tally.seen.append(client.name)


def graph():
    return NodeCompose(add, add, SUSPEND, add).render()


@pytest.mark.asyncio
async def test_the_data_comes_back_and_the_client_is_the_resuming_codes():
    store = MemoryCheckpointStore()
    tally, first = Tally(), Client("first")
    interp = WorkflowInterpreter(graph(), extra_args=(tally,), extra_kwargs={"client": first})
    interp.checkpointing = Checkpointing(store, "run", codec=PartialPickle(), keyring=KEYS)
    await interp.run()
    assert tally.total == 3
    second = Client("second")
    fresh = PartialPickle().with_fresh((Tally(),), {"client": second})
    again = await Checkpointing(store, "run", codec=PartialPickle(), keyring=KEYS).resume(graph(), codec=fresh)
    await again.run()
    restored = again._ava_args_v[1]
    assert restored is not tally and restored.total == 6 and restored.seen == ["first", "first", "second"]
    assert again._ava_kwargs_v["client"] is second


def test_what_pickles_is_pickled_whole_and_markers_name_the_place_and_type():
    codec = PartialPickle()
    shared = Tally(1)
    args, kwargs = pickle.loads(codec.dumps(((shared, threading.Lock()), {"same": shared, "n": 2})))
    assert args[0] is kwargs["same"] and args[0].total == 1 and kwargs["n"] == 2
    assert args[1] == Fresh(1, "_thread:lock")
    assert pickle.loads(codec.dumps(ValueError("x"))).args == ("x",)  # not pools: plain pickle
    with pytest.raises(TypeError):
        codec.dumps(threading.Lock())  # a non-pools value that does not pickle is the caller's error


@pytest.mark.parametrize(
    "codec, given",
    [
        (PartialPickle(), "nothing"),
        (PartialPickle().with_fresh((Tally(),), {}), "nothing"),
        (PartialPickle().with_fresh((Tally(),), {"client": "not a client"}), "a builtins:str"),
    ],
    ids=["no pools", "no client", "wrong type"],
)
def test_a_marker_without_its_object_is_a_codec_error_naming_it(codec, given):
    data = PartialPickle().dumps(((Tally(),), {"client": Client("a")}))
    with pytest.raises(CodecError, match=f"{Client.__module__}:Client at 'client'.*gave {given}"):
        codec.loads(data)


def test_the_codec_travels_without_what_a_restore_gave_it():
    codec = PartialPickle().with_fresh((Tally(),), {"client": Client("x")})
    shipped = pickle.loads(pickle.dumps(codec))
    assert isinstance(shipped, PartialPickle) and shipped.fresh_args == () and shipped.fresh_kwargs == {}
