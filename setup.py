"""Build amrita-sense-turbo: the runtime package, the compiled core, the import hook.

The compiled core needs Cython (a build requirement) and a C compiler. A build that
cannot compile it FAILS with a message saying what to do, so that nobody gets the ten
times slower pure build without knowing: AMRITA_SENSE_NO_EXTENSIONS=1 asks for the
pure build (a `py3-none-any` wheel without the core; it then loads without a
warning only where AMRITA_SENSE_NO_EXTENSIONS=1 is set at run time too). Other Python
implementations than CPython always get the pure build. AMRITA_SENSE_DEBUG_BUILD=1 builds the
debug core (checks and assertions on, see `_core_build_options`).

One source. The compiled core is `src/amrita_sense/core/_sense_core.py`, the pure build's core, compiled
by Cython in its pure Python mode with the augmenting `src/amrita_sense/core/_sense_core.pxd` (the C
types; the file's `if cython.compiled:` blocks hold the C-API paths) into the extension module
`amrita_sense.core._sense_core`. The pure build runs the same file as `amrita_sense.core.pure`.

Layout. The source tree keeps the runtime at `src/amrita_sense/` (dev mode: `PYTHONPATH=src`,
`setup.py build_ext --inplace` puts the core at `src/amrita_sense/core/_sense_core*.so`). The wheel
installs nothing that the `amrita-sense` distribution also installs:

    amrita_sense_turbo/                  the import hook (`src/amrita_sense_turbo/`)
    amrita_sense_turbo/runtime/amrita_sense/   the runtime, with the compiled core
    amrita_sense_turbo.pth               puts the hook in front of the import system at start-up

The compiled core is compiled as the module `amrita_sense.core._sense_core` (the name its
classes report as `__module__`); only its file moves into the wheel's runtime directory.
"""

import glob
import os
import platform
import re
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel
from setuptools.command.egg_info import egg_info
from setuptools.errors import SetupError


def _env_flag(name):
    return os.environ.get(name, "") not in ("", "0")


SKIP = _env_flag("AMRITA_SENSE_NO_EXTENSIONS") or platform.python_implementation() != "CPython"

RUNTIME = "amrita_sense"  # the import name users keep
HOOK = "amrita_sense_turbo"  # the directory (and hook package) of this distribution
RUNTIME_PARENT = f"{HOOK}.runtime"  # installed runtime: amrita_sense_turbo/runtime/amrita_sense
CORE = f"{RUNTIME}.core._sense_core"
CORE_MODULES = (
    CORE,
    f"{RUNTIME}.core._state",
    f"{RUNTIME}.core._structures",
    f"{RUNTIME}.core._checks",
    f"{RUNTIME}.core._async_pin",
    f"{RUNTIME}.core._events",
)
"""The compiled modules of the core, each compiled from `src/<its path>.py` with the `.pxd` of its stem."""
SAVE_MODULES = (f"{RUNTIME}.durable.snapshots._plain_snapshot", f"{RUNTIME}.durable.checkpointing._save_at_once")
"""The compiled modules above the core (the save path's hot part), compiled the same way; each loads
where the core loaded compiled (the pure build runs its source as `pure<stem>`)."""
COMPILED_MODULES = CORE_MODULES + SAVE_MODULES
OLD_CORE_BUILDS = [f"src/{RUNTIME}/_sense_core.*.so", f"src/{RUNTIME}/_core_py.*.so", f"src/{RUNTIME}/_core_py.c"]
"""What in-place builds of earlier layouts left beside the package's root aliases (they would shadow them)."""
PTH_NAME = f"{HOOK}.pth"
# A path line (so static tools that read .pth files find the runtime) and the hook itself.
PTH_TEXT = f"{HOOK}/runtime\nimport {HOOK}\n"


# ----- layout: where each package and the core live in the source tree and in the wheel -----


def _installed_name(package):
    """The installed package name of a runtime package (`amrita_sense.x` -> `amrita_sense_turbo.runtime.amrita_sense.x`)."""
    return f"{RUNTIME_PARENT}.{package}"


def _packages():
    runtime = find_packages("src", include=[RUNTIME, f"{RUNTIME}.*"])
    return [HOOK, *map(_installed_name, runtime)]


def _package_dir():
    return {HOOK: f"src/{HOOK}", _installed_name(RUNTIME): f"src/{RUNTIME}"}


def _is_runtime(package):
    return package == RUNTIME or package.startswith(RUNTIME + ".")


class LayoutBuildPy(build_py):
    """Build the packages in their installed layout and write the `.pth` hook at the root of the
    build. (The core's types are those of `core/_sense_core.py`, which ships as the pure build; its `.pxd`
    only augments that file for Cython and is not shipped.)"""

    def get_package_dir(self, package):
        # build_ext asks where `amrita_sense` lives (for --inplace and editable builds): the source tree.
        if _is_runtime(package):
            return os.path.join("src", *package.split("."))
        return super().get_package_dir(package)

    def run(self):
        super().run()
        pth = os.path.join(self.build_lib, PTH_NAME)
        with open(pth, "w", encoding="utf-8") as out:
            out.write(PTH_TEXT)

    def get_outputs(self, include_bytecode=True):
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH_NAME)]


class TopLevelNames(egg_info):
    """List `amrita_sense` among the top-level names (`importlib.metadata.packages_distributions()`)."""

    def run(self):
        super().run()
        self.write_file("top-level names", os.path.join(self.egg_info, "top_level.txt"), f"{RUNTIME}\n{HOOK}\n")


class EditableWithHook(editable_wheel):
    """An editable install gets the hook too (`amrita_sense` then resolves to the checkout's
    `src/amrita_sense`): setuptools' editable wheel carries only the package mapping, so the
    strategy that writes it also writes an import-only `.pth` (read after setuptools' own
    `__editable__*.pth`, which makes the hook package importable)."""

    def _select_strategy(self, name, tag, build_lib):
        return _AlsoWritesHook(super()._select_strategy(name, tag, build_lib))


class _AlsoWritesHook:
    def __init__(self, strategy):
        self._strategy = strategy

    def __call__(self, wheel, files, mapping):
        self._strategy(wheel, files, mapping)
        wheel.writestr(PTH_NAME, f"import {HOOK}\n")

    def __enter__(self):
        self._strategy.__enter__()
        return self

    def __exit__(self, *exc_info):
        return self._strategy.__exit__(*exc_info)


# ----- the compiled core ----------------------------------------------------------------


class CoreBuildExt(build_ext):
    """Build the compiled core (a toolchain failure becomes the clear error of `_no_core`), and put
    its file in the runtime's installed directory (or beside the runtime's source with --inplace)."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:  # the core's modules compile side by side (`-j` still wins)
            self.parallel = os.cpu_count() or 1

    def run(self):
        try:
            super().run()
        except CoreNotBuilt:
            raise
        except Exception as exc:  # noqa: BLE001 - any toolchain failure
            _no_core(exc)

    def build_extensions(self):
        _drop_build_machine_rpath(self.compiler)
        super().build_extensions()

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            _no_core(exc)

    def get_ext_filename(self, fullname):
        # Called with the dotted name by setuptools (outputs, --inplace copies) and with the last
        # component only by get_ext_fullpath below.
        filename = super().get_ext_filename(fullname)
        if _is_runtime(fullname):
            return os.path.join(*RUNTIME_PARENT.split("."), filename)
        return filename

    def get_ext_fullpath(self, ext_name):
        path = super().get_ext_fullpath(ext_name)
        if self.inplace or not _is_runtime(ext_name):
            return path
        return os.path.join(self.build_lib, *RUNTIME_PARENT.split("."), os.path.relpath(path, self.build_lib))


def _drop_build_machine_rpath(compiler):
    """Link the core without the run-time search path some Pythons put in LDSHARED (pyenv's
    `-Wl,-rpath,<prefix>/lib`): the core needs no library of the build machine's Python, and a
    wheel must not carry that machine's paths (auditwheel keeps them)."""
    linker = getattr(compiler, "linker_so", None)
    if linker:
        compiler.linker_so = [arg for arg in linker if not arg.startswith(("-Wl,-rpath", "-Wl,-R"))]


class CoreNotBuilt(SetupError):
    """The compiled core cannot be built here, and the pure build was not asked for."""


def _no_core(cause):
    """Stop the build with what to do instead."""
    raise CoreNotBuilt(
        f"amrita-sense-turbo: the compiled core could not be built ({type(cause).__name__}: {cause}).\n"
        "Building from source needs a C compiler (gcc or clang; MSVC on Windows) and the Python headers "
        "(for example: apt-get install build-essential python3-dev). Alternatives:\n"
        "  - install a prebuilt wheel of amrita-sense-turbo for this platform;\n"
        "  - or ask for the pure-Python runtime (same behaviour, about 10x slower engine):\n"
        "      AMRITA_SENSE_NO_EXTENSIONS=1 pip install --no-cache-dir amrita-sense-turbo\n"
        "    and set AMRITA_SENSE_NO_EXTENSIONS=1 where it runs to silence its import warning."
    ) from cause


def _drop_stale_c():
    """Remove what earlier layouts' in-place builds left (`OLD_CORE_BUILDS`), and a generated C file
    Cython would wrongly reuse: one compiled under another module name, or older than the `.pxd`."""
    for pattern in OLD_CORE_BUILDS:
        for leftover in glob.glob(pattern):
            os.remove(leftover)
    for module in COMPILED_MODULES:
        stem = _source_stem(module)
        c_file = stem + ".c"
        if not os.path.exists(c_file):
            continue
        with open(c_file, encoding="utf-8", errors="replace") as generated:
            header = generated.read(2000)
        if f'"module_name": "{module}"' not in header or os.path.getmtime(c_file) < os.path.getmtime(stem + ".pxd"):
            os.remove(c_file)


def _source_stem(module):
    """`src/amrita_sense/core/_checks` for `amrita_sense.core._checks` (add `.py`, `.pxd`, `.c`)."""
    return os.path.join("src", *module.split("."))


def _core_build_options():
    """Cython directives, Extension options and whether to regenerate the C of the compiled core.

    Both builds keep Python's meaning where the `.pxd` does not say otherwise: checked indexing (and
    negative indexes, except in the functions marked `wraparound(False)`), annotations as
    documentation (the source has `from __future__ import annotations`; the `.pxd` gives the types).
    Release: the core's assertions compiled out. AMRITA_SENSE_DEBUG_BUILD=1: the debug build, with
    None checked on typed attribute access, the core's assertions and C asserts on, no optimisation
    and debug symbols. Switching between the two regenerates the C (cythonize does not notice a
    change of directives).
    """
    debug = _env_flag("AMRITA_SENSE_DEBUG_BUILD")
    # freethreading_compatible: on a free-threaded interpreter the core keeps the GIL off. Every shared
    # structure of the core is immutable once published, guarded or per thread (each says which in a
    # `threads:` comment), and what relied on the GIL takes the object's critical section or another
    # way there (`_capi.FREE_THREADED`); docs/howto/threads.md says what was checked, and where.
    directives = {"language_level": "3", "annotation_typing": False, "binding": True, "freethreading_compatible": True}
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
    except ImportError as exc:  # a build without isolation, in an environment without Cython
        _no_core(exc)
    _drop_stale_c()
    directives, build_options, force = _core_build_options()
    try:
        # `core/_sense_core.py` compiled under its own module name, with `core/_sense_core.pxd` (the same
        # stem) as its augmenting declarations
        return cythonize(
            [Extension(module, [_source_stem(module) + ".py"], **build_options) for module in COMPILED_MODULES],
            compiler_directives=directives,
            force=force,
            quiet=True,
        )
    except SetupError:
        raise
    except Exception as exc:  # noqa: BLE001 - any Cython failure
        _no_core(exc)


def _version():
    """`__version__` from src/amrita_sense/_version.py, without importing the package."""
    with open(os.path.join("src", RUNTIME, "_version.py"), encoding="utf-8") as source:
        match = re.search(r'^__version__ = "([^"]+)"$', source.read(), re.M)
    if match is None:
        raise RuntimeError(f"no __version__ in src/{RUNTIME}/_version.py")
    return match.group(1)


setup(
    version=_version(),
    packages=_packages(),
    package_dir=_package_dir(),
    package_data={_installed_name(RUNTIME): ["py.typed"]},
    # the sdist carries the core's `.pxd` files (MANIFEST.in); they only build it, so no wheel does
    exclude_package_data={
        _installed_name(package): ["*.pxd"]
        for package in (RUNTIME, f"{RUNTIME}.core", f"{RUNTIME}.durable.snapshots", f"{RUNTIME}.durable.checkpointing")
    },
    ext_modules=_extensions(),
    cmdclass={
        "build_ext": CoreBuildExt,
        "build_py": LayoutBuildPy,
        "egg_info": TopLevelNames,
        "editable_wheel": EditableWithHook,
    },
    py_modules=[],
)
