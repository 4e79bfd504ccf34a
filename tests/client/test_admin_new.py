"""The admin API's tenant operations through the client: tenants filtered
with counts, deletion with confirmation, the audit log.

Skipped until those endpoints are merged (tests/client/pending.py); then every method here
round-trips against the live service and its models are checked against the OpenAPI document.
"""

from __future__ import annotations

import uuid

import pytest
from rag_client import Invalid, NotFound, RagClient
from rag_client.admin_models import AuditPage, TenantPage, TenantStats

from app.settings import Settings
from tests.client.conftest import ADMIN_SCOPES, LiveService
from tests.client.pending import requires
from tests.client.schema_drift import drift, openapi, parameter_drift

AUDIT = "/api/admin/audit"
TENANT = "/api/admin/tenants/{tenant_id}"


@pytest.fixture(autouse=True)
def _merged(settings: Settings) -> None:
    requires(settings, "GET", AUDIT)
    requires(settings, "DELETE", TENANT)


def test_models_match_the_openapi_document(settings: Settings) -> None:
    document = openapi(settings)
    assert drift(document, "GET", AUDIT, AuditPage, reply=True) == []
    assert drift(document, "GET", "/api/admin/tenants", TenantPage, reply=True) == []
    assert drift(document, "GET", f"{TENANT}/stats", TenantStats, reply=True) == []
    tenants_query = {"status", "tier", "limit", "offset"}
    assert parameter_drift(document, "GET", "/api/admin/tenants", tenants_query) == []
    audit_query = {"tenant_id", "action", "actor", "limit", "offset"}
    assert parameter_drift(document, "GET", AUDIT, audit_query) == []


def test_tenants_filtered_with_counts_deleted_and_audited(live: LiveService) -> None:
    admin_tenant = live.tenant(prefix="admin")
    target = f"c-{uuid.uuid4().hex[:10]}"
    with RagClient(live.url, live.token(admin_tenant, ADMIN_SCOPES)) as admin:
        admin.create_tenant(target, tier="pro")
        with RagClient(live.url, live.token(target)) as member:
            member.ingest("Some words about rivers.", external_id="r")
        admin.suspend_tenant(target)
        suspended = {t.id: t for t in admin.iter_tenants(status="suspended")}
        counted = suspended[target]
        assert (counted.documents, counted.chunks is not None and counted.chunks >= 1) == (1, True)
        assert target not in {t.id for t in admin.iter_tenants(status="active")}
        stats = admin.tenant_stats(target)
        assert stats.storage is not None
        assert stats.storage.total_bytes > 0
        assert stats.traffic is not None
        assert stats.traffic.last_day.ingests >= 1

        with pytest.raises(Invalid):
            admin.delete_tenant(target, confirm="something-else")
        admin.delete_tenant(target, confirm=target)
        with pytest.raises(NotFound):
            admin.tenant_stats(target)

        actions = [entry.action for entry in admin.audit(tenant_id=target).items]
        assert len(actions) >= 3  # created, suspended, deleted
        assert all(
            entry.actor or entry.model_extra for entry in admin.audit(tenant_id=target).items
        )
