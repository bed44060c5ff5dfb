"""Sphinx configuration of the amrita-sense-turbo documentation (build: ``bash scripts/docs.sh``)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

# The reference is generated from the pure build: no compiler, and the same docstrings and type hints
# (the compiled core is the same source). Set before anything imports amrita_sense.
os.environ["AMRITA_SENSE_NO_EXTENSIONS"] = "1"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

_VERSION_FILE = (ROOT / "src" / "amrita_sense" / "_version.py").read_text(encoding="utf-8")
release = re.search(r'^__version__ = "([^"]+)"', _VERSION_FILE, re.M).group(1)  # type: ignore[union-attr]
version = ".".join(release.split(".")[:2])

project = "amrita-sense-turbo"
author = "The amrita-sense-turbo developers"
copyright = "the amrita-sense-turbo developers (Apache-2.0)"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# Docstrings quote names and code in single backticks; render them as literals.
default_role = "literal"

# MyST: ::: fences, definition lists, and anchors for headings down to ###, so pages can link
# to a section with (page.md#heading-slug) and a missing anchor is a warning.
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# autodoc
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_member_order = "bysource"
autodoc_default_options: dict[str, object] = {}
autodoc_preserve_defaults = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# -n (nitpicky) is on in scripts/docs.sh. Without intersphinx (the build has no network), types of
# the standard library and of third-party packages cannot resolve; they are ignored here, by name.
nitpicky = True
nitpick_ignore = [
    # Private helpers named in the signatures of methods and constructors users do not call
    # themselves (a decorator's type variable; RunHandle / RunStream are made by the pool).
    ("py:class", "amrita_sense.runtime.workflow._Method"),
    ("py:class", "_RunState"),
    ("py:class", "_Buffer"),
    ("py:class", "PoolLoop"),
    ("py:class", "T"),
    # the key's HMAC state `Keyring.mac_for` hands to the snapshot packer (not used by callers)
    ("py:class", "amrita_sense.durable.snapshots.signing._HmacSha256"),
]
nitpick_ignore_regex = [
    # Standard library and builtins (no intersphinx inventory for docs.python.org).
    (
        r"py:.*",
        r"(_asyncio|typing|collections|collections\.abc|asyncio|concurrent|contextvars|types|enum|abc|os|pathlib|sqlite3|threading|argparse|dataclasses|io|re|datetime|json|pickle|zlib|inspect|weakref|functools|contextlib|subprocess)(\..*)?",
    ),
    (
        r"py:.*",
        r"(int|str|bytes|bytearray|float|bool|object|dict|list|tuple|set|frozenset|type|None|NoneType|Exception|BaseException|TypeError|ValueError|AttributeError|AssertionError|TimeoutError|RuntimeError|KeyError|IndexError|LookupError|ConnectionError|OSError|RecursionError|memoryview|Ellipsis|callable|Callable|Any|Awaitable|Coroutine|Iterable|Iterator|AsyncIterator|AsyncIterable|AsyncGenerator|Generator|Mapping|MutableMapping|Sequence|Optional|Union|Literal|TypeVar|ParamSpec|Generic|Protocol|Self|Task|Future|AbstractEventLoop|Path|PathLike|ExceptionGroup|BaseExceptionGroup|ContextVar|Context|Lock|RLock|Event|Thread|Namespace|frame|FrameType|TracebackType|CodeType|FunctionType|ModuleType|Enum|IntEnum|IntFlag|datetime|timedelta)",
    ),
    # Third-party packages the optional modules use (psycopg, Ray, OpenTelemetry, Starlette, loguru).
    (
        r"py:.*",
        r"(psycopg|psycopg_pool|ray|opentelemetry|starlette|uvicorn|loguru|anyio|sniffio|cloudpickle|pytest|matplotlib)(\..*)?",
    ),
]

html_theme = "furo"
html_title = f"amrita-sense-turbo {release}"


def _napoleon_except_attributes(app, what, name, obj, options, lines):  # type: ignore[no-untyped-def]
    """napoleon for every docstring but an attribute's or a property's.

    napoleon reads an attribute docstring `X: Y` as "type X, description Y"; here the types come
    from the annotations and those docstrings are prose that often has a colon in it
    ("The capacity: `push` on a stack this long raises ...").
    """
    from sphinx.ext.napoleon import _process_docstring

    if what not in ("attribute", "property", "data"):
        _process_docstring(app, what, name, obj, options, lines)


def setup(app):  # type: ignore[no-untyped-def]
    from sphinx.ext.napoleon import _process_docstring

    for listener in list(app.events.listeners.get("autodoc-process-docstring", ())):
        if listener.handler is _process_docstring:
            app.disconnect(listener.id)
    app.connect("autodoc-process-docstring", _napoleon_except_attributes)
