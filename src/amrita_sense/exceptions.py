"""Exception classes of the engine (same names and hierarchy as amrita-sense 1.1.3)."""

from __future__ import annotations


class InterruptNotice(BaseException):
    """Ends a run unconditionally and resets the interpreter.

    A `BaseException`, so neither a Try node nor `except Exception` can hold it.
    """

    def __init__(self, message: str | None = None):
        super().__init__(*(() if message is None else (message,)))
        self.message: str | None = message

    def __str__(self) -> str:
        return f"InterruptNotice {self.message or ''}"


class InterruptKeepContext(InterruptNotice):
    """Ends a run but keeps its state; the next run steps past the halting node."""


class NullPointerException(Exception):
    """An address, alias or index does not resolve to a node."""


class BreakLoop(Exception):
    """Raised by a loop body to leave the enclosing WHILE / DO loop."""


class DependsException(Exception):
    """Base class of the dependency-injection errors."""


class DependsResolveFailed(DependsException):
    """A node's or handler's signature cannot be satisfied from the argument pools."""


class DependsInjectFailed(DependsException):
    """A dependency provider failed, returned None, or a keyword argument collided."""


class DependsDeclarationError(DependsException):
    """A `Depends` declaration is contradictory; raised when the signature is analysed."""


class IllegalState(Exception):
    """The operation is not allowed in the current state."""


class GraphBuildError(Exception):
    """Compiling or rendering a graph failed."""


class StreamStateError(Exception):
    """A `SuspendObjectStream` was used in a way its state does not allow."""


class AliasNotFoundError(Exception):
    """A jump, call or invoke names an alias that the graph does not define."""


# ----- refusing bad input early (not in 1.1.3) ----------------------------------------------------
# A check added for robustness raises where 1.1.3 accepted the value and failed later, or failed
# differently. Each class derives from what 1.1.3 raises for such input, so `except` clauses
# written for 1.1.3 keep catching it.


class InvalidOperand(TypeError, AttributeError):
    """A value of the wrong kind: an argument, an instruction operand or a field value.

    A `TypeError`, and an `AttributeError` because that is what 1.1.3 raises for most such values,
    at the call or later, when it first looks up an attribute the value does not have.
    """


class InvalidMiddleware(InvalidOperand, AssertionError):
    """A middleware that is not callable (1.1.3 asserts that it is: an `AssertionError`)."""


class InvalidFlags(InvalidOperand, ValueError):
    """A status register value that is not an int, or has bits other than IF / HLT / JMP (1.1.3's
    `int()` of a non-numeric string is a `ValueError`)."""
