# Development tasks; each uses the virtual environment .venv in the checkout (`make dev` creates it).
# `bash scripts/test.sh` and `bash scripts/bench.sh` stay the one-command versions (they install the
# checkout non-editable); these targets work on the source tree.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEV_PACKAGES := "cython>=3.3" "setuptools>=77" sniffio loguru pytest pytest-asyncio pytest-timeout pytest-xdist hypothesis uvloop \
	pytest-benchmark ruff==0.17.6 cython-lint==0.22.1 pre-commit mypy colorama exceptiongroup

.PHONY: dev build test test-compiled test-pure bench lint format typecheck clean

dev: $(PY)  ## the development venv, with the test, lint and type-check tools
	$(PY) -m pip install -q $(DEV_PACKAGES)

$(PY):
	$(PYTHON) -m venv $(VENV)

build:  ## compile the core (core/_sense_core.py with core/_sense_core.pxd) in place as src/amrita_sense/core/_sense_core*.so; after each edit of either
	$(PY) setup.py build_ext --inplace

test: test-compiled test-pure  ## the suite on both builds, each under asyncio and uvloop

test-compiled: build
	PYTHONPATH=src AMRITA_SENSE_REQUIRE_EXTENSIONS=1 $(PY) -m pytest -q -n 2 tests

test-pure:
	PYTHONPATH=src AMRITA_SENSE_NO_EXTENSIONS=1 $(PY) -m pytest -q -n 2 tests

bench: build  ## the benchmark runner on the source tree, quick (scripts/bench.sh is the full job)
	PYTHONPATH=src $(PY) -m amrita_sense.bench --quick

lint:  ## ruff (check and format) and cython-lint, as CI runs them (configured in pyproject.toml)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/cython-lint src/amrita_sense/core/*.pxd src/amrita_sense/durable/*/*.pxd

format:  ## apply ruff's fixes and formatting
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

typecheck:  ## mypy on the package, the import hook and the typed example (pyproject.toml)
	$(PY) -m mypy

clean:
	rm -rf build src/amrita_sense/core/*.c src/amrita_sense/core/*.so src/amrita_sense/durable/*/*.c src/amrita_sense/durable/*/*.so
	rm -f src/_sense_core.c src/_sense_core*.so src/amrita_sense/_core_py*.so src/amrita_sense/_core_py.c src/amrita_sense/_sense_core*.so  # left by older layouts
