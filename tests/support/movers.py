"""Programs whose instruction slots hold nodes that move the pointer or the stacks.

The native opcodes must do exactly what the instruction nodes' own functions do
when a condition, body, handler, THEN, FINALLY or ELSE slot holds RET, PUSH_RET,
PUSH/POP_CONTEXT, INT/IRET, CALL, JMP, a user node calling `jump_*` or
`rebase_ptr`, or an async node calling `call_sub` (`MOVERS`). A program is plain,
JSON-able data (see `Builder`), built on one package:

- `Api()`: the `amrita_sense` the test session imported;
- `Api(sense.sub)`: a `dual.SenseCopy` (the compiled core and the pure build side by side);
- amrita-sense 1.1.3, when this file runs as a script under its interpreter:
  `python movers.py PROGRAMS.json RECORDS.json` (the reference differential).

`record(api, program, mode)` runs a program with `run()` ("run": the native fast
path), with `run_step_by()` ("steps": the nodes' own functions) or with `run()`
under a pass-through middleware ("generic") and returns a comparable record.
This file imports only what 1.1.3 has too.
"""

import asyncio
import importlib
import json
import sys
from collections.abc import Callable
from typing import Any

BUDGET = 80
"""Traced calls per run; the next one raises `OverBudget`, so a program that loops stops at the
same place on every path."""

RUNS = 3
"""Iterations of the loop that repeats the program's statements (places "fn" and "loop")."""

STACK_LIMIT = 40
"""Return-stack capacity: a program that recurses through `call_sub` (a Try part called relative to
a moved pointer can land on its own Try block) stops with OverflowError at the same depth everywhere,
long before Python's recursion limit, which each build reaches at another depth."""


class OverBudget(BaseException):
    """Raised by a traced node once the run has made `BUDGET` traced calls (not an `Exception`:
    no CATCH handler takes it, so it ends the run)."""


class Api:
    """The names a program is built from, taken from one package (`sub("node")` is its
    `amrita_sense.node`)."""

    def __init__(self, sub: Callable[[str], Any] | None = None):
        sub = sub or (lambda dotted: importlib.import_module(f"amrita_sense.{dotted}"))
        self.ins = sub("instructions")
        self.native = sub("instructions.native")
        node = sub("node")
        self.Node, self.NodeCompose = node.Node, node.NodeCompose
        self.WorkflowInterpreter = sub("runtime.workflow").WorkflowInterpreter


# ----- the program language ----------------------------------------------------------------
#
# A program is {"place": "fn" | "loop" | "top", "body": [statement, ...]}.
# A slot (one node): ["rec"] | ["cond", k] (truthy on its first k calls) | ["raise", exc] |
#   ["mover", name]; a WHILE / DO body may also be a Try block (["try", ...], below).
# A statement: a slot, or
#   ["if", [[cond, body], ...], else | None]           IF / ELIF / ELSE (slots)
#   ["while", cond, body] | ["do", body, cond]          WHILE / DO (slots)
#   ["nif", [[cond, body], ...], else | None]           NATIVE_IF; a body may be ["seq", [statement...]]
#   ["nwhile", cond, [statement...]] | ["ndo", [statement...], cond]
#   ["try", body, [[exc, handler], ...], then | None, finally | None]
#   ["invoke", slot]                                    INVOKE of an archived node
#   ["break"] | ["continue"]                            BREAK_LOOP / CONTINUE (directly in a native loop)
# Place "fn" runs the body inside FN "f", CALLed from a NATIVE_WHILE loop (RUNS iterations);
# "loop" runs it inside that loop's body; "top" runs it once at top level. Around it: a
# PUSH_CONTEXT("L") first (so IRET has a context to restore), the label "L" after the body,
# FN "g", INTER_FN "isr" and the archived node "s" (targets of CALL, INT and call_sub).

EXCEPTIONS = {"ValueError": ValueError, "KeyError": KeyError, "Exception": Exception}

MOVERS = (
    "ret",
    "push_ret",
    "push_ctx",
    "pop_ctx",
    "int",
    "iret",
    "call",
    "jmp",
    "jump_to",
    "jump_offset",
    "rebase",
    "call_sub",
)
INSTRUCTION_MOVERS = {
    "ret": ("RET",),
    "push_ret": ("PUSH_RET", "L"),
    "push_ctx": ("PUSH_CONTEXT", "L"),
    "pop_ctx": ("POP_CONTEXT",),
    "int": ("INT", "isr"),
    "iret": ("IRET",),
    "call": ("CALL", "g"),
    "jmp": ("JMP", "L"),
}
"""The movers that are built-in instructions: (name in `amrita_sense.instructions`, operands)."""
JUMPING_MOVERS = ("call", "int", "jmp", "jump_to", "jump_offset", "ret", "push_ret", "iret", "rebase")
"""The movers that leave the pointer somewhere else (all but the stack-only ones and call_sub)."""

R, X = ["rec"], ["raise", "ValueError"]
C0, C1, C2 = ["cond", 0], ["cond", 1], ["cond", 2]

SLOTS: dict[str, Callable[[list], list]] = {
    "IF.cond": lambda m: ["if", [[m, R]], R],
    "IF.body": lambda m: ["if", [[C1, m]], R],
    "ELIF.cond": lambda m: ["if", [[C0, R], [m, R]], R],
    "ELIF.body": lambda m: ["if", [[C0, R], [C1, m]], R],
    "ELSE": lambda m: ["if", [[C0, R]], m],
    "WHILE.cond": lambda m: ["while", m, R],
    "WHILE.body": lambda m: ["while", C2, m],
    "DO.body": lambda m: ["do", m, C1],
    "DO.cond": lambda m: ["do", R, m],
    "NATIVE_IF.cond": lambda m: ["nif", [[m, R]], R],
    "NATIVE_IF.body": lambda m: ["nif", [[C1, m]], R],
    "NATIVE_ELIF.cond": lambda m: ["nif", [[C0, R], [m, R]], ["seq", [R, R]]],
    "NATIVE_ELIF.body": lambda m: ["nif", [[C0, R], [C1, m]], ["seq", [R, R]]],
    "NATIVE_WHILE.cond": lambda m: ["nwhile", m, [R]],
    "NATIVE_DO.cond": lambda m: ["ndo", [R], m],
    "Try.body": lambda m: ["try", m, [["ValueError", R]], None, R],
    "Try.body (CATCH only)": lambda m: ["try", m, [["ValueError", R]], None, None],
    "Try.body (CATCH Exception)": lambda m: ["try", m, [["Exception", R]], None, None],
    "Try.handler": lambda m: ["try", X, [["ValueError", m]], None, R],
    "Try.handler (CATCH only)": lambda m: ["try", X, [["ValueError", m]], None, None],
    "Try.THEN": lambda m: ["try", R, [["KeyError", R]], m, R],
    "Try.FINALLY": lambda m: ["try", R, [["KeyError", R]], None, m],
    "WHILE.body Try.body": lambda m: ["while", C2, ["try", m, [["ValueError", R]], None, None]],
    "WHILE.body Try.handler": lambda m: ["while", C2, ["try", X, [["ValueError", m]], None, None]],
    "WHILE.body Try.FINALLY": lambda m: ["while", C2, ["try", X, [["ValueError", R]], None, m]],
    "DO.body Try.body": lambda m: ["do", ["try", m, [["KeyError", R], ["ValueError", R]], None, None], C1],
    "INVOKE": lambda m: ["invoke", m],
}
PLACES = ("fn", "loop", "top")


def slot_program(place: str, slot: str, mover: str) -> dict:
    """The program with `mover` in `slot` of one instruction, at `place`."""
    return {"place": place, "body": [SLOTS[slot](["mover", mover])]}


def every_slot_program() -> dict[str, dict]:
    """Every (place, slot, mover) combination, by name."""
    return {
        f"{place}|{slot}|{mover}": slot_program(place, slot, mover)
        for place in PLACES
        for slot in SLOTS
        for mover in MOVERS
    }


def differs_from_113_by_design(program: dict) -> bool:
    """True when a documented difference from 1.1.3 applies (README, compatibility): an INVOKE
    target or a Try part that moves the pointer, or a NATIVE_IF compose body followed by another
    branch."""
    return any(_documented_difference(part) for part in _lists(program["body"]))


def _moves(slot: list | None) -> bool:
    return slot is not None and slot[0] == "mover" and slot[1] in JUMPING_MOVERS


def _documented_difference(stmt: list) -> bool:
    if stmt and stmt[0] == "invoke":
        return _moves(stmt[1])
    if stmt and stmt[0] == "try":
        _, body, catches, then, final = stmt
        return any(_moves(part) for part in (body, then, final, *(handler for _, handler in catches)))
    if stmt and stmt[0] == "nif":
        branches, otherwise = stmt[1], stmt[2]
        return any(
            body[0] == "seq" and (i + 1 < len(branches) or otherwise is not None)
            for i, (_, body) in enumerate(branches)
        )
    return False


def _lists(value: Any):
    """`value` and every list nested in it."""
    if isinstance(value, list):
        yield value
        for item in value:
            yield from _lists(item)


# ----- random programs -----------------------------------------------------------------------


def random_program(choose: Callable[[list], Any], for_reference: bool = False) -> dict:
    """A random program; `choose(options)` picks one option (`random.Random.choice`, or a
    hypothesis `data.draw(sampled_from(...))`).

    `for_reference` leaves out what differs from 1.1.3 by design: besides
    `differs_from_113_by_design`, a Try part or INVOKE target that moves the pointer (the parts
    after it are called relative to where it went, and can land on a Try block, which then
    runs as a sub-call: README, compatibility, Try).
    """
    pick = _Picker(choose, for_reference)
    place = choose(list(PLACES))
    return {"place": place, "body": pick.block(2, in_loop=place == "loop")}


class _Picker:
    def __init__(self, choose: Callable[[list], Any], for_reference: bool):
        self.choose = choose
        self.for_reference = for_reference
        self.contained = tuple(m for m in MOVERS if m not in JUMPING_MOVERS) if for_reference else MOVERS
        """The movers allowed in Try parts and INVOKE targets."""

    def slot(self, movers: tuple = MOVERS, raising: int = 1) -> list:
        """A slot; `raising` weighs a failing node against seven others."""
        kind = self.choose(["rec", "cond", "cond", "mover", "mover", "mover", "mover", *["raise"] * raising])
        if kind == "rec":
            return ["rec"]
        if kind == "cond":
            return ["cond", self.choose([0, 1, 2])]
        if kind == "raise":
            return ["raise", self.choose(list(EXCEPTIONS))]
        return ["mover", self.choose(list(movers))]

    def loop_condition(self) -> list:
        """A slot for a loop condition: not POP_CONTEXT, which is truthy and not traced (beside a
        PUSH_CONTEXT body the loop would never reach the budget)."""
        return self.slot(tuple(m for m in MOVERS if m != "pop_ctx"))

    def loop_body(self) -> list:
        """A WHILE / DO body: a slot, or now and then a Try block (which runs as the loop's sub-call)."""
        return self.try_block() if self.choose([False, False, False, True]) else self.slot()

    def block(self, depth: int, in_loop: bool = False) -> list:
        """Statements; directly in a native loop's body (`in_loop`) also BREAK_LOOP and CONTINUE."""
        return [self.statement(depth, in_loop) for _ in range(self.choose([1, 1, 2, 3]))]

    def body(self, depth: int, composable: bool) -> list:
        if depth > 0 and composable and self.choose([False, True]):
            return ["seq", self.block(depth - 1)]
        return self.slot()

    def statement(self, depth: int, in_loop: bool = False) -> list:
        kinds = ["slot", "invoke"] + (["if", "while", "do", "nif", "nwhile", "ndo", "try"] if depth > 0 else [])
        kind = self.choose(kinds + (["break", "continue"] if in_loop else []))
        if kind in ("break", "continue"):
            return [kind]
        if kind == "slot":
            return self.slot()
        if kind == "invoke":
            return ["invoke", self.slot(self.contained)]
        if kind == "if":
            branches = [[self.slot(), self.slot()] for _ in range(self.choose([1, 2]))]
            return ["if", branches, self.optional(self.slot)]
        if kind == "while":
            return ["while", self.loop_condition(), self.loop_body()]
        if kind == "do":
            return ["do", self.loop_body(), self.loop_condition()]
        if kind == "nif":
            return self.native_if(depth)
        if kind == "nwhile":
            return ["nwhile", self.loop_condition(), self.block(depth - 1, in_loop=True)]
        if kind == "ndo":
            return ["ndo", self.block(depth - 1, in_loop=True), self.loop_condition()]
        return self.try_block()

    def optional(self, make: Callable[[], list]) -> list | None:
        return make() if self.choose([False, True]) else None

    def try_block(self) -> list:
        part = lambda: self.slot(self.contained)  # noqa: E731
        body = self.slot(self.contained, raising=7)
        catches = [[self.choose(list(EXCEPTIONS)), part()] for _ in range(self.choose([0, 1, 2]))]
        then = self.optional(part)
        final = self.optional(part) if catches else part()
        return ["try", body, catches, then, final]

    def native_if(self, depth: int) -> list:
        count = self.choose([1, 2])
        otherwise = self.choose([None, "slot", "seq"])
        branches = []
        for index in range(count):
            last = index + 1 == count and otherwise is None
            branches.append([self.slot(), self.body(depth, last or not self.for_reference)])
        if otherwise == "slot":
            return ["nif", branches, self.slot()]
        return ["nif", branches, None if otherwise is None else ["seq", self.block(depth - 1)]]


# ----- building ------------------------------------------------------------------------------


class Builder:
    """Builds one program on one package; every traced node records (name, pointer, return-stack
    depth, context-stack depth) in `trace`, names given in build order."""

    def __init__(self, api: Api):
        self.api = api
        self.trace: list = []
        self.count = 0
        self.archived: list = []

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def _traced(self, name: str, result: Callable[[Any], Any]) -> Any:
        trace, interpreter = self.trace, self.api.WorkflowInterpreter

        def body(pc: interpreter) -> Any:
            trace.append([name, list(pc._pointer), len(pc._ret_addr_stack), len(pc._context_stack)])
            if len(trace) > BUDGET:
                raise OverBudget(name)
            return result(pc)

        body.__name__ = f"node_{name}"
        return self.api.Node(wrap_to_async=False)(body)

    def rec(self, name: str | None = None) -> Any:
        name = name or self.name("n")
        return self._traced(name, lambda pc: name)

    def cond(self, limit: int) -> Any:
        calls = [0]

        def answer(pc: Any) -> bool:
            calls[0] += 1
            return calls[0] <= limit

        return self._traced(self.name("c"), answer)

    def raising(self, exc: str) -> Any:
        name = self.name("x")

        def fail(pc: Any) -> None:
            raise EXCEPTIONS[exc](name)

        return self._traced(name, fail)

    def slot(self, spec: list) -> Any:
        kind = spec[0]
        if kind == "rec":
            return self.rec()
        if kind == "cond":
            return self.cond(spec[1])
        if kind == "raise":
            return self.raising(spec[1])
        if kind == "try":
            return self._stmt_try(*spec[1:])
        if spec[1] in INSTRUCTION_MOVERS:
            name, *operands = INSTRUCTION_MOVERS[spec[1]]
            return getattr(self.api.ins, name)(*operands)
        return getattr(self, f"_mover_{spec[1]}")()

    # the movers that are user nodes (the others: `INSTRUCTION_MOVERS`)

    def _mover_jump_to(self) -> Any:
        return self._traced(self.name("jt"), lambda pc: pc.jump_to(_label(pc, "L")))

    def _mover_jump_offset(self) -> Any:
        return self._traced(self.name("jo"), lambda pc: (pc.jump_offset(1), True)[1])

    def _mover_rebase(self) -> Any:
        return self._traced(self.name("rb"), lambda pc: (pc.rebase_ptr(_label(pc, "L")), True)[1])

    def _mover_call_sub(self) -> Any:
        name, trace, interpreter = self.name("cs"), self.trace, self.api.WorkflowInterpreter

        async def call_sub(pc: interpreter) -> Any:
            trace.append([name, list(pc._pointer), len(pc._ret_addr_stack), len(pc._context_stack)])
            if len(trace) > BUDGET:
                raise OverBudget(name)
            return await pc.call_sub(_label(pc, "s"))

        call_sub.__name__ = f"node_{name}"
        return self.api.Node()(call_sub)

    # statements

    def statement(self, spec: list) -> Any:
        handler = getattr(self, f"_stmt_{spec[0]}", None)
        return self.slot(spec) if handler is None else handler(*spec[1:])

    def block(self, specs: list) -> Any:
        return self.api.NodeCompose(*(self.statement(s) for s in specs))

    def body(self, spec: list) -> Any:
        return self.block(spec[1]) if spec[0] == "seq" else self.slot(spec)

    def _chain(self, make: Callable, branches: list, otherwise: list | None, body: Callable) -> Any:
        """`make(cond, body).ELIF(...)...ELSE(...)`, each body built by `body`."""
        (cond, first), *rest = branches
        clause = make(self.slot(cond), body(first))
        for cond, then in rest:
            clause = clause.ELIF(self.slot(cond), body(then))
        return clause if otherwise is None else clause.ELSE(body(otherwise))

    def _stmt_if(self, branches: list, otherwise: list | None) -> Any:
        return self._chain(self.api.ins.IF, branches, otherwise, self.slot)

    def _stmt_while(self, cond: list, body: list) -> Any:
        return self.api.ins.WHILE(self.slot(cond)).ACTION(self.slot(body))

    def _stmt_do(self, body: list, cond: list) -> Any:
        return self.api.ins.DO(self.slot(body)).WHILE(self.slot(cond))

    def _stmt_nif(self, branches: list, otherwise: list | None) -> Any:
        return self._chain(self.api.native.NATIVE_IF, branches, otherwise, self.body)

    def _stmt_nwhile(self, cond: list, body: list) -> Any:
        return self.api.native.NATIVE_WHILE(self.slot(cond)).ACTION(self.block(body))

    def _stmt_ndo(self, body: list, cond: list) -> Any:
        return self.api.native.NATIVE_DO(self.block(body)).WHILE(self.slot(cond))

    def _stmt_try(self, body: list, catches: list, then: list | None, final: list | None) -> Any:
        clause = self.api.ins.Try(self.slot(body))
        for exc, handler in catches:
            clause = clause.CATCH(EXCEPTIONS[exc], self.slot(handler))
        if then is not None:
            clause = clause.THEN(self.slot(then))
        return clause if final is None else clause.FINALLY(self.slot(final))

    def _stmt_break(self) -> Any:
        return self.api.native.BREAK_LOOP()

    def _stmt_continue(self) -> Any:
        return self.api.native.CONTINUE()

    def _stmt_invoke(self, target: list) -> Any:
        alias = f"m{len(self.archived)}"
        self.archived.append(self.api.ins.ALIAS(self.slot(target), alias))
        return self.api.ins.INVOKE(alias)

    # the program

    def program(self, program: dict) -> Any:
        ins, compose = self.api.ins, self.api.NodeCompose
        place = program["place"]
        head = [ins.PUSH_CONTEXT("L"), self.rec()]
        statements = [self.statement(s) for s in program["body"]]
        routines = []
        if place == "top":
            main = [*head, *statements, self.rec()]
        else:
            inner = [ins.CALL("f")] if place == "fn" else statements
            loop = self.api.native.NATIVE_WHILE(self.cond(RUNS)).ACTION(compose(self.rec(), *inner, self.rec()))
            main = [*head, loop]
            if place == "fn":
                routines.append(ins.FN("f", compose(self.rec(), *statements, self.rec())))
        main += [ins.ALIAS(self.rec("L"), "L"), self.rec(), ins.JMP("done")]
        routines += [
            ins.FN("g", self.rec()),
            ins.INTER_FN("isr", self.rec()),
            ins.ARCHIVED_NODES(ins.ALIAS(self.rec(), "s"), *self.archived),
            ins.ALIAS(self.rec("done"), "done"),
        ]
        return compose(*main, *routines).render()


def _label(pc: Any, alias: str) -> list:
    return list(pc.get_graph().alias2vector_map[alias])


# ----- running -------------------------------------------------------------------------------


async def _pass_through(pc: Any) -> Any:
    return await pc._call()


RUN_TIMEOUT = 10.0
"""Seconds; only a program that loops without reaching a traced node needs it (a loop whose
condition and body are pointer movers can: `record` reports such a run as looping, in every mode)."""


STEP_CAP = 50 * BUDGET
"""Steps per run under `run_step_by()`, whose loop never yields to the event loop (so `RUN_TIMEOUT`
cannot stop a program that loops without reaching a traced node)."""


LOOPING = (["timeout"], ["OverBudget", "steps"])
"""How `_run_once` reports a run stopped from outside: `RUN_TIMEOUT`, or `STEP_CAP` under `run_step_by()`."""


async def _drain(interp: Any, mode: str) -> None:
    if mode == "steps":
        steps = 0
        async for _ in interp.run_step_by():
            steps += 1
            if steps > STEP_CAP:
                raise OverBudget("steps")
    else:
        await interp.run()


async def _run_once(interp: Any, mode: str) -> list | None:
    """One run in `mode`; the exception that ended it as `[type name, message]`, or None."""
    try:
        await asyncio.wait_for(_drain(interp, mode), RUN_TIMEOUT)
    except asyncio.TimeoutError:
        return ["timeout"]
    except (KeyboardInterrupt, SystemExit, asyncio.CancelledError):
        raise
    except BaseException as exc:  # recorded and compared, not hidden
        return [type(exc).__name__, str(exc)]
    return None


async def record(api: Api, program: dict, mode: str) -> list:
    """What running `program` in `mode` did: per run, the trace since the previous run and the
    error, pointer, stack depths and flags afterwards. Place "top" runs twice (the second run
    finds the injection plans made by the first, so the native opcodes take the fast path),
    unless the first run failed."""
    builder = Builder(api)
    try:
        graph = builder.program(program)
    except Exception as exc:
        return [["build", type(exc).__name__, str(exc)]]
    interp = api.WorkflowInterpreter(graph, middleware=_pass_through if mode == "generic" else None)
    interp._ret_addr_stack.resize(STACK_LIMIT)
    runs = []
    for _ in range(2 if program["place"] == "top" else 1):
        start = len(builder.trace)
        error = await _run_once(interp, mode)
        if error in LOOPING:
            # a loop that reaches no traced node: each mode is stopped from outside, at a place of
            # its own (a step count, a timeout), so the pointer and the stacks there say nothing
            runs.append({"trace": builder.trace[start:], "error": ["loops without a traced node"]})
            break
        runs.append(
            {
                "trace": builder.trace[start:],
                "error": error,
                "pointer": list(interp._pointer),
                "stack": len(interp._ret_addr_stack),
                "contexts": len(interp._context_stack),
                "flags": int(interp._flags),
            }
        )
        if error is not None:
            break
    return runs


async def record_all(api: Api, programs: dict[str, dict], mode: str) -> dict[str, list]:
    return {key: await record(api, program, mode) for key, program in programs.items()}


def _main(programs_path: str, records_path: str) -> None:
    """Run every program of a JSON file with `run()` on the `amrita_sense` this interpreter
    imports (1.1.3 for the reference differential) and write their records as JSON."""
    import logging

    logging.disable(logging.CRITICAL)
    log = importlib.import_module("amrita_sense.logging").logger
    if hasattr(log, "remove"):  # 1.1.3's own loguru logger writes every panic to stderr
        log.remove()
    with open(programs_path) as fh:
        programs = json.load(fh)
    records = asyncio.run(record_all(Api(), programs, "run"))
    with open(records_path, "w") as fh:
        json.dump(records, fh)


if __name__ == "__main__":
    _main(*sys.argv[1:3])
