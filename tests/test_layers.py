"""The package's layering, read from its source: every import counts.

Counted: module-level imports, imports inside functions, imports under `TYPE_CHECKING`, and the
imports by name (`"amrita_sense.module:Name"` strings, which a late lookup imports on first use,
and literal `importlib.import_module("amrita_sense....")` calls). A `from package import name`
where `name` is a module of the package counts as an import of that module.

The core imports nothing above its ground floor: what it needs of the layers above (classes it
checks against, rules it calls) their modules give it through `_core.provide`. The other limits
are today's, so that no new circle or late import slips in; the layering work lowers them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "src" / "amrita_sense"
BY_NAME = re.compile(r"^(amrita_sense(?:\.\w+)*):\w+$")

CORE_FILES = {"_core_py.py", "_core.py"}
CORE_MAY_IMPORT = {
    "_classmemo.py",
    "_cython_shim.py",
    "_opcodes.py",
    "_portable.py",
    "_unsafe.py",
    "exceptions.py",
}
"""The ground floor the core stands on (and the core's own two files)."""

MAX_FILES_IN_CIRCLES = 3
MAX_IMPORTS_IN_FUNCTIONS = 10


COMPILED = {"amrita_sense._sense_core": "_core_py.py"}
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
from amrita_sense import _opcodes
if TYPE_CHECKING:
    from amrita_sense.streaming import SuspendObjectStream
def later():
    from . import exceptions
    importlib.import_module("amrita_sense._unsafe")
    return _late("amrita_sense.types:Stack")
"""
    visitor = _Imports(PACKAGE_ROOT / "_core_py.py")
    visitor.visit(ast.parse(source))
    assert sorted(visitor.found) == [
        ("_opcodes.py", False),
        ("_unsafe.py", True),
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


def test_no_new_import_circles(graph):
    circles = _circles(graph)
    in_circles = sum(len(circle) for circle in circles)
    assert in_circles <= MAX_FILES_IN_CIRCLES, [sorted(circle) for circle in circles]


def test_no_new_imports_inside_functions(graph):
    inner = [(here, target) for here, found in graph.items() for target, inside in found if inside]
    assert len(inner) <= MAX_IMPORTS_IN_FUNCTIONS, sorted(inner)
