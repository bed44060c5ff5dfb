"""NOP / RESET / SUSPEND, the tag enum, the deprecated aliases and the exported names."""

from __future__ import annotations

import pytest

import amrita_sense
from amrita_sense import NodeCompose, WorkflowInterpreter
from amrita_sense import instructions as ins
from amrita_sense.exceptions import InterruptKeepContext, InterruptNotice
from amrita_sense.instructions import _deprecated, enum, interrupt, jump, ret2, workfl_ctrl
from amrita_sense.instructions.native import CONTINUE
from amrita_sense.runtime.types import Flags
from support.dual import Recorder, run_program

INSTRUCTION_NAMES = (
    "ALIAS ARCHIVED_NODES AUTO_PREFIX AUTO_TAGS BATCH_RUN BREAK_LOOP CALL DO FN FUN_BLOCK GOTO IF INT INTERRUPT "
    "INTERRUPT_INTO INTERRUPT_KEEP_CTX INTERRUPT_RET INTER_FN INVOKE IRET JMP NATIVE_DO NATIVE_IF NATIVE_WHILE NOP "
    "POP_CONTEXT PUSH_AND_GOTO PUSH_CONTEXT PUSH_RET PUSH_STACK RESET RET RET_FAR SUSPEND TRIGGER_EVENT WHILE "
    "BuiltinTags Try"
)
ROOT_INSTRUCTIONS = (
    "ALIAS ARCHIVED_NODES CALL DO GOTO IF INTERRUPT INTERRUPT_INTO INTERRUPT_KEEP_CTX INTERRUPT_RET INVOKE JMP NOP "
    "PUSH_AND_GOTO PUSH_STACK RESET RET_FAR SUSPEND TRIGGER_EVENT WHILE Try"
)


def test_instructions_all_matches_the_reference_names():
    assert set(ins.__all__) == set(INSTRUCTION_NAMES.split())
    assert len(ins.__all__) == 38
    assert "CONTINUE" not in ins.__all__
    for name in ins.__all__:
        assert getattr(ins, name) is not None


REFERENCE_ROOT = (
    "ALIAS ARCHIVED_NODES CALL DO GOTO IF INTERRUPT INTERRUPT_INTO INTERRUPT_KEEP_CTX INTERRUPT_RET INVOKE JMP NOP "
    "POINTER_DEPENDS PUSH_AND_GOTO PUSH_STACK RESET RET_FAR SUSPEND TRIGGER_EVENT WHILE AliasNotFoundError BaseEvent "
    "DependsDeclarationError DependsException DependsInjectFailed DependsResolveFailed EventRegistry GraphBuildError "
    "IllegalState InterruptNotice Matcher MatcherFactory Node NodeCompose NodeComposeRendered NodeType "
    "NullPointerException PointerVector Stack StreamStateError Try WorkflowInterpreter _unsafe on_event sign_func"
)


def test_root_exports_every_reference_name():
    names = REFERENCE_ROOT.split()
    assert len(names) == 46
    assert set(names) <= set(amrita_sense.__all__)
    for name in names:
        assert getattr(amrita_sense, name) is not None


@pytest.mark.parametrize("name", ROOT_INSTRUCTIONS.split())
def test_root_reexports_instruction(name):
    assert name in amrita_sense.__all__
    assert getattr(amrita_sense, name) is getattr(ins, name)


@pytest.mark.parametrize("name", ["RET", "PUSH_RET", "INT", "IRET", "FN", "BATCH_RUN", "NATIVE_IF", "BREAK_LOOP"])
def test_root_does_not_reexport(name):
    assert name not in amrita_sense.__all__


def test_deprecated_names_are_the_same_objects():
    assert ins.GOTO is ins.JMP is jump.GOTO
    assert ins.PUSH_STACK is ins.PUSH_RET is ret2.PUSH_STACK
    assert ins.RET_FAR is ins.RET
    assert ins.INTERRUPT is ins.RESET is workfl_ctrl.INTERRUPT
    assert ins.INTERRUPT_KEEP_CTX is ins.SUSPEND is workfl_ctrl.INTERRUPT_KEEP_CTX
    assert ins.INTERRUPT_INTO is ins.INT is interrupt.INTERRUPT_INTO
    assert ins.INTERRUPT_RET is ins.IRET
    assert _deprecated.PUSH_AND_GOTO is ret2.PUSH_AND_GOTO
    assert set(_deprecated.__all__) == {
        "GOTO",
        "INTERRUPT",
        "INTERRUPT_INTO",
        "INTERRUPT_KEEP_CTX",
        "INTERRUPT_RET",
        "PUSH_AND_GOTO",
        "PUSH_STACK",
        "RET_FAR",
    }


def test_builtin_tags_values_and_aliases():
    tags = enum.BuiltinTags
    assert tags.CALL == "__CALL__" and tags.RET == "__RET__" and tags.INT == "__INT__"
    assert tags.EVENT_TRIGGER_CALL == "EventTrigger::__call__"
    assert tags.TRIGGER_CONSTRUCTOR == "TriggerInstruction::constructor"
    assert tags.TRY_WORKER == "TryNode::worker"
    assert tags.RET_FAR is tags.RET and tags.PUSH_STACK is tags.PUSH_RET and tags.PUSH_AND_GOTO is tags.CALL
    assert tags.INTERRUPT_INTO is tags.INT and tags.INTERRUPT_RET is tags.IRET
    assert "RET_FAR" in tags.__members__ and tags.RET_FAR not in list(tags)[: list(tags).index(tags.RET)]
    assert len(list(tags)) == 15 and len(tags.__members__) == 20
    assert isinstance(tags.CALL, str)


def test_auto_tags():
    assert enum.AUTO_PREFIX == "NodeSuspend::"
    assert enum.AUTO_TAGS["NOP"] == "NodeSuspend::_no_operation"
    assert enum.AUTO_TAGS["WHILE_CHECKUP"] == "NodeSuspend::_while_checkup"
    assert len(enum.AUTO_TAGS) == 10


def test_singletons_describe_themselves():
    assert (ins.NOP.tag, ins.NOP.address_able, ins.NOP.wrap_to_async) == ("NodeSuspend::_no_operation", True, False)
    assert (ins.RESET.tag, ins.RESET.address_able) == ("NodeSuspend::_reset_operation", False)
    assert (ins.SUSPEND.tag, ins.SUSPEND.address_able) == ("NodeSuspend::_suspend_operation", True)
    assert [(n.__sdb_dis__, n.__sdb_cmt__) for n in (ins.NOP, ins.RESET, ins.SUSPEND)] == [
        ("NOP", "no operation"),
        ("RESET", "reset interpreter state"),
        ("SUSPEND", "suspend, keep context"),
    ]
    assert ins.NOP() is None
    with pytest.raises(InterruptNotice):
        ins.RESET()
    with pytest.raises(InterruptKeepContext):
        ins.SUSPEND()


@pytest.mark.asyncio
async def test_nop_runs_as_a_step_that_yields_none():
    rec = Recorder()
    interp = WorkflowInterpreter(NodeCompose(rec.act("a", 1), ins.NOP, rec.act("b", 2)).render())
    out = await run_program(interp, rec)
    assert out.yields == [1, None, 2] and out.trace == ["a", "b"] and out.error is None


@pytest.mark.asyncio
async def test_reset_ends_the_run_quietly_and_clears_state():
    rec = Recorder()
    interp = WorkflowInterpreter(NodeCompose(rec.act("a"), ins.PUSH_RET([0]), ins.RESET, rec.act("b")).render())
    out = await run_program(interp, rec)
    assert out.trace == ["a"] and out.error is None
    assert out.pointer == [] and out.stack_depth == 0 and out.flags == 0
    again = await run_program(interp, rec)
    assert again.trace == ["a"]


@pytest.mark.asyncio
async def test_suspend_keeps_state_and_resumes_after_itself():
    rec = Recorder()
    interp = WorkflowInterpreter(NodeCompose(rec.act("a"), ins.SUSPEND, rec.act("b"), ins.SUSPEND).render())
    first = await run_program(interp, rec)
    assert (first.trace, first.pointer, first.flags) == (["a"], [1], int(Flags.HLT))
    second = await run_program(interp, rec)
    assert (second.trace, second.yields, second.pointer) == (["b"], [None], [3])
    third = await run_program(interp, rec)
    assert (third.trace, third.yields, third.pointer, third.flags) == ([], [], [], 0)


@pytest.mark.asyncio
async def test_a_node_raising_keep_context_is_not_run_again():
    rec = Recorder()
    body = rec.act("halt", exc=InterruptKeepContext("wait"))
    interp = WorkflowInterpreter(NodeCompose(body, rec.act("after")).render())
    await run_program(interp, rec)
    out = await run_program(interp, rec)
    assert rec.trace == ["halt", "after"] and out.trace == ["after"]


@pytest.mark.asyncio
async def test_continue_is_importable_from_native_only():
    assert not hasattr(ins, "CONTINUE")
    assert CONTINUE().tag == enum.BuiltinTags.CONTINUE
