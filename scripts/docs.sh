#!/usr/bin/env bash
# Builds the documentation site (Sphinx + Furo + MyST) from a checkout; any warning fails the build
# (broken links between pages or to headings, missing references, docstrings that do not render).
#   bash scripts/docs.sh [OUTPUT_DIR]     default docs/_build/html; then open OUTPUT_DIR/index.html
#   PYTHON=path                           the Python to run Sphinx with (default .venv/bin/python);
#                                         it needs the docs extra: pip install ".[docs]"
# The reference is generated from the pure build (docs/conf.py sets AMRITA_SENSE_NO_EXTENSIONS=1),
# so no compiler is needed. No network either: no intersphinx, no link check.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
OUT="${1:-docs/_build/html}"

if ! "$PYTHON" -c "import sphinx, furo, myst_parser" 2>/dev/null; then
    echo "scripts/docs.sh: $PYTHON lacks Sphinx, Furo or MyST-Parser; install them with:" >&2
    echo "    $PYTHON -m pip install \".[docs]\"" >&2
    exit 2
fi
exec "$PYTHON" -m sphinx -W --keep-going -n -b html docs "$OUT"
