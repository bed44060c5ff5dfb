"""1.1.3's exception messages at every raise site we share with it (`tests/support/raise_sites.py`).

Each message starts with 1.1.3's text, verbatim; ours may add detail after it.
When AMRITA_SENSE_REF_PYTHON names an interpreter with amrita-sense 1.1.3
installed (CI sets it), the table itself is checked against 1.1.3 too.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from support import raise_sites
from support.raise_sites import SITES, outcome


@pytest.mark.parametrize("site", list(SITES))
def test_message_starts_with_1_1_3s(site):
    trigger, kind, prefix = SITES[site]
    got_kind, message = outcome(trigger)
    assert got_kind == kind
    assert message.startswith(prefix), f"{message!r} does not start with {prefix!r}"


def test_the_table_describes_1_1_3():
    ref = os.environ.get("AMRITA_SENSE_REF_PYTHON")
    if not ref:
        pytest.skip("AMRITA_SENSE_REF_PYTHON (an interpreter with amrita-sense 1.1.3) is not set")
    env = {**os.environ, "LOG_LEVEL": "CRITICAL", "AMRITA_SENSE_TURBO": "0"}
    env.pop("PYTHONPATH", None)
    script = Path(raise_sites.__file__)
    version = subprocess.run(
        [ref, "-c", "import importlib.metadata as m; print(m.version('amrita-sense'))"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert version.stdout.strip() == "1.1.3"
    done = subprocess.run([ref, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
