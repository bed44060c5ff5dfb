"""`MatcherFactory._resolve_dependencies` / `_do_runtime_resolve` replaced (1.1.3's own tests patch them):
`_call()` outside a run resolves through them as 1.1.3's `_call()` does; a run's steps use the plans
(README, "DI internals")."""

from __future__ import annotations

import pytest

from amrita_sense import DependsInjectFailed, DependsResolveFailed, Node, NodeCompose, WorkflowInterpreter
from amrita_sense.hook.matcher import Depends, FailedEnum, MatcherFactory


class Config:
    def __init__(self, name: str = "cfg"):
        self.name = name


def inline(func):
    return Node(wrap_to_async=False)(func)


@pytest.fixture
def matcher(monkeypatch):
    return lambda name, func: monkeypatch.setattr(MatcherFactory, name, classmethod(func))


def taking_config(seen: list):
    @inline
    def first(cfg: Config):
        seen.append(("first", cfg.name))

    return first


@pytest.mark.asyncio
async def test_call_before_a_run_resolves_through_a_replaced_resolve_dependencies(matcher):
    first = taking_config([])
    interp = WorkflowInterpreter(NodeCompose(first).render(), extra_args=(Config(),))
    matcher("_resolve_dependencies", lambda cls, *args, **kwargs: (FailedEnum.RESOLVE_FAILED, {}, {}))
    with pytest.raises(DependsResolveFailed, match="could not be resolved"):
        await interp._call()


@pytest.mark.asyncio
async def test_call_before_a_run_resolves_providers_through_a_replaced_do_runtime_resolve(matcher):
    seen = []

    async def refuse(cls, *args, **kwargs):
        seen.append(sorted(kwargs["runtime_kwargs"]))
        return False

    @inline
    def node(made: int = Depends(lambda: 1)):
        pass

    interp = WorkflowInterpreter(NodeCompose(node).render())
    matcher("_do_runtime_resolve", refuse)
    with pytest.raises(DependsInjectFailed, match="made"):
        await interp._call()
    assert seen == [["made"]]


@pytest.mark.asyncio
async def test_call_through_replaced_hooks_injects_what_they_give(matcher):
    seen = []

    @inline
    def node(cfg: Config, made: int = Depends(lambda: 1)):
        seen.append((cfg, made))

    def resolve(cls, meta, args, kwargs):
        return None, {"cfg": "from the hook"}, dict(meta["factory_map"])

    async def provide(cls, *, runtime_kwargs, kwargs2update, **rest):
        kwargs2update.update(dict.fromkeys(runtime_kwargs, 42))
        return True

    interp = WorkflowInterpreter(NodeCompose(node).render(), extra_args=(Config(),))
    matcher("_resolve_dependencies", resolve)
    matcher("_do_runtime_resolve", provide)
    await interp._call()
    assert seen == [("from the hook", 42)]


@pytest.mark.asyncio
async def test_a_runs_steps_use_the_plans_not_the_replaced_hooks(matcher):
    seen = []
    first = taking_config(seen)
    interp = WorkflowInterpreter(NodeCompose(first).render(), extra_args=(Config("a"),))
    matcher("_resolve_dependencies", lambda cls, *args, **kwargs: (FailedEnum.RESOLVE_FAILED, {}, {}))
    await interp.run()
    assert seen == [("first", "a")]
