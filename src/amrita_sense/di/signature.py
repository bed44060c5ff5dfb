"""Signature analysis for dependency injection.

`sign_func` reads a function's parameters once (when a node or handler is
created) into a `DependencyMeta`: for each parameter its type hint, whether
it is required, optional or provided by a `Depends(...)` factory, and its
default. Plain functions are read straight from `__code__`, `__defaults__`,
`__kwdefaults__` and `__annotations__`; other callables go through
`inspect.signature`.
"""

from __future__ import annotations

import builtins
import inspect
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import CodeType, FrameType, FunctionType, MethodType
from typing import Annotated, Any, Literal, TypedDict

from amrita_sense.exceptions import DependsDeclarationError


class _Empty:
    """The type of `EMPTY`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "EMPTY"

    def __reduce__(self) -> str:
        return "EMPTY"


EMPTY: Any = _Empty()
"""Marks "no annotation" in `type_hint` and "no default" in `default`."""


class ParamDescriptor(TypedDict):
    type_hint: Any
    """The annotation with `Annotated` removed, or `EMPTY`."""
    kind: Literal["required", "optional", "factory"]
    default: Any
    """The default value; `EMPTY` for a required parameter, None for a factory parameter."""


class DependencyMeta(TypedDict):
    params: dict[str, ParamDescriptor]
    factory_map: dict[str, Factory]


@dataclass
class FunctionData:
    """One registered event handler."""

    function: Callable[..., Awaitable[Any]]
    signature: DependencyMeta
    frame: FrameType | None
    priority: int
    matcher: Any  # the `hook.matcher.Matcher` the handler is registered with
    _plans: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        # event dispatch keeps what it read of a handler while the registry's version stands: a
        # write tells it (`_set_change_listener`)
        object.__setattr__(self, name, value)
        listener = _change_listener[0]
        if listener is not None:
            listener()


_change_listener: list[Callable[[], None] | None] = [None]
# threads: immutable once published (set once, at import of hook.matcher, under the import lock)


def _set_change_listener(listener: Callable[[], None]) -> None:
    _change_listener[0] = listener


class _NoFactory:
    """Stands in for `DependsFactory` until `di.depends` is imported."""


_factory_cls: type = _NoFactory
# threads: immutable once published (set once, at import of di.depends, under the import lock)

Factory = Any
"""A `di.depends.DependsFactory` (named loosely: that module builds on this one)."""
_AnnotatedAlias = type(Annotated[int, None])
_NoneType = type(None)
_CO_VARARGS = inspect.CO_VARARGS
_CO_VARKEYWORDS = inspect.CO_VARKEYWORDS
_compiled_annotations: dict[str, CodeType | None] = {}
# threads: a race only recomputes the same value (compile of one text; one setitem)


def _set_factory_class(cls: type) -> None:
    global _factory_cls
    _factory_cls = cls


def unwrap_annotated(anno: Any) -> Any:
    """Remove the `Annotated[...]` layer (typing flattens nested ones), keeping the type."""
    if type(anno) is _AnnotatedAlias:
        return anno.__origin__  # type: ignore[attr-defined]  # typing's private alias class
    return anno


def _declared_depends(anno: Any) -> Factory | None:
    """The last `Depends(...)` marker in an `Annotated` annotation, if any."""
    if type(anno) is not _AnnotatedAlias:
        return None
    for meta in reversed(anno.__metadata__):  # type: ignore[attr-defined]  # typing's private alias class
        if isinstance(meta, _factory_cls):
            return meta
    return None


def type_matches(value: Any, hint: Any) -> bool:
    """`isinstance(value, hint)` that never raises.

    A subscripted generic is checked against its origin (`list[int]` as
    `list`); `Any`, `EMPTY` and anything `isinstance` refuses do not match.
    """
    if hint is EMPTY:
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


# ----- annotations -------------------------------------------------------------------


def _evaluate(text: str, globalns: dict[str, Any]) -> Any:
    """One PEP 563 string annotation evaluated in the function's globals; EMPTY on failure.

    A string that evaluates to a string (a quoted annotation under
    `from __future__ import annotations`) is evaluated once more.
    """
    value = _evaluate_once(text, globalns)
    if type(value) is str:
        value = _evaluate_once(value, globalns)
    return value


def _evaluate_once(text: str, globalns: dict[str, Any]) -> Any:
    if text.isidentifier():
        value = globalns.get(text, EMPTY)
        if value is EMPTY:
            value = builtins.__dict__.get(text, EMPTY)
        return value
    code = _compiled_annotations.get(text, EMPTY)
    if code is EMPTY:
        try:
            code = compile(text, "<annotation>", "eval")
        except SyntaxError:
            code = None
        _compiled_annotations[text] = code
    if code is None:
        return EMPTY
    try:
        return eval(code, globalns)
    except Exception:
        return EMPTY


def _resolve_strings(raw: dict[str, Any], globalns: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Evaluate the string annotations of `raw`: `(resolved, every string evaluated)`.

    A string that fails becomes EMPTY for its parameter alone.
    """
    for value in raw.values():
        if type(value) is str:
            break
    else:
        return raw, True
    resolved = {}
    complete = True
    for name, value in raw.items():
        if type(value) is str:
            value = _evaluate(value, globalns)
            complete = complete and value is not EMPTY
        resolved[name] = _NoneType if value is None else value
    return resolved, complete


def _raw_annotations(func: Any) -> dict[str, Any]:
    try:
        raw = getattr(func, "__annotations__", None)
    except Exception:  # deferred annotations (PEP 649) naming something undefined
        raw = _forward_ref_annotations(func)
    return raw if isinstance(raw, dict) else {}


def _forward_ref_annotations(func: Any) -> dict[str, Any]:
    try:
        import annotationlib  # Python 3.14+

        found = annotationlib.get_annotations(func, format=annotationlib.Format.FORWARDREF)
    except Exception:
        return {}
    return {k: EMPTY if isinstance(v, annotationlib.ForwardRef) else v for k, v in found.items()}


def _globals_of(func: Any) -> dict[str, Any]:
    target = func
    while hasattr(target, "__wrapped__"):
        target = target.__wrapped__
    target = getattr(target, "__func__", target)
    return getattr(target, "__globals__", None) or {}


# ----- parameters --------------------------------------------------------------------


def _describe(func: Any, name: str, anno: Any, default: Any, factories: dict[str, Any]) -> ParamDescriptor:
    declared = _declared_depends(anno) if type(anno) is _AnnotatedAlias else None
    hint = anno.__origin__ if type(anno) is _AnnotatedAlias else anno  # type: ignore[attr-defined]
    if isinstance(default, _factory_cls):
        if declared is not None:
            raise DependsDeclarationError(
                f"Parameter {name!r} of {_func_name(func)} declares `Depends` in both its "
                "annotation and its default value; pick one."
            )
        factories[name] = default
        return {"type_hint": hint, "kind": "factory", "default": None}
    if declared is not None:
        factories[name] = declared
        return {"type_hint": hint, "kind": "factory", "default": None}
    return {"type_hint": hint, "kind": "required" if default is EMPTY else "optional", "default": default}


def _sign_code(func: FunctionType, skip: int, annotations: dict[str, Any]) -> DependencyMeta:
    """Read a plain function's parameters from its code object (`skip` bound leading ones)."""
    code = func.__code__
    names = code.co_varnames
    npos = code.co_argcount
    nkw = code.co_kwonlyargcount
    defaults = func.__defaults__ or ()
    first_default = npos - len(defaults)
    params: dict[str, ParamDescriptor] = {}
    factories: dict[str, Any] = {}
    get = annotations.get
    for i in range(skip, npos):
        name = names[i]
        anno = get(name, EMPTY)
        default = defaults[i - first_default] if i >= first_default else EMPTY
        if type(anno) is _AnnotatedAlias or isinstance(default, _factory_cls):
            params[name] = _describe(func, name, anno, default, factories)
        else:
            params[name] = {
                "type_hint": anno,
                "kind": "required" if default is EMPTY else "optional",
                "default": default,
            }
    rest = npos + nkw
    if code.co_flags & _CO_VARARGS:
        name = names[rest]
        params[name] = _describe(func, name, get(name, EMPTY), EMPTY, factories)
        rest += 1
    if nkw:
        kwdefaults = func.__kwdefaults__ or {}
        for name in names[npos : npos + nkw]:
            params[name] = _describe(func, name, get(name, EMPTY), kwdefaults.get(name, EMPTY), factories)
    if code.co_flags & _CO_VARKEYWORDS:
        name = names[rest]
        params[name] = _describe(func, name, get(name, EMPTY), EMPTY, factories)
    return {"params": params, "factory_map": factories}


_sign_cache: dict[CodeType, tuple] = {}
# threads: a race only recomputes the same value: an entry is one tuple (stored in one setitem,
# read in one get, checked against the function's current defaults / annotations / globals)
_SIGN_CACHE_LIMIT = 4096


def _sign_plain(func: FunctionType, skip: int) -> DependencyMeta:
    """`_sign_code`, remembered per code object while defaults, annotations and globals stay the same objects."""
    code = func.__code__
    defaults, kwdefaults, globalns = func.__defaults__, func.__kwdefaults__, func.__globals__
    try:
        raw = func.__annotations__
    except Exception:  # deferred annotations (PEP 649) naming something undefined
        return _sign_code(func, skip, _forward_ref_annotations(func))
    hit = _sign_cache.get(code)
    if (
        hit is not None
        and hit[0] is defaults
        and hit[1] is kwdefaults
        and hit[2] is raw
        and hit[3] is globalns
        and hit[4] == skip
    ):
        return hit[5]
    annotations, complete = _resolve_strings(raw, globalns) if raw else (raw, True)
    meta = _sign_code(func, skip, annotations)
    if complete:
        if len(_sign_cache) >= _SIGN_CACHE_LIMIT:
            _sign_cache.clear()
        _sign_cache[code] = (defaults, kwdefaults, raw, globalns, skip, meta)
    return meta


def _sign_inspect(func: Any) -> DependencyMeta:
    """The general path: `inspect.signature` plus the callable's own `__annotations__`."""
    parameters: Mapping[str, inspect.Parameter]
    try:
        parameters = inspect.signature(func).parameters
    except ValueError:  # a builtin without signature metadata (Python 3.10): nothing to inject
        parameters = {}
    annotations = _raw_annotations(func)
    if annotations:
        annotations = _resolve_strings(annotations, _globals_of(func))[0]
    params: dict[str, ParamDescriptor] = {}
    factories: dict[str, Any] = {}
    empty = inspect.Parameter.empty
    for name, prm in parameters.items():
        default = EMPTY if prm.default is empty else prm.default
        anno = annotations.get(name, EMPTY)
        if anno is empty:
            anno = EMPTY
        params[name] = _describe(func, name, anno, default, factories)
    return {"params": params, "factory_map": factories}


def _is_plain(func: Any) -> bool:
    """A function whose code object is its signature (no `__wrapped__` / `__signature__`)."""
    if type(func) is not FunctionType:
        return False
    attrs = func.__dict__
    return not attrs or ("__wrapped__" not in attrs and "__signature__" not in attrs)


def sign_func(func: Callable[..., Any]) -> DependencyMeta:
    """Analyse `func`'s parameters for dependency injection.

    PEP 563 string annotations are evaluated in the function's globals; one
    that cannot be evaluated becomes `EMPTY` for that parameter only.
    `Annotated[T, ...]` is reduced to `T`, and a `Depends(...)` in its
    metadata (the last one wins) or in the default value makes the parameter
    a factory parameter. Declaring both raises `DependsDeclarationError`.
    """
    if _is_plain(func):
        return _sign_plain(func, 0)  # type: ignore[arg-type]  # _is_plain checked it is a FunctionType
    if type(func) is MethodType and _is_plain(func.__func__) and func.__func__.__code__.co_argcount:
        return _sign_plain(func.__func__, 1)  # type: ignore[arg-type]
    return _sign_inspect(func)


def _func_name(func: Any) -> str:
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)


__all__ = [
    "DependencyMeta",
    "FunctionData",
    "ParamDescriptor",
    "sign_func",
    "type_matches",
    "unwrap_annotated",
]
