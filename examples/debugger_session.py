"""A debugger session over a small workflow that calls a subroutine twice.

    python examples/debugger_session.py             # interactive console
    python examples/debugger_session.py < cmds.txt  # commands read from a pipe
    python examples/debugger_session.py --demo      # run the scripted session below

The console starts with `it` (the interpreter), `state` and `trace` (what the
nodes did), every command of `amrita_sense.debugger` and `draw` (the rows around
the pointer as Mermaid text, `amrita_sense.pictures.draw`) in scope, e.g.::

    (sdb) break_at_addr(it, "square")
    (sdb) cont(it)
    (sdb) where(it)
    (sdb) step(it)
    (sdb) backtrace(it)
    (sdb) draw(it, 3)

When the commands come from a pipe, each one is echoed after the prompt, so
the output reads as a transcript.
"""

from __future__ import annotations

import code
import sys

import amrita_sense.debugger as sdb
from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.instructions import CALL, FN
from amrita_sense.pictures import draw

PROMPT = "(sdb) "

DEMO = """\
list_nodes(it)
break_at_addr(it, "square")
cont(it)
where(it)
step(it)
print("pointer:", it._pointer.base_addr)
print("return stack:", [p.base_addr for p in it._ret_addr_stack.stack])
backtrace(it)
step_out(it)
clear_break_addr(it, "square")
cont(it)
print("trace:", trace)
"""


def build_workflow() -> tuple[WorkflowInterpreter, dict, list]:
    """`load`, a routine `square` (square, report) called twice, then `finish`."""
    state = {"value": 0}
    trace: list[str] = []

    @Node(wrap_to_async=False)
    def load():
        state["value"] = 3
        trace.append("load 3")

    @Node(wrap_to_async=False)
    def square():
        state["value"] *= state["value"]

    @Node(wrap_to_async=False)
    def report():
        trace.append(f"value {state['value']}")

    @Node(wrap_to_async=False)
    def finish():
        trace.append("done")

    routine = NodeCompose(square, report)
    graph = (load >> FN("square", routine) >> CALL("square") >> CALL("square") >> finish).render()
    return WorkflowInterpreter(graph), state, trace


class DebugConsole(code.InteractiveConsole):
    """An interactive console that echoes commands read from a pipe."""

    def raw_input(self, prompt: str = "") -> str:
        if sys.stdin.isatty():
            return input(prompt)
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        line = line.rstrip("\n")
        print(f"{PROMPT}{line}")
        return line


def make_console() -> DebugConsole:
    interp, state, trace = build_workflow()
    namespace = {name: getattr(sdb, name) for name in sdb.__all__}
    namespace.update(it=interp, state=state, trace=trace, draw=draw)
    return DebugConsole(namespace)


def run_demo(console: DebugConsole) -> None:
    for line in DEMO.splitlines():
        print(f"{PROMPT}{line}")
        console.push(line)


def main(argv: list[str]) -> None:
    console = make_console()
    if "--demo" in argv:
        run_demo(console)
        return
    sys.ps1 = sys.ps2 = PROMPT if sys.stdin.isatty() else ""
    console.interact(banner="SenseDBG console: `it` is the interpreter; try break_at_addr(it, 'square')", exitmsg="")


if __name__ == "__main__":
    main(sys.argv[1:])
