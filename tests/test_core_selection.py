import os

import amrita_sense


def _flag(name):
    return os.environ.get(name, "") not in ("", "0")


def test_required_compiled_core_loaded():
    if _flag("AMRITA_SENSE_REQUIRE_EXTENSIONS") and not _flag("AMRITA_SENSE_NO_EXTENSIONS"):
        assert amrita_sense.IMPLEMENTATION == "cython"


def test_no_extensions_forces_twin():
    if _flag("AMRITA_SENSE_NO_EXTENSIONS"):
        assert amrita_sense.IMPLEMENTATION == "python"


def test_implementation_names_the_loaded_core():
    from amrita_sense import _core

    assert amrita_sense.IMPLEMENTATION in ("cython", "python")
    expected = "amrita_sense._sense_core" if amrita_sense.IMPLEMENTATION == "cython" else "amrita_sense._core_py"
    assert _core._impl.__name__ == expected


def test_compiled_core_imports_before_the_package():
    import subprocess
    import sys

    if amrita_sense.IMPLEMENTATION != "cython":
        return
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    code = "import amrita_sense._sense_core, amrita_sense; assert amrita_sense.IMPLEMENTATION == 'cython'"
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_compiled_classes_belong_to_the_package():
    from amrita_sense import _core

    if amrita_sense.IMPLEMENTATION != "cython":
        return
    for cls in (_core.PointerVector, _core.Stack, _core.InterpreterCore, _core.InterpretLock):
        assert cls.__module__ == "amrita_sense._sense_core"


def test_core_reason_says_why_this_core_loaded():
    from amrita_sense import _core

    if amrita_sense.IMPLEMENTATION == "cython":
        assert _core.CORE_REASON.startswith("the compiled core (") and "_sense_core" in _core.CORE_REASON
    elif _flag("AMRITA_SENSE_NO_EXTENSIONS"):
        assert _core.CORE_REASON == "the pure-Python twin: AMRITA_SENSE_NO_EXTENSIONS asked for it"
    else:
        import importlib.util

        assert _core.CORE_REASON.startswith("the pure-Python twin: ")
        if importlib.util.find_spec("amrita_sense._sense_core") is None:
            assert "this build has no compiled core" in _core.CORE_REASON


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
