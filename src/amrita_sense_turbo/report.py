"""What `python -m amrita_sense` (or `python -m amrita_sense_turbo`) prints: which runtime the
name `amrita_sense` loads and from where, which core and why, the installed distributions, and
a warning for every broken mix it can detect. Exit status 1 when there is a warning."""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import os
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import amrita_sense_turbo as hook

OURS = "amrita-sense-turbo"
THEIRS = "amrita-sense"


@dataclass
class Report:
    """The facts, then the warnings derived from them."""

    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def fact(self, label: str, value: object) -> None:
        self.lines.append(f"{label:<22}{value}")

    def text(self) -> str:
        body = list(self.lines)
        body += [f"WARNING: {warning}" for warning in self.warnings] or ["no problem found"]
        return "\n".join(body)


# ----- installed distributions -------------------------------------------------------------


def _dists(name: str) -> list[metadata.Distribution]:
    """Every installed distribution of that name on sys.path (more than one is a stale copy); a
    source checkout's egg-info (no RECORD) is not an installation."""
    wanted = name.replace("-", "_").lower()
    found = []
    for dist in metadata.distributions():
        dist_name = (dist.metadata["Name"] or "").replace("-", "_").lower()
        if dist_name == wanted and dist.read_text("RECORD") is not None:
            found.append(dist)
    return found


def _where(dist: metadata.Distribution) -> str:
    return str(dist.locate_file(""))


def _recorded(dist: metadata.Distribution) -> list[Path]:
    """The module files of a distribution's RECORD (bytecode caches left out)."""
    files = dist.files or []
    return [
        Path(str(dist.locate_file(f)))
        for f in files
        if f.suffix in (".py", ".so", ".pyd") and "__pycache__" not in f.parts
    ]


def _missing(dist: metadata.Distribution) -> list[Path]:
    return [path for path in _recorded(dist) if not path.exists()]


def _foreign_files(dist: metadata.Distribution, package_dir: Path) -> list[Path]:
    """Module files in `package_dir` that the distribution's RECORD does not list."""
    if not package_dir.is_dir():
        return []
    recorded = {path.resolve() for path in _recorded(dist)}
    present = (p for p in package_dir.rglob("*") if p.suffix in (".py", ".so", ".pyd") and "__pycache__" not in p.parts)
    return sorted(p for p in present if p.resolve() not in recorded)


def _sample(paths: list[Path], root: Path) -> str:
    shown = ", ".join(str(p.relative_to(root)) if p.is_relative_to(root) else str(p) for p in paths[:3])
    return shown + (", ..." if len(paths) > 3 else "")


def _check_ours(report: Report) -> None:
    dists = _dists(OURS)
    if not dists:
        report.fact(OURS, "not installed (a source tree on sys.path)")
        return
    for dist in dists:
        report.fact(OURS, f"{dist.version} at {_where(dist)}")
        missing = _missing(dist)
        if missing:
            report.warnings.append(
                f"{len(missing)} files of {OURS} {dist.version} are missing ({_sample(missing, Path(_where(dist)))}): "
                f"reinstall it (pip install --force-reinstall {OURS})"
            )
    if len(dists) > 1:
        report.warnings.append(f"{len(dists)} installations of {OURS} are on sys.path; remove the stale ones")


def _check_theirs(report: Report) -> None:
    dists = _dists(THEIRS)
    if not dists:
        report.fact(THEIRS, f"not installed ({hook.SWITCH}=0 has nothing to select)")
        return
    for dist in dists:
        report.fact(THEIRS, f"{dist.version} at {_where(dist)}")
        root = Path(_where(dist))
        missing = _missing(dist)
        if missing:
            report.warnings.append(
                f"{THEIRS} {dist.version} is listed but {len(missing)} of its files are missing "
                f"({_sample(missing, root)}): {hook.SWITCH}=0, or uninstalling {OURS}, leaves no working "
                f"amrita_sense; reinstall it (pip install --force-reinstall {THEIRS}=={dist.version})"
            )
        foreign = _foreign_files(dist, root / hook.RUNTIME)
        if foreign:
            report.warnings.append(
                f"{root / hook.RUNTIME} holds {len(foreign)} files that {THEIRS} {dist.version} did not install "
                f"({_sample(foreign, root)}): another package (an older {OURS}?) wrote into its directory; "
                f"reinstall it (pip install --force-reinstall {THEIRS}=={dist.version})"
            )
    if len(dists) > 1:
        report.warnings.append(f"{len(dists)} installations of {THEIRS} are on sys.path; remove the stale ones")


# ----- the runtime the name loads ----------------------------------------------------------


def _check_hook(report: Report) -> None:
    selected = "amrita-sense-turbo" if hook.turbo_selected() else f"amrita-sense ({hook.SWITCH}=0)"
    state = "active" if hook.installed() else "NOT active"
    report.fact("import hook", f"{state} ({hook.__file__}); selects {selected}")
    if _dists(OURS) and not hook.installed():
        report.warnings.append(
            f"the import hook is not active in this interpreter ({hook.__name__}.pth was not read: python -S, "
            f"or the file is missing), so `import amrita_sense` ignores {OURS}"
        )


def _check_runtime(report: Report) -> None:
    try:
        runtime = importlib.import_module(hook.RUNTIME)
    except ImportError as exc:
        report.fact("runtime", "none")
        report.warnings.append(f"`import amrita_sense` fails: {exc}")
        return
    location = Path(runtime.__file__ or "").parent
    ours = location.parent.resolve() == Path(hook.runtime_parent()).resolve()
    report.fact("runtime", f"{OURS if ours else THEIRS + ' (or another copy)'} from {location}")
    if ours != hook.turbo_selected():
        wanted = OURS if hook.turbo_selected() else THEIRS
        report.warnings.append(f"`import amrita_sense` loaded {location}, not the selected {wanted}")
    if ours:
        core = importlib.import_module(f"{hook.RUNTIME}._core")
        report.fact("core", f"{runtime.IMPLEMENTATION}: {core.CORE_REASON}")


def build_report() -> Report:
    """Gather the facts and warnings for this interpreter."""
    report = Report()
    report.fact("python", f"{sys.version.split()[0]} ({sys.executable})")
    _check_hook(report)
    _check_runtime(report)
    _check_ours(report)
    _check_theirs(report)
    gil_enabled = getattr(sys, "_is_gil_enabled", None)  # 3.13+; read after the core's import
    if gil_enabled is not None and sysconfig.get_config_var("Py_GIL_DISABLED"):
        state = "on (PYTHON_GIL=1, or a module that needs it)" if gil_enabled() else "off"
        report.fact("GIL", f"{state}: a free-threaded interpreter")
    for name in ("AMRITA_SENSE_TURBO", "AMRITA_SENSE_NO_EXTENSIONS", "AMRITA_SENSE_REQUIRE_EXTENSIONS"):
        if name in os.environ:
            report.fact(name, os.environ[name])
    return report


def main() -> int:
    """Print the report; 1 when it has a warning."""
    report = build_report()
    print(report.text())
    return 1 if report.warnings else 0
