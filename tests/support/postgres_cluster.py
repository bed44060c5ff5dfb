"""A throwaway PostgreSQL cluster (and a PgBouncer in front of it) for the Postgres store's tests.

`session_cluster()` finds the server binaries (`pg_config --bindir`, /usr/lib/postgresql/*/bin),
runs `initdb` into a temporary folder, starts the server on a free loopback port with its socket in
that folder (trust authentication, loopback only, `fsync` left on) and removes it all at the end.
As root (here and in CI) the server's commands run as the `postgres` user (else `nobody`) through
`runuser`, the folder owned by that user: PostgreSQL refuses to run as root.

When something is missing the tests skip, or fail when AMRITA_SENSE_REQUIRE_POSTGRES=1 (CI).
`current()` is the session's cluster, for the tests that stop and start it again;
`pgbouncer(cluster)` puts a PgBouncer in transaction pooling mode on another loopback port.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REQUIRED = os.environ.get("AMRITA_SENSE_REQUIRE_POSTGRES", "") not in ("", "0")
_CURRENT: PostgresCluster | None = None


def unavailable(reason: str) -> None:
    """Skip the test, or fail it when AMRITA_SENSE_REQUIRE_POSTGRES=1."""
    if REQUIRED:
        pytest.fail(f"AMRITA_SENSE_REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def find_bindir() -> Path | None:
    """The folder of `initdb` and `pg_ctl`: pg_config's, or the newest /usr/lib/postgresql/*/bin."""
    candidates = []
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=30)
        if out.returncode == 0:
            candidates.append(Path(out.stdout.strip()))
    numbered = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += sorted((Path(p) for p in numbered), key=lambda p: _major(p.parent.name), reverse=True)
    return next((d for d in candidates if (d / "initdb").is_file() and (d / "pg_ctl").is_file()), None)


def _major(name: str) -> int:
    return int(name) if name.isdigit() else 0


def server_user() -> str | None:
    """The user the server runs as: None when we are not root, else `postgres` (or `nobody`)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise RuntimeError("running as root, and neither a postgres nor a nobody user exists to run the server")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PostgresCluster:
    """One initdb'd data folder and its server; `stop()` / `start()` restart the same cluster."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.user = server_user()
        self.root = Path(tempfile.mkdtemp(prefix="amrita-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = 0
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def run(self, *command: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """A server command (`initdb`, `pg_ctl`), as the server's user."""
        argv = [str(self.bindir / command[0]), *command[1:]]
        if self.user is not None:
            argv = ["runuser", "-u", self.user, "--", *argv]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=self.root)
        if out.returncode != 0:
            raise RuntimeError(f"{command[0]} failed ({out.returncode}): {out.stderr or out.stdout}{self._log_tail()}")
        return out

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return "\nserver log:\n" + self.log.read_text()[-2000:]
        return ""

    def init(self) -> None:
        # --no-sync: initdb does not flush the files it writes (a throwaway folder); the server
        # itself runs with fsync on
        self.run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
        (self.data / "pg_hba.conf").write_text("local all all trust\nhost all all 127.0.0.1/32 trust\n")
        self.port = free_port()
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.root}'",
            "fsync": "on",
            "max_connections": "60",
            "logging_collector": "off",
        }
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write("".join(f"{key} = {value}\n" for key, value in settings.items()))

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (`fast`: sessions are ended; `immediate`: as a crash, recovery at the next start)."""
        self.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def remove(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


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
    cluster = PostgresCluster(bindir)
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
