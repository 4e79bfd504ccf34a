"""Document permissions under attack, through every door, and a guard that proves the suite
sees a leak.

One tenant holds documents for three groups (hr, legal, board), one for hr and legal together,
one for a single user (alice) and one for everybody; each carries a canary string in its title
and text. Six callers (an outsider, one per group, hr+legal, alice) each attack every document
they may not see: its ids in paths, bodies and filters, its collection, its external id at
ingest, every REST endpoint and every MCP tool and resource. Each attack is sent twice, once
with the invisible document's values and once with values nobody holds: the two replies must be
the same (status and body, ids and timings masked), no reply may hold the canary of a document
the caller may not see, and the documents are unchanged afterwards. Each caller's own search
must find exactly the canaries it may see (so the suite cannot pass by seeing nothing).

The guard replaces the policies of documents and chunks by the tenant condition alone (inside
a transaction that is rolled back) and runs the same attacks: the suite must report leaks.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest
from httpx import ASGITransport, AsyncClient, Response
from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker

from app.auth import issue_token
from app.db import policies
from app.db.engine import create_engine
from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.conftest import (
    SEQUENTIAL,
    DatabaseUrls,
    TenantClient,
    registered_tenant,
    running_app,
)
from tests.fakes import WordHashEmbedder
from tests.mcp.conftest import HOST, mcp_settings
from tests.reliability.conftest import send
from tests.reliability.endpoints import Call, Door, mcp_call

pytestmark = pytest.mark.on_citus

# name -> (access list, topic word only its text holds)
DOCUMENTS = {
    "open": ([], "welcome"),
    "hr": (["group:hr"], "salary"),
    "legal": (["group:legal"], "lawsuit"),
    "board": (["group:board"], "merger"),
    "hr-legal": (["group:hr", "group:legal"], "severance"),
    "alice": (["user:alice"], "diary"),
}
# name -> (subject, groups)
CALLERS = {
    "outsider": ("bob", []),
    "hr": ("carol", ["hr"]),
    "legal": ("dan", ["legal"]),
    "board": ("erin", ["board"]),
    "hr+legal": ("frank", ["hr", "legal"]),
    "alice": ("alice", []),
}
SCOPES = ["rag:search", "rag:ingest"]
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIMING = re.compile(r'"([a-z_]*_ms)":\s*[0-9.e-]+')


@dataclass(frozen=True, slots=True)
class Holdings:
    """What an attacker may aim at: a document's ids, names and topic."""

    document_id: str
    chunk_id: str
    collection: str
    external_id: str
    topic: str


@dataclass(frozen=True, slots=True)
class Seeded:
    tenant_id: str
    holdings: dict[str, Holdings]  # by document name
    canaries: dict[str, str]  # by document name

    def invisible_to(self, caller: str) -> list[str]:
        subject, groups = CALLERS[caller]
        mine = {f"user:{subject}", *(f"group:{g}" for g in groups)}
        return [n for n, (access, _) in DOCUMENTS.items() if access and not mine & set(access)]


def nobody() -> Holdings:
    """Values of the same shapes that no document holds."""
    return Holdings(
        str(uuid.uuid4()), str(uuid.uuid4()), f"c-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex, "kiwi"
    )


def caller_client(
    http: AsyncClient, settings: Settings, tenant_id: str, caller: str
) -> TenantClient:
    subject, groups = CALLERS[caller]
    token = issue_token(
        settings,
        tenant_id=tenant_id,
        subject=subject,
        scopes=SCOPES,
        groups=groups,
        ttl_seconds=600,
    )
    return TenantClient(http, tenant_id, {"Authorization": f"Bearer {token}"})


def everything_client(http: AsyncClient, settings: Settings, tenant_id: str) -> TenantClient:
    token = issue_token(
        settings,
        tenant_id=tenant_id,
        subject="librarian",
        scopes=[*SCOPES, "rag:all-documents"],
        ttl_seconds=600,
    )
    return TenantClient(http, tenant_id, {"Authorization": f"Bearer {token}"})


def mcp_read(uri: str) -> Call:
    body = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri}}
    return Call("POST", "/mcp", json=body, door=Door.MCP)


def _search(path: str, **body: object) -> Call:
    return Call("POST", path, json=body)


Attack = tuple[str, Callable[[Holdings], Call]]

ATTACKS: list[Attack] = [
    ("read document", lambda h: Call("GET", f"/api/rag/documents/{h.document_id}")),
    (
        "similar documents",
        lambda h: Call(
            "GET",
            f"/api/rag/documents/{h.document_id}/similar",
            params={"search_scope": "all", "min_similarity": "0"},
        ),
    ),
    (
        "similar chunks",
        lambda h: Call(
            "GET",
            f"/api/rag/chunks/{h.chunk_id}/similar",
            params={"search_scope": "all", "min_similarity": "0"},
        ),
    ),
    *(
        (
            f"search {mode}, document filter",
            lambda h, mode=mode: _search(
                "/api/rag/search",
                query="launch code quarterly",
                mode=mode,
                max_results=20,
                threshold=0.1,
                filters={"document_ids": [h.document_id]},
            ),
        )
        for mode in ("vector", "keyword", "hybrid")
    ),
    *(
        (  # a collection filter takes the direct path (app/retrieval/search.py)
            f"search {mode}, its collection",
            lambda h, mode=mode: _search(
                "/api/rag/search",
                query=f"{h.topic} quarterly",
                mode=mode,
                threshold=0.0,
                collections=[h.collection],
            ),
        )
        for mode in ("vector", "keyword", "hybrid")
    ),
    (
        "search, diverse",
        lambda h: _search(
            "/api/rag/search",
            query="launch code",
            mode="keyword",
            diversity=0.5,
            filters={"document_ids": [h.document_id]},
        ),
    ),
    (
        "context, document filter",
        lambda h: _search(
            "/api/rag/context", query="launch code", filters={"document_ids": [h.document_id]}
        ),
    ),
    (
        "documents, its collection",
        lambda h: Call("GET", "/api/rag/documents", params={"collection": h.collection}),
    ),
    (
        "dedupe merge, its collection",
        lambda h: _search(
            "/api/rag/dedupe",
            collections=[h.collection],
            similarity_threshold=0.0,
            dry_run=False,
            merge_strategy="keep_newest",
            across_access=True,
        ),
    ),
    (
        "ingest its external id",
        lambda h: _search(
            "/api/rag/documents",
            content="A note.",
            external_id=h.external_id,
            collection=h.collection,
        ),
    ),
    (
        "batch ingest its external id",
        lambda h: _search(
            "/api/rag/documents/batch",
            documents=[
                {"content": "A note.", "external_id": h.external_id, "collection": h.collection}
            ],
        ),
    ),
    ("jobs", lambda h: Call("GET", "/api/rag/jobs")),
    ("mcp fetch chunk", lambda h: mcp_call("fetch", id=h.chunk_id)),
    ("mcp fetch document", lambda h: mcp_call("fetch", id=h.document_id)),
    ("mcp find_similar", lambda h: mcp_call("find_similar", id=h.document_id, min_similarity=0.0)),
    (
        "mcp find_similar chunk",
        lambda h: mcp_call("find_similar", id=h.chunk_id, min_similarity=0.0, search_scope="all"),
    ),
    (
        "mcp search, filters",
        lambda h: mcp_call(
            "search",
            query="launch code",
            mode="keyword",
            collections=[h.collection],
            filters={"document_ids": [h.document_id]},
        ),
    ),
    (
        "mcp find_duplicates",
        lambda h: mcp_call("find_duplicates", collections=[h.collection], similarity_threshold=0.0),
    ),
    ("mcp document resource", lambda h: mcp_read(f"rag://documents/{h.document_id}")),
    ("mcp collection resource", lambda h: mcp_read(f"rag://collections/{h.collection}")),
    ("mcp collections resource", lambda h: mcp_read("rag://collections")),
    # Writes last: where they leak (the guard), they change what the next attacks meet.
    (
        "patch access",
        lambda h: Call("PATCH", f"/api/rag/documents/{h.document_id}", json={"access": []}),
    ),
    (
        "patch metadata",
        lambda h: Call("PATCH", f"/api/rag/documents/{h.document_id}", json={"metadata": {"x": 1}}),
    ),
    ("delete document", lambda h: Call("DELETE", f"/api/rag/documents/{h.document_id}")),
]


# Questions about the invisible document's topic: the query differs from the one with values
# nobody holds, so only the canary check applies (no reply may show one).
TOPIC_ATTACKS: list[Attack] = [
    *(
        (
            f"search {mode} for its topic",
            lambda h, mode=mode: _search(
                "/api/rag/search", query=h.topic, mode=mode, max_results=20, threshold=0.1
            ),
        )
        for mode in ("vector", "keyword", "hybrid")
    ),
    ("context for its topic", lambda h: _search("/api/rag/context", query=h.topic)),
    ("mcp search_similar", lambda h: mcp_call("search_similar", query=h.topic, limit=20)),
    (
        "mcp semantic_search",
        lambda h: mcp_call("semantic_search", query=h.topic, limit=20, threshold=0.0),
    ),
    ("mcp get_context", lambda h: mcp_call("get_context", query=h.topic)),
]


async def seed(http: AsyncClient, settings: Settings, sessions: SessionMaker) -> Seeded:
    """The documents, ingested by a caller who sees everything: in a shared collection, and
    each restricted one also in a collection of its own."""
    tenant_id = await registered_tenant(sessions, tier="enterprise")  # ~2,000 requests
    librarian = everything_client(http, settings, tenant_id)
    holdings: dict[str, Holdings] = {}
    canaries: dict[str, str] = {}
    for name, (access, topic) in DOCUMENTS.items():
        canary = f"zq{uuid.uuid4().hex[:12]}"
        canaries[name] = canary
        collection = "shared" if not access else f"{name}-files"
        body = {
            "title": f"{name} {canary}",
            "content": f"Launch code quarterly {topic} note {canary}. The {topic} plan stands.",
            "external_id": f"policy-{name}",
            "collection": collection,
            "access": access,
        }
        reply = await http.post("/api/rag/documents", json=body, headers=librarian.headers)
        assert reply.status_code == 201, reply.text
        document_id = reply.json()["document_id"]
        found = await http.post(
            "/api/rag/search",
            headers=librarian.headers,
            json={"query": topic, "mode": "keyword", "filters": {"document_ids": [document_id]}},
        )
        [chunk] = found.json()["chunks"]
        holdings[name] = Holdings(
            document_id, chunk["chunk_id"], collection, f"policy-{name}", topic
        )
    return Seeded(tenant_id, holdings, canaries)


def masked(reply: Response, holdings: Holdings) -> tuple[int, str]:
    body = reply.text
    for value in (holdings.collection, holdings.external_id, holdings.topic):
        # whole names only: "legal-files" is not masked inside "hr-legal-files"
        body = re.sub(rf"(?<![\w-]){re.escape(value)}(?![\w-])", "<value>", body)
    body = TIMING.sub(r'"\1":0', UUID.sub("<id>", body))
    return reply.status_code, body


def shown(reply: Response, seeded: Seeded, names: list[str]) -> list[str]:
    return [name for name in names if seeded.canaries[name] in reply.text]


async def leaks(http: AsyncClient, settings: Settings, seeded: Seeded) -> list[str]:
    """Every attack of every caller on every document it may not see: the replies that differ
    from those for values nobody holds, and those that show a canary it may not see."""
    found: list[str] = []
    for caller in CALLERS:
        client = caller_client(http, settings, seeded.tenant_id, caller)
        hidden = seeded.invisible_to(caller)
        for target in hidden:
            for name, build in ATTACKS:
                replies = []
                for holdings in (seeded.holdings[target], nobody()):
                    reply = await send(http, client, settings, build(holdings))
                    assert reply.status_code < 500, (caller, name, reply.text)
                    await remove_created(http, client, reply)
                    if seen := shown(reply, seeded, hidden):
                        found.append(f"{caller} / {name} on {target}: shows {seen}")
                    replies.append(masked(reply, holdings))
                if replies[0] != replies[1]:
                    found.append(f"{caller} / {name} on {target}: {replies[0]} != {replies[1]}")
            for name, build in TOPIC_ATTACKS:
                reply = await send(http, client, settings, build(seeded.holdings[target]))
                assert reply.status_code == 200, (caller, name, reply.text)
                if seen := shown(reply, seeded, hidden):
                    found.append(f"{caller} / {name} on {target}: shows {seen}")
    return found


async def remove_created(http: AsyncClient, client: TenantClient, reply: Response) -> None:
    """Delete what an ingest attack wrote (a document the attacker may see), so that the next
    attacks meet the tenant as it was."""
    if reply.request.method != "POST" or not reply.request.url.path.startswith(
        "/api/rag/documents"
    ):
        return
    body = reply.json()
    results = [item.get("result") or {} for item in body.get("results", [])] or [body]
    for result in results:
        if document_id := result.get("document_id"):
            gone = await http.delete(f"/api/rag/documents/{document_id}", headers=client.headers)
            assert gone.status_code == 204, gone.text


async def sees(http: AsyncClient, settings: Settings, seeded: Seeded, caller: str) -> set[str]:
    """The canaries a caller's broad searches and lists show."""
    client = caller_client(http, settings, seeded.tenant_id, caller)
    texts = []
    for mode in ("vector", "keyword", "hybrid"):
        reply = await http.post(
            "/api/rag/search",
            headers=client.headers,
            json={
                "query": "launch code quarterly note",
                "mode": mode,
                "max_results": 20,
                "threshold": 0.1,
            },
        )
        assert reply.status_code == 200, reply.text
        texts.append(reply.text)
    listing = await http.get("/api/rag/documents", headers=client.headers)
    texts.append(listing.text)
    return {name for name, canary in seeded.canaries.items() if all(canary in t for t in texts)}


async def snapshot(http: AsyncClient, settings: Settings, seeded: Seeded) -> list[str]:
    librarian = everything_client(http, settings, seeded.tenant_id)
    reply = await http.get("/api/rag/documents", params={"limit": 200}, headers=librarian.headers)
    items = reply.json()["items"]
    return sorted(
        json.dumps([i["document_id"], i["title"], i["access"], i["metadata"], i["chunks"]])
        for i in items
        if i["title"].split()[0] in DOCUMENTS
    )


async def test_no_caller_reaches_a_document_it_may_not_see_through_any_door(
    http: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    seeded = await seed(http, settings, sessions)
    before = await snapshot(http, settings, seeded)
    for caller in CALLERS:
        expected = set(DOCUMENTS) - set(seeded.invisible_to(caller))
        assert await sees(http, settings, seeded, caller) == expected, caller
    found = await leaks(http, settings, seeded)
    assert not found, "\n".join(found)
    assert await snapshot(http, settings, seeded) == before
    everything = everything_client(http, settings, seeded.tenant_id)
    listing = await http.get("/api/rag/documents", headers=everything.headers)
    assert all(canary in listing.text for canary in seeded.canaries.values())


@asynccontextmanager
async def without_access_condition(database: DatabaseUrls) -> AsyncIterator[SessionMaker]:
    """Sessions of the tables' owner (row-level security is forced on it too) inside one
    transaction whose policies on documents and chunks check the tenant only; rolled back."""
    engine = create_engine(database.owner_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            outer = await conn.begin()
            await conn.execute(SEQUENTIAL)
            for table in ("documents", "chunks"):
                await conn.execute(
                    text(
                        f"ALTER POLICY tenant_isolation ON {table}"
                        f" USING ({policies.TENANT}) WITH CHECK ({policies.TENANT})"
                    )
                )
            try:
                yield async_sessionmaker(
                    bind=conn, expire_on_commit=False, join_transaction_mode="create_savepoint"
                )
            finally:
                if outer.is_active:
                    await outer.rollback()
    finally:
        await engine.dispose()


async def test_the_guard_the_suite_reports_leaks_without_the_access_condition(
    settings: Settings, database: DatabaseUrls, embedder: WordHashEmbedder
) -> None:
    async with without_access_condition(database) as sessions:
        app_settings = mcp_settings(settings, access_flush_seconds=3600)
        async with (
            running_app(app_settings, sessions, embedder) as app,
            AsyncClient(transport=ASGITransport(app), base_url=f"http://{HOST}") as http,
        ):
            seeded = await seed(http, settings, sessions)
            found = await leaks(http, settings, seeded)
            # Rolled back before the app's lifespan ends: its last flush of returned counts
            # (on another connection) must not wait for the policies' locks.
            await sessions.kw["bind"].rollback()
    kinds = {leak.split(" / ")[1].split(" on ")[0] for leak in found}
    assert {"read document", "mcp fetch document", "delete document"} <= kinds, sorted(kinds)
    assert any("shows" in leak for leak in found), found


def test_every_attack_has_a_unique_name() -> None:
    names = [name for name, _ in ATTACKS + TOPIC_ATTACKS]
    assert len(names) == len(set(names))
