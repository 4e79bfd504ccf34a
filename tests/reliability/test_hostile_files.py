"""Files built to cost a parser minutes or gigabytes (PDFs whose few kilobytes take an
extractor minutes or inflate to gigabytes, Office containers that inflate, nest or run to a
million rows): each is stopped within its budget and refused with what it exceeded, nothing is
stored, and the service answers other requests while the file is being read."""

from __future__ import annotations

import asyncio
import time
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
from tests.ingest.office import docx_bytes, epub_bytes, odt_bytes, xlsx_bytes
from tests.ingest.office_bombs import (
    crowded_docx,
    crowded_runs_docx,
    deep_docx,
    empty_rows_xlsx,
    far_row_xlsx,
    inflating_docx,
    laughing_docx,
    lying_docx,
    one_row_number_xlsx,
    spaced_odt,
    spread_docx,
)

pytestmark = pytest.mark.slow
BUDGET = 2.0  # seconds for a small file: the shared-stream bomb needs several times that


LIMITS = {
    "parse_seconds": BUDGET,
    "parse_max_pages": 20,
    "parse_max_chars": 2_000_000,  # the slow bomb's million characters pass: time stops it
    "parse_max_inflated_bytes": 1024 * 1024,
    "parse_max_unzipped_bytes": 4 * 1024 * 1024,
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


async def test_a_zip_whose_members_inflate_past_the_limits_is_413(tenant: TenantClient) -> None:
    one = await upload(tenant, "big.docx", inflating_docx(8 * 1024 * 1024))  # 45 KB sent
    problem = assert_problem(one, 413)
    assert (problem["limit"], problem["value"]) == ("max_inflated_bytes", 1024 * 1024)
    assert "RAG_PARSE_MAX_INFLATED_BYTES" in problem["detail"]
    together = assert_problem(await upload(tenant, "wide.docx", spread_docx(6, 900_000)), 413)
    assert together["limit"] == "max_unzipped_bytes"
    assert "RAG_PARSE_MAX_UNZIPPED_BYTES" in together["detail"]
    crowded = assert_problem(await upload(tenant, "many.docx", crowded_docx(10_001)), 413)
    assert crowded["limit"] == "max_members"
    lying = assert_problem(await upload(tenant, "lies.docx", lying_docx(512 * 1024)), 422)
    assert "could not be inflated" in lying["detail"]  # bytes past its declared size
    assert await total(tenant) == 0
    good = await upload(tenant, "handbook.docx", docx_bytes())  # the worker reads on
    assert good.status_code == 201, good.text


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("deep.docx", deep_docx(10_000)),
        ("deep.epub", epub_bytes(chapter_body="<div>" * 10_000 + "deep")),
    ],
)
async def test_deeply_nested_xml_is_422_naming_the_limit(
    tenant: TenantClient, name: str, data: bytes
) -> None:
    problem = assert_problem(await upload(tenant, name, data), 422)
    assert (problem["limit"], problem["value"]) == ("max_xml_depth", 128)
    assert "RAG_PARSE_MAX_XML_DEPTH" in problem["detail"]
    assert await total(tenant) == 0


async def test_entities_expanding_a_thousandfold_are_422(tenant: TenantClient) -> None:
    problem = assert_problem(await upload(tenant, "lol.docx", laughing_docx()), 422)
    assert "amplification" in problem["detail"]
    assert await total(tenant) == 0


async def test_a_million_empty_rows_is_413_with_the_default_limits(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    async with app_client(settings, sessions, embedder) as http:
        tenant = await new_tenant(http, settings, sessions)
        bombs = [
            ("empty.xlsx", empty_rows_xlsx()),
            ("far.xlsx", far_row_xlsx()),
            ("same.xlsx", one_row_number_xlsx()),  # 28 KB: a budget of 5.3 s
        ]
        for name, data in bombs:
            problem = assert_problem(await upload(tenant, name, data), 413)
            # the row limit answered, not the file's parse budget: the rows were counted
            # (docs/BENCHMARKS.md has the time; a wall-clock bound here failed on a loaded CI)
            assert (problem["limit"], problem["value"]) == ("max_rows", 200_000), name
            assert "RAG_PARSE_MAX_ROWS" in problem["detail"]
        assert await total(tenant) == 0
        good = await upload(tenant, "stock.xlsx", xlsx_bytes(rows=5))
        assert good.status_code == 201, good.text


async def test_a_file_that_needs_more_memory_than_a_worker_may_have_is_422(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    # a worker holds ~50-100 MB of code (each reader imported by the first file that needs
    # it): 300 leaves ~200 MB, which these inflate past
    capped = settings.model_copy(update={"parse_max_memory_mb": 300, "parse_seconds": 60.0})
    listing = b"# List\n\n" + b"- x\n" * 300_000  # 1.2 MB: 1.5 million parser tokens, ~600 MB
    async with app_client(capped, sessions, embedder) as http:
        tenant = await new_tenant(http, settings, sessions)
        reply = await upload(tenant, "list.md", listing, content_type="text/markdown")
        problem = assert_problem(reply, 422)
        assert (problem["limit"], problem["value"]) == ("max_memory_mb", 300)
        assert "RAG_PARSE_MAX_MEMORY_MB" in problem["detail"]
        page = b"<html><body>" + b"<p>" * 2_500_000 + b"<p>The end."  # libxml2: ~320 MB
        reply = await upload(tenant, "page.html", page, content_type="text/html")
        assert assert_problem(reply, 422)["limit"] == "max_memory_mb"  # not "no text"
        assert await total(tenant) == 0
        good = await upload(tenant, "survey.pdf", pdf_bytes())  # the worker reads on
        assert good.status_code == 201, good.text


async def test_millions_of_tiny_xml_elements_are_413_with_the_default_limits(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    """Issue 47: an ODT of tens of kilobytes grew a parse worker to 600+ MB (3.4 million
    `<text:s/>` as a tree). Counted while inflating, it is refused in seconds."""
    async with app_client(settings, sessions, embedder) as http:
        tenant = await new_tenant(http, settings, sessions)
        for name, data in [("spaced.odt", spaced_odt()), ("runs.docx", crowded_runs_docx())]:
            started = time.perf_counter()
            problem = assert_problem(await upload(tenant, name, data), 413)
            # counted, not built: a 422 would say the budget (5.6 s here) or memory stopped it
            assert time.perf_counter() - started < 15.0, name
            assert (problem["limit"], problem["value"]) == ("max_xml_elements", 1_000_000)
            assert "RAG_PARSE_MAX_XML_ELEMENTS" in problem["detail"]
        assert await total(tenant) == 0
        good = await upload(tenant, "burrows.odt", odt_bytes())
        assert good.status_code == 201, good.text
