"""The `_di_cache` view's former path: the same module object as `amrita_sense.di.dicache` (this path is kept for imports and pickles that name it)."""

import sys

from amrita_sense.di import dicache as _moved

sys.modules[__name__] = _moved
