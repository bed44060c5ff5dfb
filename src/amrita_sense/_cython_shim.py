"""The part of the `cython` module the core's single source reads, for a pure build without Cython.

`amrita_sense/_core_py.py` is plain Python that Cython also compiles (with `_core_py.pxd`) into the
compiled core; its `if cython.compiled:` blocks hold the C-level paths, the `else` blocks the Python
ones. Where Cython is installed the real module (its pure-Python shadow) answers instead.
"""

compiled = False


def cast(kind, value):
    """`value` as `kind` to the C compiler; the value itself here."""
    return value
