"""One sorted page of the run list, for every store: `list_page(...)` and what it returns::

    page = store.list_page(status="halted", sort="updated", order="desc", offset=0, limit=50)
    page.total          # runs with that status
    page.records        # at most 50 records (CheckpointRecord), newest first

The SQL stores sort and cut the page in the database and read only the record columns of the
page's rows (never a snapshot); `page_of` does the same over a list of records (the memory store,
and any store that has only `list`). Ties are broken by run id, and `order` applies to the whole
key, so every store gives the same pages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from amrita_sense.durable.stores.base import CheckpointRecord

PAGE_SORTS: dict[str, tuple[str, ...]] = {
    "updated": ("updated_at", "run_id"),
    "created": ("created_at", "run_id"),
    "run": ("run_id",),
    "status": ("status", "run_id"),
    "version": ("version", "run_id"),
}
"""The sort keys of `list_page`: the record fields (and table columns) each one orders by."""
PAGE_ORDERS = ("desc", "asc")
MAX_OFFSET = 2**62
"""The largest `offset` (a 64-bit integer in every database)."""


@dataclass(frozen=True)
class CheckpointPage:
    """One page of the run list: its records and how many runs the whole list holds."""

    records: list[CheckpointRecord]
    total: int


def check_page(status: Any, sort: Any, order: Any, offset: Any, limit: Any) -> None:
    """`ValueError` unless the arguments of `list_page` are in range."""
    if status is not None and not isinstance(status, str):
        raise ValueError(f"status is None or a string, not {status!r:.60}")
    if sort not in PAGE_SORTS:
        raise ValueError(f"sort is one of {', '.join(PAGE_SORTS)}, not {sort!r:.60}")
    if order not in PAGE_ORDERS:
        raise ValueError(f"order is 'desc' or 'asc', not {order!r:.60}")
    if type(offset) is not int or not 0 <= offset <= MAX_OFFSET:
        raise ValueError(f"offset is an int between 0 and 2**62, not {offset!r:.60}")
    if type(limit) is not int or not 1 <= limit <= MAX_OFFSET:
        raise ValueError(f"limit is an int between 1 and 2**62, not {limit!r:.60}")


def order_by(sort: str, order: str) -> str:
    """The SQL `ORDER BY` list of a checked `sort` and `order` (column names of the checkpoints table)."""
    direction = " DESC" if order == "desc" else " ASC"
    return ", ".join(column + direction for column in PAGE_SORTS[sort])


def page_of(records: list[CheckpointRecord], sort: str, order: str, offset: int, limit: int) -> CheckpointPage:
    """The page of `records` (already filtered by status), sorted as the SQL stores sort."""
    check_page(None, sort, order, offset, limit)
    ordered = sorted(records, key=_sort_key(PAGE_SORTS[sort]), reverse=order == "desc")
    return CheckpointPage(ordered[offset : offset + limit], len(ordered))


def _sort_key(fields: tuple[str, ...]) -> Callable[[CheckpointRecord], tuple]:
    """A key over `fields` that also orders values of a wrong type (numbers, then text, then the rest),
    as SQLite orders a column holding mixed types."""

    def key(record: CheckpointRecord) -> tuple:
        return tuple(_ranked(getattr(record, field)) for field in fields)

    return key


def _ranked(value: Any) -> tuple:
    if value is None:
        return (0, 0)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    return (3, repr(value))


__all__ = ["MAX_OFFSET", "PAGE_ORDERS", "PAGE_SORTS", "CheckpointPage", "check_page", "order_by", "page_of"]
