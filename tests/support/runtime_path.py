"""Where the amrita_sense under test lives, for the PYTHONPATH of the tests' subprocesses.

The installed runtime (CI installs the wheel) or the source tree (`PYTHONPATH=src`): a
subprocess must import the same copy, never `src/` beside an installed wheel.
"""

from __future__ import annotations

from pathlib import Path

import amrita_sense

RUNTIME_DIR = str(Path(amrita_sense.__file__).resolve().parents[1])
