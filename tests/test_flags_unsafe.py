"""`amrita_sense._unsafe`: the engine switches (rules 87-88).

Assignment rules are checked on fresh `_Flags()` instances; the process-wide
singleton is never mutated (it can be assigned only once per process). Effects
are checked by swapping a fresh instance into the module namespaces the engine
reads, which `monkeypatch` restores afterwards.
"""

from __future__ import annotations

import dataclasses
import threading

import pytest

import amrita_sense
from amrita_sense import Node, WorkflowInterpreter, _unsafe
from amrita_sense._unsafe import _Flags
from amrita_sense.exceptions import BreakLoop, InterruptNotice
from support.dual import install_flags

UPPERCASE = [
    "FORCE_NOT_WRAP_TO_ASYNC",
    "DISABLE_EXC_IGNORED",
    "NO_DEPENDENCY_META_CACHE",
    "NO_SHARED_MIDDLEWARE",
    "WORKFLOW_DI_NO_CACHE",
    "WORKFLOW_DI_PRELOAD_CACHE",
    "WORKFLOW_DI_PRELOAD_BATCH",
    "SQUASHED_LOOP",
]
ONCE_ONLY = [name for name in UPPERCASE if name not in ("WORKFLOW_DI_NO_CACHE", "WORKFLOW_DI_PRELOAD_BATCH")]


# ----- the module --------------------------------------------------------------------------


def test_root_reexports_the_module():
    assert amrita_sense._unsafe is _unsafe


def test_singleton_and_all():
    assert isinstance(_unsafe.__flags__, _Flags)
    assert _unsafe.__all__ == ["__flags__"]


def test_fields_and_defaults():
    flags = _Flags()
    assert [f.name for f in dataclasses.fields(flags) if f.name.isupper()] == UPPERCASE
    assert flags.FORCE_NOT_WRAP_TO_ASYNC is False
    assert flags.DISABLE_EXC_IGNORED is False
    assert flags.NO_DEPENDENCY_META_CACHE is False
    assert flags.NO_SHARED_MIDDLEWARE is False
    assert flags.WORKFLOW_DI_NO_CACHE is False
    assert flags.WORKFLOW_DI_PRELOAD_CACHE is False
    assert flags.WORKFLOW_DI_PRELOAD_BATCH == 10
    assert flags.SQUASHED_LOOP is False


def test_private_bookkeeping():
    flags = _Flags()
    assert flags._writeables == {"WORKFLOW_DI_PRELOAD_BATCH", "WORKFLOW_DI_NO_CACHE"}
    assert flags._modified_flags == set()
    assert flags._args_conflicts == {
        ("WORKFLOW_DI_PRELOAD_CACHE", "NO_DEPENDENCY_META_CACHE"),
        ("WORKFLOW_DI_NO_CACHE", "WORKFLOW_DI_PRELOAD_CACHE"),
    }


def test_instances_do_not_share_bookkeeping():
    first, second = _Flags(), _Flags()
    first.SQUASHED_LOOP = True
    assert second._modified_flags == set()
    second.SQUASHED_LOOP = True


# ----- assignment rules --------------------------------------------------------------------


@pytest.mark.parametrize("name", ONCE_ONLY)
def test_uppercase_flag_can_be_set_once(name):
    flags = _Flags()
    setattr(flags, name, True)
    assert getattr(flags, name) is True
    assert name in flags._modified_flags
    with pytest.raises(RuntimeError, match=f"^{name} is modified$"):
        setattr(flags, name, False)
    assert getattr(flags, name) is True


def test_setting_the_default_value_still_counts():
    flags = _Flags()
    flags.SQUASHED_LOOP = False
    with pytest.raises(RuntimeError, match="SQUASHED_LOOP is modified"):
        flags.SQUASHED_LOOP = False


def test_writable_flags_can_be_set_repeatedly():
    flags = _Flags()
    for value in (True, False, True):
        flags.WORKFLOW_DI_NO_CACHE = value
    for size in (1, 50, 3):
        flags.WORKFLOW_DI_PRELOAD_BATCH = size
    assert flags.WORKFLOW_DI_NO_CACHE is True
    assert flags.WORKFLOW_DI_PRELOAD_BATCH == 3


def test_lowercase_attributes_are_unrestricted():
    flags = _Flags()
    flags.note = 1
    flags.note = 2
    assert flags.note == 2
    assert "note" not in flags._modified_flags


def test_constructor_values_do_not_count_as_modifications():
    flags = _Flags(SQUASHED_LOOP=True)
    assert flags.SQUASHED_LOOP is True
    flags.SQUASHED_LOOP = False
    with pytest.raises(RuntimeError):
        flags.SQUASHED_LOOP = True


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("WORKFLOW_DI_PRELOAD_CACHE", "NO_DEPENDENCY_META_CACHE"),
        ("NO_DEPENDENCY_META_CACHE", "WORKFLOW_DI_PRELOAD_CACHE"),
        ("WORKFLOW_DI_NO_CACHE", "WORKFLOW_DI_PRELOAD_CACHE"),
        ("WORKFLOW_DI_PRELOAD_CACHE", "WORKFLOW_DI_NO_CACHE"),
    ],
)
def test_conflicting_flags_are_refused_whichever_comes_first(first, second):
    flags = _Flags()
    setattr(flags, first, True)
    with pytest.raises(RuntimeError, match="Conflicting flags"):
        setattr(flags, second, True)
    assert getattr(flags, second) is False


def test_refused_conflict_is_not_recorded_as_a_modification():
    flags = _Flags()
    flags.WORKFLOW_DI_PRELOAD_CACHE = True
    with pytest.raises(RuntimeError):
        flags.NO_DEPENDENCY_META_CACHE = True
    assert "NO_DEPENDENCY_META_CACHE" not in flags._modified_flags


def test_conflict_message_names_the_pair():
    flags = _Flags()
    flags.WORKFLOW_DI_PRELOAD_CACHE = True
    with pytest.raises(RuntimeError) as info:
        flags.NO_DEPENDENCY_META_CACHE = True
    assert "WORKFLOW_DI_PRELOAD_CACHE" in str(info.value)
    assert "NO_DEPENDENCY_META_CACHE" in str(info.value)


def test_false_values_never_conflict():
    flags = _Flags()
    flags.WORKFLOW_DI_PRELOAD_CACHE = True
    flags.NO_DEPENDENCY_META_CACHE = False
    flags.WORKFLOW_DI_NO_CACHE = False
    assert flags.WORKFLOW_DI_PRELOAD_CACHE is True


def test_clearing_the_writable_side_allows_the_other():
    flags = _Flags()
    flags.WORKFLOW_DI_NO_CACHE = True
    flags.WORKFLOW_DI_NO_CACHE = False
    flags.WORKFLOW_DI_PRELOAD_CACHE = True
    assert flags.WORKFLOW_DI_PRELOAD_CACHE is True


# ----- effects (read through the module globals at each use) --------------------------------


@pytest.mark.asyncio
async def test_force_not_wrap_runs_sync_nodes_on_the_loop_thread(monkeypatch):
    install_flags(monkeypatch, _Flags(FORCE_NOT_WRAP_TO_ASYNC=True))
    threads = []

    @Node()
    def where():
        threads.append(threading.current_thread())

    await WorkflowInterpreter(where.as_compose().render()).run()
    assert threads == [threading.current_thread()]


@pytest.mark.asyncio
async def test_without_force_not_wrap_sync_nodes_use_a_worker(monkeypatch):
    install_flags(monkeypatch, _Flags())
    threads = []

    @Node()
    def where():
        threads.append(threading.current_thread())

    await WorkflowInterpreter(where.as_compose().render()).run()
    assert len(threads) == 1
    assert threads[0] is not threading.current_thread()


def test_disable_exc_ignored_empties_the_pass_through_types(monkeypatch):
    graph = Node()(lambda: None).as_compose().render()
    assert WorkflowInterpreter(graph, exception_ignored=(KeyError,))._exc_ignored == (
        KeyError,
        InterruptNotice,
        BreakLoop,
    )
    install_flags(monkeypatch, _Flags(DISABLE_EXC_IGNORED=True))
    assert WorkflowInterpreter(graph, exception_ignored=(KeyError,))._exc_ignored == ()
