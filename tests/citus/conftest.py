"""A Citus cluster of the tests' own (a coordinator and two workers), started once for the
tests of this folder: distribution, routing, faults and operations on a live cluster. The
project's other suites run on a cluster of their own with `pytest --citus` (tests/conftest.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from tests.citus.cluster import Cluster, running_cluster
from tests.conftest import DatabaseUrls, citus_database


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    with running_cluster(workers=2, shard_count=8) as started:
        yield started


@pytest.fixture
def citus_db(cluster: Cluster) -> Iterator[DatabaseUrls]:
    """A database of its own on the cluster, migrated (distributed); dropped afterwards."""
    name = f"rag_citus_{uuid.uuid4().hex[:8]}"
    urls = asyncio.run(citus_database(cluster, name))
    try:
        yield urls
    finally:
        cluster.drop_database(name)
