#!/usr/bin/env bash
# The test command: installs the checkout (non-editable, building the compiled core) into a
# virtual environment, then runs the suite on the compiled core and on the pure build,
# each under asyncio and uvloop. Extra arguments go to pytest.
#   VENV=path                          virtual environment to use (default .venv, created if missing)
#   AMRITA_SENSE_TEST_INSTALLED=1      the package is already installed in $VENV: skip the install
#   AMRITA_SENSE_REQUIRE_EXTENSIONS=0  allow the first pass to fall back to the pure build (default: required)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
PYTHON="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    echo "==> creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
if [ "${AMRITA_SENSE_TEST_INSTALLED:-0}" != "1" ]; then
    echo "==> installing the checkout with the compiled core into $VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    AMRITA_SENSE_REQUIRE_EXTENSIONS="${AMRITA_SENSE_REQUIRE_EXTENSIONS:-1}" \
        "$VENV/bin/python" -m pip install -q --force-reinstall --no-deps .
    "$VENV/bin/python" -m pip install -q ".[test]"
fi

# The package lives under src/, so the checkout root on sys.path does not shadow the installed wheel.
run_pass() {
    echo "==> tests on the $1 core"
    shift
    env "$@" "$VENV/bin/python" -m pytest -q tests "${PYTEST_ARGS[@]}"
}
PYTEST_ARGS=("$@")
PYTEST_ARGS+=()
run_pass compiled AMRITA_SENSE_REQUIRE_EXTENSIONS="${AMRITA_SENSE_REQUIRE_EXTENSIONS:-1}" AMRITA_SENSE_NO_EXTENSIONS=0
run_pass pure-Python AMRITA_SENSE_NO_EXTENSIONS=1 AMRITA_SENSE_REQUIRE_EXTENSIONS=0
