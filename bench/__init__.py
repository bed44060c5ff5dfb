"""Benchmarks for amrita-sense-turbo.

`bench.scenarios` holds the scenarios (public 1.1.3 API only, so the same file
runs against the reference), `bench.runner` the comparison runner
(`python -m bench --help`), and `bench/test_bench_*.py` the pytest-benchmark
versions of the main scenarios.
"""
