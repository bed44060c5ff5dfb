"""Native (jump-based) control flow: bodies are entered by jumps, not by `call_sub`."""

from .break_loop import BREAK_LOOP
from .continue_loop import CONTINUE
from .do_native import NATIVE_DO
from .if_native import NATIVE_IF
from .while_native import NATIVE_WHILE

__all__ = ("BREAK_LOOP", "CONTINUE", "NATIVE_DO", "NATIVE_IF", "NATIVE_WHILE")
