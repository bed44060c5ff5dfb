"""How many random programs (seeds, Hypothesis examples, appends) a test draws in this pass.

The README's test command runs every random test at its full size, on both builds and both loops.
CI runs the suite again on other binaries and interpreters (the debug core, the pure wheel, Debian's
3.14 and 3.15); those passes look for what the binary or the interpreter changes, and such a change
breaks whole kinds of programs rather than one rare draw. There CI sets AMRITA_SENSE_TEST_SHARE
(0 < share <= 1) and each random test draws that share of its programs, at least `least`: every
test still runs, with fewer programs (Hypothesis draws other ones in every pass).
"""

from __future__ import annotations

import math
import os


def _share() -> float:
    text = os.environ.get("AMRITA_SENSE_TEST_SHARE") or "1"
    share = float(text)
    if not 0 < share <= 1:
        raise ValueError(f"AMRITA_SENSE_TEST_SHARE must be in (0, 1], not {text!r}")
    return share


SHARE = _share()


def sized(full: int, least: int = 5) -> int:
    """`full` in the full passes; this pass's share of it (at least `least`, at most `full`)."""
    return min(full, max(least, math.ceil(full * SHARE)))
