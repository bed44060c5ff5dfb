"""Matching a signature against the pools: `_resolve_dependencies` and `_do_runtime_resolve` (rules 72-75)."""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated, Any, Optional

import pytest

from amrita_sense import sign_func
from amrita_sense.di import DependencyStore, LifecycleScope, Scope
from amrita_sense.exceptions import BreakLoop, DependsInjectFailed
from amrita_sense.hook.matcher import Depends, DependsFactory, FailedEnum, MatcherFactory

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup


class Animal:
    pass


class Dog(Animal):
    pass


class Cat(Animal):
    pass


def resolve(func, args, kwargs=None):
    return MatcherFactory._resolve_dependencies(sign_func(func), args, kwargs or {})


def test_positional_by_type_first_match_wins():
    def f(a: Animal, n: int): ...

    dog, cat = Dog(), Cat()
    fail, values, factories = resolve(f, [cat, 7, dog, 8])
    assert fail is None
    assert values == {"a": cat, "n": 7}
    assert factories == {}


def test_same_value_can_fill_two_parameters():
    def f(a: Animal, b: Dog): ...

    dog = Dog()
    assert resolve(f, [dog])[1] == {"a": dog, "b": dog}


def test_keyword_by_name_wins_over_type():
    def f(a: Animal): ...

    fail, values, _ = resolve(f, [Dog()], {"a": "not an animal"})
    assert fail is None
    assert values == {"a": "not an animal"}


def test_optional_parameter_only_from_keywords():
    def f(a: int, b: int = 5): ...

    assert resolve(f, [1, 2])[1] == {"a": 1}
    assert resolve(f, [1, 2], {"b": 9})[1] == {"a": 1, "b": 9}


def test_unused_keywords_are_ignored():
    def f(a: int): ...

    assert resolve(f, [1], {"zzz": 0})[1] == {"a": 1}


def test_optional_union_and_generics():
    def f(a: Optional[Dog], b: int | str, c: list[int], d: Annotated[Cat, "x"]): ...

    dog, cat = Dog(), Cat()
    fail, values, _ = resolve(f, ["s", [1], dog, cat])
    assert fail is None
    assert values == {"a": dog, "b": "s", "c": [1], "d": cat}


def test_any_never_matches_positionally():
    def f(a: Any): ...

    assert resolve(f, [1, "x"])[0] is FailedEnum.MISSED_DEPENDENCY
    assert resolve(f, [], {"a": 3})[1] == {"a": 3}


def test_missed_annotation_beats_missed_dependency():
    def f(a: Dog, b): ...

    assert resolve(f, [])[0] is FailedEnum.MISSED_ANNOTATION


def test_missing_annotation_fails_even_with_a_keyword_or_default():
    def f(a=1): ...

    assert resolve(f, [], {"a": 2})[0] is FailedEnum.MISSED_ANNOTATION


def test_missed_dependency():
    def f(a: Dog): ...

    assert resolve(f, [Cat()]) == (FailedEnum.MISSED_DEPENDENCY, {}, {})


def test_failed_enum_values():
    assert [m.value for m in FailedEnum] == ["Missed annotation", "Missed dependency", "Resolution failed"]


def test_factories_are_returned_unresolved():
    def provider() -> int:
        return 1

    marker = Depends(provider)

    def f(a: int = marker, b: str = "x"): ...

    fail, values, factories = resolve(f, [])
    assert fail is None and values == {}
    assert factories == {"a": marker}


def test_keyword_named_like_a_factory_parameter_is_taken_then_overridden():
    def f(a: int = Depends(lambda: 1)): ...

    assert resolve(f, [], {"a": 0})[1] == {"a": 0}


def test_pools_may_be_any_iterable():
    def f(a: int): ...

    assert resolve(f, iter([3]))[1] == {"a": 3}


# ----- _do_runtime_resolve ------------------------------------------------------------


async def runtime_resolve(runtime_kwargs, *, args=(), kwargs=None, exception_ignored=(), runtime_args=None, **extra):
    target_args = list(args)
    target_kwargs = dict(kwargs or {})
    ok = await MatcherFactory._do_runtime_resolve(
        runtime_args or {},
        runtime_kwargs,
        target_args,
        target_kwargs,
        list(args),
        dict(kwargs or {}),
        exception_ignored,
        **extra,
    )
    return ok, target_args, target_kwargs


@pytest.mark.asyncio
async def test_runtime_resolve_fills_targets_from_the_pools():
    def double(n: int) -> int:
        return n * 2

    async def name(label: str) -> str:
        return label.upper()

    ok, args, kwargs = await runtime_resolve(
        {"x": Depends(double), "y": Depends(name)},
        args=[21],
        kwargs={"label": "ab"},
        runtime_args={0: Depends(double)},
    )
    assert ok
    assert args == [42]
    assert kwargs == {"label": "ab", "x": 42, "y": "AB"}


@pytest.mark.asyncio
async def test_runtime_resolve_none_result_fails_and_updates_nothing():
    ok, args, kwargs = await runtime_resolve({"x": Depends(lambda: 1), "y": Depends(lambda: None)})
    assert ok is False
    assert kwargs == {}


@pytest.mark.asyncio
async def test_runtime_resolve_unresolvable_provider_fails():
    def needs(d: Dog) -> int:
        return 1

    ok, _, _ = await runtime_resolve({"x": Depends(needs)}, args=[Cat()])
    assert ok is False


@pytest.mark.asyncio
async def test_runtime_resolve_groups_ordinary_exceptions():
    def bad() -> int:
        raise ValueError("v")

    async def worse() -> int:
        raise KeyError("k")

    with pytest.raises(ExceptionGroup) as info:
        await runtime_resolve({"a": Depends(bad), "b": Depends(worse), "c": Depends(lambda: 1)})
    assert [type(e) for e in info.value.exceptions] == [ValueError, KeyError]


@pytest.mark.asyncio
async def test_runtime_resolve_passes_through_ignored_exceptions():
    def bad() -> int:
        raise BreakLoop()

    with pytest.raises(BreakLoop):
        await runtime_resolve({"a": Depends(bad)}, exception_ignored=(BreakLoop,))


@pytest.mark.asyncio
async def test_runtime_resolve_reraises_base_exceptions():
    async def cancelled() -> int:
        raise asyncio.CancelledError()

    with pytest.raises(asyncio.CancelledError):
        await runtime_resolve({"a": Depends(cancelled), "b": Depends(lambda: 1)})


@pytest.mark.asyncio
async def test_plain_providers_run_concurrently():
    started = asyncio.Event()

    async def first() -> str:
        started.set()
        return "first"

    async def second() -> str:
        await asyncio.wait_for(started.wait(), 1)
        return "second"

    ok, _, kwargs = await runtime_resolve({"b": Depends(second), "a": Depends(first)})
    assert ok and kwargs == {"b": "second", "a": "first"}


@pytest.mark.asyncio
async def test_nested_depends_resolve_from_the_same_pools():
    def base(n: int) -> int:
        return n + 1

    def middle(v: int = Depends(base)) -> int:
        return v * 10

    def top(w: int = Depends(middle), label: str = "") -> str:
        return f"{label}{w}"

    ok, _, kwargs = await runtime_resolve({"out": Depends(top)}, args=[4], kwargs={"label": "="})
    assert ok and kwargs["out"] == "=50"


@pytest.mark.asyncio
async def test_generator_needs_a_lifecycle_scope():
    def gen():
        yield 1

    with pytest.raises(DependsInjectFailed, match="lifecycle scope"):
        await runtime_resolve({"a": Depends(gen)})


@pytest.mark.asyncio
async def test_generators_open_in_declaration_order_and_close_in_reverse():
    log = []

    def make(name):
        def gen():
            log.append(f"open {name}")
            yield name
            log.append(f"close {name}")

        return gen

    scope = LifecycleScope(Scope.DISPATCH)
    ok, _, kwargs = await runtime_resolve(
        {"a": Depends(make("a")), "b": Depends(make("b")), "c": Depends(lambda: "plain")},
        lifecycles={Scope.DISPATCH: scope},
        default_scope=Scope.DISPATCH,
    )
    assert ok and kwargs == {"a": "a", "b": "b", "c": "plain"}
    assert log == ["open a", "open b"]
    await scope.aclose()
    assert log == ["open a", "open b", "close b", "close a"]


@pytest.mark.asyncio
async def test_store_shares_a_scoped_value_between_resolutions():
    opened = []

    async def gen():
        opened.append(1)
        yield len(opened)

    scope, store = LifecycleScope(Scope.WORKFLOW), DependencyStore()
    marker = Depends(gen)
    first = await runtime_resolve(
        {"a": marker}, store=store, lifecycles={Scope.WORKFLOW: scope}, default_scope=Scope.WORKFLOW
    )
    second = await runtime_resolve(
        {"a": marker}, store=store, lifecycles={Scope.WORKFLOW: scope}, default_scope=Scope.WORKFLOW
    )
    assert first[2] == second[2] == {"a": 1}
    assert opened == [1]
    await scope.aclose()


@pytest.mark.asyncio
async def test_empty_runtime_resolve_is_true():
    assert (await runtime_resolve({}))[0] is True


def test_depends_factory_declaration():
    def plain() -> int:
        return 1

    def gen():
        yield 1

    factory = Depends(plain, use_cache=True)
    assert isinstance(factory, DependsFactory)
    assert factory.cacheable and factory.use_cache and not factory.is_lifecycle
    assert Depends(plain, cacheable=True).use_cache is True
    assert Depends(plain, True, cacheable=False).use_cache is False
    scoped = Depends(gen, scope="call")
    assert scoped.is_lifecycle and scoped.scope is Scope.CALL and scoped.generator_kind == "sync"
    assert Depends(gen).scope is None


def test_scope_on_a_plain_provider_is_a_declaration_error():
    from amrita_sense import DependsDeclarationError

    with pytest.raises(DependsDeclarationError, match="plain"):
        Depends(lambda: 1, scope="workflow")


def test_unknown_scope_name_is_a_value_error():
    def gen():
        yield 1

    with pytest.raises(ValueError):
        Depends(gen, scope="forever")


@pytest.mark.asyncio
async def test_factory_resolve_directly():
    def provider(n: int, label: str) -> str:
        return f"{label}{n}"

    async def async_provider(n: int) -> int:
        return n + 1

    assert await Depends(provider).resolve(3, label="#") == "#3"
    assert await Depends(async_provider).resolve(3) == 4
    assert await Depends(provider).resolve("no int") is None


@pytest.mark.asyncio
async def test_factory_resolve_on_a_generator_raises():
    def gen():
        yield 1

    with pytest.raises(DependsInjectFailed, match="generator"):
        await Depends(gen).resolve()


@pytest.mark.asyncio
async def test_circular_depends_is_a_declaration_error():
    from amrita_sense import DependsDeclarationError

    def loop_provider(x: int = None) -> int:  # the default is replaced below
        return 1

    marker = Depends(loop_provider)
    loop_provider.__defaults__ = (marker,)
    marker._sign = sign_func(loop_provider)
    with pytest.raises(DependsDeclarationError, match="circular"):
        await runtime_resolve({"a": marker})
