"""The target of the black-box suite: RAG_BLACKBOX_URL (a deployed stack, see target.py), or
a `rag serve` this session starts (server.py) with the Redis of tests/conftest.py.

Against a deployed stack the suite needs nothing of this repository but its own folder:
`pytest tests/blackbox --confcutdir tests/blackbox` leaves tests/conftest.py (which imports
the service to test it from inside) unloaded; scripts/compose-smoke.sh runs it so."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.blackbox.server import started_service
from tests.blackbox.target import Target, Tenant, target_from_environment


@pytest.fixture(scope="session")
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    deployed = target_from_environment(os.environ)
    if deployed is not None:
        yield deployed
        return
    redis_url: str = request.getfixturevalue("redis_url")  # tests/conftest.py's private Redis
    with started_service(redis_url) as started:
        yield started


@dataclass(frozen=True, slots=True)
class Seeded:
    """A tenant holding a document with a canary nobody else has."""

    tenant: Tenant
    canary: str
    document_id: str


def seed(target: Target, prefix: str) -> Seeded:
    tenant = target.new_tenant(prefix)
    canary = f"canary{uuid.uuid4().hex[:12]}"
    content = (
        f"# Harbour maintenance\n\nThe {prefix} harbour dredges its channel every spring; "
        f"the inspection code is {canary}. Ships wait at the outer buoy during the work."
    )
    made = tenant.ingest("Harbour maintenance", content, external_id="harbour.md")
    return Seeded(tenant, canary, str(made["document_id"]))


@pytest.fixture(scope="module")
def alpha(target: Target) -> Iterator[Seeded]:
    seeded = seed(target, "alpha")
    yield seeded
    seeded.tenant.http.close()


@pytest.fixture(scope="module")
def beta(target: Target) -> Iterator[Seeded]:
    seeded = seed(target, "beta")
    yield seeded
    seeded.tenant.http.close()
