"""Ray is loaded only on request: `import amrita_sense` never imports it, and without Ray the
scale-out module says how to get it. Runs in fresh interpreters, with or without Ray installed."""

from __future__ import annotations

import subprocess
import sys


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_amrita_sense_does_not_import_ray():
    done = _python(
        "import sys, amrita_sense, amrita_sense.durable, amrita_sense.streaming, amrita_sense.debugger\n"
        "from amrita_sense import WorkflowInterpreter\n"
        "assert 'ray' not in sys.modules, sorted(m for m in sys.modules if m.startswith('ray'))\n"
        "print('ok')"
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_without_ray_the_module_says_how_to_install_it():
    done = _python(
        "import sys\n"
        "sys.modules['ray'] = None  # as if Ray were not installed\n"
        "try:\n"
        "    import amrita_sense.distributed\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    assert "pip install 'amrita-sense-turbo[ray]'" in done.stdout, done.stderr
