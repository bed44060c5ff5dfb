"""Library logging: a private loguru logger, configured as amrita-sense 1.1.3 configures it.

`logger` is a loguru `Logger` with a core of its own (the global `loguru.logger`
is left alone). It starts with one sink, `sys.stdout`, whose id is kept in
`logger_id`; that sink prints the records at or above the level named by the
`LOG_LEVEL` environment variable (default INFO), read when each record is
emitted, so any loguru level name works (TRACE, SUCCESS, custom levels) and a
change of the variable takes effect at once. Applications add and remove sinks
with the usual `logger.add(...)` / `logger.remove(logger_id.value)`.

`debug_log(message)` logs at debug level only while the module switch `debug`
is True. Nothing is logged on the per-step path; the engine's own debug lines
(render time, panics) are guarded by `engine_debug_enabled()`, which is cheap.
"""

from __future__ import annotations

import atexit
import inspect
import logging as _std_logging
import os
import sys
import warnings
from typing import TYPE_CHECKING, Any, Protocol

from loguru import _defaults as _loguru_defaults
from loguru import _logger as _loguru_logger

from amrita_sense.utils import Ref

if TYPE_CHECKING:
    from loguru import Logger, Record

__all__ = ["debug_log", "logger", "logger_id"]

DEFAULT_LEVEL = "INFO"
DEBUG_LEVEL_NO = 10

debug: bool = False
"""When True, `debug_log` messages are emitted at debug level."""

default_format: str = " | ".join(
    (
        "<green>{time:YYYY-MM-DD HH:mm:ss}</green>",
        "<level>{level: <7}</level>",
        "<magenta>{name}:{function}:{line}</magenta>",
        "<level>{message}</level>",
    )
)
"""The default sink's format: time, level, where the line was logged, message."""


def _new_logger() -> Logger:
    """A loguru logger with a core of its own, set up like loguru's global one (a stderr sink
    when loguru's autoinit is on), so handler ids are numbered as they are for that logger."""
    new = _loguru_logger.Logger(
        core=_loguru_logger.Core(),
        exception=None,
        depth=0,
        record=False,
        lazy=False,
        colors=False,
        raw=False,
        capture=True,
        patchers=[],
        extra={},
    )
    if _loguru_defaults.LOGURU_AUTOINIT and sys.stderr:
        new.add(sys.stderr)
    return new  # type: ignore[return-value]  # loguru's class behind its public Logger type


logger: Logger = _new_logger()
_reported_levels: set[str] = set()
# threads: check-then-add without a lock: two threads may both warn once about the same bad level
# name (harmless: a duplicate warning, nothing wrong is decided)


def level_threshold(name: str | None) -> int:
    """The level number `LOG_LEVEL=name` selects: a loguru level name (exact, then upper-cased),
    or a non-negative integer; unset or empty means INFO. An unknown name means INFO too, with
    one `RuntimeWarning` per distinct name."""
    if not name:
        name = DEFAULT_LEVEL
    for candidate in (name, name.upper()):
        try:
            return logger.level(candidate).no
        except ValueError:
            pass
    if name.isdigit():
        return int(name)
    if name not in _reported_levels:
        _reported_levels.add(name)
        warnings.warn(f"LOG_LEVEL={name!r} is not a log level; INFO is used", RuntimeWarning, stacklevel=2)
    return logger.level(DEFAULT_LEVEL).no


def default_filter(record: Record) -> bool:
    """The default sink's filter: the record's level against `LOG_LEVEL`, read now."""
    return record["level"].no >= level_threshold(os.environ.get("LOG_LEVEL"))


def _install_default_sink() -> int:
    logger.remove()
    return logger.add(sys.stdout, level=0, diagnose=False, filter=default_filter, format=default_format)


logger_id: Ref[int] = Ref(_install_default_sink())
"""The id of the default stdout sink (pass `logger_id.value` to `logger.remove`)."""

atexit.register(logger.remove)


class ToStringAble(Protocol):
    """Anything with a `__str__`."""

    def __str__(self) -> str: ...


def debug_log(message: ToStringAble) -> None:
    """Log `message` at debug level when the module switch `debug` is on."""
    if debug:
        logger.debug(message)


def _raw_env_reader():
    """A cheap reader of the raw `LOG_LEVEL` value (only compared, never decoded).

    `os.environ.get` costs a key encoding and a missing-key exception on each call; the mapping
    behind `os.environ` is read directly where CPython's `os._Environ` exposes it."""
    data, encodekey = getattr(os.environ, "_data", None), getattr(os.environ, "encodekey", None)
    if isinstance(data, dict) and callable(encodekey):
        key = encodekey("LOG_LEVEL")
        return lambda: data.get(key)
    return lambda: os.environ.get("LOG_LEVEL")


_raw_log_level = _raw_env_reader()
# (sinks dict, raw LOG_LEVEL, verdict): loguru replaces its sinks dict on every add/remove, so
# the dict's identity and the variable's raw value are all the verdict depends on.
_debug_verdict: list[Any] = [None, None, False]
# threads: written in one slice store; a reader reads the three slots apart, so under a race it may
# take the verdict of another thread's newer sinks dict: a debug line more or less, never an error


def engine_debug_enabled() -> bool:
    """Whether a debug record of the engine would reach a sink: the default sink while `LOG_LEVEL`
    lets it print debug, or another sink whose level admits debug. Guards the engine's own debug
    lines, so building their text costs nothing when nobody reads it (a cached verdict: two
    identity/equality tests)."""
    handlers = logger._core.handlers  # type: ignore[attr-defined]  # noqa: SLF001 - loguru's sinks, replaced on every add/remove
    raw = _raw_log_level()
    verdict = _debug_verdict
    if verdict[0] is not handlers or verdict[1] != raw:
        verdict[:] = handlers, raw, _debug_reaches_a_sink(handlers)
    return verdict[2]


def _debug_reaches_a_sink(handlers: dict[int, Any]) -> bool:
    for handler_id, handler in handlers.items():
        if handler_id == logger_id.value:
            if level_threshold(os.environ.get("LOG_LEVEL")) <= DEBUG_LEVEL_NO:
                return True
        elif handler.levelno <= DEBUG_LEVEL_NO:
            return True
    return False


class LoguruHandler(_std_logging.Handler):
    """A standard-library `logging.Handler` that forwards every record to `logger`, with the
    level name kept when loguru knows it and the original caller as the record's origin."""

    def emit(self, record: _std_logging.LogRecord) -> None:
        level: Any
        try:
            level = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        logger.opt(depth=_depth_outside_logging(), exception=record.exc_info).log(level, record.getMessage())


def _depth_outside_logging() -> int:
    """How far above `emit` (depth 0) the first frame outside the stdlib `logging` module is."""
    emit_frame = inspect.currentframe().f_back  # type: ignore[union-attr]
    frame, depth = emit_frame.f_back if emit_frame is not None else None, 1
    while frame is not None and frame.f_code.co_filename == _std_logging.__file__:
        frame = frame.f_back
        depth += 1
    return depth
