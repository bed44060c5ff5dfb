"""Side by side with amrita-sense, in fresh virtual environments, with pip and with uv.

AmritaCore pulls amrita-sense 1.1.3; our wheel must install beside it in either
order, give `import amrita_sense` our runtime while it is installed (in every
process: pickles and multiprocessing's spawned children included), leave a
working 1.1.3 when it is uninstalled, and let `AMRITA_SENSE_TURBO=0` select 1.1.3.

Slow (real installs from PyPI): marked `install` and run only when
AMRITA_SENSE_INSTALL_TESTS=1. AMRITA_SENSE_REQUIRE_INSTALL_TESTS=1 (CI) makes
anything that would skip them (no PyPI, no uv) a failure. AMRITA_SENSE_WHEEL
names the wheel to test; without it a pure wheel of this checkout is built.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parent.parent
AMRITA_CORE = "amrita-core==1.3.1"
REQUIRED = os.environ.get("AMRITA_SENSE_REQUIRE_INSTALL_TESTS", "") not in ("", "0")

if not REQUIRED and os.environ.get("AMRITA_SENSE_INSTALL_TESTS", "") in ("", "0"):
    pytest.skip("install tests run with AMRITA_SENSE_INSTALL_TESTS=1", allow_module_level=True)

PROBE = textwrap.dedent(
    """
    import json, pickle, subprocess, sys
    import multiprocessing as mp

    def child(blob, queue):
        import amrita_sense
        error, cls = pickle.loads(blob)
        queue.put([amrita_sense.IMPLEMENTATION, type(error).__module__, str(error), cls.__module__])

    def describe():
        try:
            import amrita_sense
        except ImportError as exc:
            return {"runtime": None, "error": str(exc)}
        turbo = hasattr(amrita_sense, "IMPLEMENTATION")
        out = {"runtime": "turbo" if turbo else "1.1.3", "file": amrita_sense.__file__}
        if turbo:
            from amrita_sense import NullPointerException, PointerVector
            blob = pickle.dumps((NullPointerException("boom"), PointerVector))
            fresh = subprocess.run([sys.executable, "-c", "import pickle, sys; e, c = pickle.loads(sys.stdin.buffer.read()); print(c.__module__, e)"],
                                   input=blob, capture_output=True, check=True)
            out["fresh"] = fresh.stdout.decode().strip()
            ctx = mp.get_context("spawn")
            queue = ctx.Queue()
            proc = ctx.Process(target=child, args=(blob, queue))
            proc.start()
            out["spawned"] = queue.get(timeout=60)
            proc.join(60)
        return out

    if __name__ == "__main__":
        print(json.dumps(describe()))
    """
)


def _run(
    cmd: list[str], env: dict | None = None, check: bool = True, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AMRITA_SENSE_TURBO", "VIRTUAL_ENV")}
    full_env.update(env or {})
    done = subprocess.run(cmd, env=full_env, cwd=cwd, capture_output=True, text=True, timeout=900)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"AMRITA_SENSE_REQUIRE_INSTALL_TESTS=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    given = os.environ.get("AMRITA_SENSE_WHEEL")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("wheel")
    done = _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
        env={"AMRITA_SENSE_NO_EXTENSIONS": "1"},
        check=False,
    )
    if done.returncode != 0:
        _unavailable(f"building a wheel failed (no PyPI for the build requirements?):\n{done.stderr[-2000:]}")
    return next(out.glob("*.whl"))


@pytest.fixture(scope="module")
def uv(tmp_path_factory) -> str:
    found = shutil.which("uv")
    if found:
        return found
    tools = tmp_path_factory.mktemp("uv-tool")
    _run([sys.executable, "-m", "venv", str(tools)])
    done = _run([str(tools / "bin" / "python"), "-m", "pip", "install", "-q", "uv"], check=False)
    if done.returncode != 0:
        _unavailable(f"uv does not install from PyPI here:\n{done.stderr[-2000:]}")
    return str(tools / "bin" / "uv")


class Env:
    """A fresh virtual environment driven by one installer ("pip" or "uv")."""

    def __init__(self, root: Path, installer: str, uv: str | None):
        self.root, self.installer, self.uv = root, installer, uv
        _run([sys.executable, "-m", "venv", str(root)])
        self.python = str(root / "bin" / "python")
        self.probe = root / "probe.py"
        self.probe.write_text(PROBE)

    def _pip(self, *args: str) -> None:
        if self.installer == "uv":
            _run([self.uv, "pip", *args, "--python", self.python])
        else:
            _run([self.python, "-m", "pip", *args])

    def install(self, *targets: str) -> None:
        self._pip("install", "-q", *targets)

    def uninstall(self, name: str) -> None:
        if self.installer == "uv":
            self._pip("uninstall", name)
        else:
            self._pip("uninstall", "-q", "-y", name)

    def state(self, **env: str) -> dict:
        return json.loads(_run([self.python, str(self.probe)], env=env, cwd=self.root).stdout)

    def report(self) -> subprocess.CompletedProcess:
        return _run([self.python, "-m", "amrita_sense_turbo"], check=False, cwd=self.root)

    def site_names(self) -> set[str]:
        site = Path(
            _run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
        )
        return {p.name for p in site.iterdir() if "amrita_sense" in p.name}

    def amrita_core_imports(self) -> None:
        _run(
            [self.python, "-c", "import amrita_core, amrita_sense.logging as l; assert amrita_core.logger is l.logger"],
            cwd=self.root,
        )


def _assert_turbo(state: dict) -> None:
    assert state["runtime"] == "turbo", state
    assert "/amrita_sense_turbo/runtime/amrita_sense/" in state["file"]
    assert state["fresh"].startswith("amrita_sense.") and state["fresh"].endswith("boom")
    implementation, error_module, message, cls_module = state["spawned"]
    assert error_module == "amrita_sense.exceptions" and message == "boom"
    assert cls_module.startswith("amrita_sense.")


def _assert_113(state: dict) -> None:
    assert state["runtime"] == "1.1.3", state
    assert "amrita_sense_turbo" not in state["file"]


def _assert_both_installed(env: Env) -> None:
    _assert_turbo(env.state())
    _assert_113(env.state(AMRITA_SENSE_TURBO="0"))
    report = env.report()
    assert report.returncode == 0, report.stdout + report.stderr
    assert "runtime               amrita-sense-turbo" in report.stdout
    env.amrita_core_imports()


OUR_FILES = {"amrita_sense_turbo", "amrita_sense_turbo.pth"}


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_amrita_core_first_then_ours(tmp_path, wheel, installer, request):
    env = Env(tmp_path / "venv", installer, request.getfixturevalue("uv") if installer == "uv" else None)
    env.install(AMRITA_CORE)
    _assert_113(env.state())
    env.install(str(wheel))
    _assert_both_installed(env)
    env.uninstall("amrita-sense-turbo")
    _assert_113(env.state())
    assert not env.site_names() & OUR_FILES
    env.amrita_core_imports()


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_ours_first_then_amrita_core(tmp_path, wheel, installer, request):
    env = Env(tmp_path / "venv", installer, request.getfixturevalue("uv") if installer == "uv" else None)
    env.install(str(wheel))
    _assert_turbo(env.state())
    missing = env.state(AMRITA_SENSE_TURBO="0")
    assert missing["runtime"] is None and "AMRITA_SENSE_TURBO=0" in missing["error"]
    env.install(AMRITA_CORE)
    _assert_both_installed(env)
    env.uninstall("amrita-sense")
    _assert_turbo(env.state())
    assert env.report().returncode == 0
    env.uninstall("amrita-sense-turbo")
    assert env.state()["runtime"] is None
    assert not env.site_names()
