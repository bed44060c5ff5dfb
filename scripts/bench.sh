#!/usr/bin/env bash
# The main job: benchmark amrita-sense-turbo (compiled core and pure build) against
# amrita-sense 1.1.3, side by side, on asyncio and uvloop.
#
# On a fresh machine it creates two virtual environments, and reuses them on later runs:
#   .venv      this checkout, installed non-editable with the compiled core (pip install ".[bench]");
#              reinstalled automatically when the sources changed since the last install
#   .venv-ref  amrita-sense==1.1.3 (plus uvloop): the reference
# and AmritaCore (amrita-core, the e2e extra's pin) in both, for the amrita_core_turn scenarios: in
# .venv it runs on this package (through its import hook), in .venv-ref on 1.1.3; where it does
# not install, those scenarios read n/a and the rest runs
# then runs the comparison runner on the default scenario set:
#   .venv/bin/python -m amrita_sense.bench --against .venv-ref/bin/python --loop both --json bench-results.json
#
# With --peers (or --peers langgraph,burr) it runs the side-by-side comparison with the other
# runtimes instead of the scenarios: each peer gets its own environment, made by the runner on
# first use and reused later: .venv-peers/<name> (pip, versions pinned in
# src/amrita_sense/bench/peers/__init__.py); add --scenarios ... to run scenarios as well. The
# durable work among them (a checkpoint after every node) stores into SQLite files, files, and a
# throwaway PostgreSQL server the runner starts on loopback from the server binaries it finds
# (initdb, pg_ctl: e.g. apt-get install postgresql; without them that column reads n/a), or the one
# --postgres-url names; .venv gets psycopg (the postgres extra) for ours and the floor.
#
# Options: --rebuild  reinstall both environments (and the peers' with --peers).
#          Anything else goes to the runner, e.g. --quick, --scenarios sync_chain,while_loop,
#          --loop asyncio, --repeats 9, --targets, --families [LIST] (the near-variant sweep),
#          --plot bench-results.png (installs matplotlib),
#          --workflow mymodule:factory, --profile-nodes, --peers [LIST], --help.
# Environment: PYTHON (default python3), VENV (default .venv), REF_VENV (default .venv-ref),
#              PEERS_DIR (default .venv-peers), BENCH_JSON (default bench-results.json).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
REF_VENV="${REF_VENV:-.venv-ref}"
PEERS_DIR="${PEERS_DIR:-.venv-peers}"
JSON="${BENCH_JSON:-bench-results.json}"
STAMP_FILE="$VENV/.amrita-sense-bench-stamp"
AMRITA_CORE="amrita-core==1.3.1"  # as pinned by the e2e extra in pyproject.toml
unset PYTHONPATH AMRITA_SENSE_NO_EXTENSIONS AMRITA_SENSE_REQUIRE_EXTENSIONS  # measure what is installed

REBUILD=0
RUNNER_ARGS=()
for arg in "$@"; do
    case "$arg" in
        --rebuild) REBUILD=1; RUNNER_ARGS+=(--peers-rebuild) ;;
        *) RUNNER_ARGS+=("$arg") ;;
    esac
done

say() { echo "==> $*" >&2; }

# Fingerprint of everything that goes into the installed package.
source_stamp() {
    "$PYTHON" - <<'PY'
import hashlib, pathlib
digest = hashlib.sha256()
files = [pathlib.Path(p) for p in ("pyproject.toml", "setup.py", "MANIFEST.in") if pathlib.Path(p).exists()]
files += [p for p in pathlib.Path("src").rglob("*") if p.suffix in {".py", ".pxd"}]
for path in sorted(files):
    digest.update(str(path).encode() + b"\0" + path.read_bytes())
print(digest.hexdigest())
PY
}

project_ready() {
    [ -f "$STAMP_FILE" ] && [ "$(cat "$STAMP_FILE")" = "$1" ] &&
        "$VENV/bin/python" -c "import amrita_sense; assert amrita_sense.IMPLEMENTATION == 'cython'" 2>/dev/null
}

reference_ready() {
    "$REF_VENV/bin/python" -c "from importlib.metadata import version; assert version('amrita-sense') == '1.1.3'" 2>/dev/null
}

amrita_core_ready() {  # $1: the environment's Python
    "$1" -c "from importlib.metadata import version; assert version('amrita-core') == '${AMRITA_CORE#*==}'" 2>/dev/null
}

# AmritaCore into an environment, keeping the amrita-sense it runs (its pin, when it has one).
install_amrita_core() {  # $1: the environment's Python, $2: its amrita-sense pin or ""
    amrita_core_ready "$1" && return 0
    say "installing $AMRITA_CORE into $(dirname "$(dirname "$1")") (the AmritaCore turn scenarios)"
    "$1" -m pip install -q "$AMRITA_CORE" ${2:+"$2"} ||
        say "$AMRITA_CORE did not install there; the amrita_core_turn scenarios will read n/a"
}

if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
STAMP="$(source_stamp)"
if [ "$REBUILD" = 1 ] || ! project_ready "$STAMP"; then
    say "installing this checkout with the compiled core into $VENV (compiling; this takes a minute)"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    AMRITA_SENSE_REQUIRE_EXTENSIONS=1 "$VENV/bin/python" -m pip install -q --force-reinstall --no-deps .
    "$VENV/bin/python" -m pip install -q ".[bench,postgres]"
    "$VENV/bin/python" -c "import amrita_sense; assert amrita_sense.IMPLEMENTATION == 'cython', amrita_sense.IMPLEMENTATION"
    echo "$STAMP" > "$STAMP_FILE"
else
    say "reusing $VENV (installed from the current sources)"
fi
install_amrita_core "$VENV/bin/python" ""
"$VENV/bin/python" -c "import psycopg, psycopg_pool" 2>/dev/null || {  # an environment made before it needed them
    say "installing psycopg into $VENV (the durable work's Postgres store)"
    "$VENV/bin/python" -m pip install -q "psycopg[binary]>=3.1" "psycopg-pool>=3.2" ||
        say "psycopg did not install; ours and the floor on Postgres will read n/a"
}
"$VENV/bin/python" -c "import amrita_sense; assert amrita_sense.IMPLEMENTATION == 'cython', amrita_sense.IMPLEMENTATION"

if [ ! -x "$REF_VENV/bin/python" ]; then
    say "creating $REF_VENV"
    "$PYTHON" -m venv "$REF_VENV"
fi
if [ "$REBUILD" = 1 ] || ! reference_ready; then
    say "installing amrita-sense==1.1.3 into $REF_VENV"
    "$REF_VENV/bin/python" -m pip install -q --upgrade pip
    FORCE=()
    [ "$REBUILD" = 1 ] && FORCE=(--force-reinstall)
    "$REF_VENV/bin/python" -m pip install -q ${FORCE[@]+"${FORCE[@]}"} "amrita-sense==1.1.3"
    "$REF_VENV/bin/python" -m pip install -q uvloop ||
        say "uvloop did not install for the reference; its uvloop column will read n/a"
else
    say "reusing $REF_VENV (amrita-sense 1.1.3)"
fi
install_amrita_core "$REF_VENV/bin/python" "amrita-sense==1.1.3"

case " ${RUNNER_ARGS[*]-} " in
    *" --plot"*)
        "$VENV/bin/python" -c "import matplotlib" 2>/dev/null || {
            say "installing matplotlib into $VENV for --plot"
            "$VENV/bin/python" -m pip install -q "matplotlib>=3.7"
        } ;;
esac

say "running the benchmarks (progress below, then the table); JSON goes to $JSON"
exec "$VENV/bin/python" -m amrita_sense.bench --against "$REF_VENV/bin/python" --loop both --json "$JSON" \
    --peers-dir "$PEERS_DIR" ${RUNNER_ARGS[@]+"${RUNNER_ARGS[@]}"}
