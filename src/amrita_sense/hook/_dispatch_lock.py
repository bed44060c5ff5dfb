"""The per-event-type dispatch lock: the core's (`core.events.DispatchLock`, compiled with the
dispatch's hot path, which takes and releases it without a Python call)."""

from __future__ import annotations

from amrita_sense.core import events as _events

DispatchLock = _events.DispatchLock

__all__ = ["DispatchLock"]
