"""Generator and context-manager providers in workflow nodes: call and workflow scopes (rules 57, 75, 78-79)."""

from __future__ import annotations

from contextlib import asynccontextmanager, contextmanager

import pytest

from amrita_sense import DependsInjectFailed, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.di import Scope
from amrita_sense.hook.matcher import Depends
from amrita_sense.instructions.workfl_ctrl import RESET, SUSPEND


def inline(func):
    return Node(wrap_to_async=False)(func)


def tracked(log: list, name: str, *, kind: str = "sync"):
    """A generator provider of `kind` that logs its opening and closing."""
    if kind == "sync":

        def provider():
            log.append(f"open {name}")
            yield name
            log.append(f"close {name}")

    elif kind == "async":

        async def provider():
            log.append(f"open {name}")
            yield name
            log.append(f"close {name}")

    elif kind == "contextmanager":

        @contextmanager
        def provider():
            log.append(f"open {name}")
            yield name
            log.append(f"close {name}")

    else:

        @asynccontextmanager
        async def provider():
            log.append(f"open {name}")
            yield name
            log.append(f"close {name}")

    return provider


def recorder(log: list, label: str, **params):
    """A node named `label` with one `str` parameter per `params` item (name -> Depends); it logs the values it got."""
    signature = ", ".join(f"{name}: str = _deps[{name!r}]" for name in params)
    values = "".join(f"{name}, " for name in params)
    source = f"def {label}({signature}):\n    _log.append(({label!r}, {values}))\n"
    namespace: dict = {"_deps": params, "_log": log}
    exec(source, namespace)
    return inline(namespace[label])


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["sync", "async", "contextmanager", "asynccontextmanager"])
async def test_workflow_scope_is_shared_by_the_run_and_closed_at_its_end(kind):
    log = []
    marker = Depends(tracked(log, "r", kind=kind))
    graph = NodeCompose(recorder(log, "a", res=marker), recorder(log, "b", res=marker)).render()
    interp = WorkflowInterpreter(graph)
    await interp.run()
    assert log == ["open r", ("a", "r"), ("b", "r"), "close r"]
    await interp.run()
    assert log[4:] == ["open r", ("a", "r"), ("b", "r"), "close r"]


@pytest.mark.asyncio
async def test_workflow_scope_closes_in_reverse_order_of_opening():
    log = []
    first, second = Depends(tracked(log, "1")), Depends(tracked(log, "2"))
    graph = NodeCompose(recorder(log, "a", x=first), recorder(log, "b", y=second)).render()
    await WorkflowInterpreter(graph).run()
    assert log == ["open 1", ("a", "1"), "open 2", ("b", "2"), "close 2", "close 1"]


@pytest.mark.asyncio
async def test_generators_of_one_node_open_in_declaration_order():
    log = []
    node = recorder(log, "n", x=Depends(tracked(log, "1")), y=Depends(tracked(log, "2")), z=Depends(lambda: "plain"))
    await WorkflowInterpreter(node.as_compose().render()).run()
    assert log == ["open 1", "open 2", ("n", "1", "2", "plain"), "close 2", "close 1"]


@pytest.mark.asyncio
async def test_call_scope_closes_after_each_call():
    log = []
    marker = Depends(tracked(log, "c"), scope="call")
    graph = NodeCompose(recorder(log, "a", res=marker), recorder(log, "b", res=marker)).render()
    await WorkflowInterpreter(graph).run()
    assert log == ["open c", ("a", "c"), "close c", "open c", ("b", "c"), "close c"]


@pytest.mark.asyncio
async def test_call_and_workflow_scopes_together():
    log = []
    node = recorder(log, "n", w=Depends(tracked(log, "w")), c=Depends(tracked(log, "c"), scope=Scope.CALL))
    other = inline(lambda: log.append("other"))
    await WorkflowInterpreter(NodeCompose(node, other).render()).run()
    assert log == ["open w", "open c", ("n", "w", "c"), "close c", "other", "close w"]


@pytest.mark.asyncio
async def test_nested_call_scoped_generator_under_a_plain_provider():
    log = []

    def plain(inner: str = Depends(tracked(log, "inner"), scope="call")) -> str:
        return f"plain({inner})"

    node = recorder(log, "n", p=Depends(plain))
    await WorkflowInterpreter(NodeCompose(node, inline(lambda: log.append("next"))).render()).run()
    assert log == ["open inner", ("n", "plain(inner)"), "close inner", "next"]


@pytest.mark.asyncio
async def test_call_scope_closes_when_the_node_raises():
    log = []
    marker = Depends(tracked(log, "c"), scope="call")

    @inline
    def failing(res: str = marker):
        log.append("body")
        raise ValueError("boom")

    interp = WorkflowInterpreter(failing.as_compose().render())
    with pytest.raises(ValueError):
        await interp.run()
    assert log == ["open c", "body", "close c"]


@pytest.mark.asyncio
async def test_failing_provider_tears_down_what_the_call_opened():
    log = []

    def yields_none():
        yield None

    @inline
    def node(a: str = Depends(tracked(log, "a"), scope="call"), b: str = Depends(yields_none, scope="call")):
        log.append("body")

    with pytest.raises(DependsInjectFailed, match="yields_none"):
        await WorkflowInterpreter(node.as_compose().render()).run()
    assert log == ["open a", "close a"]


def fails_first_time(log: list, attempts: list):
    """A node with a workflow-scoped resource `w` that raises on its first run only."""
    marker = Depends(tracked(log, "w"))

    @inline
    def flaky(res: str = marker):
        attempts.append(res)
        if len(attempts) == 1:
            raise RuntimeError("first attempt fails")

    return flaky


@pytest.mark.asyncio
async def test_workflow_scope_stays_open_after_a_panic_until_terminate():
    log, attempts = [], []
    interp = WorkflowInterpreter(fails_first_time(log, attempts).as_compose().render())
    with pytest.raises(RuntimeError):
        await interp.run()
    assert log == ["open w"]
    await interp.terminate()
    assert log == ["open w", "close w"]
    await interp.terminate()
    assert log == ["open w", "close w"]


@pytest.mark.asyncio
async def test_recovery_run_reuses_the_open_workflow_resource():
    log, attempts = [], []
    interp = WorkflowInterpreter(fails_first_time(log, attempts).as_compose().render())
    with pytest.raises(RuntimeError):
        await interp.run()
    await interp.run()
    assert attempts == ["w", "w"]
    assert log == ["open w", "close w"]


@pytest.mark.asyncio
async def test_reset_closes_the_workflow_scope():
    log = []
    graph = NodeCompose(
        recorder(log, "a", res=Depends(tracked(log, "w"))), RESET, inline(lambda: log.append("never"))
    ).render()
    await WorkflowInterpreter(graph).run()
    assert log == ["open w", ("a", "w"), "close w"]


@pytest.mark.asyncio
async def test_suspend_keeps_the_workflow_scope_for_the_resume():
    log = []
    marker = Depends(tracked(log, "w"))
    graph = NodeCompose(recorder(log, "a", res=marker), SUSPEND, recorder(log, "b", res=marker)).render()
    interp = WorkflowInterpreter(graph)
    await interp.run()
    assert log == ["open w", ("a", "w")]
    await interp.run()
    assert log == ["open w", ("a", "w"), ("b", "w"), "close w"]


@pytest.mark.asyncio
async def test_each_interpreter_has_its_own_workflow_scope():
    log = []
    graph = recorder(log, "a", res=Depends(tracked(log, "w"))).as_compose().render()
    await WorkflowInterpreter(graph).run()
    await WorkflowInterpreter(graph).run()
    assert log.count("open w") == 2 and log.count("close w") == 2


@pytest.mark.asyncio
async def test_generator_sees_the_pools():
    log = []

    def session(pc: WorkflowInterpreter, label: str):
        log.append(("open", pc is interp, label))
        yield label
        log.append("close")

    interp = WorkflowInterpreter(
        recorder(log, "n", s=Depends(session)).as_compose().render(), extra_kwargs={"label": "L"}
    )
    await interp.run()
    assert log == [("open", True, "L"), ("n", "L"), "close"]


@pytest.mark.asyncio
async def test_teardown_error_propagates_from_run():
    def broken_teardown():
        yield "v"
        raise OSError("teardown failed")

    interp = WorkflowInterpreter(recorder([], "n", s=Depends(broken_teardown)).as_compose().render())
    with pytest.raises(OSError, match="teardown failed"):
        await interp.run()
    # a fresh scope is in place: the next run opens and closes again
    with pytest.raises(OSError):
        await interp.run()


@pytest.mark.asyncio
async def test_terminate_during_a_run_closes_the_workflow_scope():
    import asyncio

    log = []
    gate = asyncio.Event()

    @Node()
    async def waiting(res: str = Depends(tracked(log, "w"))):
        log.append("waiting")
        await gate.wait()

    interp = WorkflowInterpreter(NodeCompose(waiting, inline(lambda: log.append("after"))).render())
    run = asyncio.create_task(interp.run())
    while "waiting" not in log:
        await asyncio.sleep(0)
    stopper = asyncio.create_task(interp.terminate())
    await asyncio.sleep(0)
    gate.set()
    await asyncio.wait_for(asyncio.gather(run, stopper), 5)
    assert log == ["open w", "waiting", "close w"]
