"""FUN_BLOCK (a sub-graph run in a forked interpreter as one step), FN and INTER_FN."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from amrita_sense.exceptions import IllegalState, InvalidOperand
from amrita_sense.instructions._support import NODE_SLOTS, require_name, require_part
from amrita_sense.instructions.alias import ALIAS
from amrita_sense.instructions.interrupt import IRET
from amrita_sense.instructions.ret2 import RET
from amrita_sense.instructions.workfl_ctrl import NOP
from amrita_sense.node.abc_base import AbstractCompose, AbstractComposeOriginal, is_rendered_compose
from amrita_sense.node.core import BaseNode
from amrita_sense.node.run_state import ForkingStep
from amrita_sense.node.self_compile import SelfCompileInstruction
from amrita_sense.node.wrapper import Node
from amrita_sense.runtime.workflow import UNSET, WorkflowInterpreter, check_fork_options

Middleware = Callable[[WorkflowInterpreter], Awaitable[Any]]


class FuncBlock(BaseNode, ForkingStep):
    """Runs the rendered graph `_comp_rendered` to completion in a child interpreter.

    Each interpreter that runs the block has its own child (a graph is shared
    by many interpreters, each with its own pools), forked lazily by
    `_pre_check` (once, unless one-time) and reset after each run; a one-time
    child is dropped instead. `_interpreter` is the child of the interpreter
    that ran the block last.
    """

    __sdb_dis__ = "FN"
    __sdb_cmt__ = "FuncBlock"
    __slots__ = (*NODE_SLOTS, "_children", "_comp_rendered", "_interpreter", "_io", "_mdw", "_onetime")

    def __init__(
        self, sub_comp: AbstractCompose, middleware: Middleware | None | object, object_io: Any, one_time_interp: bool
    ):
        if not is_rendered_compose(sub_comp) and not isinstance(sub_comp, SelfCompileInstruction):
            raise InvalidOperand(
                f"FUN_BLOCK(sub_comp) needs a rendered graph (call .render()), not {type(sub_comp).__name__}"
            )
        check_fork_options(middleware, object_io, "FUN_BLOCK")
        self._comp_rendered = sub_comp
        self._mdw = middleware
        self._io = object_io
        self._children: weakref.WeakKeyDictionary[WorkflowInterpreter, WorkflowInterpreter] = (
            weakref.WeakKeyDictionary()
        )
        self._interpreter: WorkflowInterpreter | None = None
        self._init(self.__call__, None, False, True)
        self._onetime = one_time_interp

    def _pre_check(self, pointer: WorkflowInterpreter) -> None:
        child = self._children.get(pointer)
        if child is None:
            child = self._children[pointer] = pointer.fork_interpreter(
                compose=self._comp_rendered, middleware=self._mdw, object_io=self._io
            )
        self._interpreter = child

    fork_kind = "fun_block"

    def sub_graphs(self) -> list[Any]:
        return [self._comp_rendered]

    def step_children(self, interp: Any) -> list[Any] | None:
        child = self._children.get(interp)
        return [child] if child is not None else None

    def children_misfit(self, count: int) -> str | None:
        return None if count == 1 else "a FUN_BLOCK has one sub-interpreter"

    def fork_children(self, parent: Any) -> list[Any]:
        child = parent.fork_interpreter(compose=self._comp_rendered, middleware=self._mdw, object_io=self._io)
        self._children[parent] = self._interpreter = child
        return [child]

    async def __call__(self, pc: WorkflowInterpreter) -> None:
        child = self._children.get(pc)
        if child is None:
            raise IllegalState("FUN_BLOCK ran without its sub-interpreter (was `_pre_check` skipped?)")
        try:
            await child.run()
        finally:
            with contextlib.suppress(IllegalState):
                await child.terminate_all_forks(eol=self._onetime)
            if self._onetime:
                self._children.pop(pc, None)
                if self._interpreter is child:
                    self._interpreter = None
            else:
                child.reset()


def FUN_BLOCK(
    sub_comp: AbstractCompose,
    middleware: Middleware | None | object = UNSET,
    object_io: Any = None,
    one_time_interp: bool = False,
) -> FuncBlock:
    """Run a separate rendered graph to completion, in a forked interpreter, as a single step.

    `middleware`: UNSET inherits the parent's, None means none. `object_io`
    defaults to the parent's stream. `one_time_interp` forks a fresh child for
    every execution.
    """
    return FuncBlock(sub_comp, middleware=middleware, object_io=object_io, one_time_interp=one_time_interp)


@Node(wrap_to_async=False, address_able=False)
def _fn_escape(pc: WorkflowInterpreter) -> None:
    """Skip a function body in ordinary flow: park on its last slot, the loop advances past it."""
    pc.rebase_ptr(pc._pointer.copy().offset(3))


def _routine(entrypoint: str, block: Any, closer: BaseNode) -> AbstractComposeOriginal:
    require_name(entrypoint, "FN(entrypoint)")
    require_part(block, "FN(block)")
    if isinstance(block, SelfCompileInstruction):
        block = block.extract()
    return _fn_escape >> ALIAS(NOP, entrypoint) >> block >> closer


def FN(entrypoint: str, block: BaseNode | AbstractComposeOriginal | SelfCompileInstruction) -> AbstractComposeOriginal:
    """A subroutine `[escape, ALIAS(NOP, entrypoint), block, RET()]`, entered with `CALL(entrypoint)`."""

    return _routine(entrypoint, block, RET())


def INTER_FN(
    entrypoint: str, block: BaseNode | AbstractComposeOriginal | SelfCompileInstruction
) -> AbstractComposeOriginal:
    """An interrupt service routine `[escape, ALIAS(NOP, entrypoint), block, IRET()]`, entered with `INT`."""

    return _routine(entrypoint, block, IRET())
