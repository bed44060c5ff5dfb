"""The pure build of the save path's hot part: `_plain_snapshot.py` run as Python, as this module."""

from typing import TYPE_CHECKING

from amrita_sense.core.sources import run_source

if TYPE_CHECKING:  # the type checker reads the source's names as this module's
    from amrita_sense.durable.snapshots._plain_snapshot import *  # noqa: F403
else:
    run_source(__name__, "_plain_snapshot", __file__)
