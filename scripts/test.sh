#!/usr/bin/env bash
# The test command: installs the checkout (non-editable, building the compiled core once) into a
# virtual environment, then runs the suite on the compiled core and on the pure build, each under
# asyncio and uvloop. The two passes run side by side, each spread over pytest-xdist workers; each
# writes its own log, and the end prints each pass's result and time. Extra arguments go to pytest
# (with a test path among them, e.g. tests/test_nodes.py, only what they name runs).
#   VENV=path                          virtual environment to use (default .venv, created if missing)
#   TEST_WORKERS=N                     xdist workers per pass (default 2; 0 runs a pass in one process)
#   TEST_LOGS=dir                      where the passes' logs go (default: a new temporary folder)
#   AMRITA_SENSE_TEST_INSTALLED=1      the package is already installed in $VENV: skip the install
#   AMRITA_SENSE_REQUIRE_EXTENSIONS=0  allow the first pass to fall back to the pure build (default: required)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
PYTHON="${PYTHON:-python3}"
WORKERS="${TEST_WORKERS:-2}"
REQUIRE_EXTENSIONS="${AMRITA_SENSE_REQUIRE_EXTENSIONS:-1}"
started=$SECONDS

if [ ! -x "$VENV/bin/python" ]; then
    echo "==> creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
if [ "${AMRITA_SENSE_TEST_INSTALLED:-0}" != "1" ]; then
    echo "==> installing the checkout with the compiled core into $VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    wheels="$(mktemp -d)"
    # one build: the wheel is made once, then installed over whatever was there, then its test extras
    AMRITA_SENSE_REQUIRE_EXTENSIONS="$REQUIRE_EXTENSIONS" "$VENV/bin/python" -m pip wheel -q --no-deps -w "$wheels" .
    wheel="$(ls "$wheels"/*.whl)"
    "$VENV/bin/python" -m pip install -q --force-reinstall --no-deps "$wheel"
    "$VENV/bin/python" -m pip install -q "$wheel[test]"
    rm -rf "$wheels"
fi
installed=$((SECONDS - started))

# pytest keeps its rewritten test modules in tests/__pycache__: with bytecode writes off, every worker
# of every pass would parse and rewrite all of them again (several seconds of CPU each)
unset PYTHONDONTWRITEBYTECODE
LOGS="${TEST_LOGS:-$(mktemp -d)}"
mkdir -p "$LOGS"
PYTEST_ARGS=("$@")
TARGETS=(tests)  # the whole suite, unless a test path (a file, a folder, a node id) is among the arguments
for arg in "$@"; do
    if [ -e "${arg%%::*}" ]; then
        TARGETS=()
        break
    fi
done
# The package lives under src/, so the checkout root on sys.path does not shadow the installed wheel.
start_pass() {  # start_pass NAME VAR=VALUE...: one pass in the background, its log in $LOGS/NAME.log
    local name="$1"
    shift
    (
        begin=$SECONDS
        status=0
        env "$@" "$VENV/bin/python" -m pytest -q -rfE -n "$WORKERS" ${TARGETS[@]+"${TARGETS[@]}"} ${PYTEST_ARGS[@]+"${PYTEST_ARGS[@]}"} \
            >"$LOGS/$name.log" 2>&1 || status=$?
        echo "$status $((SECONDS - begin))" >"$LOGS/$name.status"
    ) &
}
PASSES=(compiled pure)
echo "==> the compiled core and the pure build side by side ($WORKERS workers each; logs in $LOGS)"
rm -f "$LOGS"/*.status
start_pass compiled AMRITA_SENSE_REQUIRE_EXTENSIONS="$REQUIRE_EXTENSIONS" AMRITA_SENSE_NO_EXTENSIONS=0
start_pass pure AMRITA_SENSE_NO_EXTENSIONS=1 AMRITA_SENSE_REQUIRE_EXTENSIONS=0

progress() {  # the last percentage a pass's log shows
    local shown
    shown="$(grep -o '\[ *[0-9]*%\]' "$LOGS/$1.log" 2>/dev/null | tail -1 | tr -d '[] ')" || true
    echo "${shown:-0%}"
}
shown=$SECONDS
while [ "$(ls "$LOGS"/*.status 2>/dev/null | wc -l)" -lt "${#PASSES[@]}" ]; do
    sleep 1
    [ $((SECONDS - shown)) -ge 15 ] || continue
    shown=$SECONDS
    line="    $((SECONDS - started)) s:"
    for name in "${PASSES[@]}"; do
        if [ -f "$LOGS/$name.status" ]; then line+=" $name done;"; else line+=" $name $(progress "$name");"; fi
    done
    echo "$line"
done
wait

failed=0
for name in "${PASSES[@]}"; do
    read -r status seconds <"$LOGS/$name.status"
    echo
    if [ "$status" -ne 0 ]; then
        failed=1
        echo "==> $name pass FAILED (exit $status); its log ($LOGS/$name.log):"
        cat "$LOGS/$name.log"
    else
        echo "==> $name pass: $(tail -1 "$LOGS/$name.log")"
    fi
done
echo
echo "==> times: install ${installed} s$(for name in "${PASSES[@]}"; do
    read -r status seconds <"$LOGS/$name.status"
    printf '; %s pass %s s' "$name" "$seconds"
done); all $((SECONDS - started)) s"
exit "$failed"
