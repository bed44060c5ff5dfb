"""The project's pytest-benchmark suite (`bench/test_*.py`) over the scenarios of
`amrita_sense.bench.scenarios`; the comparison runner is `python -m amrita_sense.bench`."""
