"""The pictures of one small graph per instruction kind, compared with golden files
(`tests/golden/pictures/`; regenerate with AMRITA_SENSE_UPDATE_GOLDEN=1), and checked by
Graphviz and Mermaid's parser when they are installed."""

from __future__ import annotations

import pytest

from amrita_sense.pictures import picture_of, to_dot, to_mermaid
from support.pictures_support import KIND_PROGRAMS, check_golden, parse_dot, parse_mermaid

KINDS = sorted(KIND_PROGRAMS)


@pytest.mark.parametrize("kind", KINDS)
def test_mermaid_golden(kind):
    check_golden(f"{kind}.mmd", to_mermaid(KIND_PROGRAMS[kind]()))


@pytest.mark.parametrize("kind", KINDS)
def test_dot_golden(kind):
    check_golden(f"{kind}.dot", to_dot(KIND_PROGRAMS[kind]()))


def test_the_golden_pictures_parse():
    graphs = [KIND_PROGRAMS[kind]() for kind in KINDS]
    assert parse_dot([to_dot(g) for g in graphs]) == [None] * len(KINDS)
    assert parse_mermaid([to_mermaid(g) for g in graphs]) == [None] * len(KINDS)


def _edges(kind: str) -> set[tuple[str, str, str]]:
    return {(e.source, e.target, e.kind) for e in picture_of(KIND_PROGRAMS[kind]()).edges}


def test_if_branches_merge_on_the_closing_nop():
    edges = _edges("if_elif_else")
    assert ("n1_0", "n1_1", "subcall") in edges  # the test
    assert ("n1_0", "n1_3", "branch") in edges  # false: the next test
    assert {("n1_2", "n1_8", "merge"), ("n1_5", "n1_8", "merge"), ("n1_7", "n1_8", "merge")} <= edges


def test_loops_have_back_edges():
    assert ("n1_3", "n1_0", "back") in _edges("while")
    assert ("n0_2", "n0_0", "back") in _edges("do_while")
    native = _edges("native_while")
    assert ("n0_2_3", "n0_0", "back") in native  # CONTINUE
    assert ("n0_2_1", "n0_3", "jump") in native  # BREAK_LOOP


def test_jumps_calls_and_returns():
    assert ("n1", "n3", "jump") in _edges("jumps")
    assert ("n4", "n0", "back") in _edges("jumps")
    calls = _edges("call_ret")
    assert ("n1", "n3_1", "call") in calls and ("n1", "n2", "return") in calls
    assert ("n1", "n3_1", "call") in _edges("interrupt")


def test_try_invoke_and_forks():
    assert ("n0_1", "n0_2", "catch") in _edges("try")
    assert ("n0", "n2_1", "subcall") in _edges("invoke")
    assert ("n1", "g1n0", "fork") in _edges("fun_block")
    forks = {target for _, target, kind in _edges("batch_run") if kind == "fork"}
    assert forks == {"g1n0", "g2n0", "g3n0"}


def test_sub_graphs_and_archived_nodes_are_clusters():
    kinds = {c.id: c.kind for c in picture_of(KIND_PROGRAMS["batch_run"]()).clusters}
    assert kinds["b0"] == "batch_run" and kinds["g1"] == kinds["g2"] == kinds["g3"] == "graph"
    assert {c.kind for c in picture_of(KIND_PROGRAMS["invoke"]()).clusters} == {"archived"}
    assert {c.kind for c in picture_of(KIND_PROGRAMS["call_ret"]()).clusters} == {"fn", "segment"}


def test_a_parser_is_asked_again_about_a_text_it_refused_and_not_about_one_it_accepted(tmp_path, monkeypatch):
    import support.pictures_support as pictures_support

    monkeypatch.setattr(pictures_support, "ACCEPTED_DIR", tmp_path)
    good, bad = "digraph { a -> b }", "digraph { a -> }"
    asked: list[list[str]] = []
    real = pictures_support._dot_errors

    def counting(program, texts):
        asked.append(list(texts))
        return real(program, texts)

    monkeypatch.setattr(pictures_support, "_dot_errors", counting)
    first = parse_dot([good, bad])
    second = parse_dot([good, bad])
    assert first[0] is None and first[1] and second == first
    assert asked[0] == [good, bad] and asked[-1] == [bad]
