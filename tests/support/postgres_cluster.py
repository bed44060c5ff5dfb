"""A throwaway PostgreSQL cluster (and a PgBouncer in front of it) for the Postgres store's tests.

`session_cluster()` (the cluster itself: `amrita_sense.bench.postgres`, which the benchmark shares) finds the server binaries (`pg_config --bindir`, /usr/lib/postgresql/*/bin),
runs `initdb` into a temporary folder, starts the server on a free loopback port with its socket in
that folder (trust authentication, loopback only, `fsync` off: a killed or restarted server still
loses no commit, only a machine crash could) and removes it all at the end.
As root (here and in CI) the server's commands run as the `postgres` user (else `nobody`) through
`runuser`, the folder owned by that user: PostgreSQL refuses to run as root.

When something is missing the tests skip, or fail when AMRITA_SENSE_REQUIRE_POSTGRES=1 (CI).
`current()` is the session's cluster, for the tests that stop and start it again;
`pgbouncer(cluster)` puts a PgBouncer in transaction pooling mode on another loopback port.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

# the cluster itself lives in the bench package (the peers' durable work starts one too)
from amrita_sense.bench.postgres import PostgresCluster, find_bindir, free_port, server_user

__all__ = [
    "PgBouncer",
    "PostgresCluster",
    "current",
    "drop_schema_after",
    "find_bindir",
    "free_port",
    "pgbouncer",
    "server_user",
    "session_cluster",
    "unavailable",
]

REQUIRED = os.environ.get("AMRITA_SENSE_REQUIRE_POSTGRES", "") not in ("", "0")
_CURRENT: PostgresCluster | None = None


def unavailable(reason: str) -> None:
    """Skip the test, or fail it when AMRITA_SENSE_REQUIRE_POSTGRES=1."""
    if REQUIRED:
        pytest.fail(f"AMRITA_SENSE_REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@contextlib.contextmanager
def session_cluster() -> Iterator[PostgresCluster]:
    """Start a cluster for the session (or skip / fail, see `unavailable`), remove it at the end."""
    global _CURRENT
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        unavailable(f"psycopg is not installed (pip install 'amrita-sense-turbo[postgres]'): {exc}")
    bindir = find_bindir()
    if bindir is None:
        unavailable(
            "no PostgreSQL server binaries (initdb, pg_ctl) in `pg_config --bindir` or /usr/lib/postgresql/*/bin"
        )
    assert bindir is not None
    cluster = PostgresCluster(bindir, fsync=False)
    try:
        cluster.init()
        cluster.start()
        _CURRENT = cluster
        yield cluster
    finally:
        _CURRENT = None
        cluster.remove()


def current() -> PostgresCluster:
    """The cluster the `postgres_dsn` fixture started (use the fixture first)."""
    assert _CURRENT is not None, "no PostgreSQL cluster: request the postgres_dsn fixture"
    return _CURRENT


class PgBouncer:
    """A PgBouncer in transaction pooling mode in front of `cluster`, on another loopback port."""

    def __init__(self, binary: str, cluster: PostgresCluster, pool_size: int = 3) -> None:
        self.binary, self.cluster = binary, cluster
        self.root = cluster.root / f"pgbouncer-{free_port()}"
        self.port = free_port()
        self.pidfile = self.root / "pgbouncer.pid"
        self.root.mkdir()
        (self.root / "users.txt").write_text('"postgres" ""\n')
        (self.root / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host=127.0.0.1 port={cluster.port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.root / 'users.txt'}\n"
            f"pool_mode = transaction\ndefault_pool_size = {pool_size}\nmax_client_conn = 100\n"
            f"logfile = {self.root / 'pgbouncer.log'}\npidfile = {self.pidfile}\n"
        )
        if cluster.user is not None:
            entry = pwd.getpwnam(cluster.user)
            for path in (self.root, *self.root.iterdir()):
                os.chown(path, entry.pw_uid, entry.pw_gid)

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def start(self) -> None:
        """Start it as a daemon (it refuses to run as root) and wait until it listens."""
        argv = [self.binary, "-d", str(self.root / "pgbouncer.ini")]
        if self.cluster.user is not None:
            argv = ["runuser", "-u", self.cluster.user, "--", *argv]
        subprocess.run(argv, check=True, capture_output=True, timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return
            time.sleep(0.05)
        raise RuntimeError(f"pgbouncer did not listen on port {self.port}")

    def stop(self) -> None:
        """Stop the daemon this object started (the pid its pidfile names)."""
        with contextlib.suppress(OSError, ValueError):
            pid = int(self.pidfile.read_text().strip())
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                os.kill(pid, 0)  # raises once it is gone
                time.sleep(0.05)


@contextlib.contextmanager
def pgbouncer(cluster: PostgresCluster) -> Iterator[PgBouncer]:
    """A running PgBouncer in front of `cluster` (or skip / fail when `pgbouncer` is not installed)."""
    binary = shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.path.exists(p)), None
    )
    if binary is None:
        unavailable("pgbouncer is not installed (apt-get install pgbouncer)")
    assert binary is not None
    bouncer = PgBouncer(binary, cluster)
    bouncer.start()
    try:
        yield bouncer
    finally:
        bouncer.stop()


def drop_schema_after(request: pytest.FixtureRequest, dsn: str) -> str:
    """A fresh schema name for one test's store; the schema is dropped when the test ends."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:16]}"

    def drop() -> None:
        with contextlib.suppress(psycopg.Error), psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    request.addfinalizer(drop)
    return schema
