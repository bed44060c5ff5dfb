"""The tag strings of the built-in instructions."""

from __future__ import annotations

from enum import Enum


class BuiltinTags(str, Enum):
    """Fixed tags of the built-in instruction nodes.

    Names renamed in 1.0 stay as aliases of the new member
    (`BuiltinTags.RET_FAR is BuiltinTags.RET`).
    """

    PUSH_CONTEXT = "__PUSH_CONTEXT__"
    POP_CONTEXT = "__POP_CONTEXT__"
    INT = "__INT__"
    INTERRUPT_INTO = "__INT__"
    IRET = "__IRET__"
    INTERRUPT_RET = "__IRET__"
    RET = "__RET__"
    RET_FAR = "__RET__"
    PUSH_RET = "__PUSH_RET__"
    PUSH_STACK = "__PUSH_RET__"
    CALL = "__CALL__"
    PUSH_AND_GOTO = "__CALL__"
    ARCHIVED_SEGMENT = "__ARCHIVED_SEGMENT__"
    BATCH_CALLER = "__BATCH_CALLER__"
    BATCH_RUN = "__BATCH_RUN__"
    BREAK_LOOP = "__BREAK_LOOP__"
    CONTINUE = "__CONTINUE__"
    EVENT_TRIGGER_CALL = "EventTrigger::__call__"
    TRIGGER_CONSTRUCTOR = "TriggerInstruction::constructor"
    TRY_WORKER = "TryNode::worker"


AUTO_PREFIX = "NodeSuspend::"
"""Prefix of the tags generated for nodes created without an explicit tag."""

AUTO_TAGS: dict[str, str] = {
    "NOP": f"{AUTO_PREFIX}_no_operation",
    "RESET": f"{AUTO_PREFIX}_reset_operation",
    "SUSPEND": f"{AUTO_PREFIX}_suspend_operation",
    "JMP": f"{AUTO_PREFIX}_jump",
    "IF_CONDJUMP": f"{AUTO_PREFIX}_do",
    "ELSE_WORKER": f"{AUTO_PREFIX}_else_worker",
    "DO_NODE": f"{AUTO_PREFIX}_do_worker",
    "DO_WHILE": f"{AUTO_PREFIX}_do_while_worker",
    "WHILE_NODE": f"{AUTO_PREFIX}_while_worker",
    "WHILE_CHECKUP": f"{AUTO_PREFIX}_while_checkup",
}
"""Generated tags of the built-in nodes that have no explicit tag (shared, not unique)."""

__all__ = ["AUTO_PREFIX", "AUTO_TAGS", "BuiltinTags"]
