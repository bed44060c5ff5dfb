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
import random


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


def _sweep_stride() -> int:
    text = os.environ.get("AMRITA_SENSE_SWEEP_STRIDE") or "1"
    stride = int(text)
    if stride < 1:
        raise ValueError(f"AMRITA_SENSE_SWEEP_STRIDE must be a whole number of at least 1, not {text!r}")
    return stride


SWEEP_STRIDE = _sweep_stride()
"""The exhaustive sweeps (a KeyboardInterrupt at every trace event or bytecode of a run) cut at
every position in the README's passes and on Debian's interpreters, where an interrupt lands
differently. CI's debug-core and pure-wheel passes run the same source on the same interpreter as
the README's passes, which already cut everywhere: there CI sets AMRITA_SENSE_SWEEP_STRIDE and each
sweep cuts every stride-th position from a random first one (`sweep_positions`)."""


def sweep_positions(cap: int):
    """1, 2, 3, ... below `cap` in the full passes; with a stride k, a random start in 1..k, then every
    k-th position (the caller stops when a position is past the run's end)."""
    return range(random.randint(1, SWEEP_STRIDE), cap, SWEEP_STRIDE)
