"""Build the optional compiled core `_sense_core`.

Without a compiler the build still succeeds and the pure-Python twin runs,
unless AMRITA_SENSE_REQUIRE_EXTENSIONS=1, which turns a failed compile into an error.
AMRITA_SENSE_NO_EXTENSIONS=1 skips the compiled core altogether.
"""

import os
import platform

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
    try:
        extensions = cythonize(
            [Extension("_sense_core", ["src/_sense_core.pyx"])],
            compiler_directives={"language_level": "3"},
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
