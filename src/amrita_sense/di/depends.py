"""`Depends(...)`: the declared dependency, a provider whose own parameters are injected too.

The signature analysis (`di.signature`) recognises these objects as parameter defaults and in
`Annotated[...]`; the injection engine (`di.inject`) prepares and resolves them.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import Any, Generic, Literal, TypeVar

from amrita_sense.di import signature
from amrita_sense.di.cache import DependencyStore
from amrita_sense.di.inject import Prepared, Session, callable_name, resolve_group
from amrita_sense.di.scope import LifecycleScope, Scope, lift_sync_context
from amrita_sense.di.signature import DependencyMeta, sign_func
from amrita_sense.exceptions import DependsDeclarationError, DependsInjectFailed

T = TypeVar("T")


def detect_generator_kind(call: Callable[..., Any]) -> Literal["sync", "async"] | None:
    """ "async" / "sync" for a generator provider (also through `@contextmanager` wrappers), else None."""
    target = inspect.unwrap(call)
    if inspect.isasyncgenfunction(target):
        return "async"
    if inspect.isgeneratorfunction(target):
        return "sync"
    return None


def _context_builder(
    call: Callable[..., Any], kind: str
) -> Callable[[dict[str, Any]], AbstractAsyncContextManager[Any]]:
    if kind == "async":
        factory = asynccontextmanager(call) if inspect.isasyncgenfunction(call) else call
        return lambda values: factory(**values)
    factory = contextmanager(call) if inspect.isgeneratorfunction(call) else call
    return lambda values: lift_sync_context(factory(**values))


class DependsFactory(Generic[T]):
    """A declared dependency: a provider whose own parameters are injected too.

    A plain provider (sync, async, or returning an awaitable) is called per
    use, or once per interpreter argument signature with `cacheable`. A
    generator provider yields its value and tears down when its scope closes
    (`scope`: "call", "dispatch" or "workflow"; by default the site's widest).
    A None result means the dependency could not be provided.
    """

    __slots__ = ("__cacheable", "_cm_builder", "_depency_func", "_sign", "generator_kind", "scope")

    def __init__(
        self, depency: Callable[..., T | Awaitable[T]], cacheable: bool = False, *, scope: Scope | str | None = None
    ):
        self._depency_func = depency
        self.__cacheable = cacheable
        self._sign: DependencyMeta = sign_func(depency)
        self.generator_kind: Literal["sync", "async"] | None = detect_generator_kind(depency)
        if self.generator_kind is None and scope is not None:
            raise DependsDeclarationError(
                f"`scope` is only meaningful for generator dependencies, but {callable_name(depency)!r} is a plain "
                "callable; use `use_cache=True` to reuse its value instead."
            )
        self.scope: Scope | None = Scope(scope) if scope is not None else None
        self._cm_builder: Callable[[dict[str, Any]], AbstractAsyncContextManager[Any]] | None = None

    @property
    def cacheable(self) -> bool:
        """Whether the value may be reused (workflow nodes only)."""
        return self.__cacheable

    @property
    def use_cache(self) -> bool:
        """The same as `cacheable`."""
        return self.__cacheable

    @property
    def is_lifecycle(self) -> bool:
        """True for a generator provider (it needs a scope)."""
        return self.generator_kind is not None

    def __repr__(self) -> str:
        extra = f", scope={self.scope.value!r}" if self.scope is not None else ""
        return f"Depends({callable_name(self._depency_func)}, use_cache={self.__cacheable!r}{extra})"

    def make_context_manager(self, values: dict[str, Any]) -> AbstractAsyncContextManager[Any]:
        """The async context manager of a generator provider called with `values`."""
        builder = self._cm_builder
        if builder is None:
            if self.generator_kind is None:
                raise DependsInjectFailed(f"{callable_name(self._depency_func)!r} is not a generator dependency")
            builder = self._cm_builder = _context_builder(self._depency_func, self.generator_kind)
        return builder(values)

    async def resolve(
        self,
        *args: Any,
        _store: DependencyStore | None = None,
        _lifecycles: Mapping[Scope, LifecycleScope] | None = None,
        _default_scope: Scope | None = None,
        **kwargs: Any,
    ) -> T | None:
        """Resolve the provider's parameters from `args` / `kwargs`, call it and return its value.

        Returns None when the provider's own parameters cannot be resolved.
        A generator provider raises `DependsInjectFailed`: it needs a scope.
        """
        prep = Prepared(self, args, kwargs, ())
        if prep.recipe is None:
            return None
        values = prep.recipe.build(args, kwargs)
        session = Session(args, kwargs, _store, _lifecycles, _default_scope)
        if prep.nested is not None and not await resolve_group(prep.nested, session, (), values):
            return None
        if self.generator_kind is not None:
            raise DependsInjectFailed(
                f"{callable_name(self._depency_func)!r} is a generator dependency; it has to be resolved through a "
                "lifecycle scope rather than by calling `resolve()` directly."
            )
        value: Any = self._depency_func(**values)
        if hasattr(type(value), "__await__"):
            value = await value
        return value


def Depends(
    dependency: Callable[..., T | Awaitable[T]],
    use_cache: bool = False,
    scope: Scope | str | None = None,
    *,
    cacheable: bool | None = None,
) -> Any:
    """Declare an injected dependency: `param: T = Depends(provider)` or `Annotated[T, Depends(provider)]`.

    `use_cache=True` lets a workflow reuse a plain provider's value;
    `scope` sets how long a generator provider's value stays open.
    `cacheable=` is the old name of `use_cache`.
    """
    if cacheable is not None:
        use_cache = cacheable
    return DependsFactory(dependency, use_cache, scope=scope)


signature._set_factory_class(DependsFactory)
