"""Build the optional compiled core `_sense_core`.

Without a compiler the build still succeeds and the pure-Python twin runs,
unless AMRITA_SENSE_REQUIRE_EXTENSIONS=1, which turns a failed compile into an error.
AMRITA_SENSE_NO_EXTENSIONS=1 skips the compiled core altogether.
AMRITA_SENSE_DEBUG_BUILD=1 builds the debug core (checks and assertions on, see `_core_build_options`).
"""

import os
import platform
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py


def _env_flag(name):
    return os.environ.get(name, "") not in ("", "0")


REQUIRE = _env_flag("AMRITA_SENSE_REQUIRE_EXTENSIONS")
SKIP = _env_flag("AMRITA_SENSE_NO_EXTENSIONS") or platform.python_implementation() != "CPython"


class OptionalBuildExt(build_ext):
    """Turn a compiler failure into a warning unless the compiled core is required."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any toolchain failure
            self._fail(exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self._fail(exc)

    def _fail(self, exc):
        if REQUIRE:
            raise
        print(f"WARNING: building the compiled core failed ({exc}); the pure-Python core will be used")


class BuildPyWithCoreStubs(build_py):
    """Ship the compiled core's `.pyi` stub and `.pxd` contract beside the top-level module."""

    def run(self):
        super().run()
        for name in ("_sense_core.pyi", "_sense_core.pxd"):
            self.copy_file(os.path.join("src", name), os.path.join(self.build_lib, name))


def _core_build_options():
    """Cython directives, Extension options and whether to regenerate the C of the compiled core.

    Release: no bounds or None checks on the hot path, the core's assertions compiled out.
    AMRITA_SENSE_DEBUG_BUILD=1: the debug build, with the same semantics but every list/tuple index
    bounds-checked, None checked on typed attribute access, the core's assertions and C asserts on,
    no optimisation and debug symbols. Switching between the two regenerates the C (cythonize does
    not notice a change of directives).
    """
    debug = _env_flag("AMRITA_SENSE_DEBUG_BUILD")
    directives = {"language_level": "3", "boundscheck": debug, "wraparound": False, "cdivision": True}
    force = _build_mode_changed("debug" if debug else "release")
    if not debug:
        return directives, {"define_macros": [("CYTHON_WITHOUT_ASSERTIONS", None)]}, force
    directives.update(nonecheck=True, initializedcheck=True)
    flags = ["/Od", "/Zi", "/UNDEBUG"] if sys.platform == "win32" else ["-O0", "-g", "-UNDEBUG"]
    return directives, {"define_macros": [("AMRITA_SENSE_DEBUG", "1")], "extra_compile_args": flags}, force


def _build_mode_changed(mode):
    """Record `mode` for the next build; True when the last build of the core was the other one."""
    stamp = os.path.join("build", "core-build-mode")
    try:
        with open(stamp) as f:
            previous = f.read()
    except OSError:
        previous = "release"  # builds before the debug build existed
    os.makedirs("build", exist_ok=True)
    with open(stamp, "w") as f:
        f.write(mode)
    return previous != mode


def _extensions():
    if SKIP:
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        if REQUIRE:
            raise
        print("WARNING: Cython is not available; the pure-Python core will be used")
        return []
    directives, build_options, force = _core_build_options()
    try:
        extensions = cythonize(
            [Extension("_sense_core", ["src/_sense_core.pyx"], **build_options)],
            compiler_directives=directives,
            force=force,
            quiet=True,
        )
    except Exception as exc:  # noqa: BLE001 - a Cython error must not break a pure install
        if REQUIRE:
            raise
        print(f"WARNING: cythonizing the compiled core failed ({exc}); the pure-Python core will be used")
        return []
    for ext in extensions:
        ext.optional = not REQUIRE
    return extensions


setup(
    ext_modules=_extensions(),
    cmdclass={"build_ext": OptionalBuildExt, "build_py": BuildPyWithCoreStubs},
    py_modules=[],
)
