"""The part of the `cython` module the core's source reads, for a pure build without Cython.

`amrita_sense/_core_py.py` is plain Python that Cython also compiles (with `_sense_core.pxd`) into the
compiled core; its `if cython.compiled:` blocks hold the C-level paths, the `else` blocks the Python
ones. Where Cython is installed the real module (its pure-Python shadow) answers instead.
"""

compiled = False


def cast(kind, value):
    """`value` as `kind` to the C compiler; the value itself here."""
    return value


def locals(**types):  # noqa: A001 - Cython's name
    """The C types of a function's local variables, to the C compiler; nothing here."""
    return lambda function: function


def wraparound(on):
    """Whether a function's C-integer indexes may be negative (Python's meaning), to the C compiler;
    nothing here."""
    return lambda function: function


def boundscheck(on):
    """Whether a function's indexes are checked against the length, to the C compiler; nothing here."""
    return lambda function: function


# the C types the core names in `locals(...)`, as the Python types their values have here
int = int  # noqa: A001, PLW0127
Py_ssize_t = int
double = float


class critical_section:  # noqa: N801 - Cython's name
    """`with cython.critical_section(obj):` holds `obj`'s lock on a free-threaded build of the compiled
    core; the pure build runs none of those blocks (they sit under `if cython.compiled:`)."""

    def __init__(self, *objects):
        pass

    def __enter__(self):
        return None

    def __exit__(self, *exc_info):
        return False
