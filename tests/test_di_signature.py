"""Signature analysis: `sign_func`, `type_matches`, `unwrap_annotated` (rule 71)."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from contextlib import contextmanager
from typing import Annotated, Any, Optional, Union

import pytest

from amrita_sense import DependsDeclarationError, sign_func
from amrita_sense.hook.fun_typing import EMPTY, FunctionData, type_matches, unwrap_annotated
from amrita_sense.hook.matcher import Depends, DependsFactory


def provide_int() -> int:
    return 1


def kinds(meta) -> dict:
    return {name: p["kind"] for name, p in meta["params"].items()}


def hints(meta) -> dict:
    return {name: p["type_hint"] for name, p in meta["params"].items()}


def test_required_optional_and_defaults():
    def f(a: int, b: str = "x", *, c: float, d: bytes = b"") -> None: ...

    meta = sign_func(f)
    assert kinds(meta) == {"a": "required", "b": "optional", "c": "required", "d": "optional"}
    assert meta["params"]["a"]["default"] is EMPTY
    assert meta["params"]["b"]["default"] == "x"
    assert meta["params"]["d"]["default"] == b""
    assert meta["factory_map"] == {}


def test_parameter_order_includes_var_parameters():
    def f(a: int, *rest: int, k: str, **more: dict) -> None: ...

    assert list(sign_func(f)["params"]) == ["a", "rest", "k", "more"]


def test_missing_annotation_is_empty():
    def f(a, b: int): ...

    assert hints(sign_func(f)) == {"a": EMPTY, "b": int}


def test_pep563_strings_are_evaluated_in_the_function_globals():
    def f(a: "Iterable[int]", b: "Optional[str]" = None, c: "int" = 0): ...

    got = hints(sign_func(f))
    assert got["a"] == Iterable[int]
    assert got["b"] == Optional[str]
    assert got["c"] is int


def test_string_annotations_of_a_future_import_module_are_resolved():
    # this module uses `from __future__ import annotations`
    def f(a: int, b: list[str], c: Service | None) -> None: ...

    got = hints(sign_func(f))
    assert got == {"a": int, "b": list[str], "c": Service | None}


def test_annotation_naming_a_local_is_empty():
    class Local:
        pass

    def f(a: Local, b: int): ...

    assert hints(sign_func(f)) == {"a": EMPTY, "b": int}


def test_unresolvable_string_degrades_only_its_parameter():
    def f(a: "NoSuchName", b: "int"): ...  # noqa: F821

    assert hints(sign_func(f)) == {"a": EMPTY, "b": int}


def test_syntactically_broken_string_is_empty():
    def f(a: "int +", b: int): ...

    assert hints(sign_func(f)) == {"a": EMPTY, "b": int}


def test_none_annotation_string_becomes_none_type():
    def f(a: "None"): ...

    assert hints(sign_func(f)) == {"a": type(None)}


def test_annotated_is_unwrapped():
    def f(a: Annotated[int, "meta"]): ...

    meta = sign_func(f)
    assert meta["params"]["a"] == {"type_hint": int, "kind": "required", "default": EMPTY}


def test_depends_as_default():
    marker = Depends(provide_int)

    def f(a: int = marker): ...

    meta = sign_func(f)
    assert meta["params"]["a"] == {"type_hint": int, "kind": "factory", "default": None}
    assert meta["factory_map"] == {"a": marker}


FIRST_MARKER, LAST_MARKER = Depends(provide_int), Depends(provide_int)


def test_depends_in_annotated_metadata_last_wins():
    def f(a: Annotated[int, FIRST_MARKER, "other", LAST_MARKER]): ...

    meta = sign_func(f)
    assert meta["factory_map"]["a"] is LAST_MARKER
    assert meta["params"]["a"]["kind"] == "factory"
    assert meta["params"]["a"]["type_hint"] is int


def test_depends_in_annotated_string_is_found():
    def f(a: "Annotated[int, Depends(provide_int)]"): ...

    meta = sign_func(f)
    assert isinstance(meta["factory_map"]["a"], DependsFactory)


def test_depends_declared_twice_is_a_declaration_error():
    def f(a: Annotated[int, Depends(provide_int)] = Depends(provide_int)): ...

    with pytest.raises(DependsDeclarationError, match="'a'"):
        sign_func(f)


def test_declaration_error_is_raised_when_the_node_is_created():
    from amrita_sense import Node

    with pytest.raises(DependsDeclarationError):

        @Node()
        def node(a: Annotated[int, Depends(provide_int)] = Depends(provide_int)): ...


def test_bound_method_drops_self():
    class Holder:
        def method(self, a: int, b: str = "s"): ...

    assert list(sign_func(Holder().method)["params"]) == ["a", "b"]


def test_wrapped_function_uses_the_wrapped_signature():
    def inner(a: int, b: str): ...

    @functools.wraps(inner)
    def outer(*args, **kwargs): ...

    assert list(sign_func(outer)["params"]) == ["a", "b"]
    assert hints(sign_func(outer)) == {"a": int, "b": str}


def test_contextmanager_provider_signature():
    @contextmanager
    def resource(size: int):
        yield size

    assert hints(sign_func(resource)) == {"size": int}


def test_callable_object_without_annotations_has_empty_hints():
    class Callable_:
        def __call__(self, a: int): ...

    assert hints(sign_func(Callable_())) == {"a": EMPTY}


def test_partial_drops_bound_arguments():
    def f(a: int, b: int): ...

    assert list(sign_func(functools.partial(f, 1))["params"]) == ["b"]


def test_non_callable_is_a_type_error():
    with pytest.raises(TypeError):
        sign_func(42)


def test_analysis_follows_changed_defaults():
    def f(a: int = 1): ...

    assert sign_func(f)["params"]["a"]["default"] == 1
    f.__defaults__ = (2,)
    assert sign_func(f)["params"]["a"]["default"] == 2


class Service:
    pass


class Special(Service):
    pass


@pytest.mark.parametrize(
    ("value", "hint", "expected"),
    [
        (1, int, True),
        (True, int, True),
        ("s", int, False),
        (Special(), Service, True),
        ([1], list[int], True),
        ({"a": 1}, dict[str, int], True),
        ((1,), list[int], False),
        (None, Optional[int], True),
        (3, Union[str, int], True),
        (3.0, int | str, False),
        (1, Any, False),
        (1, EMPTY, False),
        (1, "int", False),
        (1, Iterable[int], False),
        ([1], Iterable[int], True),
    ],
)
def test_type_matches(value, hint, expected):
    assert type_matches(value, hint) is expected


def test_unwrap_annotated():
    assert unwrap_annotated(Annotated[int, "x"]) is int
    assert unwrap_annotated(int) is int
    assert unwrap_annotated(Annotated[Annotated[str, 1], 2]) is str


def test_function_data_fields():
    def handler(): ...

    data = FunctionData(function=handler, signature=sign_func(handler), frame=None, priority=3, matcher=None)
    assert (data.function, data.priority) == (handler, 3)
    assert "handler" in repr(data)
