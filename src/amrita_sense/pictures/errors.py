"""The errors of `amrita_sense.pictures`: each one a `PictureError` and the builtin it refines."""

from __future__ import annotations


class PictureError(Exception):
    """Base of every error the picture exporters raise."""


class NotARenderedGraph(PictureError, TypeError):
    """What was given to draw is not a top-level rendered graph (`NodeCompose(...).render()`)."""


class GraphvizNotFound(PictureError, RuntimeError):
    """SVG export needs Graphviz's `dot` program, and it is not on PATH."""


class GraphvizFailed(PictureError, RuntimeError):
    """Graphviz's `dot` ran but did not produce the picture (its message is included)."""


class OverlayMismatch(PictureError, ValueError):
    """An overlay was read from a run (a snapshot, a history) of another graph than the one drawn."""


class UnknownFormat(PictureError, ValueError):
    """A picture format other than `mermaid`, `dot` or `svg` was asked for."""


__all__ = [
    "GraphvizFailed",
    "GraphvizNotFound",
    "NotARenderedGraph",
    "OverlayMismatch",
    "PictureError",
    "UnknownFormat",
]
