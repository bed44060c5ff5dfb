import os
import re

import amrita_sense

# What the selector says when the pure build loaded: "the pure build" (or its older wording, from
# "the pure" to the colon), then why.
PURE_REASON = re.compile(r"the pure[\w -]*: (.+)")
UNASKED_WARNING = re.compile(r"RuntimeWarning: amrita_sense runs on its pure[\w -]*, about 10x slower: ")


def _flag(name):
    return os.environ.get(name, "") not in ("", "0")


def test_required_compiled_core_loaded():
    if _flag("AMRITA_SENSE_REQUIRE_EXTENSIONS") and not _flag("AMRITA_SENSE_NO_EXTENSIONS"):
        assert amrita_sense.IMPLEMENTATION == "cython"


def test_no_extensions_forces_the_pure_build():
    if _flag("AMRITA_SENSE_NO_EXTENSIONS"):
        assert amrita_sense.IMPLEMENTATION == "python"


def test_implementation_names_the_loaded_core():
    from amrita_sense import core as _core

    assert amrita_sense.IMPLEMENTATION in ("cython", "python")
    expected = "amrita_sense.core._sense_core" if amrita_sense.IMPLEMENTATION == "cython" else "amrita_sense.core.pure"
    assert _core._impl.__name__ == expected


def test_compiled_core_imports_before_the_package():
    import subprocess
    import sys

    if amrita_sense.IMPLEMENTATION != "cython":
        return
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    code = "import amrita_sense.core._sense_core, amrita_sense; assert amrita_sense.IMPLEMENTATION == 'cython'"
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_compiled_classes_belong_to_the_package():
    from amrita_sense import _core

    if amrita_sense.IMPLEMENTATION != "cython":
        return
    assert _core.InterpreterCore.__module__ == "amrita_sense.core._sense_core"
    for cls in (_core.PointerVector, _core.Stack, _core.InterpretLock, _core.Program):
        assert cls.__module__ == "amrita_sense.core._structures"


def test_core_reason_says_why_this_core_loaded():
    from amrita_sense import _core

    if amrita_sense.IMPLEMENTATION == "cython":
        assert _core.CORE_REASON.startswith("the compiled core (") and "_sense_core" in _core.CORE_REASON
    elif _flag("AMRITA_SENSE_NO_EXTENSIONS"):
        assert PURE_REASON.fullmatch(_core.CORE_REASON).group(1) == "AMRITA_SENSE_NO_EXTENSIONS asked for it"
        assert _core._impl.__file__.endswith("_sense_core.py")  # the core's one source, run by the interpreter
    else:
        assert PURE_REASON.fullmatch(_core.CORE_REASON)
        if not _core._compiled_core_installed():
            assert "this installation has no compiled core" in _core.CORE_REASON


def test_stack_push_pop_keeps_references_balanced():
    import sys

    from amrita_sense import Stack

    stack, item = Stack(4), object()
    before = sys.getrefcount(item)
    for _ in range(100):
        stack.push(item)
        stack.push(item)
        assert stack.pop() is item
        assert stack.pop() is item
    assert sys.getrefcount(item) == before and len(stack) == 0 and stack.stack == []


def _runtime_copy_without_core(tmp_path):
    """A copy of the loaded runtime without its compiled core (as a pure build installs it)."""
    import shutil
    from pathlib import Path

    copy = tmp_path / "amrita_sense"
    shutil.copytree(Path(amrita_sense.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    from amrita_sense.core import COMPILED_PARTS

    for core in [path for stem in COMPILED_PARTS for path in (copy / "core").glob(f"{stem}*")]:
        if core.suffix in (".so", ".pyd"):
            core.unlink()
    return tmp_path


def _import_in_child(tmp_path, code, **env):
    import subprocess
    import sys

    # AMRITA_SENSE_TURBO=0: an installed import hook then picks the copy on PYTHONPATH, not its own runtime
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("AMRITA_SENSE_")}
    child_env.update(PYTHONPATH=str(tmp_path), AMRITA_SENSE_TURBO="0", **env)
    return subprocess.run([sys.executable, "-c", code], env=child_env, capture_output=True, text=True, cwd=tmp_path)


def test_an_unasked_pure_build_warns_once_at_import(tmp_path):
    root = _runtime_copy_without_core(tmp_path)
    code = (
        "import amrita_sense, amrita_sense.streaming, importlib; importlib.import_module('amrita_sense');"
        "print(amrita_sense.IMPLEMENTATION, amrita_sense.__file__)"
    )
    proc = _import_in_child(root, code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "python" and proc.stdout.split()[1].startswith(str(root))
    assert len(UNASKED_WARNING.findall(proc.stderr)) == 1
    assert "this installation has no compiled core" in proc.stderr
    assert "AMRITA_SENSE_NO_EXTENSIONS=1" in proc.stderr


def test_an_asked_for_pure_build_does_not_warn(tmp_path):
    root = _runtime_copy_without_core(tmp_path)
    proc = _import_in_child(
        root, "import amrita_sense; print(amrita_sense.IMPLEMENTATION)", AMRITA_SENSE_NO_EXTENSIONS="1"
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "python", proc.stderr
    assert "RuntimeWarning" not in proc.stderr


def test_a_core_that_fails_to_load_warns_with_the_error(tmp_path):
    root = _runtime_copy_without_core(tmp_path)
    import importlib.machinery

    from amrita_sense.core import COMPILED_PARTS

    for stem in COMPILED_PARTS:
        broken = root / "amrita_sense" / "core" / f"{stem}{importlib.machinery.EXTENSION_SUFFIXES[0]}"
        broken.write_bytes(b"not a shared library")
    proc = _import_in_child(root, "import amrita_sense; print(amrita_sense.IMPLEMENTATION)")
    assert proc.returncode == 0 and proc.stdout.strip() == "python", proc.stderr
    assert "the compiled core failed to load (" in proc.stderr


def test_the_source_refuses_to_run_under_the_compiled_cores_name(tmp_path):
    root = _runtime_copy_without_core(tmp_path)
    proc = _import_in_child(root, "import amrita_sense.core._sense_core")
    assert proc.returncode != 0 and "the compiled core is not built here" in proc.stderr


def test_the_former_module_paths_are_the_same_modules():
    import importlib

    from amrita_sense import core

    assert importlib.import_module("amrita_sense._core") is core
    assert importlib.import_module("amrita_sense._core_py") is importlib.import_module("amrita_sense.core.pure")
    assert importlib.import_module("amrita_sense._portable") is importlib.import_module("amrita_sense.core.portable")
    assert importlib.import_module("amrita_sense._opcodes") is importlib.import_module("amrita_sense.core.opcodes")
    if amrita_sense.IMPLEMENTATION == "cython":
        assert importlib.import_module("amrita_sense._sense_core") is core._impl
