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
    expected = "_sense_core" if amrita_sense.IMPLEMENTATION == "cython" else "amrita_sense._core_py"
    assert _core._impl.__name__ == expected
