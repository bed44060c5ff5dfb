"""Runs that wait (issue 46): WAIT / SLEEP / SLEEP_UNTIL in the graph, the `Message` a WAIT
delivers, and the `Waker` that resumes waiting runs when they are due.

The room above `checkpointing`: a wait parks a checkpointed run (`graph`), a waker resumes it
(`waker`). Import from `amrita_sense.durable`.
"""

from __future__ import annotations

from amrita_sense.durable.waits.graph import SLEEP, SLEEP_UNTIL, WAIT, Message, WaitNode
from amrita_sense.durable.waits.waker import Waker

__all__ = ["SLEEP", "SLEEP_UNTIL", "WAIT", "Message", "WaitNode", "Waker"]
