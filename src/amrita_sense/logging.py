"""Library logging: a named standard-library logger with a `NullHandler`.

The names of amrita-sense 1.1.3 are kept (`logger`, `logger_id`, `debug_log`,
`debug`). Nothing is logged on the per-step path. Set `LOG_LEVEL` to have the
library attach a stdout handler of its own at that level.
"""

from __future__ import annotations

import logging as _logging
import os
import sys

from amrita_sense.utils import Ref

logger = _logging.getLogger("amrita_sense")
logger.addHandler(_logging.NullHandler())

debug = False
"""When True, `debug_log` messages are emitted at debug level."""


def _install_env_handler() -> int:
    level = os.environ.get("LOG_LEVEL")
    if not level:
        return -1
    handler = _logging.StreamHandler(sys.stdout)
    handler.setFormatter(_logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    return id(handler)


logger_id: Ref[int] = Ref(_install_env_handler())


def debug_log(message: str) -> None:
    """Log `message` at debug level when the module switch `debug` is on."""
    if debug:
        logger.debug(message)


__all__ = ["debug_log", "logger", "logger_id"]
