"""`amrita_sense.utils` helpers."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from datetime import datetime, timedelta

import pytest

from amrita_sense.utils import Ref, TimeInsighter, _fingerprint_args, isabstractmethod, search_exceptions


def test_time_insighter_sync():
    with TimeInsighter() as timer:
        pass
    assert isinstance(timer.t_beg, datetime) and timer.t_end >= timer.t_beg
    assert timer.t_diff == timer.t_end - timer.t_beg
    assert isinstance(timer.t_diff, timedelta)


@pytest.mark.asyncio
async def test_time_insighter_async():
    async with TimeInsighter() as timer:
        await asyncio.sleep(0)
    assert timer.t_diff >= timedelta(0)


def test_ref_is_a_mutable_box():
    ref = Ref(1)
    ref.value += 1
    assert ref.value == 2


def test_search_exceptions_flattens_and_filters():
    a, b, c = ValueError(), KeyError(), KeyboardInterrupt()
    assert search_exceptions([a, None, [b, [None, c]], "x"]) == [a, b, c]
    assert search_exceptions([]) == []


def test_fingerprint_uses_type_names_and_sorted_kwargs():
    assert _fingerprint_args((1, "a"), {"x": 1, "y": "s"}) == _fingerprint_args((2, "b"), {"y": "t", "x": 3})
    assert _fingerprint_args((1,), {}) != _fingerprint_args(("1",), {})
    assert _fingerprint_args((), {"x": 1}) != _fingerprint_args((), {"y": 1})


def test_isabstractmethod():
    class Base(ABC):
        @abstractmethod
        def hook(self): ...

        def concrete(self): ...

    assert isabstractmethod(Base.hook) is True
    assert isabstractmethod(Base.concrete) is False
    assert isabstractmethod(len) is False
