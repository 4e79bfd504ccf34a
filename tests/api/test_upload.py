"""POST /api/rag/documents/upload: PDF pages, markdown and HTML files, type sniffing, form
fields, and the refusals (wrong type, empty, encrypted, corrupt, oversize, bad metadata)."""

from __future__ import annotations

import io
from collections.abc import Mapping
from datetime import UTC, datetime

from fpdf import FPDF
from httpx import AsyncClient, Response
from pypdf import PdfReader, PdfWriter

from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.api.calls import (
    DOCUMENTS,
    Json,
    assert_problem,
    document,
    ingested,
    keyword_hits,
    listing,
    search,
)
from tests.conftest import TenantClient, app_client
from tests.fakes import WordHashEmbedder

UPLOAD = f"{DOCUMENTS}/upload"
PAGES = (
    "Harbour survey page one: aardvark apricot anchors.",
    "Harbour survey page two: bumblebee blueberry buoys.",
    "Harbour survey page three: cormorant cranberry cables.",
)
CREATED = datetime(2024, 5, 1, tzinfo=UTC)
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
NOTES_MD = b"""# Workshop notes

## Lathe

Keep the lathe chuck key out of the spindlewhorl at all times.

## Bandsaw

Tension the blade before the featherboard goes on.
"""
PAGE_HTML = b"""<!doctype html>
<html><head><title>Lighthouse log</title>
<script>var beaconscript = "trackingpixelword";</script></head>
<body><nav>Home | About</nav>
<h1>Keeper notes</h1><p>The lamp turned all night over the fogbank.</p>
<script>trackingpixelword();</script>
</body></html>
"""


def pdf_bytes(pages: tuple[str, ...] = PAGES) -> bytes:
    pdf = FPDF()
    pdf.set_creation_date(CREATED)  # the same pages make the same bytes
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 10, text)
    return bytes(pdf.output())


def encrypted_pdf(*, user_password: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes())))
    writer.encrypt(user_password=user_password, owner_password="owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


async def upload(
    tenant: TenantClient,
    name: str,
    data: bytes,
    *,
    content_type: str = "application/octet-stream",
    form: Mapping[str, str] | None = None,
    http: AsyncClient | None = None,
) -> Response:
    return await (http or tenant.http).post(
        UPLOAD,
        files={"file": (name, data, content_type)},
        data=dict(form or {}),
        headers=tenant.headers,
    )


async def uploaded(
    tenant: TenantClient,
    name: str,
    data: bytes,
    *,
    content_type: str = "application/octet-stream",
    **form: str,
) -> Json:
    response = await upload(tenant, name, data, content_type=content_type, form=form)
    assert response.status_code == 201, response.text
    reply: Json = response.json()
    return reply


async def test_pdf_pages_keep_their_page_numbers(tenant_a: TenantClient) -> None:
    reply = await uploaded(tenant_a, "survey.pdf", pdf_bytes())
    assert reply["chunks"] == 3
    assert reply["embedded"] == 3
    assert (await document(tenant_a, reply["document_id"]))["source_type"] == "pdf"
    [top] = await search(tenant_a, "bumblebee blueberry buoys", max_results=1)
    assert top["page_number"] == 2
    assert "bumblebee" in top["content"]
    [hit] = await search(tenant_a, "cormorant cranberry", mode="keyword")
    assert hit["page_number"] == 3


async def test_same_file_again_is_200_and_unchanged(tenant_a: TenantClient) -> None:
    data = pdf_bytes()
    first = await uploaded(tenant_a, "survey.pdf", data, external_id="survey")
    again = await upload(tenant_a, "survey.pdf", data, form={"external_id": "survey"})
    assert again.status_code == 200
    reply = again.json()
    assert reply["document_id"] == first["document_id"]
    assert (reply["embedded"], reply["unchanged"], reply["changed"]) == (0, 3, False)


async def test_markdown_file_sections_reach_search(tenant_a: TenantClient) -> None:
    reply = await uploaded(tenant_a, "notes.md", NOTES_MD, content_type="text/markdown")
    assert reply["title"] == "Workshop notes"
    assert (await document(tenant_a, reply["document_id"]))["source_type"] == "markdown"
    [top] = await search(tenant_a, "lathe chuck key spindlewhorl", max_results=1)
    assert top["section"] == ["Workshop notes", "Lathe"]


async def test_html_file_takes_its_title_and_drops_scripts(tenant_a: TenantClient) -> None:
    reply = await uploaded(tenant_a, "log.html", PAGE_HTML, content_type="text/html")
    assert reply["title"] == "Lighthouse log"
    assert (await document(tenant_a, reply["document_id"]))["source_type"] == "html"
    assert len(await keyword_hits(tenant_a, "fogbank")) == 1
    assert await keyword_hits(tenant_a, "trackingpixelword") == []
    assert await keyword_hits(tenant_a, "beaconscript") == []
    [top] = await search(tenant_a, "lamp fogbank", max_results=1)
    assert top["section"] == ["Keeper notes"]


async def test_type_is_sniffed_from_the_bytes_not_the_name(tenant_a: TenantClient) -> None:
    reply = await uploaded(tenant_a, "readme.txt", pdf_bytes(), content_type="text/plain")
    assert (await document(tenant_a, reply["document_id"]))["source_type"] == "pdf"
    [top] = await search(tenant_a, "aardvark apricot anchors", max_results=1)
    assert top["page_number"] == 1


async def test_form_fields_are_stored(tenant_a: TenantClient) -> None:
    reply = await uploaded(
        tenant_a,
        "notes.md",
        NOTES_MD,
        title="Shop safety",
        external_id="shop-1",
        collection=" manuals ",
        source_url="https://example.org/shop",
        metadata='{"site": "north", "floor": 2}',
    )
    assert (reply["title"], reply["external_id"], reply["collection"]) == (
        "Shop safety",
        "shop-1",
        "manuals",
    )
    stored = await document(tenant_a, reply["document_id"])
    assert stored["source_url"] == "https://example.org/shop"
    assert stored["metadata"] == {"site": "north", "floor": 2}
    assert (await listing(tenant_a, collection="manuals"))["total"] == 1


BAD_UPLOADS: dict[str, tuple[str, bytes, dict[str, str], int]] = {
    "png-bytes": ("photo.txt", PNG, {}, 415),
    "nul-bytes": ("bin.txt", b"text\x00with\x00nul", {}, 415),
    "empty-file": ("blank.txt", b"", {}, 422),
    "not-utf8": ("latin.txt", "caf\u00e9".encode("latin-1"), {}, 422),
    "encrypted-pdf": ("locked.pdf", encrypted_pdf(user_password="opensesame"), {}, 422),
    "corrupt-pdf": ("broken.pdf", b"%PDF-1.4\n" + b"garbage " * 64, {}, 422),
    "truncated-pdf": ("cut.pdf", pdf_bytes()[:700], {}, 422),
    "metadata-not-json": ("a.md", NOTES_MD, {"metadata": "{not json"}, 422),
    "metadata-not-object": ("a.md", NOTES_MD, {"metadata": "[1, 2]"}, 422),
    "metadata-nul": ("a.md", NOTES_MD, {"metadata": '{"k": "a\\u0000b"}'}, 422),
    "title-nul": ("a.md", NOTES_MD, {"title": "a\x00b"}, 422),
    "source-url-not-url": ("a.md", NOTES_MD, {"source_url": "not a url"}, 422),
}
DETAILS = {"png-bytes": "PNG", "empty-file": "empty", "encrypted-pdf": "encrypted"}


async def test_bad_upload_is_refused_and_changes_nothing(tenant_a: TenantClient) -> None:
    kept = await ingested(tenant_a, content="Existing", external_id="same")
    for case, (name, data, form, status) in BAD_UPLOADS.items():
        response = await upload(tenant_a, name, data, form={**form, "external_id": "same"})
        assert response.status_code == status, (case, response.text)
        problem = assert_problem(response, status)
        assert DETAILS.get(case, "") in problem["detail"], case
        page = await listing(tenant_a)
        assert page["total"] == 1, case
        assert page["items"][0]["document_id"] == kept["document_id"], case
        assert page["items"][0]["title"] == "Existing", case


async def test_pdf_with_only_an_owner_password_opens(tenant_a: TenantClient) -> None:
    reply = await uploaded(tenant_a, "restricted.pdf", encrypted_pdf(user_password=""))
    assert reply["chunks"] == 3
    [top] = await search(tenant_a, "bumblebee blueberry buoys", max_results=1)
    assert top["page_number"] == 2


async def test_oversize_upload_is_413_and_changes_nothing(
    tenant_a: TenantClient, settings: Settings, sessions: SessionMaker
) -> None:
    small = settings.model_copy(update={"upload_max_bytes": 2048})
    async with app_client(small, sessions, WordHashEmbedder()) as http:
        fits = await upload(tenant_a, "ok.txt", b"word " * 400, http=http)
        assert fits.status_code == 201, fits.text
        response = await upload(tenant_a, "big.txt", b"word " * 500, http=http)
        assert_problem(response, 413)
        huge = await upload(tenant_a, "huge.txt", b"word " * 40_000, http=http)
        assert_problem(huge, 413)
    assert (await listing(tenant_a))["total"] == 1
