"""TRIGGER_EVENT: build an event from the interpreter's DI pools and dispatch it."""

from __future__ import annotations

from typing import Any

from amrita_sense.exceptions import InterruptKeepContext, InvalidOperand
from amrita_sense.hook.event import BaseEvent, ConstructableEvent
from amrita_sense.hook.matcher import MatcherFactory
from amrita_sense.instructions._support import NODE_SLOTS, resume_offset
from amrita_sense.instructions.enum import BuiltinTags
from amrita_sense.instructions.workfl_ctrl import NOP
from amrita_sense.node.abc_base import AbstractComposeOriginal
from amrita_sense.node.core import BaseNode, Node
from amrita_sense.node.self_compile import SelfCompileInstruction
from amrita_sense.runtime.workflow import WorkflowInterpreter


class EventTrigger(BaseNode):
    """Call the constructor at `+c`, dispatch the event through `MatcherFactory`, move `+e`."""

    __sdb_dis__ = "EVENT"
    __sdb_cmt__ = "EventTrigger"
    __slots__ = (*NODE_SLOTS, "_c_offset", "_e_offset")

    def __init__(self, c_offset: int, e_offset: int):
        self._c_offset = c_offset
        self._e_offset = e_offset
        self._init(self.__call__, BuiltinTags.EVENT_TRIGGER_CALL, False, False)

    async def __call__(self, pc: WorkflowInterpreter) -> None:
        try:
            event = await pc.call_offset(self._c_offset)
        except InterruptKeepContext:
            resume_offset(pc, self._e_offset)
            raise
        if not isinstance(event, BaseEvent):
            raise TypeError(f"Expected an event object, got {type(event)}")
        await MatcherFactory.trigger_event(event, *pc._ava_args, exception_ignored=pc._exc_ignored, **pc._ava_kwargs)
        pc.jump_offset(self._e_offset)


class TriggerInstruction(SelfCompileInstruction):
    """`[EventTrigger(+1, +2), Node(event.constructor), NOP]`."""

    def __init__(self, event: type[ConstructableEvent]):
        if not isinstance(event, type) or not callable(getattr(event, "constructor", None)):
            raise InvalidOperand(f"TRIGGER_EVENT(event) needs an event class with a constructor, not {event!r}")
        self._constructor: Node[Any] = Node(event.constructor, BuiltinTags.TRIGGER_CONSTRUCTOR, False, False)

    def extract(self) -> AbstractComposeOriginal:
        return EventTrigger(1, 2) >> self._constructor >> NOP


def TRIGGER_EVENT(event: type[ConstructableEvent]) -> TriggerInstruction:
    """Build `event` with its `constructor` (arguments injected from the pools) and dispatch it."""
    return TriggerInstruction(event)
