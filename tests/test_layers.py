"""The package's layering, read from its source: every import counts.

Counted: module-level imports, imports inside functions, imports under `TYPE_CHECKING`, and the
imports by name (`"amrita_sense.module:Name"` strings, which a late lookup imports on first use,
and literal `importlib.import_module("amrita_sense....")` calls). A `from package import name`
where `name` is a module of the package counts as an import of that module.

The core imports nothing above its ground floor: what it needs of the layers above (classes it
checks against, rules it calls) their modules give it through `_core.provide`; what it calls on the
interpreter is its declared `LAYER_CONTRACT`. No import circle but the selector's own, and every
import inside a function is listed with its reason (`IMPORTS_INSIDE_FUNCTIONS`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "src" / "amrita_sense"
BY_NAME = re.compile(r"^(amrita_sense(?:\.\w+)*):\w+$")

CORE_FILES = {
    "core/__init__.py",
    "core/_async_pin.py",
    "core/_checks.py",
    "core/_events.py",
    "core/_sense_core.py",
    "core/_state.py",
    "core/_structures.py",
    "core/pure.py",
    "core/pure_async_pin.py",
    "core/pure_checks.py",
    "core/pure_events.py",
    "core/pure_state.py",
    "core/pure_structures.py",
    "core/sources.py",
}
CORE_MAY_IMPORT = {
    "core/cython_shim.py",
    "core/opcodes.py",
    "core/portable.py",
    "_classmemo.py",
    "_unsafe.py",
    "exceptions.py",
}
"""The ground floor the core stands on: its own folder and three leaf modules beside it."""

ALLOWED_CIRCLES = [
    {
        "core/__init__.py",
        "core/_events.py",
        "core/_sense_core.py",
        "core/_state.py",
        "core/_structures.py",
        "core/portable.py",
        "core/pure.py",
        "core/pure_events.py",
        "core/pure_state.py",
        "core/pure_structures.py",
    }
]
"""The selector's own loop, inside the core's folder: the selector imports the core it picks (the
pure build names the source's types for type checkers) and its parts, the parts their data structures,
those their pickle support, and that finds the loaded core through the selector when called."""

IMPORTS_INSIDE_FUNCTIONS = {
    ("core/__init__.py", "core/pure.py"): "the selector imports the pure build only when it is the one chosen",
    ("core/__init__.py", "core/_sense_core.py"): "the same, for the compiled core",
    ("core/portable.py", "core/__init__.py"): "unpickling rebuilds on whichever core loaded; the core imports it",
    ("bench/_worker.py", "__init__.py"): "a benchmark worker imports the package after choosing its build",
    ("bench/workload.py", "__init__.py"): "the same, for the workloads a worker builds",
    (
        "runtime/workflow.py",
        "durable/snapshots/fingerprint.py",
    ): "the interpreter's durable entry points: durable is above it",
    ("runtime/workflow.py", "durable/snapshots/restore.py"): "the same (WorkflowInterpreter.restore)",
    ("runtime/workflow.py", "durable/snapshots/capture.py"): "the same (WorkflowInterpreter.snapshot)",
    ("runtime/workflow.py", "durable/errors.py"): "the same (WorkflowInterpreter.step_key)",
    (
        "durable/__init__.py",
        "durable/stores/postgres.py",
    ): "the Postgres stores need psycopg (extra [postgres]): on first use",
    (
        "durable/waits/cli.py",
        "durable/stores/postgres.py",
    ): "the same, for `python -m amrita_sense worker --store postgresql://...`",
}
"""Every package import inside a function, and why it cannot be at module level."""


COMPILED = {
    f"amrita_sense.core.{stem}": f"core/{stem}.py" for stem in ("_sense_core", "_checks", "_async_pin", "_events")
}
"""Compiled modules and the source each is built from."""


def _module_file(module: str) -> str | None:
    """The package-relative file of an `amrita_sense...` module name, or None outside the package."""
    if module in COMPILED:
        return COMPILED[module]
    parts = module.split(".")
    if parts[0] != "amrita_sense":
        return None
    base = PACKAGE_ROOT.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return str((base / "__init__.py").relative_to(PACKAGE_ROOT))
    if base.with_suffix(".py").is_file():
        return str(base.with_suffix(".py").relative_to(PACKAGE_ROOT))
    return None


def _absolute(node: ast.ImportFrom, path: Path) -> str:
    if not node.level:
        return node.module or ""
    package = list(path.relative_to(PACKAGE_ROOT).parent.parts)
    if node.level > 1:
        package = package[: len(package) - (node.level - 1)]
    return ".".join(["amrita_sense", *package] + ([node.module] if node.module else []))


class _Imports(ast.NodeVisitor):
    """Every package import of one file: (target file, inside a function)."""

    def __init__(self, path: Path):
        self.path = path
        self.found: list[tuple[str, bool]] = []
        self._depth = 0

    def _add(self, module: str) -> None:
        target = _module_file(module)
        if target is not None:
            self.found.append((target, self._depth > 0))

    def visit_FunctionDef(self, node):
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Import(self, node):
        for alias in node.names:
            self._add(alias.name)

    def visit_ImportFrom(self, node):
        module = _absolute(node, self.path)
        for alias in node.names:
            submodule = f"{module}.{alias.name}"
            self._add(submodule if _module_file(submodule) is not None else module)

    def visit_Constant(self, node):
        if isinstance(node.value, str):
            match = BY_NAME.match(node.value)
            if match:
                self._add(match.group(1))

    def visit_Call(self, node):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name == "import_module" and node.args and isinstance(node.args[0], ast.Constant):
            if isinstance(node.args[0].value, str):
                self._add(node.args[0].value)
        self.generic_visit(node)


def _graph() -> dict[str, list[tuple[str, bool]]]:
    graph = {}
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        visitor = _Imports(path)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        here = str(path.relative_to(PACKAGE_ROOT))
        graph[here] = [(target, inner) for target, inner in visitor.found if target != here]
    return graph


def _circles(graph: dict[str, list[tuple[str, bool]]]) -> list[set[str]]:
    """The strongly connected components of more than one file (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target, _ in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in graph:
        if node not in index:
            visit(node)
    return found


@pytest.fixture(scope="module")
def graph():
    return _graph()


def test_the_reader_sees_every_kind_of_import():
    source = """
from typing import TYPE_CHECKING
from amrita_sense.core import opcodes
if TYPE_CHECKING:
    from amrita_sense.streaming import SuspendObjectStream
def later():
    from .. import exceptions
    importlib.import_module("amrita_sense._unsafe")
    return _late("amrita_sense.types:Stack")
"""
    visitor = _Imports(PACKAGE_ROOT / "core" / "_sense_core.py")
    visitor.visit(ast.parse(source))
    assert sorted(visitor.found) == [
        ("_unsafe.py", True),
        ("core/opcodes.py", False),
        ("exceptions.py", True),
        ("streaming.py", False),
        ("types.py", True),
    ]


def test_the_core_imports_nothing_above_the_ground_floor(graph):
    upward = {
        (here, target)
        for here in CORE_FILES
        for target, _ in graph[here]
        if target not in CORE_MAY_IMPORT and target not in CORE_FILES
    }
    assert not upward, f"the core imports above it (give it the part through `provide`): {sorted(upward)}"


def test_no_import_circles_but_the_selectors_own(graph):
    circles = _circles(graph)
    assert all(circle in ALLOWED_CIRCLES for circle in circles), [sorted(circle) for circle in circles]


def test_every_import_inside_a_function_is_a_declared_one(graph):
    inner = {(here, target) for here, found in graph.items() for target, inside in found if inside}
    assert not inner - set(IMPORTS_INSIDE_FUNCTIONS), "import at module level, or say why not here"


DURABLE_ROOMS = (
    "durable/errors.py",
    "durable/snapshots/",
    "durable/stores/",
    "durable/checkpointing/",
    "durable/waits/",
)
"""The durable layer's rooms, in the order a save flows through them: each imports only the rooms
before it (and its own). The package's `__init__.py` is the front door over all of them."""


def _room(relative: str) -> int | None:
    return next((index for index, room in enumerate(DURABLE_ROOMS) if relative.startswith(room)), None)


def test_the_durable_rooms_import_only_the_rooms_below_them(graph):
    upward = sorted(
        (here, target)
        for here, found in graph.items()
        if _room(here) is not None
        for target, _ in found
        if _room(target) is not None and _room(target) > _room(here)
    )
    assert not upward, f"a durable room imports one above it: {upward}"


def test_every_durable_module_lives_in_a_room(graph):
    loose = sorted(
        path for path in graph if path.startswith("durable/") and path != "durable/__init__.py" and _room(path) is None
    )
    assert not loose, f"put these in a room of durable/ ({DURABLE_ROOMS}): {loose}"


CORE_CLASSES = (("core/_state.py", "CoreState"), ("core/_sense_core.py", "InterpreterCore"))
"""The interpreter's classes in the core: its state, and the step loop that extends it."""


def _class_in(relative: str, class_name: str) -> ast.ClassDef:
    tree = ast.parse((PACKAGE_ROOT / relative).read_text(encoding="utf-8"))
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)


def _upward_calls_of_the_core() -> dict[str, int]:
    """The attributes the core's classes read on `self` (or on `core`, in the opcodes' functions) that
    neither defines nor keeps in a field: their calls up into the interpreter (name -> first line)."""
    classes = [_class_in(relative, name) for relative, name in CORE_CLASSES]
    defined: set[str] = set()
    for cls in classes:
        for member in cls.body:
            if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defined.add(member.name)
            elif isinstance(member, ast.Assign) and isinstance(member.targets[0], ast.Name):
                if member.targets[0].id == "__slots__":
                    defined |= {element.value for element in member.value.elts}
                else:
                    defined.add(member.targets[0].id)
    loop_module = ast.parse((PACKAGE_ROOT / "core" / "_sense_core.py").read_text(encoding="utf-8"))
    opcodes = [f for f in loop_module.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    bodies = [(cls, "self") for cls in classes] + [
        (f, "core") for f in opcodes if f.args.args[:1] and f.args.args[0].arg == "core"
    ]
    found: dict[str, int] = {}
    for body, name in bodies:
        for node in ast.walk(body):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name:
                if node.attr not in defined:
                    found.setdefault(node.attr, node.lineno)
    return found


def _declared_contract() -> dict[str, tuple[str, str]]:
    """`LAYER_CONTRACT` as the core's source writes it (read, not imported: this test needs no build)."""
    tree = ast.parse((PACKAGE_ROOT / "core" / "_state.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "LAYER_CONTRACT":
            return ast.literal_eval(node.value)
    raise AssertionError("the core declares no LAYER_CONTRACT")


def _methods(relative: str, class_name: str) -> dict[str, bool]:
    """The methods a class of the package defines: name -> whether it is `async def`."""
    tree = ast.parse((PACKAGE_ROOT / relative).read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    defs = (m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return {m.name: isinstance(m, ast.AsyncFunctionDef) for m in defs}


def test_the_core_calls_up_only_through_its_declared_contract():
    assert set(_upward_calls_of_the_core()) == set(_declared_contract())


def test_the_interpreter_implements_the_contract_the_core_declares():
    implemented = {
        **_methods("di/interpreter.py", "Injection"),
        **_methods("runtime/workflow.py", "WorkflowInterpreter"),
    }
    for name, (kind, promise) in _declared_contract().items():
        assert promise, name
        assert name in implemented, f"{name} is not implemented above the core"
        assert implemented[name] == (kind == "async"), name
