"""The pure build: the core's one source (`_sense_core.py`) run as Python, as this module.

The source cannot be imported under its own name when the compiled extension sits beside it (the
extension wins), so this module loads the file itself and stands for it: `amrita_sense.core.pure`
is the source's module object, its classes report this name, and tracebacks show the source file.
"""

import sys
from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the type checker reads the source's names as this module's
    from amrita_sense.core._sense_core import *  # noqa: F403

_spec = spec_from_file_location(__name__, Path(__file__).with_name("_sense_core.py"))
assert _spec is not None and _spec.loader is not None
_module = module_from_spec(_spec)
sys.modules[__name__] = _module
_spec.loader.exec_module(_module)
