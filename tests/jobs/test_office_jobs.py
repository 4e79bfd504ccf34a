"""Office, EPUB and ODT files through a background job: read by the same sandboxed parser as
uploads, with the same citations; a bomb or a legacy file fails alone, naming why."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from app.db.tenancy import SessionMaker
from app.jobs.queue import background_workers
from app.jobs.runner import JobServices
from app.resources import sandboxed_parser
from app.settings import Settings
from tests.conftest import TenantClient, small_chunker
from tests.fakes import WordHashEmbedder
from tests.ingest.office import docx_bytes, epub_bytes, odt_bytes, pptx_bytes, xlsx_bytes
from tests.ingest.office_bombs import far_row_xlsx, legacy_office
from tests.jobs.conftest import finished
from tests.jobs.test_jobs_api import submit

OCTETS = "application/octet-stream"


@asynccontextmanager
async def sandboxed_workers(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> AsyncIterator[None]:
    """A job worker as `rag serve` runs it: files read in killable worker processes."""
    with sandboxed_parser(settings) as parser:
        services = JobServices(sessions, embedder, small_chunker(), parser, 2, settings)
        async with background_workers(settings, services, concurrency=1):
            yield


async def _hit(tenant: TenantClient, word: str, source_type: str) -> dict[str, Any]:
    """The one chunk of this source type holding `word`."""
    body = {
        "query": word,
        "mode": "keyword",
        "max_results": 20,
        "filters": {"source_types": [source_type]},
    }
    reply = await tenant.http.post("/api/rag/search", json=body, headers=tenant.headers)
    assert reply.status_code == 200, reply.text
    [hit] = reply.json()["chunks"]
    found: dict[str, Any] = hit
    return found


async def test_office_files_in_a_job_keep_their_citations_and_bad_ones_fail_alone(
    owner_a: TenantClient, settings: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    upload = [
        ("files", ("kb/handbook.docx", docx_bytes(), OCTETS)),
        ("files", ("kb/review.pptx", pptx_bytes(), OCTETS)),
        ("files", ("kb/stock.xlsx", xlsx_bytes(rows=40), OCTETS)),
        ("files", ("kb/guide.epub", epub_bytes(), OCTETS)),
        ("files", ("kb/burrows.odt", odt_bytes(), OCTETS)),
        ("files", ("kb/minutes.doc", legacy_office("WordDocument"), OCTETS)),
        ("files", ("kb/far.xlsx", far_row_xlsx(), OCTETS)),
    ]
    job_id = await submit(owner_a, files=upload)
    async with sandboxed_workers(settings, committed, embedder):
        state = await finished(owner_a, job_id)
    assert state["status"] == "partial"
    results = {r["name"]: r for r in state["results"]}
    assert {name for name, r in results.items() if r["status"] == "succeeded"} == {
        f"kb/{name}"
        for name in ("handbook.docx", "review.pptx", "stock.xlsx", "guide.epub", "burrows.odt")
    }
    legacy, far = results["kb/minutes.doc"], results["kb/far.xlsx"]
    assert (legacy["error_status"], far["error_status"]) == (415, 413)
    assert "save it as .docx" in legacy["error"]
    assert "RAG_PARSE_MAX_ROWS" in far["error"]

    chapter = await _hit(owner_a, "termites", "epub")
    assert chapter["section"] == ["Chapter 1: Aardvarks", "Diet"]
    assert (await _hit(owner_a, "north", "odt"))["section"] == ["Burrows", "Depth"]
    slide = await _hit(owner_a, "chameleons", "pptx")
    assert (slide["page_number"], slide["section"]) == (2, ["Regional Figures"])
    assert (await _hit(owner_a, "chameleons", "docx"))["section"] == ["Safety"]
    assert (await _hit(owner_a, "enclosure", "xlsx"))["section"] == ["Notes", "row 3"]


async def test_a_large_page_and_a_costly_markdown_file_in_a_job_are_read_by_the_workers(
    owner_a: TenantClient, settings: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    page = b"<html><body>" + b"<p>" * 700_000 + b"<p>The lighthouse keeper's last page."
    capped = settings.model_copy(update={"parse_max_memory_mb": 400, "parse_seconds": 60.0})
    listing = b"# List\n\n" + b"- x\n" * 200_000  # ~400 MB of parser tokens; the page ~90
    upload = [
        ("files", ("site/page.html", page, "text/html")),
        ("files", ("notes/list.md", listing, "text/markdown")),
    ]
    job_id = await submit(owner_a, files=upload)
    async with sandboxed_workers(capped, committed, embedder):
        state = await finished(owner_a, job_id)
    assert state["status"] == "partial", state["results"]
    read, refused = state["results"]
    assert (read["status"], read["chunks"]) == ("succeeded", 1)
    assert refused["error_status"] == 422
    assert "RAG_PARSE_MAX_MEMORY_MB" in refused["error"]
