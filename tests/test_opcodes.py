"""The native instruction set as the node table compiles it: every built-in instruction that has
an opcode gets it (its own `_native_op`), every record has the one named layout of `_opcodes`, and
a record's jump targets are descriptors. That native opcodes behave exactly like the nodes'
Python functions is `test_native_vs_generic.py`'s job."""

from __future__ import annotations

import copy

from amrita_sense import Node, NodeCompose, _opcodes
from amrita_sense.instructions import CALL, DO, FN, IF, INVOKE, JMP, NOP, RET, WHILE, Try
from amrita_sense.instructions.jump import JumpNode
from amrita_sense.instructions.native import BREAK_LOOP, CONTINUE, NATIVE_DO, NATIVE_IF, NATIVE_WHILE
from amrita_sense.node.table import compile_instructions


@Node()
def yes() -> bool:
    return True


@Node()
def work() -> int:
    return 1


@Node()
def no() -> bool:
    return False


def every_instruction():
    return (
        IF(yes, work).ELIF(no, work).ELSE(work)
        >> WHILE(no).ACTION(work)
        >> DO(work).WHILE(no)
        >> NOP
        >> Try(work).CATCH(ValueError, work)
        >> NATIVE_IF(yes, work)
        >> NATIVE_WHILE(no).ACTION(NodeCompose(work, BREAK_LOOP()))
        >> NATIVE_DO(NodeCompose(work, CONTINUE())).WHILE(no)
        >> FN("f", work >> RET())
        >> CALL("f")
        >> INVOKE("f")
        >> JMP([0])
    ).render()


OPCODES = {name: value for name, value in vars(_opcodes).items() if name.startswith("OP_")}


def test_opcodes_are_distinct_small_ints():
    assert sorted(OPCODES.values()) == list(range(len(OPCODES)))


def test_every_opcode_is_compiled_from_its_instruction():
    ops, _ = compile_instructions(every_instruction())
    assert set(ops) == set(OPCODES.values())


def test_records_have_the_named_layout():
    ops, records = compile_instructions(every_instruction())
    for op, record in zip(ops, records):
        if record is None:
            assert op in (_opcodes.OP_CALL, _opcodes.OP_NOP, _opcodes.OP_RET)
            continue
        assert type(record) is tuple and len(record) == _opcodes.N_FIELDS
        for field in (_opcodes.EXIT, _opcodes.THEN):
            assert record[field] is None or (type(record[field]) is tuple and len(record[field]) == 3)


def test_a_jump_record_names_its_target_then():
    ops, records = compile_instructions((work >> JMP([0])).render())
    record = records[ops.index(_opcodes.OP_JUMP)]
    assert record[_opcodes.THEN] == (0, True, [0])
    assert _opcodes.dense_row(record) == (-1, -1, -1, 0)


def test_a_subclass_runs_its_own_function_not_its_base_opcode():
    class LoggedJump(JumpNode):
        __slots__ = ()

    ops, _ = compile_instructions((work >> LoggedJump([0])).render())
    assert ops[1] == _opcodes.OP_CALL


def test_a_copy_of_nop_is_a_plain_call():
    ops, _ = compile_instructions((work >> copy.copy(NOP)).render())
    assert ops[1] == _opcodes.OP_CALL
