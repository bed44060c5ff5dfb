"""Matchers, event dispatch and `Depends` (stub: the events/DI issue owns this module)."""

from __future__ import annotations

import inspect
from enum import Enum
from typing import Any

from amrita_sense.hook.fun_typing import EMPTY, DependencyMeta, sign_func, type_matches


class FailedEnum(str, Enum):
    MISSED_ANNOTATION = "missed_annotation"
    MISSED_DEPENDENCY = "missed_dependency"
    RESOLVE_FAILED = "resolve_failed"


class DependsFactory:
    """A declared dependency: a provider whose own parameters are injected too."""

    def __init__(self, depency, cacheable: bool = False, *, scope=None):
        self._depency = depency
        self._cacheable = cacheable
        self._scope = scope

    @property
    def cacheable(self) -> bool:
        return self._cacheable

    use_cache = cacheable

    @property
    def is_lifecycle(self) -> bool:
        return inspect.isgeneratorfunction(self._depency) or inspect.isasyncgenfunction(self._depency)

    async def resolve(self, *args, **kwargs):
        fail, resolved, _ = MatcherFactory._resolve_dependencies(sign_func(self._depency), args, kwargs)
        if fail is not None:
            return None
        result = self._depency(**resolved)
        if inspect.isawaitable(result):
            result = await result
        return result


def Depends(dependency, use_cache: bool = False, scope=None, *, cacheable: bool | None = None) -> DependsFactory:
    return DependsFactory(dependency, use_cache if cacheable is None else cacheable, scope=scope)


class MatcherFactory:
    @staticmethod
    def _resolve_dependencies(signature: DependencyMeta, session_args, session_kwargs):
        resolved: dict[str, Any] = {}
        required = []
        for name, param in signature["params"].items():
            if param["type_hint"] is EMPTY:
                return FailedEnum.MISSED_ANNOTATION, {}, {}
            if name in session_kwargs:
                resolved[name] = session_kwargs[name]
            if param["default"] is EMPTY:
                required.append((name, param["type_hint"]))
        for name, hint in required:
            if name in resolved:
                continue
            for arg in session_args:
                if type_matches(arg, hint):
                    resolved[name] = arg
                    break
            else:
                return FailedEnum.MISSED_DEPENDENCY, {}, {}
        return None, resolved, signature["factory_map"]

    @staticmethod
    async def _do_runtime_resolve(
        runtime_args, runtime_kwargs, args2update, kwargs2update, session_args, session_kwargs,
        exception_ignored, *, store=None, lifecycles=None, default_scope=None,
    ) -> bool:
        for index, factory in runtime_args.items():
            value = await factory.resolve(*session_args, **session_kwargs)
            if value is None:
                return False
            args2update[index] = value
        for name, factory in runtime_kwargs.items():
            value = await factory.resolve(*session_args, **session_kwargs)
            if value is None:
                return False
            kwargs2update[name] = value
        return True
