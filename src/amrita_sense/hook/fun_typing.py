"""1.1.3's path of the signature analysis: the same module object as `amrita_sense.di.signature` (this path is kept for imports and pickles that name it)."""

import sys

from amrita_sense.di import signature as _moved

sys.modules[__name__] = _moved
