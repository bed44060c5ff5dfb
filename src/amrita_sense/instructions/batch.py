"""BATCH_RUN: several graphs or nodes run concurrently in forked interpreters, as one step."""

from __future__ import annotations

import asyncio
import sys
import weakref
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from amrita_sense.instructions._support import NODE_SLOTS, require_part
from amrita_sense.instructions.enum import BuiltinTags
from amrita_sense.node.core import BaseNode, NodeCompose
from amrita_sense.node.core import Node as NodeType
from amrita_sense.node.run_state import ForkingStep
from amrita_sense.node.self_compile import SelfCompileInstruction
from amrita_sense.node.wrapper import Node
from amrita_sense.runtime.workflow import UNSET, WorkflowInterpreter, check_fork_options

if sys.version_info < (3, 11):  # pragma: no cover - the backport ships for 3.10
    from exceptiongroup import BaseExceptionGroup

Middleware = Callable[[WorkflowInterpreter], Awaitable[Any]]


def _batch_call(nodes: Iterable[BaseNode], fail_fast: bool = True) -> NodeType[None]:
    """One node that runs `nodes` concurrently on its interpreter (no DI cache)."""
    members = list(nodes)

    @Node(BuiltinTags.BATCH_CALLER)
    async def caller(intp: WorkflowInterpreter) -> None:
        calls = [intp._call(lambda _, node=node: node, no_cache=True) for node in members]
        results = await asyncio.gather(*calls, return_exceptions=not fail_fast)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            raise BaseExceptionGroup("Detected exceptions while batch run nodes.", failures)

    return caller


class BatchRun(BaseNode, ForkingStep):
    """Runs one forked interpreter per payload graph concurrently; plain nodes share one graph.

    Graphs are rendered at `_post_compile`; children are forked by `_pre_check`
    for the interpreter about to run the node (each interpreter of a shared
    graph gets its own) and terminated (end of life) after every execution.
    """

    __slots__ = (*NODE_SLOTS, "_comp_rendered", "_fail_fast", "_forked", "_graphs", "_io", "_mdw", "_origin")

    def __init__(
        self,
        *payload: Any,
        middleware: Middleware | None | object = UNSET,
        object_io: Any = None,
        fail_fast: bool = False,
    ):
        for item in payload:
            require_part(item, "BATCH_RUN(*nodes)")
        check_fork_options(middleware, object_io, "BATCH_RUN")
        self._fail_fast = fail_fast
        self._origin = payload
        self._io = object_io
        self._mdw = middleware
        self._init(self.__call__, BuiltinTags.BATCH_RUN, False, True)
        self._forked: weakref.WeakKeyDictionary[WorkflowInterpreter, list[WorkflowInterpreter]] = (
            weakref.WeakKeyDictionary()
        )
        self.__sdb_dis__ = f"BATCH {len(payload)}"

    def _post_compile(self, compose: Any) -> None:
        if not hasattr(self, "_origin"):
            raise RuntimeError(
                "BATCH_RUN node has already been compiled; a compose-bound node can only be compiled once"
            )
        nodes = []
        self._graphs = []
        for item in self._origin:
            if isinstance(item, BaseNode):
                nodes.append(item)
            elif isinstance(item, SelfCompileInstruction):
                self._graphs.append(item.extract().render())
            else:
                self._graphs.append(item.render())
        if nodes:
            self._graphs.append(NodeCompose(_batch_call(nodes, fail_fast=self._fail_fast)).render())
        del self._origin

    fork_kind = "batch"

    def sub_graphs(self) -> list[Any]:
        return list(getattr(self, "_graphs", ()))  # none before `_post_compile`

    def step_children(self, interp: Any) -> list[Any] | None:
        children = self._forked.get(interp)
        return list(children) if children else None

    def children_misfit(self, count: int) -> str | None:
        graphs = len(self._graphs)
        return None if count == graphs else f"the BATCH_RUN has {graphs} graphs, the snapshot {count} children"

    def fork_children(self, parent: Any) -> list[Any]:
        io = self._io or parent.object_io
        children = [parent.fork_interpreter(graph, self._mdw, io) for graph in self._graphs]
        self._forked[parent] = children
        return children

    def _pre_check(self, pointer: WorkflowInterpreter) -> None:
        if pointer in self._forked:
            return
        io = self._io or pointer.object_io
        self._forked[pointer] = [pointer.fork_interpreter(graph, self._mdw, io) for graph in self._graphs]

    async def __call__(self, intp: WorkflowInterpreter) -> Any:
        children = self._forked.get(intp, [])  # kept while the step runs: a snapshot reads them
        try:
            results = await asyncio.gather(*(c.run() for c in children), return_exceptions=not self._fail_fast)
            failures = [r for r in results if r is not None]
            if failures:
                raise BaseExceptionGroup("Some exceptions were detected when running nodes", failures)
        finally:
            if self._forked.get(intp) is children:
                del self._forked[intp]
            await _terminate_all(children)


async def _terminate_all(children: list[WorkflowInterpreter]) -> None:
    outcomes = await asyncio.gather(*(c.terminate(True) for c in children), return_exceptions=True)
    failures = [r for r in outcomes if r is not None]
    if failures:
        raise BaseExceptionGroup("Some exceptions were detected when running cleanup tasks", failures)


def BATCH_RUN(
    *nodes: Any,
    sos_io: Any = None,
    middleware: Middleware | None | object = UNSET,
    fail_fast: bool = True,
) -> BatchRun:
    """Run nodes, composes or instructions concurrently in forked interpreters, as a single step.

    With `fail_fast=False` every failure is collected into one `BaseExceptionGroup`.
    """
    return BatchRun(*nodes, object_io=sos_io, middleware=middleware, fail_fast=fail_fast)
