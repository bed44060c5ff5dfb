"""Shorthand for creating a `Matcher`."""

from .matcher import Matcher


def on_event(event_type: str, priority: int = 10, block: bool = True) -> Matcher:
    """A `Matcher` for `event_type`; register handlers with `@on_event(...).handle()`."""
    return Matcher(event_type, priority, block)
