"""Cross-tenant attacks through every door, and a guard that proves the suite sees a leak.

Three tenants hold the same shared documents (same titles, texts, external ids, collection)
and one private document each, whose text carries a secret. Each tenant then attacks each
other one: the victim's ids in paths, bodies and filters, its collection names, its tenant id
in `X-Tenant-ID`, admin routes with a tenant token, and the MCP tools. Every attack is sent
twice, once with the victim's values and once with values nobody holds (fresh uuids, a
collection and a tenant nobody has): the two replies must be the same, status and body, once
the values themselves and timings are masked; no reply may hold the victim's secret; and the
victim's documents are unchanged afterwards.

The guard runs the same attacks on an app whose database sessions bypass row-level security
(the superuser): there the suite must report leaks, or it could not see one.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from httpx import ASGITransport, AsyncClient
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.embedded import with_database
from app.db.engine import create_engine, create_sessionmaker
from app.db.tenancy import SessionMaker, without_tenant_predicates
from app.settings import Settings
from tests.conftest import DatabaseUrls, TenantClient, new_tenant, running_app
from tests.fakes import WordHashEmbedder
from tests.mcp.conftest import HOST, mcp_settings
from tests.reliability.conftest import send
from tests.reliability.endpoints import Call, Json, mcp_call

pytestmark = pytest.mark.on_citus

SHARED = {
    "handbook": "Vacation requests go to your manager two weeks ahead; launch codes are never "
    "shared outside the team.",
    "security": "Rotate the launch code every quarter and keep the secret in the vault.",
}
TIMING = re.compile(r'"([a-z_]*_ms)":\s*[0-9.e-]+')


@dataclass(frozen=True, slots=True)
class Holdings:
    """What an attacker may aim at: a tenant's ids, names and secret."""

    tenant_id: str
    document_id: str
    chunk_id: str
    collection: str
    secret: str


@dataclass(frozen=True, slots=True)
class Seeded:
    tenant: TenantClient
    holdings: Holdings


def nobody() -> Holdings:
    """Values of the same shapes that no tenant holds."""
    tenant_id = f"t-{uuid.uuid4().hex[:12]}"
    return Holdings(
        tenant_id, str(uuid.uuid4()), str(uuid.uuid4()), f"private-{tenant_id}", "unheld"
    )


Attack = tuple[str, Callable[[Holdings], Call], dict[str, str]]  # name, call, extra headers


def _search(path: str, **body: object) -> Call:
    return Call("POST", path, json=body)


ATTACKS: list[Attack] = [
    ("read document", lambda h: Call("GET", f"/api/rag/documents/{h.document_id}"), {}),
    ("delete document", lambda h: Call("DELETE", f"/api/rag/documents/{h.document_id}"), {}),
    (
        "similar documents",
        lambda h: Call(
            "GET",
            f"/api/rag/documents/{h.document_id}/similar",
            params={"search_scope": "all", "min_similarity": "0"},
        ),
        {},
    ),
    (
        "similar chunks",
        lambda h: Call(
            "GET",
            f"/api/rag/chunks/{h.chunk_id}/similar",
            params={"search_scope": "all", "min_similarity": "0"},
        ),
        {},
    ),
    *(
        (
            f"search {mode}, document filter",
            lambda h, mode=mode: _search(
                "/api/rag/search",
                query=f"launch code secret {h.secret}",
                mode=mode,
                max_results=20,
                threshold=0.1,
                filters={"document_ids": [h.document_id]},
            ),
            {},
        )
        for mode in ("vector", "keyword", "hybrid")
    ),
    (
        "search, victim's collection",
        lambda h: _search(
            "/api/rag/search", query="launch code", mode="hybrid", collections=[h.collection]
        ),
        {},
    ),
    (
        "context, document filter",
        lambda h: _search(
            "/api/rag/context", query="launch code", filters={"document_ids": [h.document_id]}
        ),
        {},
    ),
    (
        "documents, victim's collection",
        lambda h: Call("GET", "/api/rag/documents", params={"collection": h.collection}),
        {},
    ),
    (
        "dedupe, victim's collection",
        lambda h: _search("/api/rag/dedupe", collections=[h.collection], similarity_threshold=0.5),
        {},
    ),
    (
        "search as the victim (X-Tenant-ID)",
        lambda h: _search("/api/rag/search", query="launch code"),
        {"X-Tenant-ID": "victim"},
    ),
    (
        "admin stats with a tenant token",
        lambda h: Call("GET", f"/api/admin/tenants/{h.tenant_id}/stats"),
        {},
    ),
    ("mcp fetch chunk", lambda h: mcp_call("fetch", id=h.chunk_id), {}),
    ("mcp fetch document", lambda h: mcp_call("fetch", id=h.document_id), {}),
    (
        "mcp find_similar",
        lambda h: mcp_call("find_similar", id=h.document_id, min_similarity=0.0),
        {},
    ),
    (
        "mcp search, victim's collection",
        lambda h: mcp_call("search", query="launch code", collections=[h.collection]),
        {},
    ),
]


async def seeded(http: AsyncClient, settings: Settings, sessions: SessionMaker) -> Seeded:
    tenant = await new_tenant(http, settings, sessions)
    for name, content in SHARED.items():
        await ingest(tenant, name.title(), content, external_id=name, collection="shared")
    secret = f"zebra{uuid.uuid4().hex[:10]}"
    collection = f"private-{tenant.tenant_id}"
    private = await ingest(
        tenant,
        "Launch code",
        f"The launch code secret for this tenant is {secret}.",
        external_id="handbook",
        collection=collection,
    )
    found = await tenant.http.post(
        "/api/rag/search",
        headers=tenant.headers,
        json={"query": secret, "mode": "keyword", "collections": [collection]},
    )
    [chunk] = found.json()["chunks"]
    holdings = Holdings(
        tenant.tenant_id, private["document_id"], chunk["chunk_id"], collection, secret
    )
    return Seeded(tenant, holdings)


async def ingest(tenant: TenantClient, title: str, content: str, **body: object) -> Json:
    reply = await tenant.http.post(
        "/api/rag/documents",
        json={"title": title, "content": content, **body},
        headers=tenant.headers,
    )
    assert reply.status_code == 201, reply.text
    created: Json = reply.json()
    return created


def masked(text: str, holdings: Holdings) -> str:
    for value in (holdings.tenant_id, holdings.document_id, holdings.chunk_id, holdings.secret):
        text = text.replace(value, "<value>")
    return TIMING.sub(r'"\1":0', text.replace(holdings.collection, "<value>"))


async def leaks(
    http: AsyncClient, settings: Settings, attacker: Seeded, victim: Seeded
) -> list[str]:
    """Each attack whose reply with the victim's values differs from the reply with values
    nobody holds, or shows the victim's secret."""
    found = []
    for name, build, extra in ATTACKS:
        replies = []
        for holdings in (victim.holdings, nobody()):
            headers = {**attacker.tenant.headers, **{k: holdings.tenant_id for k in extra}}
            tenant = TenantClient(attacker.tenant.http, attacker.tenant.tenant_id, headers)
            reply = await send(http, tenant, settings, build(holdings))
            assert reply.status_code < 500, (name, reply.text)
            replies.append((reply.status_code, masked(reply.text, holdings)))
        if replies[0] != replies[1]:
            found.append(f"{name}: {replies[0]} != {replies[1]}")
        elif victim.holdings.secret in replies[0][1]:
            found.append(f"{name}: shows the secret")
    return found


async def documents_of(http: AsyncClient, seed: Seeded) -> list[Json]:
    reply = await http.get("/api/rag/documents", params={"limit": 100}, headers=seed.tenant.headers)
    assert reply.status_code == 200, reply.text
    items: list[Json] = reply.json()["items"]
    return sorted(items, key=lambda d: str(d["document_id"]))


async def every_attack(
    seed_http: AsyncClient, attack_http: AsyncClient, settings: Settings, sessions: SessionMaker
) -> tuple[list[str], bool, list[str]]:
    """Seed three tenants through `seed_http`, attack through `attack_http`: (leaks found,
    whether every victim's documents were left as they were, the tenants' ids)."""
    seeds = [await seeded(seed_http, settings, sessions) for _ in range(3)]
    before = [await documents_of(seed_http, seed) for seed in seeds]
    found = []
    for attacker in seeds:
        for victim in seeds:
            if victim is not attacker:
                found += await leaks(attack_http, settings, attacker, victim)
    after = [await documents_of(seed_http, seed) for seed in seeds]
    return found, before == after, [seed.tenant.tenant_id for seed in seeds]


async def test_no_attack_through_any_door_reaches_another_tenant(
    http: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    found, unchanged, _ = await every_attack(http, http, settings, sessions)
    assert found == []
    assert unchanged


async def test_the_guard_the_suite_reports_leaks_when_rls_is_bypassed(
    settings: Settings, database: DatabaseUrls, app_engine: AsyncEngine, embedder: WordHashEmbedder
) -> None:
    """Seeded as usual (committed: the superuser's app must see the rows), then attacked
    through an app whose sessions belong to the superuser, for whom RLS does not apply."""
    name = make_url(database.app_url).database
    assert name is not None
    superuser = create_engine(with_database(database.superuser_url, name), pool_size=2)
    committed = create_sessionmaker(app_engine)
    # past row-level security, and past the tenant the ORM's statements name besides
    bypassing = without_tenant_predicates(create_sessionmaker(superuser))
    tenants: list[str] = []
    try:
        async with (
            running_app(mcp_settings(settings), committed, embedder) as rls_app,
            running_app(mcp_settings(settings), bypassing, embedder) as bare,
            AsyncClient(transport=ASGITransport(rls_app), base_url=f"http://{HOST}") as seed_http,
            AsyncClient(transport=ASGITransport(bare), base_url=f"http://{HOST}") as attack_http,
        ):
            found, _, tenants = await every_attack(seed_http, attack_http, settings, committed)
        assert any(leak.startswith("read document") for leak in found), found
    finally:
        async with superuser.begin() as conn:
            await conn.execute(text("delete from tenants where id = any(:ids)"), {"ids": tenants})
        await superuser.dispose()
