"""The compiled core's former path (ImportError where it is not built): the same module object as `amrita_sense.core._sense_core` (this path is kept for imports and pickles that name it)."""

import sys

from amrita_sense.core import _sense_core as _moved

sys.modules[__name__] = _moved
