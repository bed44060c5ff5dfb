#!/usr/bin/env bash
# The suite on Debian's own python3.14 and python3.15 (from Debian unstable), both builds, in a
# debootstrap chroot made here: `.ci/debian_unstable.sh WORKDIR` (root; WORKDIR is removed by the caller).
# Everything comes from the package registries: Debian's archive for the chroot, PyPI for the venvs.
set -euo pipefail
cd "$(dirname "$0")/.."
WORKDIR="$1"
ROOT="$WORKDIR/sid"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES=python3.14,python3.14-dev,python3.14-venv,python3.15,python3.15-dev,python3.15-venv
PACKAGES+=,gcc,libc6-dev,ca-certificates
# the Postgres store's (behind PgBouncer too) and the pictures' tests run in the chroot too (Node and Chromium do not: see .ci/in_chroot.sh)
PACKAGES+=,postgresql,pgbouncer,graphviz

if ! command -v debootstrap >/dev/null; then
    apt-get update -q && apt-get install -y -q debootstrap
fi
echo "debootstrap: Debian unstable into $ROOT"
begin=$SECONDS
if ! debootstrap --variant=minbase --include="$PACKAGES" unstable "$ROOT" "$MIRROR" >"$WORKDIR/debootstrap.log" 2>&1; then
    tail -40 "$WORKDIR/debootstrap.log"
    exit 1
fi
echo "debootstrap took $((SECONDS - begin)) s"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# The chroot trusts what this machine trusts (a package registry reached through a proxy with its own CA).
cp "${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}" "$ROOT/etc/ssl/certs/ca-certificates.crt"
mkdir -p "$ROOT/src/turbo"
git ls-files -z | xargs -0 tar -c | tar -x -C "$ROOT/src/turbo"

# The mounts live in a private mount namespace: they vanish when it exits, so removing WORKDIR later
# can never reach through them into this machine's /proc.
unshare --mount --propagation private bash -c '
    mount -t proc proc "$0/proc"
    exec chroot "$0" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 TEST_WORKERS="$1" \
        TEST_SHARE="$2" bash /src/turbo/.ci/in_chroot.sh' "$ROOT" "${TEST_WORKERS:-2}" "${TEST_SHARE:-1}"
