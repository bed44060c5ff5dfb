"""The pure build of a policy's save written at once: `_save_at_once.py` run as Python, as this module."""

from typing import TYPE_CHECKING

from amrita_sense.core.sources import run_source

if TYPE_CHECKING:  # the type checker reads the source's names as this module's
    from amrita_sense.durable.checkpointing._save_at_once import *  # noqa: F403
else:
    run_source(__name__, "_save_at_once", __file__)
