"""Every door on the same operations: HTTP, MCP and the in-process command line give the same
answers for the same question on the same data, with the same defaults (the MCP tools'
documented exceptions named), and do the same bookkeeping."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from httpx import AsyncClient
from typer.testing import CliRunner

from app.cli import local
from app.cli.commands import app as rag
from app.inputs.search import ContextInput, SearchInput
from app.inputs.similar import DedupeInput, SimilarInput
from app.resources import Resources
from app.settings import Settings
from tests.conftest import TenantClient, token_for
from tests.mcp.conftest import Json, ingest, rpc, structured, tool_error

pytestmark = pytest.mark.on_citus

TEXTS = {
    "Tokens": "Bearer tokens authenticate every REST request; rotate signing keys yearly.",
    "Limits": "Each tenant may send one hundred requests per minute before a 429 reply.",
    "Vectors": "Chunks are embedded and stored in PostgreSQL with pgvector for search.",
    "Citations": "Every chunk cites its document: title, page and section path.",
    "Tenants": "Row-level security keeps every tenant's documents and chunks apart.",
    "Tenants again": "Row-level security keeps every tenant's documents and chunks apart!",
}
QUERY = "how are tenant requests authenticated and kept apart"
SEARCH_KEYS = ("total_found", "avg_similarity", "mode", "model", "threshold", "shortfall")


async def seed(tenant: TenantClient) -> dict[str, str]:
    """The documents (half of them in collection `b`); their ids by title."""
    ids = {}
    for n, (title, text) in enumerate(TEXTS.items()):
        body = {"collection": "b"} if n % 2 else {}
        url = f"https://docs.example.com/{n}"
        ids[title] = (await ingest(tenant, title, text, source_url=url, **body))["document_id"]
    return ids


async def rest(tenant: TenantClient, path: str, **body: object) -> Json:
    response = await tenant.http.post(f"/api/rag/{path}", json=body, headers=tenant.headers)
    assert response.status_code == 200, response.text
    reply: Json = response.json()
    return reply


async def get(tenant: TenantClient, path: str, **params: Any) -> Json:
    response = await tenant.http.get(f"/api/rag/{path}", params=params, headers=tenant.headers)
    assert response.status_code == 200, response.text
    reply: Json = response.json()
    return reply


def dumped(reply: Any) -> Json:
    found: Json = reply.model_dump(mode="json")
    return found


def ranked(chunks: list[Json]) -> list[tuple[str, float, float]]:
    return [(c["chunk_id"], c["similarity"], c["score"]) for c in chunks]


SEARCHES: list[Json] = [
    {},  # every default
    {"max_results": 3, "threshold": 0.1},
    {"mode": "keyword", "max_results": 4},
    {"mode": "hybrid", "fusion": "rrf"},
    {"mode": "hybrid", "vector_weight": 0.2, "max_results": 6},
    {"diversity": 0.5, "max_results": 4, "threshold": 0.1},
    {"ef_search": 1, "max_results": 6, "threshold": 0.1},
    {"collections": ["b"], "filters": {"metadata": {"missing": "value"}}},
]


@pytest.mark.parametrize("options", SEARCHES, ids=lambda o: ",".join(o) or "defaults")
async def test_search_is_the_same_through_http_and_the_command_line(
    http: AsyncClient, tenant: TenantClient, operator: Resources, options: Json
) -> None:
    await seed(tenant)
    api = await rest(tenant, "search", query=QUERY, **options)
    asked = SearchInput.model_validate({"query": QUERY, **options})
    cli = dumped(await local.search_on(operator, tenant.tenant_id, asked))
    assert ranked(cli["chunks"]) == ranked(api["chunks"])
    assert cli["chunks"] == api["chunks"]
    assert {k: cli[k] for k in SEARCH_KEYS} == {k: api[k] for k in SEARCH_KEYS}


async def test_the_search_tools_are_the_search_with_their_documented_defaults(
    http: AsyncClient, tenant: TenantClient
) -> None:
    await seed(tenant)
    api = await rest(tenant, "search", query=QUERY)
    tool = await structured(http, tenant, "search_similar", query=QUERY)
    assert [d["id"] for d in tool["documents"]] == [c["chunk_id"] for c in api["chunks"]]
    # semantic_search: 0.7 unless told otherwise (docs/MCP.md), and down to 0 (the API: 0.1)
    api = await rest(tenant, "search", query=QUERY, threshold=0.7)
    tool = await structured(http, tenant, "semantic_search", query=QUERY)
    assert [d["id"] for d in tool["documents"]] == [c["chunk_id"] for c in api["chunks"]]
    tool = await structured(http, tenant, "semantic_search", query=QUERY, threshold=0.0, limit=6)
    assert tool["count"] == 6
    # search (the connectors' tool): hybrid unless told otherwise (docs/MCP.md)
    for mode in (None, "hybrid", "vector", "keyword"):
        api = await rest(tenant, "search", query=QUERY, mode=mode or "hybrid", max_results=4)
        asked = {"mode": mode} if mode else {}
        tool = await structured(http, tenant, "search", query=QUERY, max_results=4, **asked)
        assert [r["id"] for r in tool["results"]] == [c["chunk_id"] for c in api["chunks"]]


@pytest.mark.parametrize(
    "options",
    [{}, {"style": "inline", "max_tokens": 60}, {"style": "compact", "collections": ["b"]}],
    ids=lambda o: ",".join(o) or "defaults",
)
async def test_context_is_the_same_through_every_door(
    http: AsyncClient, tenant: TenantClient, operator: Resources, options: Json
) -> None:
    await seed(tenant)
    api = await rest(tenant, "context", query=QUERY, **options)
    tool = await structured(http, tenant, "get_context", query=QUERY, **options)
    asked = ContextInput.model_validate({"query": QUERY, **options})
    cli = dumped(await local.context_on(operator, tenant.tenant_id, asked))
    for key in ("context", "metrics", "total_found", "dropped"):
        assert tool[key] == cli[key] == api[key], key
    assert cli["citations"] == api["citations"]
    assert cli["chunks"] == api["chunks"]
    keys = ("number", "document_id", "title", "text", "pages", "source_url")
    assert [{k: c[k] for k in keys} for c in tool["citations"]] == [
        {k: c[k] for k in keys} for c in api["citations"]
    ]


@pytest.mark.parametrize("kind", ["chunk", "document"])
async def test_similar_items_are_the_same_through_every_door(
    http: AsyncClient, tenant: TenantClient, operator: Resources, kind: str
) -> None:
    ids = await seed(tenant)
    document_id = ids["Tenants"]
    if kind == "chunk":
        [chunk] = (await rest(tenant, "search", query=TEXTS["Tenants"], max_results=1))["chunks"]
        item_id = chunk["chunk_id"]
    else:
        item_id = document_id
    questions: list[Json] = [{}, {"min_similarity": 0.0, "search_scope": "all", "top_k": 3}]
    for asked in questions:
        api = await get(tenant, f"{kind}s/{item_id}/similar", **asked)
        tool = await structured(http, tenant, "find_similar", id=item_id, **asked)
        fields = {"scope" if k == "search_scope" else k: v for k, v in asked.items()}
        cli = SimilarInput.model_validate(fields)
        on = await local.similar_on(
            operator, tenant.tenant_id, uuid.UUID(item_id), cli, kind == "chunk"
        )
        assert dumped(on)["similar"] == api["similar"]
        assert [(s["chunk_id"], s["similarity"]) for s in tool["similar"]] == [
            (s["chunk_id"], s["similarity"]) for s in api["similar"]
        ]
    assert api["similar"], "the second question finds something"


async def test_duplicates_are_the_same_through_every_door(
    http: AsyncClient, tenant: TenantClient, operator: Resources
) -> None:
    ids = await seed(tenant)
    for asked in ({}, {"similarity_threshold": 0.9, "collections": ["b"]}):
        api = await rest(tenant, "dedupe", **asked)
        tool = await structured(http, tenant, "find_duplicates", **asked)
        cli = dumped(
            await local.dedupe_on(operator, tenant.tenant_id, DedupeInput.model_validate(asked))
        )
        assert cli == api
        keys = ("primary_id", "duplicate_ids", "avg_similarity", "differences")
        assert [{k: g[k] for k in keys} for g in tool["duplicate_groups"]] == [
            {k: g[k] for k in keys} for g in api["duplicate_groups"]
        ]
        assert tool["documents_examined"] == api["documents_examined"]
    found = {ids["Tenants"], ids["Tenants again"]}
    [group] = (await rest(tenant, "dedupe"))["duplicate_groups"]
    assert {group["primary_id"], *group["duplicate_ids"]} == found


async def test_documents_are_the_same_through_every_door(
    http: AsyncClient, tenant: TenantClient, operator: Resources
) -> None:
    ids = await seed(tenant)
    for collection, limit, offset in ((None, 50, 0), ("b", 2, 1)):
        asked = {"collection": collection} if collection else {}
        api = await get(tenant, "documents", limit=limit, offset=offset, **asked)
        page = await local.documents_on(
            operator.sessions, tenant.tenant_id, collection=collection, limit=limit, offset=offset
        )
        assert dumped(page) == api
    document_id = ids["Vectors"]
    api = await get(tenant, f"documents/{document_id}")
    cli = await local.document_on(operator.sessions, tenant.tenant_id, uuid.UUID(document_id))
    assert dumped(cli) == api
    fetched = await structured(http, tenant, "fetch", id=document_id)
    assert (fetched["title"], fetched["text"]) == (api["title"], TEXTS["Vectors"])
    assert await resource(http, tenant, f"rag://documents/{document_id}") == fetched
    listed = (await get(tenant, "collections"))["items"]
    shown = (await resource(http, tenant, "rag://collections"))["collections"]
    assert [(c["name"], c["documents"], c["chunks"]) for c in shown] == [
        (c["name"], c["documents"], c["chunks"]) for c in listed
    ]


async def resource(http: AsyncClient, tenant: TenantClient, uri: str) -> Json:
    """An MCP resource's JSON, read with a bare `resources/read`."""
    response = await rpc(http, "resources/read", {"uri": uri}, headers=tenant.headers)
    assert response.status_code == 200, response.text
    [content] = response.json()["result"]["contents"]
    found: Json = json.loads(content["text"])
    return found


async def test_every_door_counts_its_searches_and_the_documents_returned(
    http: AsyncClient, tenant: TenantClient, operator: Resources, settings: Settings
) -> None:
    ids = await seed(tenant)
    query = TEXTS["Vectors"]
    await rest(tenant, "search", query=query, max_results=1)
    await rest(tenant, "context", query=query, max_results=1)
    await structured(http, tenant, "search_similar", query=query, limit=1)
    await structured(http, tenant, "get_context", query=query, max_results=1)
    await local.search_on(operator, tenant.tenant_id, SearchInput(query=query, max_results=1))
    await local.context_on(operator, tenant.tenant_id, ContextInput(query=query, max_results=1))
    await operator.returns.flush(operator.sessions)
    document = await get(tenant, f"documents/{ids['Vectors']}")
    assert document["access_count"] == 6
    admin = {"Authorization": f"Bearer {token_for(settings, tenant.tenant_id, 'rag:admin')}"}
    stats = await http.get(f"/api/admin/tenants/{tenant.tenant_id}/stats", headers=admin)
    assert stats.status_code == 200, stats.text
    assert stats.json()["traffic"]["last_hour"]["searches"] == 6
    # the tenant's own view of its traffic (the console's overview) says the same
    own = await get(tenant, "usage")
    assert own["last_hour"] == stats.json()["traffic"]["last_hour"]
    assert len(own["hourly"]) == 24
    assert sum(hour["searches"] for hour in own["hourly"]) == 6


# A refused question: (the HTTP parameters or body, the MCP tool's arguments, the command's
# arguments), and the message every door gives (the input's own, app/inputs).
REFUSED_SIMILAR = [
    ({"top_k": 101}, ["--top-k", "101"], "Input should be less than or equal to 100"),
    ({"top_k": 0}, ["--top-k", "0"], "Input should be greater than or equal to 1"),
    (
        {"min_similarity": 1.5},
        ["--min-similarity", "1.5"],
        "Input should be less than or equal to 1",
    ),
    (
        {"search_scope": "nowhere"},
        ["--scope", "nowhere"],
        "Input should be 'current', 'shared' or 'all'",
    ),
]


@pytest.mark.parametrize(("asked", "argv", "message"), REFUSED_SIMILAR)
async def test_similar_items_refuse_the_same_input_with_the_same_message_on_every_door(
    http: AsyncClient, tenant: TenantClient, asked: Json, argv: list[str], message: str
) -> None:
    item = str(uuid.uuid4())
    response = await http.get(
        f"/api/rag/documents/{item}/similar", params=asked, headers=tenant.headers
    )
    assert response.status_code == 422, response.text
    [field] = asked
    assert [(e["field"], e["message"]) for e in response.json()["errors"]] == [(field, message)]
    said = await tool_error(http, tenant, "find_similar", id=item, **asked)
    assert field in said  # the MCP SDK checks a tool's arguments, in its own words around
    assert message in said  # the same message
    # the command refuses before it opens anything: no database, no model, no service
    cli = CliRunner().invoke(rag, ["similar", item, *argv, "--tenant", tenant.tenant_id])
    assert cli.exit_code == 2
    assert cli.stderr.strip() == f"error: invalid value for {argv[0]}: {message}"


REFUSED_SEARCHES = [
    ({"max_results": 101}, ["--max-results", "101"], "Input should be less than or equal to 100"),
    ({"threshold": 0.05}, ["--threshold", "0.05"], "Input should be greater than or equal to 0.1"),
    ({"ef_search": 1001}, ["--ef-search", "1001"], "Input should be less than or equal to 1000"),
]


@pytest.mark.parametrize(("asked", "argv", "message"), REFUSED_SEARCHES)
async def test_a_search_refuses_the_same_input_with_the_same_message_through_http_and_cli(
    http: AsyncClient, tenant: TenantClient, asked: Json, argv: list[str], message: str
) -> None:
    response = await tenant.http.post(
        "/api/rag/search", json={"query": QUERY, **asked}, headers=tenant.headers
    )
    assert response.status_code == 422, response.text
    [field] = asked
    assert [(e["field"], e["message"]) for e in response.json()["errors"]] == [(field, message)]
    for command in ("search", "context"):
        cli = CliRunner().invoke(rag, [command, QUERY, *argv, "--tenant", tenant.tenant_id])
        assert cli.exit_code == 2
        assert cli.stderr.strip() == f"error: invalid value for {argv[0]}: {message}"
