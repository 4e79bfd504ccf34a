"""Scanned PDF pages through POST /api/rag/documents/upload: read by OCR in the parse workers,
cited by page and marked `"ocr": true`; RAG_OCR=off, missing language data, too many scanned
pages, too slow a page, and a page of noise."""

from __future__ import annotations

import pytest

from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.api.calls import DOCUMENTS, assert_problem, search, total
from tests.api.test_upload import pdf_bytes, upload, uploaded
from tests.conftest import TenantClient, app_client, new_tenant
from tests.fakes import WordHashEmbedder
from tests.ingest.scans import merged_pdf, noise, scan, scanned_pdf, scribbles

pytestmark = pytest.mark.slow

TEXT_PAGE = "Harbour survey page one: aardvark apricot anchors."
SCANNED = ["The quillfeather ledger lists the harbour crew.", "Wrensmoke tide tables follow."]


def mixed_pdf() -> bytes:
    """Page 1 with a text layer, page 2 a scan of two lines."""
    return merged_pdf(pdf_bytes((TEXT_PAGE,)), scanned_pdf(scan(SCANNED)))


async def test_a_scanned_page_is_read_by_ocr_and_cited_by_its_page(
    tenant_a: TenantClient,
) -> None:
    reply = await uploaded(
        tenant_a, "survey.pdf", mixed_pdf(), title="Survey", metadata='{"site": "north"}'
    )
    assert reply["chunks"] == 2
    [scanned] = await search(tenant_a, "quillfeather", mode="keyword")
    assert scanned["page_number"] == 2
    assert "quillfeather ledger lists the harbour crew" in scanned["content"]
    assert "Wrensmoke" in scanned["content"]
    assert scanned["metadata"] == {"site": "north", "ocr": True}
    [typed] = await search(tenant_a, "aardvark", mode="keyword")
    assert typed["page_number"] == 1
    assert typed["metadata"] == {"site": "north"}  # its text layer was read, not its image
    # the flag is the chunk's: it stays when the document's metadata changes
    patched = await tenant_a.http.patch(
        f"{DOCUMENTS}/{reply['document_id']}",
        json={"metadata": {"site": "south"}},
        headers=tenant_a.headers,
    )
    assert patched.status_code == 200, patched.text
    [scanned] = await search(tenant_a, "quillfeather", mode="keyword")
    assert scanned["metadata"] == {"site": "south", "ocr": True}
    [typed] = await search(tenant_a, "aardvark", mode="keyword")
    assert typed["metadata"] == {"site": "south"}
    # and it filters like any metadata
    [only] = await search(tenant_a, "harbour", mode="keyword", filters={"metadata": {"ocr": True}})
    assert only["page_number"] == 2


async def test_a_pdf_that_is_only_a_scan_is_read(tenant_a: TenantClient) -> None:
    cover = scan(["Ledger of the north quay."])
    reply = await uploaded(tenant_a, "ledger.pdf", scanned_pdf(cover, scan(SCANNED)))
    assert reply["chunks"] == 2
    [hit] = await search(tenant_a, "wrensmoke", mode="keyword")
    assert (hit["page_number"], hit["metadata"]) == (2, {"ocr": True})


async def test_with_ocr_off_a_scan_is_422_and_a_mixed_pdf_keeps_its_text_pages(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    off = settings.model_copy(update={"ocr": False})
    async with app_client(off, sessions, embedder) as http:
        tenant = await new_tenant(http, settings, sessions)
        problem = assert_problem(await upload(tenant, "scan.pdf", scanned_pdf(scan(SCANNED))), 422)
        assert "no text layer" in problem["detail"]
        assert "RAG_OCR=off" in problem["detail"]
        assert await total(tenant) == 0
        reply = await uploaded(tenant, "survey.pdf", mixed_pdf())
        assert reply["chunks"] == 1
        assert await search(tenant, "quillfeather", mode="keyword") == []


async def test_without_the_language_data_a_scan_is_422_saying_ocr_is_not_installed(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    absent = settings.model_copy(update={"ocr_languages": "qaa"})  # no such traineddata
    async with app_client(absent, sessions, embedder) as http:
        tenant = await new_tenant(http, settings, sessions)
        problem = assert_problem(await upload(tenant, "scan.pdf", scanned_pdf(scan(SCANNED))), 422)
        assert "no text layer" in problem["detail"]
        assert "OCR is not installed" in problem["detail"]
        assert "qaa" in problem["detail"]
        assert await total(tenant) == 0
        reply = await uploaded(tenant, "survey.pdf", mixed_pdf())  # its text page is kept
        assert reply["chunks"] == 1


async def test_a_scan_of_500_pages_is_413_before_any_page_is_read(
    tenant_a: TenantClient,
) -> None:
    page = scan(["Page of a long scan."])
    data = scanned_pdf(*[page] * 500)
    response = await upload(tenant_a, "long.pdf", data)
    problem = assert_problem(response, 413)
    assert (problem["limit"], problem["value"]) == ("ocr_max_pages", 100)
    assert "500 pages without a text layer" in problem["detail"]
    assert "RAG_OCR_MAX_PAGES" in problem["detail"]
    assert await total(tenant_a) == 0


async def test_a_huge_page_is_read_at_a_bounded_size(tenant_a: TenantClient) -> None:
    # 620 x 92 inches: 5 billion pixels at 300 dpi; rendered at 12 million, in a worker's memory
    data = scanned_pdf(scan(SCANNED[:1]), dpi=2)
    reply = await uploaded(tenant_a, "banner.pdf", data, title="Banner")
    [hit] = await search(tenant_a, "quillfeather", mode="keyword")
    assert (hit["page_number"], hit["metadata"]) == (1, {"ocr": True})
    assert reply["chunks"] == 1


async def test_ocr_past_a_workers_memory_is_422_naming_the_limit(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    # a worker reading a scan holds ~100 MB of code (the OCR engine, the PDF reader, each
    # imported by the first file that needs it): 150 leaves too little for a full page
    capped = settings.model_copy(update={"parse_max_memory_mb": 150})
    async with app_client(capped, sessions, embedder) as http:
        tenant = await new_tenant(http, settings, sessions)
        page = scan([f"{SCANNED[0]} {n}" for n in range(40)])  # 1240 x 3320: A4 at 300 dpi
        problem = assert_problem(await upload(tenant, "full.pdf", scanned_pdf(page)), 422)
        assert (problem["limit"], problem["value"]) == ("max_memory_mb", 150)
        assert "RAG_PARSE_MAX_MEMORY_MB" in problem["detail"]
        assert await total(tenant) == 0
        good = await upload(tenant, "survey.pdf", pdf_bytes())  # a text layer fits: it reads
        assert good.status_code == 201, good.text


async def test_ocr_past_its_time_is_stopped_with_422_and_nothing_stored(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    hurried = settings.model_copy(update={"ocr_seconds_per_page": 0.01, "parse_seconds": 1.0})
    async with app_client(hurried, sessions, embedder) as http:
        tenant = await new_tenant(http, settings, sessions)
        data = scanned_pdf(noise(1240, 1754), scan(SCANNED))  # the noise alone takes seconds
        problem = assert_problem(await upload(tenant, "slow.pdf", data), 422)
        assert problem["limit"] == "ocr_seconds_per_page"
        assert "RAG_OCR_SECONDS_PER_PAGE" in problem["detail"]
        assert await total(tenant) == 0
        good = await upload(tenant, "survey.pdf", pdf_bytes())  # the worker reads on
        assert good.status_code == 201, good.text


async def test_a_page_of_noise_adds_no_text(tenant_a: TenantClient) -> None:
    pictures = scanned_pdf(noise(), noise(800, 300), scribbles())
    data = merged_pdf(pdf_bytes((TEXT_PAGE,)), pictures)
    reply = await uploaded(tenant_a, "photos.pdf", data, title="Photos")
    assert reply["chunks"] == 1
    [hit] = await search(tenant_a, "aardvark", mode="keyword")
    assert hit["page_number"] == 1
    for picture in (noise(), scribbles(2)):  # nothing, and garbage read with low confidence
        alone = await upload(tenant_a, "noise.pdf", scanned_pdf(picture))
        assert "OCR found no text" in assert_problem(alone, 422)["detail"]
    assert await total(tenant_a) == 1
