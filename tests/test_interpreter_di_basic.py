"""Basic injection into workflow nodes: the interpreter itself, `extra_args` by type,
`extra_kwargs` by name, per-call extras of `call_sub` (rules 31, 70 and 72)."""

from __future__ import annotations

from typing import Any

import pytest

from amrita_sense import (
    DependsException,
    DependsInjectFailed,
    DependsResolveFailed,
    Node,
    PointerVector,
    WorkflowInterpreter,
)


class Service:
    """A user type placed in the positional pool."""

    def __init__(self, name: str):
        self.name = name


class SpecialService(Service):
    pass


async def run_one(func, **interp_kwargs) -> list:
    """Run a graph holding one loop-thread node made of `func`; return the yields."""
    interp = WorkflowInterpreter(Node(wrap_to_async=False)(func).as_compose().render(), **interp_kwargs)
    return [value async for value in interp.run_step_by()]


# ----- the positional pool -----------------------------------------------------------------


@pytest.mark.asyncio
async def test_interpreter_is_injected_by_type():
    seen = []

    def node(pc: WorkflowInterpreter):
        seen.append(pc)

    interp = WorkflowInterpreter(Node(wrap_to_async=False)(node).as_compose().render())
    await interp.run()
    assert seen == [interp]


@pytest.mark.asyncio
async def test_node_without_parameters():
    assert await run_one(lambda: "bare") == ["bare"]


@pytest.mark.asyncio
async def test_extra_arg_injected_by_type():
    service = Service("s")

    def node(svc: Service):
        return svc

    assert await run_one(node, extra_args=(service,)) == [service]


@pytest.mark.asyncio
async def test_subclass_instance_satisfies_the_base_annotation():
    special = SpecialService("sp")

    def node(svc: Service):
        return svc

    assert await run_one(node, extra_args=(special,)) == [special]


@pytest.mark.asyncio
async def test_first_matching_positional_wins():
    def node(x: int, y: int):
        return (x, y)

    assert await run_one(node, extra_args=(1, 2)) == [(1, 1)]


@pytest.mark.asyncio
async def test_several_types_from_one_pool():
    service = Service("s")

    def node(label: str, count: int, svc: Service, pc: WorkflowInterpreter):
        return (label, count, svc.name, isinstance(pc, WorkflowInterpreter))

    assert await run_one(node, extra_args=(3, service, "txt")) == [("txt", 3, "s", True)]


@pytest.mark.asyncio
async def test_bool_satisfies_an_int_parameter():
    def node(x: int):
        return x

    assert await run_one(node, extra_args=(True,)) == [True]


@pytest.mark.asyncio
async def test_subscripted_generic_matches_its_origin():
    def node(values: list[int]):
        return values

    assert await run_one(node, extra_args=(["not", "ints"],)) == [["not", "ints"]]


@pytest.mark.asyncio
async def test_keyword_only_parameter_from_the_pool():
    def node(*, x: int):
        return x

    assert await run_one(node, extra_args=(5,)) == [5]


@pytest.mark.asyncio
async def test_optional_parameter_keeps_its_default_despite_a_matching_positional():
    def node(x: int = 3):
        return x

    assert await run_one(node, extra_args=(5,)) == [3]


# ----- the keyword pool --------------------------------------------------------------------


@pytest.mark.asyncio
async def test_extra_kwarg_injected_by_name():
    def node(cfg: dict):
        return cfg

    assert await run_one(node, extra_kwargs={"cfg": {"a": 1}}) == [{"a": 1}]


@pytest.mark.asyncio
async def test_name_match_ignores_the_type():
    def node(count: int):
        return count

    assert await run_one(node, extra_kwargs={"count": "not an int"}) == ["not an int"]


@pytest.mark.asyncio
async def test_name_match_beats_a_positional_match():
    def node(x: int):
        return x

    assert await run_one(node, extra_args=(5,), extra_kwargs={"x": 7}) == [7]


@pytest.mark.asyncio
async def test_optional_parameter_from_kwargs_by_name():
    def node(x: int = 3):
        return x

    assert await run_one(node, extra_kwargs={"x": 9}) == [9]


@pytest.mark.asyncio
async def test_unused_kwargs_are_ignored():
    def node(pc: WorkflowInterpreter):
        return "ok"

    assert await run_one(node, extra_kwargs={"other": 1}) == ["ok"]


# ----- every kind of node ------------------------------------------------------------------


@pytest.mark.asyncio
async def test_injection_into_async_and_worker_thread_nodes():
    service = Service("s")

    @Node()
    async def coro(svc: Service, tag: str):
        return ("coro", svc.name, tag)

    @Node()
    def threaded(svc: Service, tag: str):
        return ("thread", svc.name, tag)

    interp = WorkflowInterpreter((coro >> threaded).render(), extra_args=(service,), extra_kwargs={"tag": "t"})
    assert [v async for v in interp.run_step_by()] == [("coro", "s", "t"), ("thread", "s", "t")]


@pytest.mark.asyncio
async def test_injection_into_a_base_node_subclass():
    from amrita_sense.node.core import BaseNode

    class Custom(BaseNode):
        def __init__(self):
            self._init(self.run_me, None, False, True)

        def run_me(self, pc: WorkflowInterpreter, svc: Service):
            return (pc is interp, svc.name)

        def __call__(self, *args, **kwargs):
            return self.run_me(*args, **kwargs)

    interp = WorkflowInterpreter(Custom().as_compose().render(), extra_args=(Service("c"),))
    assert [v async for v in interp.run_step_by()] == [(True, "c")]


@pytest.mark.asyncio
async def test_same_node_resolves_again_on_a_new_interpreter():
    @Node(wrap_to_async=False)
    def node(x: int):
        return x

    graph = node.as_compose().render()
    first = [v async for v in WorkflowInterpreter(graph, extra_args=(1,)).run_step_by()]
    second = [v async for v in WorkflowInterpreter(graph, extra_args=(2,)).run_step_by()]
    assert (first, second) == ([1], [2])


@pytest.mark.asyncio
async def test_changed_pool_values_of_the_same_type_are_seen():
    @Node(wrap_to_async=False)
    def node(x: int):
        return x

    interp = WorkflowInterpreter(node.as_compose().render(), extra_args=(1,))
    assert [v async for v in interp.run_step_by()] == [1]
    interp._ava_args = (interp, 2)
    assert [v async for v in interp.run_step_by()] == [2]


# ----- resolution failures -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_missing_dependency_raises_depends_resolve_failed():
    def needs_service(svc: Service):
        return svc

    interp = WorkflowInterpreter(Node(wrap_to_async=False)(needs_service).as_compose().render())
    with pytest.raises(DependsResolveFailed, match="needs_service") as info:
        await interp.run()
    assert isinstance(info.value, DependsException)
    assert "NodeSuspend::needs_service" in str(info.value)
    assert interp.get_exception() is info.value
    assert interp._pointer == PointerVector([0])


@pytest.mark.asyncio
async def test_missing_annotation_raises_depends_resolve_failed():
    def unannotated(x):
        return x

    with pytest.raises(DependsResolveFailed, match="unannotated"):
        await run_one(unannotated, extra_args=(1,))


@pytest.mark.asyncio
async def test_unannotated_optional_parameter_also_fails():
    def lenient(pc: WorkflowInterpreter, y=3):
        return y

    with pytest.raises(DependsResolveFailed):
        await run_one(lenient)


@pytest.mark.asyncio
async def test_any_annotation_never_matches():
    def anything(x: Any):
        return x

    with pytest.raises(DependsResolveFailed):
        await run_one(anything, extra_args=(1,))


@pytest.mark.asyncio
async def test_resolve_failure_happens_before_the_body_runs():
    ran = []

    @Node(wrap_to_async=False)
    def first():
        ran.append("first")

    @Node(wrap_to_async=False)
    def broken(svc: Service):
        ran.append("broken")

    interp = WorkflowInterpreter((first >> broken >> first).render())
    with pytest.raises(DependsResolveFailed):
        await interp.run()
    assert ran == ["first"]
    assert interp._pointer == PointerVector([1])


@pytest.mark.asyncio
async def test_resolve_failure_in_a_worker_thread_node():
    @Node()
    def broken(svc: Service):
        return svc

    with pytest.raises(DependsResolveFailed):
        await WorkflowInterpreter(broken.as_compose().render()).run()


# ----- per-call extras of call_sub -----------------------------------------------------------


def caller_then_callee(caller, callee, tail=None):
    """`[caller, callee, tail]`; the caller skips the callee in the main loop."""

    @Node(wrap_to_async=False)
    def end():
        return "end"

    return (Node()(caller) >> callee >> (tail or end)).render()


@pytest.mark.asyncio
async def test_call_extra_args_are_appended_to_the_pool():
    @Node(wrap_to_async=False)
    def callee(text: str):
        return text

    async def caller(pc: WorkflowInterpreter):
        result = await pc.call_offset(1, "extra")
        pc.jump_offset(2)
        return result

    interp = WorkflowInterpreter(caller_then_callee(caller, callee))
    assert [v async for v in interp.run_step_by()] == ["extra", "end"]


@pytest.mark.asyncio
async def test_call_extra_args_come_after_the_existing_pool():
    @Node(wrap_to_async=False)
    def callee(text: str):
        return text

    async def caller(pc: WorkflowInterpreter):
        result = await pc.call_offset(1, "extra")
        pc.jump_offset(2)
        return result

    interp = WorkflowInterpreter(caller_then_callee(caller, callee), extra_args=("pooled",))
    assert [v async for v in interp.run_step_by()] == ["pooled", "end"]


@pytest.mark.asyncio
async def test_call_extra_kwargs_are_injected_by_name():
    @Node(wrap_to_async=False)
    def callee(label: str, n: int):
        return (label, n)

    async def caller(pc: WorkflowInterpreter):
        result = await pc.call_near(1, 4, label="named")
        pc.jump_offset(2)
        return result

    interp = WorkflowInterpreter(caller_then_callee(caller, callee))
    assert [v async for v in interp.run_step_by()] == [("named", 4), "end"]


@pytest.mark.asyncio
async def test_call_extras_through_every_call_form():
    @Node(wrap_to_async=False)
    def callee(n: int, label: str):
        return (n, label)

    async def caller(pc: WorkflowInterpreter):
        results = [
            await pc.call_sub([1], 1, label="sub"),
            await pc.call_offset(1, 2, label="offset"),
            await pc.call_near(1, 3, label="near"),
            await pc.call_offset_far([1], 4, label="far"),
        ]
        pc.jump_offset(2)
        return results

    interp = WorkflowInterpreter(caller_then_callee(caller, callee))
    assert [v async for v in interp.run_step_by()] == [
        [(1, "sub"), (2, "offset"), (3, "near"), (4, "far")],
        "end",
    ]


@pytest.mark.asyncio
async def test_call_extras_do_not_persist():
    @Node(wrap_to_async=False)
    def callee(text: str):
        return text

    async def caller(pc: WorkflowInterpreter):
        return await pc.call_offset(1, "once")

    interp = WorkflowInterpreter(caller_then_callee(caller, callee))
    gen = interp.run_step_by()
    assert await gen.__anext__() == "once"
    with pytest.raises(DependsResolveFailed):
        await gen.__anext__()
    assert interp._pointer == PointerVector([1])


@pytest.mark.asyncio
async def test_call_extra_kwarg_clash_raises_depends_inject_failed():
    @Node(wrap_to_async=False)
    def callee(k: int):
        return k

    async def caller(pc: WorkflowInterpreter):
        return await pc.call_offset(1, k=2)

    interp = WorkflowInterpreter(caller_then_callee(caller, callee), extra_kwargs={"k": 1})
    with pytest.raises(DependsInjectFailed, match="Cannot override existing kwargs"):
        await interp.run()
    assert isinstance(interp.get_exception(), DependsInjectFailed)
    assert interp._pointer == PointerVector([0])
    assert len(interp._ret_addr_stack) == 0


@pytest.mark.asyncio
async def test_call_extra_kwarg_clash_can_be_caught_by_the_caller():
    @Node(wrap_to_async=False)
    def callee(k: int):
        return k

    async def caller(pc: WorkflowInterpreter):
        try:
            await pc.call_offset(1, k=2)
        except DependsInjectFailed:
            pc.jump_offset(2)
            return "caught"

    interp = WorkflowInterpreter(caller_then_callee(caller, callee), extra_kwargs={"k": 1})
    assert [v async for v in interp.run_step_by()] == ["caught", "end"]


@pytest.mark.asyncio
async def test_call_with_unresolvable_callee_raises_resolve_failed():
    @Node(wrap_to_async=False)
    def callee(svc: Service):
        return svc

    async def caller(pc: WorkflowInterpreter):
        return await pc.call_offset(1)

    interp = WorkflowInterpreter(caller_then_callee(caller, callee))
    with pytest.raises(DependsResolveFailed):
        await interp.run()
    assert interp._pointer == PointerVector([0])


# ----- factories in the interpreter's positional pool (rule 19) ------------------------------------------


@pytest.mark.asyncio
async def test_positional_factory_is_resolved_once_and_replaces_the_arg():
    from amrita_sense.hook.matcher import Depends

    made = []

    def provide() -> Service:
        made.append(Service("made"))
        return made[-1]

    @Node(wrap_to_async=False)
    def node(svc: Service):
        return svc

    interp = WorkflowInterpreter(node.as_compose().render(), extra_args=(Depends(provide),))
    first = [v async for v in interp.run_step_by()]
    second = [v async for v in interp.run_step_by()]
    assert len(made) == 1
    assert first == second == [made[0]]
    assert interp._ava_args == (interp, made[0])
    assert interp.args_hash_trustable is True


@pytest.mark.asyncio
async def test_failing_positional_factory_aborts_the_run():
    from amrita_sense.hook.matcher import Depends

    ran = []

    @Node(wrap_to_async=False)
    def node():
        ran.append("node")

    interp = WorkflowInterpreter(node.as_compose().render(), extra_args=(Depends(lambda: None),))
    with pytest.raises(RuntimeError, match="Runtime arguments cannot be resolved"):
        await interp.run()
    assert ran == []
    assert interp.is_running is False
