"""The core's former path: the same module object as `amrita_sense.core` (this path is kept for imports and pickles that name it)."""

import sys

from amrita_sense import core as _moved

sys.modules[__name__] = _moved
