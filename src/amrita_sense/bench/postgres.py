"""A throwaway PostgreSQL cluster on loopback: the durable work of the peers' comparison
(`--peers`) stores into one, and so do the Postgres store's tests (`tests/support/postgres_cluster.py`).

`find_bindir()` finds the server binaries (`pg_config --bindir`, /usr/lib/postgresql/*/bin);
`PostgresCluster` runs `initdb` into a temporary folder and starts the server on a free loopback port
with its socket in that folder (trust authentication, loopback only, `fsync` left on: a commit waits
for its WAL flush, as on a production server), and removes it all at the end. As root the server's
commands run as the `postgres` user (else `nobody`) through `runuser`, the folder owned by that user:
PostgreSQL refuses to run as root. `throwaway()` is the runner's: a started cluster, or why there is
none (never an exception: the bench then reads n/a).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


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

    def __init__(self, bindir: Path, *, fsync: bool = True) -> None:
        self.bindir = bindir
        self.fsync = fsync
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
        return self.dsn_of("postgres")

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
        # flushes its commits unless made with fsync=False (the tests' cluster: a commit still reaches
        # the kernel before it returns, so a killed or restarted server loses nothing; only a machine
        # crash could, and no test makes one)
        self.run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
        (self.data / "pg_hba.conf").write_text("local all all trust\nhost all all 127.0.0.1/32 trust\n")
        self.port = free_port()
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.root}'",
            "fsync": "on" if self.fsync else "off",
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

    def createdb(self, name: str) -> str:
        """Create database `name` (`createdb`); its DSN."""
        self.run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
        return self.dsn_of(name)

    def dsn_of(self, dbname: str) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname}"

    def remove(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def throwaway() -> Iterator[tuple[PostgresCluster | None, str]]:
    """A started cluster and "", or None and why there is none; the cluster is removed at the end."""
    bindir = find_bindir()
    if bindir is None:
        yield (
            None,
            "no PostgreSQL server binaries (initdb, pg_ctl) in `pg_config --bindir` or /usr/lib/postgresql/*/bin",
        )
        return
    try:
        cluster = PostgresCluster(bindir)
    except (OSError, RuntimeError) as exc:
        yield None, f"cannot make a PostgreSQL cluster: {exc}"
        return
    try:
        try:
            cluster.init()
            cluster.start()
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            yield None, f"the throwaway PostgreSQL server did not start: {str(exc).splitlines()[0]}"
            return
        yield cluster, ""
    finally:
        cluster.remove()
