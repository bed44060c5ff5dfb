"""Control-flow exceptions raised from event handlers."""


class MatcherException(Exception):
    """Base of the handler control-flow exceptions."""


class CancelException(MatcherException):
    """Raised by `Matcher.stop_process()`: ends the whole dispatch."""


class PassException(MatcherException):
    """Raised by `Matcher.pass_event()`: skips to the next handler."""
