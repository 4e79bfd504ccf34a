"""POST /api/rag/search with the real local model: ranking, filters, thresholds, modes."""

from __future__ import annotations

from typing import Any

import pytest
from httpx import AsyncClient

from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.conftest import TenantClient, new_tenant

pytestmark = pytest.mark.on_citus

CORPUS = {
    "photosynthesis": "Plants convert sunlight, water and carbon dioxide into glucose and oxygen.",
    "volcano": "Magma rises through the crust and erupts as lava from a volcano.",
    "battery": "The automobile refuses to turn over when its battery is flat in winter.",
    "firmware": "Error code ZQX-981 appears in the firmware log of the router.",
    "bread": "Knead the dough, let it rise for an hour, then bake it at 220 degrees.",
    "football": "The striker scored twice in the second half of the final match.",
    "taxes": "Self-employed people must file their income declaration before May.",
    "whales": "Blue whales are the largest animals known to have ever lived.",
    "chess": "Castling moves the king two squares towards a rook on the first rank.",
    "coffee": "Arabica beans are grown at high altitude and roasted to bring out aroma.",
    "piano": "Practising scales slowly with a metronome improves finger independence.",
    "mars": "The rover collected rock samples from an ancient lake bed on Mars.",
    "engine": "Change the engine oil and the filter every ten thousand kilometres.",
    "memo": "Minutes of the quarterly meeting: the cafeteria menu changes, parking spaces are "
    "reassigned, and Halvorsen will review the budget for office furniture and new carpets.",
}


async def ingest_corpus(tenant: TenantClient, **extra: object) -> dict[str, str]:
    ids = {}
    for name, text in CORPUS.items():
        body = {"title": name.title(), "content": text, "external_id": name, **extra}
        response = await tenant.http.post("/api/rag/documents", json=body, headers=tenant.headers)
        assert response.status_code == 201, response.text
        ids[name] = response.json()["document_id"]
    return ids


async def search(tenant: TenantClient, **body: object) -> dict[str, Any]:
    response = await tenant.http.post("/api/rag/search", json=body, headers=tenant.headers)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def names(reply: dict[str, Any]) -> list[str]:
    return [chunk["external_id"] for chunk in reply["chunks"]]


@pytest.fixture
async def corpus_tenant(
    real_client: AsyncClient, settings: Settings, sessions: SessionMaker
) -> TenantClient:
    tenant = await new_tenant(real_client, settings, sessions)
    await ingest_corpus(tenant)
    return tenant


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("how do plants make food from light", "photosynthesis"),
        ("my car won't start on cold mornings", "battery"),
        ("largest creature on earth", "whales"),
        ("baking a loaf at home", "bread"),
        ("samples from the red planet", "mars"),
    ],
)
async def test_known_queries_find_their_documents(
    corpus_tenant: TenantClient, query: str, expected: str
) -> None:
    reply = await search(corpus_tenant, query=query, max_results=3)
    assert names(reply)[0] == expected


async def test_reply_carries_source_attribution_and_timings(corpus_tenant: TenantClient) -> None:
    reply = await search(corpus_tenant, query="volcanic eruptions", max_results=2)
    chunk = reply["chunks"][0]
    for field in (
        "chunk_id",
        "document_id",
        "external_id",
        "content",
        "similarity",
        "score",
        "title",
        "source_type",
        "source_url",
        "page_number",
        "section",
        "chunk_index",
        "total_chunks",
        "metadata",
    ):
        assert field in chunk
    assert chunk["title"] == "Volcano"
    assert reply["model"] == "local:all-MiniLM-L6-v2"
    timings = reply["timings"]
    assert timings["total_ms"] >= timings["embed_ms"] > 0
    assert reply["search_time_ms"] == timings["total_ms"]
    sims = [c["similarity"] for c in reply["chunks"]]
    assert reply["avg_similarity"] == pytest.approx(sum(sims) / len(sims), abs=1e-5)


async def test_results_are_sorted_by_score(corpus_tenant: TenantClient) -> None:
    for mode in ("vector", "keyword", "hybrid"):
        reply = await search(
            corpus_tenant, query="rock lava magma planet", mode=mode, max_results=10
        )
        scores = [c["score"] for c in reply["chunks"]]
        assert scores == sorted(scores, reverse=True), mode


async def test_threshold_keeps_only_similar_chunks_and_says_so(corpus_tenant: TenantClient) -> None:
    reply = await search(corpus_tenant, query="blue whales", threshold=0.5, max_results=5)
    sims = [c["similarity"] for c in reply["chunks"]]
    assert sims
    assert all(s >= 0.5 for s in sims)
    assert len(sims) < 5
    assert reply["fewer_than_requested"] is True
    assert "threshold" in str(reply["note"])
    assert reply["threshold"] == 0.5


async def test_the_note_names_why_there_are_fewer_chunks(
    corpus_tenant: TenantClient,
    real_client: AsyncClient,
    settings: Settings,
    sessions: SessionMaker,
) -> None:
    """Each reason a search can come back short, told apart: a filter that excluded everything
    is not blamed on the threshold."""
    many = {"query": "blue whales", "max_results": 20}
    cut = await search(corpus_tenant, **many, threshold=0.5)
    assert (cut["shortfall"], cut["fewer_than_requested"]) == ("threshold", True)
    assert len(cut["chunks"]) == 1  # the whales document only
    assert cut["note"] == "only 1 chunk reached the threshold 0.5"
    fused = await search(corpus_tenant, **many, threshold=0.5, mode="hybrid")
    assert fused["shortfall"] == "threshold"  # hybrid keeps keyword matches below it too
    assert fused["note"].endswith("reached the threshold 0.5 or contain the query's terms")

    for scope in ({"collections": ["nowhere"]}, {"filters": {"metadata": {"missing": "x"}}}):
        filtered = await search(corpus_tenant, **many, threshold=0.5, **scope)
        assert filtered["chunks"] == []
        assert filtered["shortfall"] == "filters", scope
        assert filtered["note"] == "the filters match only 0 chunks"

    keyword = await search(corpus_tenant, query="ZQX-981", mode="keyword", max_results=5)
    assert names(keyword) == ["firmware"]
    assert keyword["shortfall"] == "no_match"
    assert keyword["note"] == "only 1 chunk contains the query's terms"

    small = await new_tenant(real_client, settings, sessions)
    nothing = await search(small, **many)
    assert nothing["shortfall"] == "empty"
    assert nothing["note"].startswith("the tenant holds no chunks")
    for text in ("Blue whales are the largest animals.", "Whales sing to each other."):
        body = {"title": "Whales", "content": text}
        reply = await real_client.post("/api/rag/documents", json=body, headers=small.headers)
        assert reply.status_code == 201, reply.text
    everything = await search(small, **many, threshold=0.1)
    assert len(everything["chunks"]) == 2
    assert everything["shortfall"] == "scope"
    assert everything["note"] == "the tenant holds only 2 chunks"

    enough = await search(corpus_tenant, query="blue whales", max_results=1, threshold=0.1)
    assert enough["fewer_than_requested"] is False
    assert enough["shortfall"] is None
    assert enough["note"] is None


async def test_default_threshold_depends_on_the_model(corpus_tenant: TenantClient) -> None:
    reply = await search(corpus_tenant, query="blue whales")
    assert reply["threshold"] == 0.3


async def test_keyword_mode_matches_exact_terms(corpus_tenant: TenantClient) -> None:
    reply = await search(corpus_tenant, query="ZQX-981", mode="keyword")
    assert names(reply) == ["firmware"]


async def test_keyword_mode_honours_web_search_syntax(corpus_tenant: TenantClient) -> None:
    anded = await search(corpus_tenant, query='"blue whales" -chess', mode="keyword")
    assert names(anded) == ["whales"]
    none = await search(corpus_tenant, query='"whales blue"', mode="keyword")
    assert names(none) == []


async def test_hybrid_beats_both_single_modes(corpus_tenant: TenantClient) -> None:
    """Two relevant documents: a paraphrase with no word of the query (battery) and a long
    memo whose only link is an exact name. With a threshold, vector search keeps only the
    paraphrase and keyword search finds only the name; hybrid returns both."""
    query = "car will not start Halvorsen"
    wanted = {"battery", "memo"}
    common = {"query": query, "max_results": 2, "threshold": 0.28}
    vector = set(names(await search(corpus_tenant, **common, mode="vector")))
    keyword = set(names(await search(corpus_tenant, **common, mode="keyword")))
    hybrid = set(names(await search(corpus_tenant, **common, mode="hybrid")))
    assert vector == {"battery"}
    assert keyword == {"memo"}
    assert hybrid == wanted


async def test_hybrid_reports_fused_score_and_cosine_similarity(
    corpus_tenant: TenantClient,
) -> None:
    reply = await search(corpus_tenant, query="ZQX-981 router", mode="hybrid", threshold=0.1)
    top = reply["chunks"][0]
    assert top["external_id"] == "firmware"
    assert 0 < top["similarity"] <= 1
    # weighted: 0.6 * cosine + 0.4 * BM25 / the query's ceiling; its keyword part is not 0
    assert 0.6 * top["similarity"] < top["score"] <= 1.0
    rrf = await search(
        corpus_tenant, query="ZQX-981 router", mode="hybrid", threshold=0.1, fusion="rrf"
    )
    assert rrf["chunks"][0]["external_id"] == "firmware"
    assert rrf["chunks"][0]["score"] == pytest.approx(2 / 61, abs=1e-6)  # 2 / (k + 1)

    common = {"query": "car will not start", "threshold": 0.1, "max_results": 3}
    vector = names(await search(corpus_tenant, **common, mode="vector"))
    all_vector = await search(corpus_tenant, **common, mode="hybrid", vector_weight=1.0)
    assert names(all_vector)[: len(vector)] == vector  # the keyword leg weighs nothing


async def test_bad_fusion_parameters_are_422(corpus_tenant: TenantClient) -> None:
    for extra in ({"fusion": "max"}, {"vector_weight": 1.5}, {"vector_weight": -0.1}):
        body = {"query": "router", "mode": "hybrid", **extra}
        response = await corpus_tenant.http.post(
            "/api/rag/search", json=body, headers=corpus_tenant.headers
        )
        assert response.status_code == 422, extra
        assert response.headers["content-type"].startswith("application/problem+json")


async def test_filters_by_collection_metadata_source_type_and_document(
    real_client: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    tenant = await new_tenant(real_client, settings, sessions)
    docs = [
        ("a", "Tomatoes need full sun.", "garden", {"year": 2019, "lang": "en"}, "text"),
        (
            "b",
            "Tomatoes need regular watering.",
            "garden",
            {"year": 2022, "lang": "en"},
            "markdown",
        ),
        ("c", "Tomatoes are rich in vitamin C.", "kitchen", {"year": 2023, "lang": "de"}, "text"),
    ]
    ids = {}
    for ext, text, coll, meta, kind in docs:
        body = {
            "content": text,
            "external_id": ext,
            "collection": coll,
            "metadata": meta,
            "source_type": kind,
        }
        response = await real_client.post("/api/rag/documents", json=body, headers=tenant.headers)
        assert response.status_code == 201
        ids[ext] = response.json()["document_id"]
    q = {"query": "tomatoes", "threshold": 0.1, "max_results": 10}
    assert set(names(await search(tenant, **q, collections=["garden"]))) == {"a", "b"}
    assert set(names(await search(tenant, **q, filters={"metadata": {"lang": "de"}}))) == {"c"}
    assert set(names(await search(tenant, **q, filters={"metadata": {"year": {"gte": 2022}}}))) == {
        "b",
        "c",
    }
    assert set(
        names(await search(tenant, **q, filters={"metadata": {"year": {"gt": 2019, "lt": 2023}}}))
    ) == {"b"}
    assert set(names(await search(tenant, **q, filters={"metadata": {"lang": ["en", "fr"]}}))) == {
        "a",
        "b",
    }
    assert set(names(await search(tenant, **q, filters={"source_types": ["markdown"]}))) == {"b"}
    assert set(
        names(await search(tenant, **q, filters={"document_ids": [ids["a"], ids["c"]]}))
    ) == {"a", "c"}
    assert names(await search(tenant, **q, collections=["nowhere"])) == []
    # a condition that allows no value matches nothing, never everything (found by the
    # filter properties): `eq` outside `in` is empty, an empty list or only nulls is a 422
    lang = {"eq": "en", "in": ["de"]}
    assert names(await search(tenant, **q, filters={"metadata": {"lang": lang}})) == []
    empty_conditions: list[object] = [[], {"in": []}, {"in": None}, {"gt": None}]
    for empty in empty_conditions:
        body = {"query": "planets", "filters": {"metadata": {"lang": empty}}}
        reply = await tenant.http.post("/api/rag/search", json=body, headers=tenant.headers)
        assert reply.status_code == 422, (empty, reply.text)


async def test_hostile_filter_keys_and_values_change_nothing(corpus_tenant: TenantClient) -> None:
    hostile = "x'); drop table chunks; --"
    reply = await search(
        corpus_tenant,
        query="volcano",
        collections=[hostile],
        filters={"metadata": {hostile: hostile, "a' or '1'='1": {"gte": 1}}},
    )
    assert reply["chunks"] == []
    assert names(await search(corpus_tenant, query="volcano"))[0] == "volcano"


async def test_another_tenant_never_sees_these_chunks(
    corpus_tenant: TenantClient,
    real_client: AsyncClient,
    settings: Settings,
    sessions: SessionMaker,
) -> None:
    other = await new_tenant(real_client, settings, sessions)
    documents = await corpus_tenant.http.get("/api/rag/documents", headers=corpus_tenant.headers)
    their_ids = [item["document_id"] for item in documents.json()["items"]]
    for mode in ("vector", "keyword", "hybrid"):
        reply = await search(
            other,
            query="volcano lava",
            mode=mode,
            threshold=0.1,
            filters={"document_ids": their_ids},
        )
        assert reply["chunks"] == []
        assert reply["total_found"] == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "   "}, "query"),
        ({"query": "x" * 10_001}, "query"),
        ({"query": "x", "max_results": 0}, "max_results"),
        ({"query": "x", "max_results": 101}, "max_results"),
        ({"query": "x", "mode": "fuzzy"}, "mode"),
        ({"query": "x", "threshold": 0.05}, "threshold"),
        ({"query": "x", "ef_search": 0}, "ef_search"),
        ({"query": "x", "ef_search": 5000}, "ef_search"),
        ({"query": "x", "colour": "blue"}, "colour"),
        ({"query": "x", "filters": {"metadata": {"k": {"between": 1}}}}, "filters"),
        ({"query": 42}, "query"),
    ],
)
async def test_bad_search_requests_are_422_naming_the_field(
    tenant_a: TenantClient, body: dict[str, Any], field: str
) -> None:
    response = await tenant_a.http.post("/api/rag/search", json=body, headers=tenant_a.headers)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["status"] == 422
    assert any(field in error["field"] for error in problem["errors"]), problem


async def test_empty_tenant_gets_an_empty_reply(tenant_a: TenantClient) -> None:
    reply = await search(tenant_a, query="anything at all")
    assert reply["chunks"] == []
    assert reply["total_found"] == 0
    assert reply["avg_similarity"] == 0


async def test_up_to_a_hundred_results_in_every_mode(tenant_a: TenantClient) -> None:
    """A backend that reranks or filters on its side asks for 100 and gets 100, best first."""
    documents = [
        {"title": f"Note {n}", "content": f"Harbour crane number {n} lifts containers at dawn."}
        for n in range(120)
    ]
    for start in range(0, len(documents), 40):
        reply = await tenant_a.http.post(
            "/api/rag/documents/batch",
            json={"documents": documents[start : start + 40]},
            headers=tenant_a.headers,
        )
        assert reply.status_code in (200, 201, 207), reply.text
    for mode in ("vector", "keyword", "hybrid"):
        found = await search(
            tenant_a, query="harbour crane containers", mode=mode, max_results=100, threshold=0.1
        )
        chunks = found["chunks"]
        assert len(chunks) == 100, mode
        assert len({c["chunk_id"] for c in chunks}) == 100
        scores = [c["score"] for c in chunks]
        assert scores == sorted(scores, reverse=True), mode
