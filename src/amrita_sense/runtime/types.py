"""Runtime state objects shared by the interpreter and its instructions."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntFlag
from typing import Any

from amrita_sense.types import PointerVector, Stack


class Flags(IntFlag):
    """The interpreter's status register."""

    NONE = 0
    IF = 1 << 0
    """Inside an interrupt handler; a nested INT is refused."""
    HLT = 1 << 1
    """Parked on the node that suspended; the next run steps past it."""
    JMP = 1 << 2
    """A jump already moved the pointer this cycle; the loop must not advance."""


FLAG_IF = int(Flags.IF)
FLAG_HLT = int(Flags.HLT)
FLAG_JMP = int(Flags.JMP)


class RunMark:
    """Names one run's claim on its interpreter (`_start_run`): whoever made it ends that run."""

    __slots__ = ()


@dataclass
class InterpreterContext:
    """A snapshot of interpreter state (PUSH_CONTEXT, INT, IRET)."""

    ptr: PointerVector
    exception_ignored: tuple
    s_args: tuple | None = None
    s_kwargs: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    stack: Stack | None = None
    exception: Exception | None = None
    flags: Flags = Flags.NONE
