"""Try / CATCH / THEN / FINALLY: layout, declaration rules and run-time routing."""

from __future__ import annotations

import sys
import types

import pytest

from amrita_sense import IllegalState, InterruptNotice, Node, WorkflowInterpreter
from amrita_sense.exceptions import BreakLoop, DependsInjectFailed, InterruptKeepContext
from amrita_sense.instructions.try_catch import Try, TryClause, TryNode
from amrita_sense.instructions.workfl_ctrl import NOP
from amrita_sense.runtime.types import Flags


def step(log: list, name: str, exc: BaseException | None = None):
    """An inline node that records `name` and then raises `exc` if given."""

    @Node(wrap_to_async=False)
    def node():
        log.append(name)
        if exc is not None:
            raise exc

    return node


def handler(log: list, name: str = "h"):
    """A CATCH handler that records what it was given by injection."""

    @Node(wrap_to_async=False)
    def node(exc_type: type, exc_val: BaseException, exc_tb: types.TracebackType):
        log.append((name, exc_type, exc_val, exc_tb is exc_val.__traceback__))

    return node


async def run_collect(interp: WorkflowInterpreter) -> list:
    return [value async for value in interp.run_step_by()]


# ----- layout --------------------------------------------------------------------------


def test_full_clause_layout_and_operands():
    a, b, c, d, e = (step([], n) for n in "abcde")
    seg = Try(a).CATCH(ValueError, b).CATCH(KeyError, c).THEN(d).FINALLY(e).extract().render()
    assert len(seg) == 7
    worker = seg[0]
    assert isinstance(worker, TryNode)
    assert [seg[i] for i in range(1, 6)] == [a, b, c, d, e]
    assert seg[6] is NOP
    assert worker._do_node_addr == 1
    assert worker._catch_addr_chain == [(ValueError, 2), (KeyError, 3)]
    assert (worker._else_addr, worker._finally_addr, worker._escape_addr) == (4, 5, 6)
    assert worker.tag == "TryNode::worker"
    assert worker.address_able is False and worker.wrap_to_async is False
    assert worker.__sdb_dis__ == "TRY catch=ValueError#2,KeyError#3"
    assert worker.__sdb_cmt__ == "else=#4 finally=#5 escape=#6"


def test_finally_only_layout():
    a, f = step([], "a"), step([], "f")
    seg = Try(a).FINALLY(f).extract().render()
    assert len(seg) == 4
    worker = seg[0]
    assert worker._catch_addr_chain == []
    assert (worker._else_addr, worker._finally_addr, worker._escape_addr) == (None, 2, 3)
    assert worker.__sdb_dis__ == "TRY"
    assert worker.__sdb_cmt__ == "finally=#2 escape=#3"


def test_try_occupies_one_slot_behind_a_leading_nop():
    a, h, z = step([], "a"), step([], "h"), step([], "z")
    graph = (Try(a).CATCH(Exception, h) >> z).render()
    assert len(graph) == 3
    assert graph[0] is NOP
    assert len(graph[1]) == 4 and isinstance(graph[1][0], TryNode)
    assert graph[2] is z


# ----- declaration rules -----------------------------------------------------------------


def test_clause_without_catch_or_finally_is_refused_at_extract():
    clause = Try(step([], "a")).THEN(step([], "t"))
    with pytest.raises(IllegalState):
        clause.extract()
    with pytest.raises(IllegalState):
        (step([], "s") >> clause).render()


def test_catch_after_finally_is_refused():
    clause = Try(step([], "a")).FINALLY(step([], "f"))
    with pytest.raises(IllegalState):
        clause.CATCH(ValueError, step([], "h"))


@pytest.mark.parametrize("method", ["THEN", "FINALLY"])
def test_then_and_finally_only_once(method):
    clause = Try(step([], "a")).CATCH(ValueError, step([], "h"))
    getattr(clause, method)(step([], "x"))
    with pytest.raises(IllegalState):
        getattr(clause, method)(step([], "y"))


@pytest.mark.parametrize("bad", [42, "ValueError", int, (), (ValueError, 3)])
def test_catch_needs_exception_classes(bad):
    with pytest.raises(TypeError):
        Try(step([], "a")).CATCH(bad, step([], "h"))


def test_builder_methods_chain_on_the_same_clause():
    clause = Try(step([], "a"))
    assert isinstance(clause, TryClause)
    assert clause.CATCH(ValueError, step([], "h")) is clause
    assert clause.THEN(step([], "t")) is clause
    assert clause.FINALLY(step([], "f")) is clause


# ----- routing ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_success_runs_then_and_finally_and_skips_handlers():
    log: list = []
    graph = (
        step(log, "s")
        >> Try(step(log, "body")).CATCH(Exception, handler(log)).THEN(step(log, "then")).FINALLY(step(log, "fin"))
        >> step(log, "end")
    )
    interp = WorkflowInterpreter(graph.render())
    yields = await run_collect(interp)
    assert log == ["s", "body", "then", "fin", "end"]
    # s, the TryNode, the block's closing NOP, end: one yield per main-loop step
    assert yields == [None] * 4
    assert list(interp._pointer) == [] and not interp._ret_addr_stack


@pytest.mark.asyncio
async def test_caught_exception_reaches_handler_by_injection():
    log: list = []
    boom = ValueError("boom")
    graph = (
        step(log, "s")
        >> Try(step(log, "body", boom))
        .CATCH(ValueError, handler(log))
        .THEN(step(log, "then"))
        .FINALLY(step(log, "fin"))
        >> step(log, "end")
    )
    interp = WorkflowInterpreter(graph.render())
    await interp.run()
    assert log == ["s", "body", ("h", ValueError, boom, True), "fin", "end"]
    assert interp.get_exception() is None
    assert not interp._ret_addr_stack


@pytest.mark.asyncio
async def test_first_matching_catch_wins_and_subclasses_match():
    log: list = []
    graph = (
        Try(step(log, "body", KeyError("k")))
        .CATCH(ValueError, handler(log, "value"))
        .CATCH(LookupError, handler(log, "lookup"))
        .CATCH(KeyError, handler(log, "key"))
    )
    await WorkflowInterpreter(graph.extract().render()).run()
    assert [entry[0] for entry in log[1:]] == ["lookup"]


@pytest.mark.asyncio
async def test_catch_accepts_a_tuple_of_types():
    log: list = []
    graph = Try(step(log, "body", KeyError("k"))).CATCH((ValueError, KeyError), handler(log))
    worker_graph = graph.extract().render()
    assert worker_graph[0].__sdb_dis__ == "TRY catch=(ValueError,KeyError)#2"
    await WorkflowInterpreter(worker_graph).run()
    assert log[1][1] is KeyError


@pytest.mark.asyncio
async def test_unmatched_exception_panics_after_finally():
    log: list = []
    boom = ValueError("no handler")
    graph = (
        step(log, "s")
        >> Try(step(log, "body", boom)).CATCH(KeyError, handler(log)).FINALLY(step(log, "fin"))
        >> step(log, "end")
    )
    interp = WorkflowInterpreter(graph.render())
    with pytest.raises(ValueError) as info:
        await interp.run()
    assert info.value is boom
    assert log == ["s", "body", "fin"]
    assert interp.get_exception() is boom
    # the sub-call restored the pointer: the panic sits on the TryNode itself
    assert list(interp._pointer) == [1, 0]
    assert not interp._ret_addr_stack


@pytest.mark.asyncio
async def test_handler_failure_propagates_after_finally():
    log: list = []
    graph = (
        Try(step(log, "body", ValueError("v")))
        .CATCH(ValueError, step(log, "h", KeyError("from handler")))
        .FINALLY(step(log, "fin"))
    )
    interp = WorkflowInterpreter(graph.extract().render())
    with pytest.raises(KeyError):
        await interp.run()
    assert log == ["body", "h", "fin"]


@pytest.mark.asyncio
async def test_finally_failure_replaces_the_outcome():
    log: list = []
    graph = (
        Try(step(log, "body", ValueError("v")))
        .CATCH(ValueError, handler(log))
        .FINALLY(step(log, "fin", KeyError("from finally")))
    )
    interp = WorkflowInterpreter(graph.extract().render())
    with pytest.raises(KeyError):
        await interp.run()
    assert [entry if isinstance(entry, str) else entry[0] for entry in log] == ["body", "h", "fin"]


@pytest.mark.asyncio
async def test_recovering_a_try_panic_reruns_the_whole_block():
    log: list = []
    failures = [ValueError("first")]

    @Node(wrap_to_async=False)
    def flaky():
        log.append("body")
        if failures:
            raise failures.pop()

    graph = step(log, "s") >> Try(flaky).CATCH(KeyError, handler(log)).THEN(step(log, "then")) >> step(log, "end")
    interp = WorkflowInterpreter(graph.render())
    with pytest.raises(ValueError):
        await interp.run()
    await interp.run()
    assert log == ["s", "body", "body", "then", "end"]


@pytest.mark.asyncio
async def test_handler_kwarg_clashing_with_interpreter_kwargs_fails_injection():
    log: list = []
    graph = Try(step(log, "body", ValueError("v"))).CATCH(ValueError, handler(log))
    interp = WorkflowInterpreter(graph.extract().render(), extra_kwargs={"exc_val": "taken"})
    with pytest.raises(DependsInjectFailed):
        await interp.run()
    assert log == ["body"]


@pytest.mark.asyncio
async def test_handler_may_ignore_the_injected_exception():
    log: list = []
    graph = Try(step(log, "body", ValueError("v"))).CATCH(ValueError, step(log, "plain handler")) >> step(log, "end")
    await WorkflowInterpreter(graph.render()).run()
    assert log == ["body", "plain handler", "end"]


@pytest.mark.asyncio
async def test_async_and_threaded_bodies_are_caught_too():
    log: list = []

    @Node()
    async def async_body():
        log.append("async")
        raise ValueError("a")

    @Node()
    def thread_body():
        log.append("thread")
        raise KeyError("t")

    graph = Try(async_body).CATCH(ValueError, handler(log, "ha")) >> Try(thread_body).CATCH(
        KeyError, handler(log, "ht")
    )
    await WorkflowInterpreter(graph.render()).run()
    assert [e if isinstance(e, str) else e[0] for e in log] == ["async", "ha", "thread", "ht"]


# ----- pass-through types -----------------------------------------------------------------


@pytest.mark.asyncio
async def test_exception_ignored_bypasses_every_catch_but_not_finally():
    log: list = []
    boom = ValueError("ignored")
    graph = (
        Try(step(log, "body", boom))
        .CATCH(Exception, handler(log))
        .CATCH(ValueError, handler(log))
        .FINALLY(step(log, "fin"))
    )
    interp = WorkflowInterpreter(graph.extract().render(), exception_ignored=(ValueError,))
    with pytest.raises(ValueError) as info:
        await interp.run()
    assert info.value is boom
    assert log == ["body", "fin"]
    assert interp.get_exception() is boom


@pytest.mark.asyncio
async def test_exception_ignored_matches_subclasses():
    log: list = []
    graph = Try(step(log, "body", KeyError("k"))).CATCH(Exception, handler(log))
    interp = WorkflowInterpreter(graph.extract().render(), exception_ignored=(LookupError,))
    with pytest.raises(KeyError):
        await interp.run()


@pytest.mark.asyncio
async def test_default_pass_through_types_are_interrupt_notice_and_break_loop():
    interp = WorkflowInterpreter((step([], "a") >> step([], "b")).render(), exception_ignored=(KeyError,))
    assert set(interp._exc_ignored) == {KeyError, InterruptNotice, BreakLoop}


@pytest.mark.asyncio
async def test_break_loop_is_not_caught_outside_a_loop():
    log: list = []
    graph = Try(step(log, "body", BreakLoop())).CATCH(Exception, handler(log)).FINALLY(step(log, "fin"))
    interp = WorkflowInterpreter(graph.extract().render())
    with pytest.raises(BreakLoop):
        await interp.run()
    assert log == ["body", "fin"]


@pytest.mark.asyncio
async def test_interrupt_notice_passes_catch_base_exception_and_runs_finally():
    log: list = []
    graph = (
        step(log, "s")
        >> Try(step(log, "body", InterruptNotice("stop"))).CATCH(BaseException, handler(log)).FINALLY(step(log, "fin"))
        >> step(log, "end")
    )
    interp = WorkflowInterpreter(graph.render())
    await interp.run()  # an interrupt ends the run normally
    assert log == ["s", "body", "fin"]
    assert list(interp._pointer) == [] and interp.flags == Flags.NONE


@pytest.mark.asyncio
async def test_suspend_inside_try_resumes_after_the_block():
    log: list = []
    graph = (
        step(log, "s")
        >> Try(step(log, "body", InterruptKeepContext("pause")))
        .CATCH(BaseException, handler(log))
        .FINALLY(step(log, "fin"))
        >> step(log, "end")
    )
    interp = WorkflowInterpreter(graph.render())
    await interp.run()
    assert log == ["s", "body", "fin"]
    assert interp.flags & Flags.HLT
    await interp.run()
    assert log == ["s", "body", "fin", "end"]


@pytest.mark.asyncio
async def test_suspend_inside_a_nested_try_resumes_after_the_outer_block():
    log: list = []
    inner = Try(step(log, "body", InterruptKeepContext())).FINALLY(step(log, "inner fin"))
    outer = Try(inner).CATCH(Exception, handler(log)).THEN(step(log, "outer then")).FINALLY(step(log, "outer fin"))
    interp = WorkflowInterpreter((step(log, "s") >> outer >> step(log, "end")).render())
    await interp.run()
    assert log == ["s", "body", "inner fin", "outer fin"]
    await interp.run()
    assert log == ["s", "body", "inner fin", "outer fin", "end"]


@pytest.mark.asyncio
async def test_suspend_resume_skips_a_compound_finally_slot():
    log: list = []
    cleanup = step(log, "fin 1") >> step(log, "fin 2")
    graph = step(log, "s") >> Try(step(log, "body", InterruptKeepContext())).FINALLY(cleanup) >> step(log, "end")
    interp = WorkflowInterpreter(graph.render())
    await interp.run()
    assert log == ["s", "body", "fin 1"]  # a compound slot runs its first node as the sub-call
    await interp.run()
    assert log == ["s", "body", "fin 1", "end"]


# ----- nesting ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_nested_try_inner_handles_then_outer_continues_with_then():
    log: list = []
    inner = Try(step(log, "body", KeyError("k"))).CATCH(KeyError, handler(log, "inner")).FINALLY(step(log, "inner fin"))
    outer = (
        Try(inner).CATCH(Exception, handler(log, "outer")).THEN(step(log, "outer then")).FINALLY(step(log, "outer fin"))
    )
    interp = WorkflowInterpreter((step(log, "s") >> outer >> step(log, "end")).render())
    await interp.run()
    names = [e if isinstance(e, str) else e[0] for e in log]
    assert names == ["s", "body", "inner", "inner fin", "outer then", "outer fin", "end"]
    assert not interp._ret_addr_stack


@pytest.mark.asyncio
async def test_nested_try_unmatched_inner_exception_reaches_outer_handler():
    log: list = []
    boom = ValueError("v")
    inner = Try(step(log, "body", boom)).CATCH(KeyError, handler(log, "inner")).FINALLY(step(log, "inner fin"))
    outer = (
        Try(inner)
        .CATCH(ValueError, handler(log, "outer"))
        .THEN(step(log, "outer then"))
        .FINALLY(step(log, "outer fin"))
    )
    await WorkflowInterpreter((step(log, "s") >> outer >> step(log, "end")).render()).run()
    assert log[:3] == ["s", "body", "inner fin"]
    assert log[3][0] == "outer" and log[3][2] is boom
    assert log[4:] == ["outer fin", "end"]


@pytest.mark.asyncio
async def test_try_as_a_handler_of_another_try():
    log: list = []
    rescue = Try(step(log, "rescue", KeyError("again"))).CATCH(KeyError, handler(log, "rescue handler"))
    graph = Try(step(log, "body", ValueError("v"))).CATCH(ValueError, rescue).THEN(step(log, "then")) >> step(
        log, "end"
    )
    await WorkflowInterpreter(graph.render()).run()
    assert [e if isinstance(e, str) else e[0] for e in log] == ["body", "rescue", "rescue handler", "end"]


@pytest.mark.asyncio
async def test_sequential_try_blocks_each_catch_their_own():
    log: list = []
    graph = (
        Try(step(log, "one", ValueError("1"))).CATCH(ValueError, handler(log, "h1"))
        >> Try(step(log, "two", KeyError("2"))).CATCH(KeyError, handler(log, "h2"))
        >> step(log, "end")
    )
    await WorkflowInterpreter(graph.render()).run()
    assert [e if isinstance(e, str) else e[0] for e in log] == ["one", "h1", "two", "h2", "end"]


@pytest.mark.asyncio
async def test_exception_in_an_if_branch_inside_try_is_caught():
    from amrita_sense.instructions.if_clause import IF

    log: list = []

    @Node(wrap_to_async=False)
    def truthy():
        return True

    graph = Try(IF(truthy, step(log, "branch", ValueError("v")))).CATCH(ValueError, handler(log)) >> step(log, "after")
    interp = WorkflowInterpreter(graph.render())
    await interp.run()
    assert [e if isinstance(e, str) else e[0] for e in log] == ["branch", "h", "after"]
    assert not interp._ret_addr_stack


@pytest.mark.asyncio
async def test_try_node_called_directly_on_an_interpreter():
    """The worker drives the interpreter only through its public API."""
    log: list = []

    @Node()
    async def driver(pc: WorkflowInterpreter):
        worker = pc.get_graph()[1][0]
        pc.rebase_ptr([1, 0])
        await worker(pc)
        log.append(("after", list(pc._pointer), pc.jump_marked))

    @Node(wrap_to_async=False)
    def probe(pc: WorkflowInterpreter):
        log.append(("probe", list(pc._pointer)))

    graph = driver >> Try(step(log, "body", ValueError("v"))).CATCH(ValueError, handler(log)) >> probe
    await WorkflowInterpreter(graph.render()).run()
    assert log[0] == "body"
    assert log[1][0] == "h"
    # the worker jumped to the block's closing NOP; the loop continues from there
    assert log[2] == ("after", [1, 3], True)
    assert log[3] == ("probe", [2])
    assert len(log) == 4


_DISABLED_PASS_THROUGH_SCRIPT = """
import asyncio
from amrita_sense import InterruptNotice, Node, WorkflowInterpreter, _unsafe
from amrita_sense.instructions.try_catch import Try

_unsafe.__flags__.DISABLE_EXC_IGNORED = True
log = []

def raiser(exc):
    @Node(wrap_to_async=False)
    def node():
        raise exc
    return node

@Node(wrap_to_async=False)
def handler(exc_val: BaseException):
    log.append(type(exc_val).__name__)

async def main():
    graph = (
        Try(raiser(InterruptNotice("x"))).CATCH(BaseException, handler)
        >> Try(raiser(ValueError("v"))).CATCH(ValueError, handler)
    )
    interp = WorkflowInterpreter(graph.render(), exception_ignored=(ValueError,))
    assert interp._exc_ignored == (), interp._exc_ignored
    await interp.run()
    print(",".join(log))

asyncio.run(main())
"""


def test_disable_exc_ignored_lets_try_catch_everything():
    """The flag is process-wide and write-once, so it is exercised in a child process."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import amrita_sense

    env = dict(os.environ, PYTHONPATH=str(Path(amrita_sense.__file__).resolve().parents[1]))
    done = subprocess.run(
        [sys.executable, "-c", _DISABLED_PASS_THROUGH_SCRIPT], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "InterruptNotice,ValueError"


def test_public_names():
    import amrita_sense
    import amrita_sense.instructions as instructions
    from amrita_sense.instructions import interrupt

    assert amrita_sense.Try is instructions.Try is Try
    assert amrita_sense.INTERRUPT_INTO is instructions.INT is interrupt.INT
    assert amrita_sense.INTERRUPT_RET is instructions.IRET is interrupt.IRET
    assert instructions.PUSH_CONTEXT is interrupt.PUSH_CONTEXT
    assert instructions.POP_CONTEXT is interrupt.POP_CONTEXT


# ----- catching the way `except` does (the inline path: handlers without parameters) -------------


class _ClaimsKeyError(Exception):
    @property
    def __class__(self):  # isinstance() consults __class__ too
        return KeyError


class _MatchesAnything(type):
    def __instancecheck__(cls, instance):
        return True


class _Anything(Exception, metaclass=_MatchesAnything):
    pass


def _quiet(log: list, name: str):
    @Node(wrap_to_async=False)
    def node():
        log.append(name)

    return node


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("raised", "spec"),
    [(_ClaimsKeyError("x"), KeyError), (ValueError("v"), _Anything), (ValueError("v"), (KeyError, _Anything))],
)
async def test_catch_matches_like_isinstance(raised, spec):
    log: list = []
    graph = Try(step(log, "body", raised)).CATCH(spec, _quiet(log, "caught")).extract().render()
    await WorkflowInterpreter(graph).run()
    assert log == ["body", "caught"]


@pytest.mark.asyncio
async def test_a_handler_runs_while_the_exception_is_being_handled():
    seen: list = []
    original = ValueError("body")

    @Node(wrap_to_async=False)
    def inspect_then_fail():
        seen.append(sys.exc_info()[1])
        raise RuntimeError("handler")

    graph = Try(step([], "body", original)).CATCH(ValueError, inspect_then_fail).extract().render()
    with pytest.raises(RuntimeError) as failure:
        await WorkflowInterpreter(graph).run()
    assert seen == [original]
    assert failure.value.__context__ is original
    assert sys.exc_info() == (None, None, None)


@pytest.mark.asyncio
async def test_a_bare_raise_in_a_handler_re_raises_the_caught_exception():
    original = ValueError("body")

    @Node(wrap_to_async=False)
    def rethrow():
        raise

    graph = Try(step([], "body", original)).CATCH(ValueError, rethrow).extract().render()
    with pytest.raises(ValueError) as failure:
        await WorkflowInterpreter(graph).run()
    assert failure.value is original
