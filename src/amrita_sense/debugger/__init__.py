"""SenseDBG: breakpoints, stepping, inspection and disassembly for workflow interpreters.

`from amrita_sense.debugger import *` brings in every command. Each takes the
interpreter as its first argument. The sync commands (`step`, `cont`, ...)
are meant for the REPL; their `*_async` counterparts run inside an event loop.

The debugger attaches through the interpreter's middleware, and only to an
interpreter that has breakpoints; other interpreters run untouched.
"""

import os
import warnings

from amrita_sense.debugger.breakpoint import (
    Breakpoint,
    BreakpointHit,
    break_at_addr,
    break_at_tag,
    cleanup,
    clear_break_addr,
    clear_break_tag,
    list_breaks,
)
from amrita_sense.debugger.code_disp import dis, disassemble
from amrita_sense.debugger.inspect import backtrace, inspect, list_nodes, list_sub_intp, where
from amrita_sense.debugger.step import (
    cont,
    cont_async,
    step,
    step_async,
    step_out,
    step_out_async,
    step_over,
    step_over_async,
)

if os.getenv("REMOVE_DEBUGGER", "false").lower() in ("true", "1", "t"):
    warnings.warn(
        "REMOVE_DEBUGGER is no longer supported; the debugger is always available.",
        DeprecationWarning,
        stacklevel=2,
    )

__all__ = [
    "Breakpoint",
    "BreakpointHit",
    "backtrace",
    "break_at_addr",
    "break_at_tag",
    "cleanup",
    "clear_break_addr",
    "clear_break_tag",
    "cont",
    "cont_async",
    "dis",
    "disassemble",
    "inspect",
    "list_breaks",
    "list_nodes",
    "list_sub_intp",
    "step",
    "step_async",
    "step_out",
    "step_out_async",
    "step_over",
    "step_over_async",
    "where",
]
