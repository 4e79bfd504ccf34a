"""The service from outside: health, tenants through the admin API, ingest, every search mode,
context, similar items and a dedupe dry run."""

from __future__ import annotations

import time

import pytest

from tests.blackbox.conftest import Seeded
from tests.blackbox.target import ADMIN_SCOPES, READ_PRIMARY, Target

pytestmark = pytest.mark.slow

GUIDE = (
    "# Travel policy\n\nBook trains for journeys under four hours; flights need a manager's "
    "approval. Meals on the road are reimbursed up to sixty euros a day with receipts."
)


def test_health_and_readiness(target: Target) -> None:
    with target.client() as http:
        assert http.get("/healthz").status_code == 200
        ready = http.get("/readyz")
        assert ready.status_code == 200, ready.text


def test_admin_creates_tenants_once_and_refuses_tenant_tokens(target: Target) -> None:
    tenant = target.new_tenant("admin")
    with target.client(target.mint(target.admin_tenant, ADMIN_SCOPES)) as admin:
        again = admin.post("/api/admin/tenants", json={"id": tenant.id, "tier": target.tier})
        assert again.status_code == 200  # idempotent: it existed
        read = admin.get(f"/api/admin/tenants/{tenant.id}")
        assert read.status_code == 200
        assert (read.json()["id"], read.json()["status"]) == (tenant.id, "active")
    refused = tenant.http.post("/api/admin/tenants", json={"id": "bb-not-allowed"})
    assert refused.status_code == 403
    assert refused.headers["content-type"].startswith("application/problem+json")
    tenant.http.close()


def test_ingest_is_idempotent(target: Target) -> None:
    tenant = target.new_tenant("ingest")
    first = tenant.http.post(
        "/api/rag/documents",
        json={"title": "Travel", "content": GUIDE, "external_id": "travel.md"},
    )
    assert first.status_code == 201, first.text
    assert first.json()["embedded"] == first.json()["chunks"] >= 1
    second = tenant.http.post(
        "/api/rag/documents",
        json={"title": "Travel", "content": GUIDE, "external_id": "travel.md"},
    )
    assert second.status_code == 200
    assert second.json()["embedded"] == 0
    assert second.json()["document_id"] == first.json()["document_id"]
    listed = tenant.http.get("/api/rag/documents", headers=READ_PRIMARY)
    assert [d["external_id"] for d in listed.json()["items"]] == ["travel.md"]
    tenant.http.close()


@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
def test_every_search_mode_finds_the_document(alpha: Seeded, mode: str) -> None:
    query = "when is the harbour channel dredged?" if mode != "keyword" else "dredges channel"
    reply = alpha.tenant.search(query, mode=mode, max_results=3)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["mode"] == mode
    assert body["chunks"], body
    assert body["chunks"][0]["document_id"] == alpha.document_id
    assert alpha.canary in body["chunks"][0]["content"]
    assert "RateLimit-Remaining" in reply.headers


def test_reads_reach_a_replica_eventually(alpha: Seeded) -> None:
    """Without asking for the primary a search may be served by a read replica: the document
    written before this module started shows up there within seconds."""
    deadline = time.monotonic() + 30
    while True:
        reply = alpha.tenant.search(alpha.canary, primary=False, mode="keyword")
        assert reply.status_code == 200, reply.text
        if reply.json()["chunks"]:
            break
        assert time.monotonic() < deadline, "the document never became searchable"
        time.sleep(0.5)


def test_context_cites_the_document(alpha: Seeded) -> None:
    reply = alpha.tenant.http.post(
        "/api/rag/context",
        json={"query": "harbour dredging inspection", "max_results": 2},
        headers=READ_PRIMARY,
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert "[1]" in body["context"]
    assert alpha.canary in body["context"]
    [citation] = body["citations"]
    assert citation["document_id"] == alpha.document_id
    assert citation["title"] == "Harbour maintenance"


def test_similar_and_a_dedupe_dry_run_find_the_copy(target: Target) -> None:
    tenant = target.new_tenant("similar")
    original = tenant.ingest("Travel policy", GUIDE, external_id="travel.md")
    copy = tenant.ingest("Travel policy (copy)", GUIDE + " ", external_id="travel-copy.md")
    found = tenant.search("train journeys and flight approval", max_results=5)
    chunk = next(c for c in found.json()["chunks"] if c["document_id"] == original["document_id"])

    similar = tenant.http.get(
        f"/api/rag/chunks/{chunk['chunk_id']}/similar",
        params={"min_similarity": 0.5},
        headers=READ_PRIMARY,
    )
    assert similar.status_code == 200, similar.text
    assert copy["document_id"] in {c["document_id"] for c in similar.json()["similar"]}
    documents = tenant.http.get(
        f"/api/rag/documents/{original['document_id']}/similar",
        params={"min_similarity": 0.5},
        headers=READ_PRIMARY,
    )
    assert [c["document_id"] for c in documents.json()["similar"]] == [copy["document_id"]]

    dedupe = tenant.http.post(
        "/api/rag/dedupe", json={"similarity_threshold": 0.9}, headers=READ_PRIMARY
    )
    assert dedupe.status_code == 200, dedupe.text
    body = dedupe.json()
    assert (body["dry_run"], body["action"], body["removed_ids"]) == (True, "preview", [])
    [group] = body["duplicate_groups"]
    members = {group["primary_id"], *group["duplicate_ids"]}
    assert members == {original["document_id"], copy["document_id"]}
    listed = tenant.http.get("/api/rag/documents", headers=READ_PRIMARY).json()
    assert listed["total"] == 2  # a dry run changes nothing
    tenant.http.close()


def test_bad_input_is_a_problem_not_a_crash(alpha: Seeded) -> None:
    reply = alpha.tenant.http.post("/api/rag/search", json={"query": "x", "max_results": 500})
    assert reply.status_code == 422
    assert reply.headers["content-type"].startswith("application/problem+json")
    no_token = alpha.tenant.http.post(
        "/api/rag/search", json={"query": "x"}, headers={"Authorization": ""}
    )
    assert no_token.status_code == 401
