"""The native instruction set: opcode numbers and the operand layout, defined once.

The core (`_core_py.py`; C ints in the compiled core, `_sense_core.pxd`) and the
compile rules (each built-in instruction's `_native_op`, see `node/compile_rules.py`) import
from here, and nothing else: this module imports nothing from the package.

A native opcode is an exact re-implementation of its node's Python function that the
core runs on its fast path instead of calling the function. At render time each row of
the node table (`Program`) gets an opcode and one operand record: a tuple of
`N_FIELDS` fields, indexed by the names below. Every opcode uses the same record and
leaves the fields it does not use at their defaults (`native_operands`), so the core
reads a field by its name, never by an opcode-specific position.
"""

from __future__ import annotations

from typing import Any

# ----- opcodes: what the core does with a row ---------------------------------------------
OP_CALL = 0  # the generic path: call the node's function (no native opcode)
OP_NOP = 1  # the NOP singleton: do nothing
OP_JUMP = 2  # JMP and the jumps clauses compile to: go to THEN
OP_BRANCH = 3  # IF / ELIF condition: call FIRST; falsy: go to EXIT; else call SECOND, go to THEN
OP_ELSE = 4  # ELSE: call FIRST, go to THEN
OP_WHILE = 5  # WHILE: call FIRST; falsy: go to EXIT; else call SECOND, go to THEN (the check-up)
OP_CALLSUB = 6  # CALL / a bubble's entry: push the return row SECOND (or the node's address), go to THEN
OP_RET = 7  # RET: pop the return stack and go there
OP_TRY = 8  # Try: call the body FIRST with its handlers (EXTRA), go to THEN
OP_DO = 9  # DO: call FIRST, go to THEN (the condition); BreakLoop: go to EXIT
OP_DO_CHECK = 10  # a DO / NATIVE_DO condition: call FIRST; truthy: go to THEN (again); else EXIT
OP_NATIVE_IF = 11  # NATIVE_IF: like BRANCH; SECOND -1 when the body is a composition entered at THEN
OP_LOOP_HEAD = 12  # NATIVE_WHILE head: call FIRST; falsy: go to EXIT; else push SECOND, go to THEN
OP_LOOP_CONTROL = 13  # BREAK_LOOP / CONTINUE: pop the loop's entry, go to the slot in EXTRA beside it
OP_INVOKE = 14  # INVOKE: call the node at row FIRST

# ----- the operand record -------------------------------------------------------------------
# A jump target is a descriptor `(row, exact, address)`: `row` is where the address lands
# in the table, `exact` whether the address names that row itself (False: a segment whose
# first row it is, or nothing, row -1); the core goes to the row when exact, else to the
# address (the pointer view is materialised there).
FIRST = 0  # int: the row of the first node the opcode calls (condition, body, invoked node); -1: none
SECOND = 1  # int: a second row (the body after a condition, the loop head, CALL's return row); -1: none
EXIT = 2  # target descriptor of the false / exit path, or None
THEN = 3  # target descriptor of the true / continue path (JUMP, CALL: their target), or None
FIRST_RESUME = 4  # where the run resumes when the FIRST callee suspends: a slot of the segment (BRANCH
#                   and ELSE: an offset from the current slot), or None
SECOND_RESUME = 5  # where the run resumes when the SECOND callee suspends: a slot of the segment, or None
EXTRA = 6  # opcode-specific data: TRY `(body, else, finally, catches)`, LOOP_CONTROL `(slot, targets)`
N_FIELDS = 7

# ----- the dense rows -----------------------------------------------------------------------
# Beside the records, the core keeps per row ROW_WIDTH C ints: FIRST, SECOND, and the rows
# EXIT and THEN land on exactly (-1 when the target is not a single row: the core then goes
# through the descriptor). They are the record's first ROW_WIDTH fields, in that order (the
# cores unpack a dense row as `first, second, exit_row, then_row`).
ROW_WIDTH = 4
assert (FIRST, SECOND, EXIT, THEN) == tuple(range(ROW_WIDTH))


def native_operands(
    *,
    first: int = -1,
    second: int = -1,
    exit: tuple | None = None,
    then: tuple | None = None,
    first_resume: Any = None,
    second_resume: Any = None,
    extra: Any = None,
) -> tuple:
    """The operand record of one row, its fields given by name."""
    return (first, second, exit, then, first_resume, second_resume, extra)


def _exact_row(target: tuple | None) -> int:
    if target is None:
        return -1
    row, exact, _ = target
    return row if exact else -1


_NO_ROWS = (-1, -1, -1, -1)


def dense_row(operands: tuple | None) -> tuple[int, int, int, int]:
    """The ROW_WIDTH ints the core keeps for a row with this operand record."""
    if operands is None:
        return _NO_ROWS
    return operands[FIRST], operands[SECOND], _exact_row(operands[EXIT]), _exact_row(operands[THEN])


__all__ = [
    "EXIT",
    "EXTRA",
    "FIRST",
    "FIRST_RESUME",
    "N_FIELDS",
    "OP_BRANCH",
    "OP_CALL",
    "OP_CALLSUB",
    "OP_DO",
    "OP_DO_CHECK",
    "OP_ELSE",
    "OP_INVOKE",
    "OP_JUMP",
    "OP_LOOP_CONTROL",
    "OP_LOOP_HEAD",
    "OP_NATIVE_IF",
    "OP_NOP",
    "OP_RET",
    "OP_TRY",
    "OP_WHILE",
    "ROW_WIDTH",
    "SECOND",
    "SECOND_RESUME",
    "THEN",
    "dense_row",
    "native_operands",
]
