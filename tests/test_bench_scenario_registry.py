"""The benchmark's scenario registry: which scenarios exist, in which order the report lists them,
and how the `amrita_sense.bench.scenarios` package is put together (its modules import downwards,
and it loads by path as the worker loads it under 1.1.3)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from amrita_sense.bench import scenarios

PACKAGE = Path(scenarios.__file__).resolve().parent

REPORT_ORDER = [
    (
        "engine",
        [
            "sync_chain",
            "async_chain",
            "thread_chain",
            "nested",
            "while_loop",
            "if_elif_else",
            "jmp_loop",
            "call_ret",
            "try_catch",
            "render",
            "decorate",
            "memory",
            "suspend_resume",
            "interrupt_inject",
            "event_dispatch",
            "di_types",
            "di_names",
            "di_depends",
            "di_depends_cached",
            "interp_construct",
            "concurrent",
            "per_request",
            "per_request_first",
            "per_request_depends",
            "try_request",
            "event_request",
            "thread_request",
        ],
    ),
    (
        "variant",
        [
            "try_exc_val",
            "try_exc_type",
            "try_exc_both",
            "try_exc_contexts",
            "try_in_while",
            "try_in_do",
            "try_in_native_if",
            "try_in_call",
            "event_plain",
            "event_generic",
            "event_generic_dataclass",
            "event_matcher",
            "event_contexts",
            "loop_do",
            "loop_native_while",
            "loop_native_do",
            "loop_goto",
            "loop_call",
            "request_depends2",
            "request_async",
            "policy_by_hand",
            "policy_declared",
            "policy_by_hand_one_retry",
            "policy_declared_one_retry",
        ],
    ),
    ("app", ["amrita_core_turn", "amrita_core_turn_inline"]),
    (
        "floor",
        [
            "floor_call",
            "floor_await",
            "floor_to_thread",
            "floor_call_kw2",
            "floor_factories",
            "floor_while",
            "floor_if",
            "floor_jmp",
            "floor_try",
            "floor_pingpong",
            "floor_pingpong_future",
            "floor_gather",
            "floor_per_request",
            "floor_per_request_depends",
            "floor_try_request",
            "floor_event_request",
            "floor_thread_request",
        ],
    ),
    ("peer", ["peer_chain", "peer_agent", "peer_if_else", "peer_retry"]),
    ("durable", ["durable_sqlite", "durable_postgres", "durable_file"]),
    ("floor", ["durable_sqlite_floor", "durable_postgres_floor"]),
]
"""Every scenario by kind, in registration order (the kinds, too, follow one another in this order; the
durable work registers its own floors after it, as the report lists them)."""

MODULE_FLOORS = [
    {"framework"},
    {"bodies"},
    {"engine", "serving", "variants", "policies", "amrita_core", "floors", "peer_work"},
    {"durable_work"},
]
"""The package's modules, bottom up: a module imports only modules of the floors below its own."""


def _floor(module: str) -> int:
    return next(i for i, names in enumerate(MODULE_FLOORS) if module in names)


def test_every_scenario_is_registered_in_the_report_order() -> None:
    expected = [(kind, name) for kind, names in REPORT_ORDER for name in names]
    assert [(spec.kind, name) for name, spec in scenarios.SCENARIOS.items()] == expected


def test_the_families_keep_their_order() -> None:
    assert list(scenarios.FAMILIES) == ["try", "event", "loop", "request", "policy", "policy_retry"]


def test_every_family_member_is_registered_under_its_family() -> None:
    for name, spec in scenarios.SCENARIOS.items():
        assert spec.family is None or spec.family in scenarios.FAMILIES, name
        assert spec.floor is None or scenarios.SCENARIOS[spec.floor].kind == "floor", name


def _relative_imports(path: Path) -> set[str]:
    """The package's modules `path` imports (`from . import x`, `from .x import y`), and any
    import of `amrita_sense` by name (the scenarios reach the API under test through `need`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found.update([node.module] if node.module else [alias.name for alias in node.names])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("amrita_sense"):
            found.add(node.module or "")
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("amrita_sense"))
    return found


def test_the_scenario_modules_import_downwards() -> None:
    modules = {path.stem for path in PACKAGE.glob("*.py")} - {"__init__"}
    assert modules == set().union(*MODULE_FLOORS), "a module of the package is missing from MODULE_FLOORS"
    for module in sorted(modules):
        for target in _relative_imports(PACKAGE / f"{module}.py"):
            assert target in modules, f"{module} imports {target}: only the package's own modules, relatively"
            assert _floor(target) < _floor(module), f"{module} imports {target}, which is not below it"


def test_the_package_loaded_by_path_registers_the_same_scenarios(monkeypatch: pytest.MonkeyPatch) -> None:
    from amrita_sense.bench import _worker

    name = "_amrita_sense_bench_scenarios"
    for loaded in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
        monkeypatch.delitem(sys.modules, loaded)
    by_path = _worker.load_sibling("scenarios")
    try:
        assert Path(by_path.__file__).resolve() == PACKAGE / "__init__.py"
        assert by_path.engine.__name__ == f"{name}.engine"
        assert list(by_path.SCENARIOS) == list(scenarios.SCENARIOS)
        assert by_path.build("sync_chain", 3).ops == 3
    finally:
        for loaded in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
            del sys.modules[loaded]
