"""Each check added for robustness raises a type 1.1.3 code can catch (`tests/support/bad_inputs.py`).

For every bad input in the table, what we raise is an instance of what 1.1.3 raises for it (at
the same call or later, when it first uses the value): `InvalidOperand` is a TypeError and an
AttributeError, `InvalidMiddleware` also an AssertionError, `InvalidFlags` also a ValueError.
When AMRITA_SENSE_REF_PYTHON names an interpreter with amrita-sense 1.1.3 installed (CI sets
it), the table itself is checked against 1.1.3.
"""

from __future__ import annotations

import builtins
import os
import subprocess
from pathlib import Path

import pytest

from amrita_sense import exceptions
from support import bad_inputs
from support.bad_inputs import ACCEPTED, CASES, DIFFERENT, Hung, _every_trigger, outcome


def _named(kind: str) -> type:
    return getattr(builtins, kind, None) or getattr(exceptions, kind)


@pytest.mark.parametrize("case", list(CASES))
def test_ours_is_an_instance_of_1_1_3s_type(case):
    trigger, kind, _ = CASES[case]
    exc, _ = outcome(trigger)
    assert isinstance(exc, _named(kind)), f"{case}: {exc!r} is not a {kind}"
    assert isinstance(exc, (TypeError, ValueError, AttributeError))


@pytest.mark.parametrize("case", list(CASES))
def test_ours_raises_at_the_bad_input_or_where_1_1_3_does(case):
    trigger, _, where = CASES[case]
    _, stage = outcome(trigger)
    assert stage == "input" or stage == where, f"{case} raised at {stage}"


@pytest.mark.parametrize("case", list(ACCEPTED))
def test_what_1_1_3_accepts_is_refused_at_once(case):
    trigger, kind = ACCEPTED[case]
    exc, stage = outcome(trigger)
    assert isinstance(exc, _named(kind)) and not isinstance(exc, Hung) and stage == "input"


@pytest.mark.parametrize("case", list(DIFFERENT))
def test_the_cases_we_decided_against(case):
    trigger, _, ours = DIFFERENT[case]
    exc, stage = outcome(trigger)
    assert isinstance(exc, _named(ours)) and stage == "input"


def test_the_dual_types():
    assert issubclass(exceptions.InvalidOperand, TypeError) and issubclass(exceptions.InvalidOperand, AttributeError)
    assert issubclass(exceptions.InvalidMiddleware, exceptions.InvalidOperand)
    assert issubclass(exceptions.InvalidMiddleware, AssertionError)
    assert issubclass(exceptions.InvalidFlags, exceptions.InvalidOperand) and issubclass(
        exceptions.InvalidFlags, ValueError
    )


def test_every_trigger_is_in_the_table():
    listed = {t.__name__ for t, *_ in [*CASES.values(), *ACCEPTED.values(), *DIFFERENT.values()]}
    assert set(_every_trigger()) == listed


def test_the_table_describes_1_1_3():
    ref = os.environ.get("AMRITA_SENSE_REF_PYTHON")
    if not ref:
        pytest.skip("AMRITA_SENSE_REF_PYTHON (an interpreter with amrita-sense 1.1.3) is not set")
    env = {**os.environ, "LOG_LEVEL": "CRITICAL", "AMRITA_SENSE_TURBO": "0"}
    env.pop("PYTHONPATH", None)
    script = Path(bad_inputs.__file__)
    version = subprocess.run(
        [ref, "-c", "import importlib.metadata as m; print(m.version('amrita-sense'))"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert version.stdout.strip() == "1.1.3"
    done = subprocess.run([ref, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
