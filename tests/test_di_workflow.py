"""`Depends` in workflow nodes: providers, `use_cache`, the DI cache, preload and run-start factories (rules 73-77)."""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated

import pytest

from amrita_sense import DependsInjectFailed, DependsResolveFailed, Node, NodeCompose, WorkflowInterpreter
from amrita_sense._unsafe import _Flags
from amrita_sense.exceptions import InterruptNotice
from amrita_sense.hook.matcher import Depends
from amrita_sense.instructions.try_catch import Try
from amrita_sense.runtime import workflow as workflow_module

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup


class Config:
    def __init__(self, name: str = "cfg"):
        self.name = name


class Token:
    def __init__(self, value: str):
        self.value = value


def inline(func):
    return Node(wrap_to_async=False)(func)


def graph(*nodes):
    return NodeCompose(*nodes).render()


@pytest.fixture
def flags(monkeypatch):
    """A fresh flag set seen by the interpreter (rule 88: flags are read from the module global)."""
    fresh = _Flags()
    monkeypatch.setattr(workflow_module, "__flags__", fresh)
    return fresh


# ----- providers ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_sync_async_and_awaitable_returning_providers():
    seen = []

    def sync_provider(cfg: Config) -> str:
        return cfg.name

    async def async_provider(pc: WorkflowInterpreter) -> int:
        return len(pc._ava_args)

    def awaitable_provider() -> object:
        return async_provider_for_value()

    async def async_provider_for_value() -> str:
        return "awaited"

    @Node()
    async def node(
        a: str = Depends(sync_provider), b: int = Depends(async_provider), c: str = Depends(awaitable_provider)
    ):
        seen.append((a, b, c))

    await WorkflowInterpreter(graph(node), extra_args=(Config("x"),)).run()
    assert seen == [("x", 2, "awaited")]


@pytest.mark.asyncio
async def test_providers_start_in_declaration_order_sync_and_async_alike():
    """As in 1.1.3, a node's providers start in declaration order: an async one runs up to its first
    suspension before the next provider is called (the second slot runs on the cached plan)."""
    log = []

    async def first() -> int:
        log.append("first starts")
        await asyncio.sleep(0)
        log.append("first ends")
        return 1

    def second() -> int:
        log.append("second")
        return 2

    async def third() -> int:
        log.append("third")
        return 3

    def fourth() -> int:
        log.append("fourth")
        return 4

    @inline
    def node(a: int = Depends(first), b: int = Depends(second), c: int = Depends(third), d: int = Depends(fourth)):
        log.append((a, b, c, d))

    await WorkflowInterpreter(graph(node, node)).run()
    assert log == ["first starts", "second", "third", "fourth", "first ends", (1, 2, 3, 4)] * 2


@pytest.mark.asyncio
async def test_injection_into_a_worker_thread_node():
    seen = []

    @Node()
    def node(cfg: Config, name: str = Depends(lambda: "p")):
        seen.append((cfg.name, name))

    await WorkflowInterpreter(graph(node), extra_args=(Config("t"),)).run()
    assert seen == [("t", "p")]


@pytest.mark.asyncio
async def test_provider_parameters_come_from_pools_and_nested_depends():
    seen = []

    def token(cfg: Config, prefix: str) -> Token:
        return Token(prefix + cfg.name)

    def header(tok: Token = Depends(token)) -> str:
        return f"Bearer {tok.value}"

    @inline
    def node(h: str = Depends(header)):
        seen.append(h)

    await WorkflowInterpreter(graph(node), extra_args=(Config("c"),), extra_kwargs={"prefix": "p-"}).run()
    assert seen == ["Bearer p-c"]


@pytest.mark.asyncio
async def test_annotated_depends_in_a_node():
    seen = []

    @inline
    def node(value: Annotated[int, Depends(lambda: 5)]):
        seen.append(value)

    await WorkflowInterpreter(graph(node)).run()
    assert seen == [5]


@pytest.mark.asyncio
async def test_unresolvable_node_names_function_and_parameter():
    @inline
    def needs_token(tok: Token):
        pass

    interp = WorkflowInterpreter(graph(needs_token))
    with pytest.raises(DependsResolveFailed) as info:
        await interp.run()
    message = str(info.value)
    assert "needs_token" in message and "'tok'" in message and "Missed dependency" in message


@pytest.mark.asyncio
async def test_provider_returning_none_names_function_parameter_and_provider():
    def find_user() -> str | None:
        return None

    ran = []

    @inline
    def greet(user: str = Depends(find_user)):
        ran.append(user)

    with pytest.raises(DependsInjectFailed) as info:
        await WorkflowInterpreter(graph(greet)).run()
    message = str(info.value)
    assert "greet" in message and "user" in message and "find_user" in message and "None" in message
    assert ran == []


@pytest.mark.asyncio
async def test_provider_with_unresolvable_parameters_is_an_inject_failure():
    def needs_token(tok: Token) -> str:
        return tok.value

    @inline
    def node(value: str = Depends(needs_token)):
        pass

    with pytest.raises(DependsInjectFailed, match="needs_token.*'tok'"):
        await WorkflowInterpreter(graph(node)).run()


@pytest.mark.asyncio
async def test_provider_exception_panics_as_an_exception_group():
    def broken() -> int:
        raise ValueError("provider broke")

    @inline
    def node(value: int = Depends(broken)):
        pass

    interp = WorkflowInterpreter(graph(node))
    with pytest.raises(ExceptionGroup) as info:
        await interp.run()
    assert isinstance(info.value.exceptions[0], ValueError)
    assert interp.get_exception() is info.value


@pytest.mark.asyncio
async def test_pass_through_exception_from_a_provider_is_not_grouped():
    class Stop(Exception):
        pass

    def provider() -> int:
        raise Stop()

    @inline
    def node(value: int = Depends(provider)):
        pass

    with pytest.raises(Stop):
        await WorkflowInterpreter(graph(node), exception_ignored=(Stop,)).run()


@pytest.mark.asyncio
async def test_depends_failure_can_be_caught_by_try():
    caught = []

    @inline
    def needy(value: int = Depends(lambda: None)):
        pass

    @inline
    def handler(exc_type: type):
        caught.append(exc_type)

    await WorkflowInterpreter(Try(needy).CATCH(DependsInjectFailed, handler).extract().render()).run()
    assert caught == [DependsInjectFailed]


# ----- use_cache and the DI cache ---------------------------------------------------------


def counting_providers():
    calls = {"plain": 0, "cached": 0}

    def plain() -> int:
        calls["plain"] += 1
        return calls["plain"]

    def cached() -> int:
        calls["cached"] += 1
        return 100 + calls["cached"]

    return calls, plain, cached


@pytest.mark.asyncio
async def test_cached_provider_runs_once_plain_provider_every_call():
    calls, plain, cached = counting_providers()
    seen = []

    @inline
    def node(p: int = Depends(plain), c: int = Depends(cached, use_cache=True)):
        seen.append((p, c))

    interp = WorkflowInterpreter(graph(node, node, node))
    await interp.run()
    await interp.run()
    assert calls == {"plain": 6, "cached": 1}
    assert seen == [(i, 101) for i in range(1, 7)]


@pytest.mark.asyncio
async def test_cached_value_is_per_interpreter():
    calls, _, cached = counting_providers()

    @inline
    def node(c: int = Depends(cached, use_cache=True)):
        pass

    compiled = graph(node)
    await WorkflowInterpreter(compiled).run()
    await WorkflowInterpreter(compiled).run()
    assert calls["cached"] == 2


@pytest.mark.asyncio
async def test_no_cache_flag_resolves_cached_providers_every_call(flags):
    calls, _, cached = counting_providers()

    @inline
    def node(c: int = Depends(cached, use_cache=True)):
        pass

    flags.WORKFLOW_DI_NO_CACHE = True
    await WorkflowInterpreter(graph(node, node)).run()
    assert calls["cached"] == 2


@pytest.mark.asyncio
async def test_reassigned_pool_bypasses_the_cache_until_rehash():
    calls, _, cached = counting_providers()
    seen = []

    @inline
    def node(cfg: Config, c: int = Depends(cached, use_cache=True)):
        seen.append((cfg.name, c))

    interp = WorkflowInterpreter(graph(node), extra_args=(Config("a"),))
    await interp.run()
    interp._ava_args = (interp, Config("b"))
    assert interp.args_hash_trustable is False
    await interp.run()
    await interp.run()
    assert calls["cached"] == 3
    assert seen[-1] == ("b", 103)

    before = interp.args_hash
    interp.rehash_args()
    assert interp.args_hash_trustable is True
    assert interp.args_hash == before
    await interp.run()
    assert calls["cached"] == 3
    assert seen[-1] == ("b", 101)


@pytest.mark.asyncio
async def test_rehash_after_a_type_change_clears_the_cache():
    calls, _, cached = counting_providers()

    @inline
    def node(c: int = Depends(cached, use_cache=True)):
        pass

    interp = WorkflowInterpreter(graph(node))
    await interp.run()
    before = interp.args_hash
    interp._ava_args = (interp, Token("t"))
    interp.rehash_args()
    assert interp.args_hash != before
    await interp.run()
    await interp.run()
    assert calls["cached"] == 2


@pytest.mark.asyncio
async def test_cached_plans_read_current_values():
    seen = []

    @inline
    def node(cfg: Config, label: str):
        seen.append((cfg.name, label))

    interp = WorkflowInterpreter(graph(node), extra_args=(Config("a"),), extra_kwargs={"label": "x"})
    await interp.run()
    interp._ava_args = (interp, Config("b"))
    interp._ava_kwargs = {"label": "y"}
    interp.rehash_args()
    await interp.run()
    assert seen == [("a", "x"), ("b", "y")]


@pytest.mark.asyncio
async def test_catch_handler_sees_each_new_exception():
    seen = []
    count = iter(range(10))

    @inline
    def boom():
        raise ValueError(next(count))

    @inline
    def handler(exc_val: Exception):
        seen.append(exc_val.args[0])

    clause = Try(boom).CATCH(ValueError, handler)
    interp = WorkflowInterpreter(NodeCompose(clause, Try(boom).CATCH(ValueError, handler)).render())
    await interp.run()
    assert seen == [0, 1]


@pytest.mark.asyncio
async def test_same_function_in_two_slots_shares_its_cached_value():
    calls, _, cached = counting_providers()

    @inline
    def node(c: int = Depends(cached, use_cache=True)):
        pass

    await WorkflowInterpreter(graph(node, inline(node.func))).run()
    assert calls["cached"] == 1


@pytest.mark.asyncio
async def test_args_hash_fingerprints_type_names():
    from amrita_sense.utils import _fingerprint_args

    interp = WorkflowInterpreter(graph(inline(lambda: None)), extra_args=(Config(),), extra_kwargs={"k": 1})
    assert interp.args_hash == _fingerprint_args((interp, Config()), {"k": 2})
    assert interp.args_hash_trustable is True


# ----- preload ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_preload_resolves_cached_providers_before_any_node(flags):
    log = []

    def cached() -> int:
        log.append("provider")
        return 1

    @inline
    def first():
        log.append("first")

    @inline
    def second(c: int = Depends(cached, use_cache=True)):
        log.append("second")

    flags.WORKFLOW_DI_PRELOAD_CACHE = True
    inner = NodeCompose(second)
    await WorkflowInterpreter(NodeCompose(first, inner).render()).run()
    assert log == ["provider", "first", "second"]


@pytest.mark.asyncio
async def test_preload_keeps_cached_values_for_the_next_run(flags):
    """With the preload, a `use_cache` provider still runs once per interpreter (1.1.3 runs it at
    every run start; README, compatibility)."""
    calls, _, cached = counting_providers()
    seen = []

    @inline
    def node(c: int = Depends(cached, use_cache=True)):
        seen.append(c)

    flags.WORKFLOW_DI_PRELOAD_CACHE = True
    interp = WorkflowInterpreter(graph(node))
    await interp.run()
    await interp.run()
    assert calls["cached"] == 1 and seen == [101, 101]


@pytest.mark.asyncio
async def test_preload_fails_fast_on_an_unresolvable_node(flags):
    log = []

    @inline
    def first():
        log.append("first")

    @inline
    def broken(tok: Token):
        log.append("broken")

    flags.WORKFLOW_DI_PRELOAD_CACHE = True
    with pytest.raises(DependsResolveFailed):
        await WorkflowInterpreter(graph(first, broken)).run()
    assert log == []


@pytest.mark.asyncio
async def test_preload_needs_a_trusted_hash(flags):
    @inline
    def node():
        pass

    flags.WORKFLOW_DI_PRELOAD_CACHE = True
    interp = WorkflowInterpreter(graph(node))
    interp._ava_args = (interp,)
    with pytest.raises(DependsResolveFailed, match="rehash_args"):
        await interp.run()


@pytest.mark.asyncio
async def test_preload_batches_do_not_change_results(flags):
    calls, _, cached = counting_providers()
    nodes = []
    for _ in range(7):

        @inline
        def node(c: int = Depends(cached, use_cache=True)):
            pass

        nodes.append(node)
    flags.WORKFLOW_DI_PRELOAD_CACHE = True
    flags.WORKFLOW_DI_PRELOAD_BATCH = 3
    await WorkflowInterpreter(graph(*nodes)).run()
    assert calls["cached"] == 7


# ----- run-start factories ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_depends_in_extra_args_and_kwargs_resolve_at_run_start():
    built = []

    def make_config() -> Config:
        built.append(1)
        return Config("made")

    seen = []

    @inline
    def node(cfg: Config, label: str):
        seen.append((cfg.name, label))

    interp = WorkflowInterpreter(
        graph(node), extra_args=(Depends(make_config),), extra_kwargs={"label": Depends(lambda: "lbl")}
    )
    await interp.run()
    await interp.run()
    assert seen == [("made", "lbl"), ("made", "lbl")]
    assert built == [1]
    assert isinstance(interp._ava_args[1], Config)
    assert interp.args_hash_trustable


async def drain(interp, driver: str) -> None:
    if driver == "steps":
        async for _ in interp.run_step_by():
            pass
    else:
        await interp.run()


@pytest.mark.asyncio
@pytest.mark.parametrize("driver", ["run", "steps"])
async def test_unresolvable_run_start_factory_is_a_runtime_error_and_the_panic(driver):
    interp = WorkflowInterpreter(graph(inline(lambda: None)), extra_args=(Depends(lambda: None),))
    with pytest.raises(RuntimeError, match="Runtime arguments cannot be resolved") as raised:
        await drain(interp, driver)
    assert not interp.is_running
    assert interp.get_exception() is raised.value
    interp._ava_args = (interp,)
    interp.rehash_args()
    await drain(interp, driver)
    assert interp.get_exception() is None


@pytest.mark.asyncio
@pytest.mark.parametrize("driver", ["run", "steps"])
async def test_a_failing_preload_is_the_panic(flags, driver):
    @inline
    def broken(tok: Token):
        pass

    flags.WORKFLOW_DI_PRELOAD_CACHE = True
    interp = WorkflowInterpreter(graph(broken))
    with pytest.raises(DependsResolveFailed) as raised:
        await drain(interp, driver)
    assert interp.get_exception() is raised.value


@pytest.mark.asyncio
async def test_an_interrupt_notice_from_a_run_start_factory_ends_the_run_quietly():
    ran = []

    def interrupting() -> Config:
        raise InterruptNotice("stop before the first node")

    interp = WorkflowInterpreter(graph(inline(lambda: ran.append(1))), extra_args=(Depends(interrupting),))
    await interp.run()
    assert ran == [] and interp.get_exception() is None and list(interp._pointer) == []


# ----- private resolution helpers ----------------------------------------------------------


@pytest.mark.asyncio
async def test_rslv_node_helpers():
    calls, plain, cached = counting_providers()

    @inline
    def node(cfg: Config, p: int = Depends(plain), c: int = Depends(cached, use_cache=True)):
        pass

    interp = WorkflowInterpreter(graph(node))
    cfg = Config()
    static, factories = await interp._rslv_node_static(node, (interp, cfg), {})
    assert static == {"cfg": cfg, "c": 101}
    assert list(factories) == ["p"]
    assert await interp._rslv_node(node, (interp, cfg), {}) == {"cfg": cfg, "c": 102, "p": 1}


@pytest.mark.asyncio
async def test_call_extras_reach_providers():
    seen = []

    def provider(extra: Token) -> str:
        return extra.value

    @inline
    def callee(v: str = Depends(provider)):
        seen.append(v)
        return v

    @Node()
    async def caller(pc: WorkflowInterpreter):
        seen.append(await pc.call_offset(1, Token("one")))
        seen.append(await pc.call_offset(1, Token("two")))
        pc.jump_offset(2)

    await WorkflowInterpreter(graph(caller, callee, inline(lambda: None))).run()
    assert seen == ["one", "one", "two", "two"]


@pytest.mark.asyncio
async def test_no_dependency_meta_cache_reinspects_the_function(flags):
    seen = []

    @inline
    def node(cfg: Config):
        seen.append(cfg.name)

    node.fun_sign = {
        "params": {"missing": {"type_hint": Token, "kind": "required", "default": None}},
        "factory_map": {},
    }
    flags.NO_DEPENDENCY_META_CACHE = True
    await WorkflowInterpreter(graph(node), extra_args=(Config("fresh"),)).run()
    assert seen == ["fresh"]


@pytest.mark.asyncio
async def test_bound_methods_as_node_and_provider():
    class Service_:
        def __init__(self):
            self.seen = []

        def provide(self, cfg: Config) -> str:
            return cfg.name

        def handle(self, cfg: Config, name: str = Depends(lambda: "p")):
            self.seen.append((cfg.name, name))

        def positional(self, cfg: Config, label: str):
            self.seen.append((cfg.name, label))

    svc = Service_()

    @inline
    def via_provider(value: str = Depends(svc.provide)):
        svc.seen.append(value)

    interp = WorkflowInterpreter(
        graph(inline(svc.handle), inline(svc.positional), via_provider),
        extra_args=(Config("c"),),
        extra_kwargs={"label": "L"},
    )
    await interp.run()
    await interp.run()
    assert svc.seen == [("c", "p"), ("c", "L"), "c"] * 2
