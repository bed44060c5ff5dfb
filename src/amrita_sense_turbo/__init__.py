"""amrita-sense-turbo's import hook: `import amrita_sense` loads this distribution's runtime.

The wheel installs the runtime as `amrita_sense_turbo/runtime/amrita_sense/`, so it
shares no file with the `amrita-sense` distribution, and `amrita_sense_turbo.pth`,
which imports this module when the interpreter starts. `install()` puts a finder at
the front of `sys.meta_path` that resolves the top-level name `amrita_sense`:

- to this distribution's runtime (the default), under its own name: modules are
  `amrita_sense.*`, so pickles, `__module__` and `python -m amrita_sense` are as
  with any installed package, in every process that starts with the same
  site-packages (multiprocessing's children too);
- with `AMRITA_SENSE_TURBO=0`, to another installed `amrita_sense` (amrita-sense
  1.1.3, for A/B comparisons), or to a clear `ImportError` when there is none.

Importing `amrita_sense_turbo` itself installs the hook and gives this small module
(`python -m amrita_sense_turbo` prints the same report as `python -m amrita_sense`);
the runtime is never importable under a second name.

PYTEST_DONT_REWRITE: the `.pth` file imports this package before pytest starts, and the
distribution's pytest plugin makes pytest want to rewrite its asserts; this marker keeps
pytest from warning about that in every test run of the environment (it has no asserts).
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import ModuleSpec, PathFinder

RUNTIME = "amrita_sense"
SWITCH = "AMRITA_SENSE_TURBO"
_CONTAINER = f"{__name__}.runtime"  # the installed runtime's parent directory, as a (refused) dotted name
_HERE = os.path.dirname(os.path.abspath(__file__))


def runtime_parent() -> str:
    """The directory that holds this distribution's `amrita_sense/` package: `runtime/` beside this
    file in an installed wheel, the source tree's `src/` in a checkout or an editable install."""
    installed = os.path.join(_HERE, "runtime")
    if os.path.isdir(os.path.join(installed, RUNTIME)):
        return installed
    return os.path.dirname(_HERE)


def turbo_selected() -> bool:
    """False when `AMRITA_SENSE_TURBO` is set to 0 / false / no / off (read at each import)."""
    return os.environ.get(SWITCH, "").strip().lower() not in ("0", "false", "no", "off")


def _same_dir(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a or os.curdir, b)
    except OSError:
        return False


class RuntimeFinder:
    """A meta-path finder for the top-level name `amrita_sense` (its submodules then follow its
    `__path__`), and a guard against importing the runtime under the hook package's name."""

    @classmethod
    def find_spec(cls, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if fullname == RUNTIME:
            return cls._runtime_spec() if turbo_selected() else cls._other_spec()
        if fullname == _CONTAINER or fullname.startswith(_CONTAINER + "."):
            raise ModuleNotFoundError(
                f"{fullname!r}: amrita-sense-turbo's runtime is imported as {RUNTIME!r}", name=fullname
            )
        return None

    @staticmethod
    def _runtime_spec() -> ModuleSpec | None:
        # None (a broken install without the runtime) lets the rest of sys.meta_path decide.
        return PathFinder.find_spec(RUNTIME, [runtime_parent()])

    @staticmethod
    def _other_spec() -> ModuleSpec:
        ours = runtime_parent()
        elsewhere = [entry for entry in sys.path if isinstance(entry, str) and not _same_dir(entry, ours)]
        spec = PathFinder.find_spec(RUNTIME, elsewhere)
        if spec is None:
            raise ModuleNotFoundError(
                f"{SWITCH}=0 selects the installed amrita-sense instead of amrita-sense-turbo, "
                f"but no other {RUNTIME!r} package is installed (pip install amrita-sense)",
                name=RUNTIME,
            )
        return spec

    @classmethod
    def invalidate_caches(cls) -> None:
        """Nothing cached here (the path finders keep their own caches)."""


def install() -> None:
    """Put the finder at the front of `sys.meta_path` (once)."""
    if not any(finder is RuntimeFinder for finder in sys.meta_path):
        sys.meta_path.insert(0, RuntimeFinder)


def installed() -> bool:
    """Whether the finder is active in this interpreter."""
    return RuntimeFinder in sys.meta_path


install()

__all__ = ["RUNTIME", "SWITCH", "RuntimeFinder", "install", "installed", "runtime_parent", "turbo_selected"]
