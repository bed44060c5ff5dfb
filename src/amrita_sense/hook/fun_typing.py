"""Signature analysis for dependency injection (stub: the events/DI issue owns this module)."""

from __future__ import annotations

import builtins
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypedDict

from amrita_sense.exceptions import DependsDeclarationError


class _Empty:
    __slots__ = ()

    def __repr__(self) -> str:
        return "EMPTY"


EMPTY = _Empty()


class ParamDescriptor(TypedDict):
    type_hint: Any
    kind: Literal["required", "optional", "factory"]
    default: Any


class DependencyMeta(TypedDict):
    params: dict[str, ParamDescriptor]
    factory_map: dict[str, Any]


def unwrap_annotated(anno: Any) -> Any:
    """Remove one `Annotated[...]` layer."""
    if typing.get_origin(anno) is Annotated:
        return typing.get_args(anno)[0]
    return anno


def type_matches(value: Any, hint: Any) -> bool:
    """`isinstance` that falls back to a generic's origin and never raises."""
    if hint is EMPTY or hint is Any:
        return False
    try:
        return isinstance(value, hint)
    except TypeError:
        origin = typing.get_origin(hint)
        if origin is None:
            return False
        try:
            return isinstance(value, origin)
        except TypeError:
            return False


def _annotations_of(func: Callable[..., Any]) -> dict[str, Any]:
    raw = dict(getattr(func, "__annotations__", None) or {})
    if not any(isinstance(v, str) for v in raw.values()):
        return raw
    try:
        return typing.get_type_hints(func, include_extras=True)
    except Exception:
        namespace = {**vars(builtins), **getattr(func, "__globals__", {})}
        resolved = {}
        for name, value in raw.items():
            try:
                resolved[name] = eval(value, namespace) if isinstance(value, str) else value
            except Exception:
                resolved[name] = EMPTY
        return resolved


def _depends_in(anno: Any):
    from amrita_sense.hook.matcher import DependsFactory

    if typing.get_origin(anno) is not Annotated:
        return None
    for meta in reversed(typing.get_args(anno)[1:]):
        if isinstance(meta, DependsFactory):
            return meta
    return None


def sign_func(func: Callable[..., Any]) -> DependencyMeta:
    """Analyse `func`'s parameters once: type hint, kind and default of each."""
    from amrita_sense.hook.matcher import DependsFactory

    annotations = _annotations_of(func)
    params: dict[str, ParamDescriptor] = {}
    factories: dict[str, Any] = {}
    for name, prm in inspect.signature(func).parameters.items():
        default = EMPTY if prm.default is inspect.Parameter.empty else prm.default
        raw_anno = annotations.get(name, EMPTY)
        declared = _depends_in(raw_anno)
        kind = "required"
        if isinstance(default, DependsFactory):
            if declared is not None:
                raise DependsDeclarationError(
                    f"Parameter {name!r} of {getattr(func, '__qualname__', func)} declares "
                    "`Depends` both in its annotation and its default value"
                )
            kind, factories[name], default = "factory", default, None
        elif declared is not None:
            kind, factories[name], default = "factory", declared, None
        elif default is not EMPTY:
            kind = "optional"
        params[name] = ParamDescriptor(type_hint=unwrap_annotated(raw_anno), kind=kind, default=default)
    return DependencyMeta(params=params, factory_map=factories)


__all__ = ["DependencyMeta", "ParamDescriptor", "sign_func", "type_matches", "unwrap_annotated"]
