"""Bad JSON bodies and batches: clear 422/413 problems, and nothing stored by a refusal."""

from __future__ import annotations

from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.api.calls import DOCUMENTS, assert_problem, ingest, keyword_hits, total
from tests.conftest import TenantClient, app_client
from tests.fakes import WordHashEmbedder

BATCH = f"{DOCUMENTS}/batch"


async def test_malformed_json_is_a_422_problem(tenant_a: TenantClient) -> None:
    response = await tenant_a.http.post(
        DOCUMENTS,
        content=b'{"title": "x", "content": ',
        headers={**tenant_a.headers, "Content-Type": "application/json"},
    )
    problem = assert_problem(response, 422)
    assert problem["errors"]
    array = await tenant_a.http.post(DOCUMENTS, json=["content"], headers=tenant_a.headers)
    assert_problem(array, 422)
    assert await total(tenant_a) == 0


INVALID_BODIES: dict[str, tuple[dict[str, object], str]] = {
    "title-number": ({"content": "ok", "title": 5}, "title"),
    "content-list": ({"content": ["ok"]}, "content"),
    "metadata-list": ({"content": "ok", "metadata": [1]}, "metadata"),
    "collection-empty": ({"content": "ok", "collection": ""}, "collection"),
    "unknown-type": ({"content": "ok", "source_type": "rtf"}, "source_type"),
    "bad-url": ({"content": "ok", "source_url": "not a url"}, "source_url"),
    "unknown-field": ({"content": "ok", "colour": "red"}, "colour"),
    "missing-content": ({"title": "no body"}, "content"),
    "empty-content": ({"content": ""}, "content"),
    "title-nul": ({"content": "ok", "title": "a\x00b"}, "title"),
    "external-id-nul": ({"content": "ok", "external_id": "a\x00b"}, "external_id"),
    "collection-nul": ({"content": "ok", "collection": "a\x00b"}, "collection"),
    "metadata-nul": ({"content": "ok", "metadata": {"k": ["a\x00b"]}}, "metadata"),
    "chunk-embedding": (
        {"content": "ok", "chunks": [{"content": "c", "embedding": "v"}]},
        "chunks.0.embedding",
    ),
}


async def test_invalid_body_is_a_422_naming_the_field(tenant_a: TenantClient) -> None:
    for case, (body, field) in INVALID_BODIES.items():
        response = await ingest(tenant_a, **body)
        problem = assert_problem(response, 422)
        assert field in [error["field"] for error in problem["errors"]], case
        assert field in problem["detail"], case
    assert await total(tenant_a) == 0


async def test_content_the_parser_refuses_is_a_problem(tenant_a: TenantClient) -> None:
    blank = await ingest(tenant_a, content=" \n\t \n ", external_id="blank")
    assert_problem(blank, 422)
    pdf = await ingest(tenant_a, content="%PDF-1.7 pretend", source_type="pdf")
    assert_problem(pdf, 415)
    assert await total(tenant_a) == 0


async def test_batch_reports_each_document(tenant_a: TenantClient) -> None:
    documents = [
        {"content": "Sandpipers probe the mudflats.", "external_id": "one"},
        {"content": "   \n\t  ", "external_id": "blank"},
        {"content": "Curlews call across the estuary.", "external_id": "two"},
    ]
    response = await tenant_a.http.post(
        BATCH, json={"documents": documents}, headers=tenant_a.headers
    )
    assert response.status_code == 200, response.text
    reply = response.json()
    assert (reply["succeeded"], reply["failed"]) == (2, 1)
    assert [item["index"] for item in reply["results"]] == [0, 1, 2]
    assert [item["status"] for item in reply["results"]] == [201, 422, 201]
    ok, failed, also_ok = reply["results"]
    assert ok["result"]["external_id"] == "one"
    assert also_ok["result"]["external_id"] == "two"
    assert (failed["result"], bool(failed["error"])) == (None, True)
    assert await total(tenant_a) == 2
    assert len(await keyword_hits(tenant_a, "curlews")) == 1
    again = await tenant_a.http.post(BATCH, json={"documents": documents}, headers=tenant_a.headers)
    assert [item["status"] for item in again.json()["results"]] == [200, 422, 200]
    assert again.json()["results"][0]["result"]["embedded"] == 0


async def test_batch_with_an_invalid_document_is_refused_whole(tenant_a: TenantClient) -> None:
    documents = [{"content": "Fine."}, {"content": "Fine too.", "colour": "red"}]
    response = await tenant_a.http.post(
        BATCH, json={"documents": documents}, headers=tenant_a.headers
    )
    problem = assert_problem(response, 422)
    assert "documents.1.colour" in [error["field"] for error in problem["errors"]]
    empty = await tenant_a.http.post(BATCH, json={"documents": []}, headers=tenant_a.headers)
    assert_problem(empty, 422)
    assert await total(tenant_a) == 0


async def test_batch_over_the_limit_is_413_and_stores_nothing(
    tenant_a: TenantClient, settings: Settings, sessions: SessionMaker
) -> None:
    two = settings.model_copy(update={"batch_max_documents": 2})
    documents = [{"content": f"Plover {n}.", "external_id": f"p{n}"} for n in range(3)]
    async with app_client(two, sessions, WordHashEmbedder()) as http:
        response = await http.post(BATCH, json={"documents": documents}, headers=tenant_a.headers)
        assert_problem(response, 413)
        fits = await http.post(BATCH, json={"documents": documents[:2]}, headers=tenant_a.headers)
        assert fits.json()["succeeded"] == 2
    assert await total(tenant_a) == 2
