"""Files built to cost a parser minutes or gigabytes (issue 14's reproductions): each is
stopped within its budget and refused with what it exceeded, nothing is stored, and the
service answers other requests while the file is being read."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from httpx import AsyncClient

from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.api.calls import DOCUMENTS, assert_problem, total
from tests.api.test_upload import pdf_bytes, upload
from tests.conftest import TenantClient, app_client, new_tenant
from tests.fakes import WordHashEmbedder
from tests.ingest.bombs import inflation_bomb, shared_stream_bomb

pytestmark = pytest.mark.slow
BUDGET = 2.0  # seconds for a small file: the shared-stream bomb needs several times that


LIMITS = {
    "parse_seconds": BUDGET,
    "parse_max_pages": 20,
    "parse_max_chars": 2_000_000,  # the slow bomb's million characters pass: time stops it
    "parse_max_inflated_bytes": 1024 * 1024,
}


@pytest.fixture
async def limited(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> AsyncIterator[AsyncClient]:
    async with app_client(settings.model_copy(update=LIMITS), sessions, embedder) as http:
        yield http


@pytest.fixture
async def tenant(limited: AsyncClient, settings: Settings, sessions: SessionMaker) -> TenantClient:
    return await new_tenant(limited, settings, sessions)


async def test_a_slow_pdf_is_stopped_at_its_budget_and_others_are_served(
    tenant: TenantClient, limited: AsyncClient
) -> None:
    bomb = shared_stream_bomb()  # 3 KB: ten pages drawing one stream of 100,000 operators
    assert len(bomb) < 4096
    reading = asyncio.create_task(upload(tenant, "bomb.pdf", bomb))
    served = 0
    while not reading.done():  # the event loop is free while a worker process reads the file
        reply = await limited.get("/healthz")
        assert reply.status_code == 200
        served += 1
        await asyncio.sleep(0.05)
    assert served >= 5
    problem = assert_problem(await reading, 422)
    assert "budget" in problem["detail"]
    assert problem["limit"] == "seconds"
    assert await total(tenant) == 0
    # the killed worker is replaced: the next PDF reads
    good = await upload(tenant, "survey.pdf", pdf_bytes())
    assert good.status_code == 201, good.text


async def test_a_stream_inflating_past_the_limit_is_413(tenant: TenantClient) -> None:
    bomb = inflation_bomb(8 * 1024 * 1024)  # 8 MB of spaces in a few kilobytes
    problem = assert_problem(await upload(tenant, "inflate.pdf", bomb), 413)
    assert "RAG_PARSE_MAX_INFLATED_BYTES" in problem["detail"]
    assert problem["limit"] == "max_inflated_bytes"
    assert await total(tenant) == 0


async def test_too_many_pages_is_413(tenant: TenantClient) -> None:
    problem = assert_problem(await upload(tenant, "long.pdf", pdf_bytes(("page.",) * 21)), 413)
    assert "21 pages" in problem["detail"]
    assert "RAG_PARSE_MAX_PAGES" in problem["detail"]
    assert await total(tenant) == 0


async def test_too_much_text_is_413_in_every_format(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    words = "lorem ipsum dolor sit amet " * 250  # 6,750 characters
    short = settings.model_copy(update={"parse_max_chars": 5_000})
    async with app_client(short, sessions, embedder) as http:
        tenant = await new_tenant(http, settings, sessions)
        problem = assert_problem(await upload(tenant, "long.pdf", pdf_bytes((words,))), 413)
        assert "RAG_PARSE_MAX_CHARS" in problem["detail"]
        markdown = await upload(tenant, "long.md", words.encode(), content_type="text/markdown")
        assert_problem(markdown, 413)
        body = {"title": "Long", "content": words}
        response = await http.post(DOCUMENTS, json=body, headers=tenant.headers)
        assert_problem(response, 413)
        assert await total(tenant) == 0
