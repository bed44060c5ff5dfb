"""The pickle support's former path (pickles name its functions): the same module object as `amrita_sense.core.portable` (this path is kept for imports and pickles that name it)."""

import sys

from amrita_sense.core import portable as _moved

sys.modules[__name__] = _moved
