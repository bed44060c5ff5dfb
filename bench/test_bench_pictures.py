"""The picture benchmark (`python -m bench.pictures`) runs once at its quick size, checks included."""

from bench import pictures


def test_the_picture_benchmark_runs_at_a_small_size():
    found = pictures.rows(quick=True)
    assert found["rows"] >= pictures.QUICK_NODES
    assert all(found[name] > 0 for name in ("walk", "mermaid", "dot"))
    assert pictures.main(["--quick"]) == 0
