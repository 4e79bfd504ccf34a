"""Document access lists through the API: who sees what, changing a list, identities, the
groups claim. The hostile suite (tests/reliability/test_permission_attacks.py) attacks them."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from httpx import AsyncClient
from sqlalchemy import text

from app.auth import issue_token
from app.db.tenancy import SessionMaker, reading_as, tenant_transaction
from app.permissions import EVERY_DOCUMENT
from app.settings import Settings
from tests.conftest import JWT_SECRET, registered_tenant

pytestmark = pytest.mark.on_citus

Json = dict[str, Any]


class Tenant:
    def __init__(self, http: AsyncClient, settings: Settings, tenant_id: str) -> None:
        self.http, self.settings, self.id = http, settings, tenant_id

    def as_(
        self, subject: str, *groups: str, scopes: str = "rag:search rag:ingest"
    ) -> dict[str, str]:
        token = issue_token(
            self.settings,
            tenant_id=self.id,
            subject=subject,
            scopes=scopes.split(),
            groups=groups,
            ttl_seconds=300,
        )
        return {"Authorization": f"Bearer {token}"}

    async def ingest(self, headers: dict[str, str], status: int = 201, **body: object) -> Json:
        reply = await self.http.post("/api/rag/documents", json=body, headers=headers)
        assert reply.status_code == status, reply.text
        out: Json = reply.json()
        return out

    async def titles(self, headers: dict[str, str], query: str = "report") -> set[str]:
        reply = await self.http.post(
            "/api/rag/search",
            headers=headers,
            json={"query": query, "mode": "keyword", "max_results": 20},
        )
        assert reply.status_code == 200, reply.text
        return {chunk["title"] for chunk in reply.json()["chunks"]}


@pytest.fixture
async def tenant(client: AsyncClient, settings: Settings, sessions: SessionMaker) -> Tenant:
    return Tenant(client, settings, await registered_tenant(sessions, tier="enterprise"))


async def test_a_document_is_seen_by_its_principals_and_by_all_documents_callers(
    tenant: Tenant,
) -> None:
    hr = tenant.as_("carol", "hr")
    await tenant.ingest(hr, title="HR report", content="Quarterly report.", access=["group:hr"])
    await tenant.ingest(hr, title="Open report", content="Yearly report.")
    mine = await tenant.ingest(
        hr, title="Carol report", content="My report.", access=["user:carol"]
    )
    assert mine["access"] == ["user:carol"]
    assert await tenant.titles(hr) == {"HR report", "Open report", "Carol report"}
    assert await tenant.titles(tenant.as_("dan", "legal")) == {"Open report"}
    assert await tenant.titles(tenant.as_("carol")) == {"Open report", "Carol report"}
    for scopes in ("rag:search rag:all-documents", "rag:search rag:admin"):
        everything = tenant.as_("ops", scopes=scopes)
        assert await tenant.titles(everything) == {"HR report", "Open report", "Carol report"}
    listed = await tenant.http.get("/api/rag/documents", headers=tenant.as_("dan", "legal"))
    assert listed.json()["total"] == 1


async def test_a_changed_access_list_takes_effect_on_the_next_request_without_re_embedding(
    tenant: Tenant, sessions: SessionMaker
) -> None:
    hr, legal = tenant.as_("carol", "hr"), tenant.as_("dan", "legal")
    doc = await tenant.ingest(
        hr, title="Merger report", content="The merger report.", access=["group:hr"]
    )
    path = f"/api/rag/documents/{doc['document_id']}"
    assert (await tenant.http.get(path, headers=legal)).status_code == 404
    before = await chunk_rows(sessions, tenant.id, doc["document_id"])

    widened = await tenant.http.patch(
        path, json={"access": ["group:legal", "group:hr"]}, headers=hr
    )
    assert widened.status_code == 200, widened.text
    assert widened.json()["access"] == ["group:hr", "group:legal"]
    assert (await tenant.http.get(path, headers=legal)).json()["access"] == [
        "group:hr",
        "group:legal",
    ]
    assert await tenant.titles(legal) == {"Merger report"}
    after = await chunk_rows(sessions, tenant.id, doc["document_id"])
    # the same chunks and vectors, their access list the document's
    assert [(r[0], r[1]) for r in after] == [(r[0], r[1]) for r in before]
    assert all(r[2] == ["group:hr", "group:legal"] for r in after)

    narrowed = await tenant.http.patch(path, json={"access": ["group:hr"]}, headers=legal)
    assert narrowed.status_code == 422  # legal would lose sight of it
    narrowed = await tenant.http.patch(path, json={"access": ["group:legal"]}, headers=legal)
    assert narrowed.status_code == 200, narrowed.text
    assert await tenant.titles(hr) == set()
    assert (await tenant.http.get(path, headers=hr)).status_code == 404

    meta = await tenant.http.patch(path, json={"metadata": {"team": "deals"}}, headers=legal)
    assert meta.json()["metadata"] == {"team": "deals"}
    filtered = await tenant.http.post(
        "/api/rag/search",
        headers=legal,
        json={"query": "merger", "mode": "keyword", "filters": {"metadata": {"team": "deals"}}},
    )
    assert [c["title"] for c in filtered.json()["chunks"]] == ["Merger report"]


async def chunk_rows(sessions: SessionMaker, tenant_id: str, document_id: str) -> list[Any]:
    async with tenant_transaction(reading_as(sessions, EVERY_DOCUMENT), tenant_id) as session:
        rows = await session.execute(
            text(
                "select id, embedded_text_hash, access from chunks"
                " where tenant_id = :t and document_id = :d order by chunk_index"
            ),
            {"t": tenant_id, "d": document_id},
        )
        return list(rows.all())


async def test_an_external_id_names_one_document_per_access_list(tenant: Tenant) -> None:
    hr, legal = tenant.as_("carol", "hr"), tenant.as_("dan", "legal")
    both = tenant.as_("frank", "hr", "legal")
    first = await tenant.ingest(
        hr, title="HR policy", content="Policy report.", external_id="policy", access=["group:hr"]
    )
    # legal cannot see the hr document: its own is a new document, as if the id were free
    second = await tenant.ingest(
        legal,
        title="Legal policy",
        content="Policy report.",
        external_id="policy",
        access=["group:legal"],
    )
    assert second["created"]
    assert second["document_id"] != first["document_id"]
    again = await tenant.ingest(
        hr,
        200,
        title="HR policy",
        content="Policy report.",
        external_id="policy",
        access=["group:hr"],
    )
    assert again["document_id"] == first["document_id"]
    assert not again["changed"]
    # a caller who sees a document under another list is told, instead of getting a twin
    clash = await tenant.http.post(
        "/api/rag/documents",
        json={"content": "Policy report.", "external_id": "policy", "access": ["user:frank"]},
        headers=both,
    )
    assert clash.status_code == 409, clash.text
    assert "PATCH" in clash.json()["detail"]
    twin = await tenant.http.patch(
        f"/api/rag/documents/{first['document_id']}", json={"access": ["group:legal"]}, headers=both
    )
    assert twin.status_code == 409, twin.text


async def test_an_access_list_that_leaves_out_the_writer_is_refused(tenant: Tenant) -> None:
    hr = tenant.as_("carol", "hr")
    reply = await tenant.http.post(
        "/api/rag/documents",
        json={"content": "Board report.", "access": ["group:board"]},
        headers=hr,
    )
    assert reply.status_code == 422
    assert reply.json()["errors"][0]["field"] == "access"
    for bad in (["hr"], ["group:"], ["group: hr"], ["group:a\nb"], ["user:" + "x" * 200]):
        reply = await tenant.http.post(
            "/api/rag/documents", json={"content": "x", "access": bad}, headers=hr
        )
        assert reply.status_code == 422, bad
    everything = tenant.as_("ops", scopes="rag:ingest rag:search rag:all-documents")
    await tenant.ingest(everything, content="Board report.", access=["group:board"])


async def test_an_upload_takes_its_access_list_from_a_form_field(tenant: Tenant) -> None:
    hr = tenant.as_("carol", "hr")
    for field, expected in (
        ("group:hr, user:carol", ["group:hr", "user:carol"]),
        ('["group:hr"]', ["group:hr"]),
    ):
        reply = await tenant.http.post(
            "/api/rag/documents/upload",
            files={"file": ("notes.md", f"# Notes\n\nReport {field}.".encode(), "text/markdown")},
            data={"access": field},
            headers=hr,
        )
        assert reply.status_code == 201, reply.text
        assert reply.json()["access"] == expected
    bad = await tenant.http.post(
        "/api/rag/documents/upload",
        files={"file": ("n.md", b"# N\n\nReport.", "text/markdown")},
        data={"access": "hr"},
        headers=hr,
    )
    assert bad.status_code == 422


async def test_dedupe_never_merges_across_access_lists_unless_asked(tenant: Tenant) -> None:
    hr = tenant.as_("carol", "hr", scopes="rag:search rag:ingest")
    text_ = "The quarterly report says revenue grew in every region."
    await tenant.ingest(hr, title="Copy", content=text_, external_id="a")
    await tenant.ingest(hr, title="Copy", content=text_, external_id="b", access=["group:hr"])
    body = {"similarity_threshold": 0.9, "dry_run": True}
    plain = await tenant.http.post("/api/rag/dedupe", json=body, headers=hr)
    assert plain.json()["duplicate_groups"] == []
    asked = await tenant.http.post(
        "/api/rag/dedupe", json={**body, "across_access": True}, headers=hr
    )
    [group] = asked.json()["duplicate_groups"]
    assert sorted(m["access"] for m in group["documents"]) == [[], ["group:hr"]]
    # someone outside hr sees one document, so no group at all
    legal = await tenant.http.post(
        "/api/rag/dedupe", json={**body, "across_access": True}, headers=tenant.as_("dan", "legal")
    )
    assert legal.json()["duplicate_groups"] == []


def _unsigned(claims: Json) -> str:
    """A token with these claims, signed with the test secret (HS256)."""
    from jose import jwt

    return jwt.encode(claims, JWT_SECRET, algorithm="HS256")


@pytest.mark.parametrize(
    "groups",
    ["hr", ["hr", 7], [""], [["hr"]], {"hr": True}, [" hr"], ["a\u0000b"], ["x" * 200]],
)
async def test_a_malformed_groups_claim_is_a_401(tenant: Tenant, groups: object) -> None:
    import time

    claims = {
        "tenant_id": tenant.id,
        "sub": "carol",
        "scope": "rag:search",
        "exp": int(time.time()) + 60,
        "groups": groups,
    }
    reply = await tenant.http.post(
        "/api/rag/search",
        json={"query": "report"},
        headers={"Authorization": f"Bearer {_unsigned(claims)}"},
    )
    assert reply.status_code == 401, reply.text
    assert "groups" in reply.json()["detail"]


async def test_the_groups_claim_name_is_configurable(
    client: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    import time

    from httpx import ASGITransport

    from tests.conftest import running_app
    from tests.fakes import WordHashEmbedder

    tenant_id = await registered_tenant(sessions, tier="enterprise")
    custom = settings.model_copy(update={"jwt_groups_claim": "https://example.com/roles"})
    async with (
        running_app(custom, sessions, WordHashEmbedder(settings.embedding_dimensions)) as app,
        AsyncClient(transport=ASGITransport(app), base_url="http://test") as http,
    ):
        claims = {
            "tenant_id": tenant_id,
            "sub": "carol",
            "scope": "rag:search rag:ingest",
            "exp": int(time.time()) + 60,
            "https://example.com/roles": ["hr"],
        }
        headers = {"Authorization": f"Bearer {_unsigned(claims)}"}
        reply = await http.post(
            "/api/rag/documents",
            json={"content": "HR report.", "access": ["group:hr"]},
            headers=headers,
        )
        assert reply.status_code == 201, reply.text
        claims["https://example.com/roles"] = "hr"
        bad = {"Authorization": f"Bearer {_unsigned(claims)}"}
        assert (await http.get("/api/rag/documents", headers=bad)).status_code == 401


def test_tokens_carry_groups() -> None:
    settings = Settings(_env_file=None, jwt_secret=JWT_SECRET)
    token = issue_token(
        settings,
        tenant_id="acme",
        subject="carol",
        scopes=["rag:search"],
        groups=["legal", "hr"],
        ttl_seconds=60,
    )
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["groups"] == ["hr", "legal"]
    with pytest.raises(ValueError, match="group name"):
        issue_token(
            settings, tenant_id="acme", subject="c", scopes=[], groups=[" x"], ttl_seconds=60
        )
