# Development tasks; each uses the virtual environment .venv in the checkout (`make dev` creates it).
# `bash scripts/test.sh` and `bash scripts/bench.sh` stay the one-command versions (they install the
# checkout non-editable); these targets work on the source tree.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEV_PACKAGES := cython "setuptools>=77" sniffio loguru pytest pytest-asyncio hypothesis uvloop \
	pytest-benchmark ruff cython-lint pre-commit mypy

.PHONY: dev build build-single test test-compiled test-pure test-single bench lint format typecheck clean

dev: $(PY)  ## the development venv, with the test, lint and type-check tools
	$(PY) -m pip install -q $(DEV_PACKAGES)

$(PY):
	$(PYTHON) -m venv $(VENV)

build:  ## compile the core in place (src/amrita_sense/_sense_core*.so); after each .pyx/.pxd edit
	$(PY) setup.py build_ext --inplace

build-single:  ## also compile the twin _core_py.py with its .pxd in place (issue 18's single source; `make clean` undoes it)
	AMRITA_SENSE_BUILD_SINGLE_SOURCE=1 $(PY) setup.py build_ext --inplace

test-single: build-single  ## the suite on the compiled single source (the twin's pass runs it, the compiled pass diffs against it)
	PYTHONPATH=src AMRITA_SENSE_NO_EXTENSIONS=1 $(PY) -m pytest -q tests
	PYTHONPATH=src AMRITA_SENSE_REQUIRE_EXTENSIONS=1 $(PY) -m pytest -q tests

test: test-compiled test-pure  ## the suite on both builds, each under asyncio and uvloop

test-compiled: build
	PYTHONPATH=src AMRITA_SENSE_REQUIRE_EXTENSIONS=1 $(PY) -m pytest -q tests

test-pure:
	PYTHONPATH=src AMRITA_SENSE_NO_EXTENSIONS=1 $(PY) -m pytest -q tests

bench: build  ## the benchmark runner on the source tree, quick (scripts/bench.sh is the full job)
	PYTHONPATH=src $(PY) -m amrita_sense.bench --quick

lint:  ## ruff (check and format) and cython-lint, as CI runs them (configured in pyproject.toml)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/cython-lint src/_sense_core.pyx src/_sense_core.pxd src/amrita_sense/_capi.pxd src/amrita_sense/_core_py.pxd

format:  ## apply ruff's fixes and formatting
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

typecheck:  ## mypy on the package, the import hook and the typed example (pyproject.toml)
	$(PY) -m mypy

clean:
	rm -rf build src/_sense_core.c src/amrita_sense/_sense_core*.so src/_sense_core*.so
	rm -f src/amrita_sense/_core_py.c src/amrita_sense/_core_py*.so
