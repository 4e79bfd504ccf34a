"""Two tenants with a canary string each: whatever one asks, through REST or MCP, the other's
canary never comes back, and the other's ids are "not found"."""

from __future__ import annotations

import pytest

from tests.blackbox.conftest import Seeded
from tests.blackbox.target import READ_PRIMARY

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
def test_searches_never_return_the_other_tenants_canary(
    alpha: Seeded, beta: Seeded, mode: str
) -> None:
    for me, other in ((alpha, beta), (beta, alpha)):
        for query in (other.canary, "harbour channel dredging inspection code"):
            reply = me.tenant.search(query, mode=mode, max_results=20, threshold=0.1)
            assert reply.status_code == 200, reply.text
            assert other.canary not in reply.text
            assert {c["document_id"] for c in reply.json()["chunks"]} <= {me.document_id}


def test_context_and_listings_stay_in_the_tenant(alpha: Seeded, beta: Seeded) -> None:
    for me, other in ((alpha, beta), (beta, alpha)):
        context = me.tenant.http.post(
            "/api/rag/context",
            json={"query": f"inspection code {other.canary}", "max_results": 20},
            headers=READ_PRIMARY,
        )
        assert context.status_code == 200
        assert other.canary not in context.text
        listed = me.tenant.http.get("/api/rag/documents", headers=READ_PRIMARY)
        assert [d["document_id"] for d in listed.json()["items"]] == [me.document_id]


def test_the_other_tenants_ids_are_not_found(alpha: Seeded, beta: Seeded) -> None:
    http = alpha.tenant.http
    missing = "00000000-0000-4000-8000-000000000000"
    for path in (
        f"/api/rag/documents/{beta.document_id}",
        f"/api/rag/documents/{beta.document_id}/similar",
    ):
        theirs = http.get(path, headers=READ_PRIMARY)
        nobodys = http.get(path.replace(beta.document_id, missing), headers=READ_PRIMARY)
        assert theirs.status_code == nobodys.status_code == 404
        assert beta.canary not in theirs.text
    assert http.delete(f"/api/rag/documents/{beta.document_id}").status_code == 404
    still = beta.tenant.http.get(f"/api/rag/documents/{beta.document_id}", headers=READ_PRIMARY)
    assert still.status_code == 200


def test_a_tenant_token_cannot_act_for_another_tenant(alpha: Seeded, beta: Seeded) -> None:
    reply = alpha.tenant.http.post(
        "/api/rag/search", json={"query": beta.canary}, headers={"X-Tenant-ID": beta.tenant.id}
    )
    assert reply.status_code == 403
    assert beta.canary not in reply.text
