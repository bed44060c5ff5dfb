"""Benchmark your workflows on the builds of amrita_sense, side by side.

`python -m amrita_sense.bench` (or the `amrita-sense-bench` command) runs the
comparison runner (`amrita_sense.bench.runner`, `--help`): the built-in scenarios
(`amrita_sense.bench.scenarios`) or your own workflow (`--workflow module:factory`
or `path/to/file.py:factory`) on the compiled core, the pure build and, with
`--against PYTHON`, another environment such as amrita-sense 1.1.3.

Nothing here is imported by `import amrita_sense`.
"""
