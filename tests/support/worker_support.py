"""`ThisPackage`: the `dual.SenseCopy` interface over the `amrita_sense` this process imported."""

from __future__ import annotations

import importlib
from types import ModuleType


class ThisPackage:
    """What the program builders need from a package copy, for the package already imported."""

    def sub(self, dotted: str) -> ModuleType:
        return importlib.import_module(f"amrita_sense.{dotted}")
