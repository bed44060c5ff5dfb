"""The pure build's former path: the same module object as `amrita_sense.core.pure` (this path is kept for imports and pickles that name it)."""

import sys

from amrita_sense.core import pure as _moved

sys.modules[__name__] = _moved
