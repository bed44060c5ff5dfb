"""Run one of the core's sources as Python, as a module of another name: the pure build.

A compiled module sits beside its source under the source's own name (and wins an import of it), so
the pure build runs each source under a name of its own (`pure`, `pure_checks`): the module object is
the source's, its classes report that name, tracebacks show the source file.
"""

import sys
from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path
from types import ModuleType


def run_source(name: str, stem: str, beside: str = __file__) -> ModuleType:
    """Run `<stem>.py` of the folder of the file `beside` (the core's, by default) as the module `name`
    (registered in `sys.modules` before it runs). A layer above the core runs its own compiled
    modules' sources so too (`durable/snapshots/pure_plain_snapshot.py`)."""
    spec = spec_from_file_location(name, Path(beside).with_name(f"{stem}.py"))
    assert spec is not None and spec.loader is not None
    module = module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
