"""The peers' virtual environments: created with pip from the package index on request, kept
under a directory of the checkout (`.venv-peers/<name>`) and reused while their pins and the
base Python are unchanged."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable

from amrita_sense.bench.peers import Peer

STAMP = ".amrita-sense-peer.json"


class PeerEnvError(RuntimeError):
    """A peer's environment could not be created (the message ends with pip's last lines)."""


def venv_python(directory: str) -> str:
    if sys.platform == "win32":
        return os.path.join(directory, "Scripts", "python.exe")
    return os.path.join(directory, "bin", "python")


def base_version(python: str) -> str:
    """The full version of `python` (an environment over another base is a different environment)."""
    out = subprocess.run([python, "-c", "import sys; print(sys.version)"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def wanted(peer: Peer, version: str) -> dict:
    return {"requirements": list(peer.install), "python": version}


def is_ready(peer: Peer, directory: str, version: str) -> bool:
    try:
        with open(os.path.join(directory, STAMP), encoding="utf-8") as handle:
            stamp = json.load(handle)
    except (OSError, ValueError):
        return False
    return stamp == wanted(peer, version) and os.path.exists(venv_python(directory))


def ensure(peer: Peer, root: str, base_python: str, rebuild: bool = False, say: Callable[[str], None] = print) -> str:
    """The Python of `peer`'s environment `root/<name>`, (re)created first when it is missing, was
    made from other pins or another base Python, or `rebuild` asks for it."""
    directory = os.path.join(root, peer.name)
    version = base_version(base_python)
    if not rebuild and is_ready(peer, directory, version):
        say(f"reusing {directory} ({', '.join(peer.requirements)})")
        return venv_python(directory)
    say(f"creating {directory}: pip install {' '.join(peer.install)}")
    started = time.monotonic()
    shutil.rmtree(directory, ignore_errors=True)
    _run([base_python, "-m", "venv", directory], f"python -m venv {directory}")
    python = venv_python(directory)
    _run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *peer.install],
        f"pip install into {directory}",
    )
    with open(os.path.join(directory, STAMP), "w", encoding="utf-8") as handle:
        json.dump(wanted(peer, version), handle)
    say(f"created {directory} in {time.monotonic() - started:.1f} s")
    return python


def _run(command: list, what: str) -> None:
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        raise PeerEnvError(f"{what} failed (exit {proc.returncode}):\n{tail}")
