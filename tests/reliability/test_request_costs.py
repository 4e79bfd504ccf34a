"""What one synchronous ingest may cost: the chunks it makes (what it embeds) are bounded by
RAG_SYNC_INGEST_MAX_CHUNKS. A megabyte of markdown punctuation (thousands of chunks, minutes
of embedding) is a 413 before anything is embedded that says to use a job, through every
synchronous door, with nothing stored; a batch draws on one allowance."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from httpx import AsyncClient

from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.api.calls import DOCUMENTS, assert_problem, total
from tests.api.test_upload import upload
from tests.conftest import TenantClient, app_client, new_tenant
from tests.fakes import WordHashEmbedder

pytestmark = pytest.mark.slow
PUNCTUATION = "!?.,;:-*#>`_~[](){}|\n" * (1024 * 1024 // 21)  # 1 MB, a token a character
PARAGRAPH = "Lighthouses guide ships past the rocks at night with a rotating lamp. " * 20


@pytest.fixture
async def few(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> AsyncIterator[AsyncClient]:
    """An app whose synchronous ingests may make 4 chunks (of 300 tokens)."""
    bounded = settings.model_copy(update={"sync_ingest_max_chunks": 4})
    async with app_client(bounded, sessions, embedder) as http:
        yield http


def _refused_for_a_job(problem: dict[str, object], value: int) -> None:
    assert (problem["limit"], problem["value"]) == ("max_chunks", value)
    detail = str(problem["detail"])
    assert "POST /api/rag/jobs" in detail
    assert "RAG_SYNC_INGEST_MAX_CHUNKS" in detail


async def test_a_megabyte_of_markdown_punctuation_is_413_before_anything_is_embedded(
    tenant: TenantClient, http: AsyncClient, embedder: WordHashEmbedder
) -> None:
    embedded = embedder.documents_embedded
    body = {"title": "Dots", "content": PUNCTUATION, "source_type": "markdown"}
    reply = await http.post(DOCUMENTS, json=body, headers=tenant.headers)
    _refused_for_a_job(assert_problem(reply, 413), 1_000)
    reply = await upload(tenant, "dots.md", PUNCTUATION.encode(), content_type="text/markdown")
    _refused_for_a_job(assert_problem(reply, 413), 1_000)
    assert embedder.documents_embedded == embedded
    assert await total(tenant) == 0


async def test_a_document_whose_chunks_pass_the_bound_is_413(
    few: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    tenant = await new_tenant(few, settings, sessions)
    # ~290 tokens a paragraph: 5 paragraphs are 5 chunks, though 1,450 tokens fill only 4
    body = {"title": "Lamps", "content": "\n\n".join([PARAGRAPH] * 5)}
    _refused_for_a_job(
        assert_problem(await few.post(DOCUMENTS, json=body, headers=tenant.headers), 413), 4
    )
    fits = {"title": "Lamp", "content": PARAGRAPH}
    assert (await few.post(DOCUMENTS, json=fits, headers=tenant.headers)).status_code == 201
    assert await total(tenant) == 1


async def test_a_batch_draws_on_one_allowance(
    few: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    tenant = await new_tenant(few, settings, sessions)
    documents = [
        {"title": f"Lamp {i}", "external_id": f"lamp-{i}", "content": "\n\n".join([PARAGRAPH] * n)}
        for i, n in enumerate((2, 3, 2))
    ]
    reply = await few.post(
        f"{DOCUMENTS}/batch", json={"documents": documents}, headers=tenant.headers
    )
    assert reply.status_code == 200, reply.text
    items = reply.json()["results"]
    assert [item["status"] for item in items] == [201, 413, 201]
    assert "POST /api/rag/jobs" in items[1]["error"]
    assert await total(tenant) == 2
