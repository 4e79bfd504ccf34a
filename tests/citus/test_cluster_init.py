"""deploy/citus/cluster-init.sh, the compose file's wiring of the nodes, run for real against
the test cluster's nodes: then `rag migrate` distributes, and a second run changes nothing."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid

import pytest

from app.db.migrate import migrate
from app.db.sharding import DISTRIBUTED, REFERENCE
from tests.citus.build import ROOT
from tests.citus.cluster import HOST, Cluster
from tests.conftest import APP_PASSWORD, DIMENSIONS

pytestmark = pytest.mark.slow

SCRIPT = ROOT / "deploy" / "citus" / "cluster-init.sh"


def _init(cluster: Cluster, database: str, role: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{cluster.install.bin_dir}:{os.environ['PATH']}",  # its psql
        "CITUS_COORDINATOR": f"{HOST}:{cluster.coordinator.port}",
        "CITUS_WORKERS": " ".join(f"{HOST}:{w.port}" for w in cluster.workers),
        "CITUS_DATABASE": database,
        "POSTGRES_PASSWORD": "superuser-secret",
        "RAG_APP_DB_PASSWORD": APP_PASSWORD,
        "RAG_APP_ROLE": role,
    }
    return subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_compose_wiring_script_readies_a_cluster_for_rag_migrate(cluster: Cluster) -> None:
    name = f"rag_init_{uuid.uuid4().hex[:6]}"
    role = f"rag_app_{name[-6:]}"  # a role the script has to create
    cluster.create_database(name, wire=False)
    try:
        for _ in range(2):  # idempotent: compose may run it on every start
            done = _init(cluster, name, role)
            assert done.returncode == 0, done.stderr
        workers = sorted(f"{HOST}:{w.port}" for w in cluster.workers)
        assert done.stdout.split() == workers
        for node in cluster.nodes:
            roles = cluster.sql(
                "SELECT string_agg(rolename, ',' ORDER BY rolename) FROM pg_dist_authinfo",
                node=node,
                database=name,
            )
            assert roles == ",".join(sorted(["postgres", role]))
        asyncio.run(
            migrate(
                cluster.url(database=name),
                embedding_dimensions=DIMENSIONS,
                app_role=role,
                app_url=cluster.url(user=role, password=APP_PASSWORD, database=name),
            )
        )
        distributed = cluster.sql("SELECT count(*) FROM pg_dist_partition", database=name)
        assert int(distributed) == len(REFERENCE) + len(DISTRIBUTED)
    finally:
        cluster.drop_database(name)
