"""The per-class caches of the renderer, the node table and the Try fast path (issue 14) do not
keep the classes they have seen alive (a class made per request used to stay for good)."""

from __future__ import annotations

import gc
import weakref

import pytest

from amrita_sense import NodeCompose, WorkflowInterpreter
from amrita_sense._classmemo import ClassMemo
from amrita_sense.instructions import Try
from amrita_sense.node.core import BaseNode
from amrita_sense.node.wrapper import Node


def _classes(i: int):
    class Failure(Exception):
        pass

    class Checked(BaseNode):
        def __init__(self):
            self._init(self.run, f"checked{i}", False, True)

        def run(self):
            raise Failure(i)

        def _pre_check(self, interp):
            pass

        def __call__(self):
            return self.run()

    return Checked, Failure


@pytest.mark.asyncio
async def test_node_and_exception_classes_are_collected_after_use():
    refs = []
    for i in range(20):
        checked, failure = _classes(i)
        handled = []

        @Node(wrap_to_async=False)
        def handler(exc_val: Exception):
            handled.append(exc_val)  # noqa: B023 (called within this iteration)

        graph = Try(checked()).CATCH(failure, handler).extract().render()
        await WorkflowInterpreter(graph).run()
        assert len(handled) == 1
        refs.append((weakref.ref(checked), weakref.ref(failure)))
        handled.clear()  # the exception it holds refers to its class
        del checked, failure, graph, handler
    gc.collect()
    assert [ref for pair in refs for ref in pair if ref() is not None] == []


def test_a_memo_computes_once_per_class_and_forgets_a_collected_class():
    calls = []
    memo = ClassMemo(lambda cls: calls.append(cls.__name__) or cls.__name__)

    class Made:
        pass

    assert memo(Made) == "Made" and memo(Made) == "Made" and memo(int) == "int"
    assert calls == ["Made", "int"] and int in memo.forever and Made not in memo.forever
    ref = weakref.ref(Made)
    del Made
    gc.collect()
    assert ref() is None and len(memo) == 1


def test_package_classes_are_kept_in_the_plain_dict():
    memo = ClassMemo(lambda cls: True)
    memo(NodeCompose)
    memo(BaseNode)
    assert NodeCompose in memo.forever and BaseNode in memo.forever
