"""The shared plans' former path: the same module object as `amrita_sense.di.plans` (this path is kept for imports and pickles that name it)."""

import sys

from amrita_sense.di import plans as _moved

sys.modules[__name__] = _moved
