#!/usr/bin/env bash
# The compiled core's C against a free-threaded CPython's headers: `.ci/free_threaded_headers.sh PYTHON`
# (a CPython 3.14+ with its headers installed; run after the checkout was built in place, which leaves the
# core's generated C in src/amrita_sense/core/).
#
# No free-threaded interpreter can be had here (Debian ships none), so this is what can be checked: CPython
# has one set of headers for both builds, and its pyconfig.h defining Py_GIL_DISABLED is what selects the
# free-threaded one (atomic reference counts, critical sections, the list and dict functions that take a
# reference). Each module must compile there with no warning about an undeclared function, and must declare
# that it keeps the GIL off (Py_MOD_GIL_NOT_USED, from Cython's freethreading_compatible). Running it without
# the GIL is the hosted CI's free-threaded job (.github/workflows/ci.yml).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="$1"
include="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
config="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_h_filename())')"
headers="$(mktemp -d)"
trap 'rm -rf "$headers"' EXIT
cp -r "$include/." "$headers/"
{ echo "#define Py_GIL_DISABLED 1"; cat "$config"; } >"$headers/pyconfig.h"
status=0
for c in src/amrita_sense/core/_*.c; do
    if ! grep -q "Py_MOD_GIL_NOT_USED" "$c"; then
        echo "free-threaded: $c does not declare Py_MOD_GIL_NOT_USED (freethreading_compatible)"
        status=1
    fi
    if ! gcc -c -O1 -Werror=implicit-function-declaration -Werror=int-conversion -fPIC \
        -I"$headers" -Isrc/amrita_sense/core "$c" -o "$headers/$(basename "$c" .c).o"; then
        echo "free-threaded: $c does not compile against the free-threaded headers"
        status=1
    fi
done
[ "$status" -eq 0 ] && echo "free-threaded headers: $(ls src/amrita_sense/core/_*.c | wc -l) modules compile, each keeps the GIL off ($("$PYTHON" -c 'import sys; print(sys.version.split()[0])'))"
exit "$status"
