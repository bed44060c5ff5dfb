#!/usr/bin/env bash
# Runs inside the Debian unstable chroot that .ci/debian_unstable.sh makes: per Python (3.14, 3.15), a
# venv with the checkout installed (the compiled core built by that Python's headers, required), then
# the suite on the compiled core and on the pure build, each under asyncio and uvloop.
#
# What runs here beyond the core: the Postgres store (Debian's server in the chroot), Graphviz, 1.1.3's
# own test suite and the comparisons with 1.1.3 (amrita-sense 1.1.3 installed beside us), mypy; on 3.14
# also the AmritaCore end-to-end test. Not here (each is covered by the main steps on the runner's
# Python): Ray (no Ray wheels for 3.15; Ray's tests are process plumbing, not interpreter features),
# AmritaCore on 3.15 (amrita-core 1.3.1 says Requires-Python <3.15), Mermaid's parser (Node) and the
# inspector's browser test (Chromium): they check generated text and HTML, the same bytes on every Python.
# Per Python also: the compiled core's C compiled against its headers configured as the free-threaded
# build (.ci/free_threaded_headers.sh; no free-threaded interpreter can be had here).
# The two Pythons run side by side (each its own venv, Postgres clusters and logs), each suite spread
# over TEST_WORKERS pytest-xdist workers; their output is printed when both have ended.
set -euo pipefail
cd /src/turbo
export PIP_DISABLE_PIP_VERSION_CHECK=1
WORKERS="${TEST_WORKERS:-2}"
SHARE="${TEST_SHARE:-1}"  # each random test's share of its programs (tests/support/sampling.py)

one_python() {  # one_python VERSION: install, the free-threaded header check, the suite on both builds
    local version="$1" venv="/opt/venv$1" extras="test,bench,plot" core=0 build no_ext begin
    echo "=== Python $version (Debian unstable: $(python$version -c 'import sys; print(sys.version.split()[0])')) ==="
    begin=$SECONDS
    "python$version" -m venv "$venv"
    if [ "$version" = "3.14" ]; then
        extras+=",e2e"
        core=1
    fi
    # a copy of the checkout per Python: the in-place C of one build must not meet the other's
    cp -a /src/turbo "/src/turbo$version"
    cd "/src/turbo$version"
    AMRITA_SENSE_REQUIRE_EXTENSIONS=1 "$venv/bin/python" -m pip install -q ".[$extras]" mypy
    # the reference beside us (on 3.14 amrita-core has pulled it already)
    "$venv/bin/python" -m pip install -q "amrita-sense==1.1.3"
    "$venv/bin/python" -m amrita_sense
    # the core's C (left in src/ by the in-place build) against this Python's headers, configured free-threaded
    bash .ci/free_threaded_headers.sh "$venv/bin/python"
    echo "--- Python $version: installed in $((SECONDS - begin)) s"
    for build in compiled pure; do
        echo "--- Python $version, $build build"
        begin=$SECONDS
        no_ext=0
        [ "$build" = "pure" ] && no_ext=1
        env AMRITA_SENSE_NO_EXTENSIONS="$no_ext" AMRITA_SENSE_REQUIRE_EXTENSIONS="$((1 - no_ext))" \
            AMRITA_SENSE_REQUIRE_POSTGRES=1 AMRITA_SENSE_REQUIRE_REFERENCE_SUITE=1 \
            AMRITA_SENSE_REQUIRE_AMRITA_CORE="$core" AMRITA_SENSE_REF_PYTHON="$venv/bin/python" \
            AMRITA_SENSE_CHAOS_RUNS=60 AMRITA_SENSE_TEST_SHARE="$SHARE" "$venv/bin/python" -m pytest -q -p no:cacheprovider -n "$WORKERS" tests
        echo "--- Python $version, $build build: $((SECONDS - begin)) s"
    done
}

VERSIONS=(3.14 3.15)
pids=()
for version in "${VERSIONS[@]}"; do
    (set -e; one_python "$version") >"/tmp/python$version.log" 2>&1 &
    pids+=("$!")
done
status=0
for index in "${!VERSIONS[@]}"; do
    version="${VERSIONS[$index]}"
    result=0
    wait "${pids[$index]}" || result=$?
    echo
    cat "/tmp/python$version.log"
    if [ "$result" -ne 0 ]; then
        echo "=== Python $version FAILED (exit $result) ==="
        status=1
    fi
done
exit "$status"
