"""Three tenants holding the same documents (same titles, texts and external ids) plus one
private document each: through every tool and resource, a tenant sees its own rows only, and
another tenant's id is "not found" exactly like an unknown one."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

import pytest
from httpx import AsyncClient

from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.conftest import TenantClient, new_tenant
from tests.mcp.conftest import Json, ingest, rpc, structured, tool_error

pytestmark = pytest.mark.on_citus

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
SHARED = {
    "handbook": "Vacation requests go to your manager two weeks ahead; the launch code policy "
    "says codes are never shared.",
    "security": "Rotate the launch code every quarter and keep the secret in the vault.",
}
QUERIES = ("launch code secret", "vacation manager", "vault rotation")


@dataclass(frozen=True, slots=True)
class Seeded:
    tenant: TenantClient
    secret: str
    private_document: str
    private_collection: str


async def seeded(http: AsyncClient, settings: Settings, sessions: SessionMaker) -> Seeded:
    tenant = await new_tenant(http, settings, sessions)
    for name, text in SHARED.items():
        await ingest(tenant, name.title(), text, external_id=name, collection="shared")
    secret = f"zebra{uuid.uuid4().hex[:10]}"
    collection = f"private-{tenant.tenant_id}"
    private = await ingest(
        tenant,
        "Launch code",
        f"The launch code secret for this tenant is {secret}.",
        external_id="handbook",
        collection=collection,
    )
    return Seeded(tenant, secret, private["document_id"], collection)


async def everything_seen(http: AsyncClient, seed: Seeded) -> str:
    """Every tool's and resource's reply for the tenant, as one JSON text."""
    tenant, replies = seed.tenant, []
    for query in QUERIES:
        for tool, args in (
            ("search_similar", {"limit": 20}),
            ("semantic_search", {"limit": 20, "threshold": 0.0}),
            ("search", {"max_results": 20, "mode": "hybrid"}),
            ("search", {"max_results": 20, "mode": "keyword"}),
            ("get_context", {"max_results": 20, "max_tokens": 4000}),
        ):
            replies.append(await structured(http, tenant, tool, query=query, **args))
    found_ids = set(UUID.findall(json.dumps(replies)))
    for found in sorted(found_ids):
        replies.append(await structured(http, tenant, "fetch", id=found))
        replies.append(
            await structured(
                http, tenant, "find_similar", id=found, min_similarity=0.0, search_scope="all"
            )
        )
    replies.append(await structured(http, tenant, "find_duplicates", similarity_threshold=0.0))
    for uri in ("rag://collections", f"rag://collections/{seed.private_collection}"):
        replies.append(await read(http, tenant, uri))
    return json.dumps(replies)


async def read(http: AsyncClient, tenant: TenantClient, uri: str) -> Json:
    response = await rpc(http, "resources/read", {"uri": uri}, headers=tenant.headers)
    assert response.status_code == 200, response.text
    body: Json = response.json()
    return body


async def test_no_tool_or_resource_shows_another_tenants_rows(
    http: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    seeds = [await seeded(http, settings, sessions) for _ in range(3)]
    seen = {seed.tenant.tenant_id: await everything_seen(http, seed) for seed in seeds}
    ids = {tenant: set(UUID.findall(text)) for tenant, text in seen.items()}
    for seed in seeds:
        mine = seen[seed.tenant.tenant_id]
        assert seed.secret in mine
        assert seed.private_document in ids[seed.tenant.tenant_id]
        for other in seeds:
            if other is seed:
                continue
            assert other.secret not in mine
            assert other.private_collection not in mine
            assert not ids[seed.tenant.tenant_id] & ids[other.tenant.tenant_id]


async def test_another_tenants_ids_are_not_found_like_unknown_ones(
    http: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    mine, theirs = [await seeded(http, settings, sessions) for _ in range(2)]
    their_chunk = (await structured(http, theirs.tenant, "search", query="launch code"))["results"]
    for foreign in (theirs.private_document, their_chunk[0]["id"]):
        for tool in ("fetch", "find_similar"):
            message = await tool_error(http, mine.tenant, tool, id=foreign)
            unknown = uuid.uuid4()
            expected = await tool_error(http, mine.tenant, tool, id=str(unknown))
            assert message == expected.replace(str(unknown), foreign)
    for uri in (
        f"rag://documents/{theirs.private_document}",
        f"rag://collections/{theirs.private_collection}",
    ):
        error = (await read(http, mine.tenant, uri))["error"]
        assert error["code"] == -32602, error
        assert "no " in error["message"]
