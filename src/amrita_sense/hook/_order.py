"""The provider order's former path: the same module object as `amrita_sense.di.order` (this path is kept for imports and pickles that name it)."""

import sys

from amrita_sense.di import order as _moved

sys.modules[__name__] = _moved
