"""The reference differential: programs whose instruction slots move the pointer or the stacks
(`movers`) give the same records here as on amrita-sense 1.1.3.

1.1.3 runs in a subprocess (`python -I movers.py PROGRAMS.json RECORDS.json`, with
`AMRITA_SENSE_TURBO=0`): the interpreter named by AMRITA_SENSE_REF_PYTHON (CI sets it: its venv has
amrita-sense 1.1.3 beside this package), or else the checkout's `.venv-ref` (`scripts/bench.sh`
creates it). Without one the tests are skipped. The programs are every (place, slot, mover)
combination and a fixed set of seeded random programs, less the constructs that differ from 1.1.3
by design (README, compatibility list).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from support import movers
from support.sampling import sized

SEEDS = range(sized(600))
REFERENCE_VERSION = "1.1.3"
CHECKOUT = Path(__file__).resolve().parent.parent
_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "AMRITA_SENSE_"))},
    "AMRITA_SENSE_TURBO": "0",  # where amrita-sense-turbo is installed too, import 1.1.3
}
_PROBE = (
    "import importlib.metadata as m, amrita_sense; "
    "print('turbo' if hasattr(amrita_sense, 'IMPLEMENTATION') else m.version('amrita-sense'))"
)


def reference_programs() -> dict[str, dict]:
    programs = {
        key: program
        for key, program in movers.every_slot_program().items()
        if not movers.differs_from_113_by_design(program)
    }
    for seed in SEEDS:
        programs[f"seed {seed}"] = movers.random_program(random.Random(seed).choice, for_reference=True)
    return programs


def _imported_version(python: str) -> str | None:
    """The version of the `amrita_sense` that `python` imports ("turbo" for this package)."""
    try:
        done = subprocess.run([python, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=60, env=_ENV)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def reference_python() -> str:
    """The interpreter that imports amrita-sense 1.1.3; skips when there is none (fails when
    AMRITA_SENSE_REF_PYTHON names one that does not)."""
    named = os.environ.get("AMRITA_SENSE_REF_PYTHON")
    python = named or str(CHECKOUT / ".venv-ref" / "bin" / "python")
    if not Path(python).is_file():
        problem = f"{python} does not exist"
    else:
        version = _imported_version(python)
        if version == REFERENCE_VERSION:
            return python
        problem = f"{python} imports amrita-sense {version}" if version else f"{python} cannot import amrita_sense"
    if named:
        pytest.fail(f"AMRITA_SENSE_REF_PYTHON: {problem}, not {REFERENCE_VERSION}")
    pytest.skip(f"no amrita-sense {REFERENCE_VERSION} to compare with ({problem}); set AMRITA_SENSE_REF_PYTHON")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """`(programs, records)`: the programs and what 1.1.3 recorded for each with `run()`."""
    python = reference_python()
    folder = tmp_path_factory.mktemp("reference")
    programs = reference_programs()
    (folder / "programs.json").write_text(json.dumps(programs))
    done = subprocess.run(
        [python, "-I", movers.__file__, "programs.json", "records.json"],
        cwd=folder,
        env=_ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return programs, json.loads((folder / "records.json").read_text())


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["run", "steps"])
async def test_programs_with_pointer_moving_nodes_give_what_113_gives(reference, mode):
    programs, expected = reference
    ours = json.loads(json.dumps(await movers.record_all(movers.Api(), programs, mode)))
    assert [key for key in programs if ours[key] != expected[key]] == []
