"""POST /api/rag/documents/upload with Word, PowerPoint, Excel, EPUB and ODT files made in the
tests: each is recognised by its content, and its chunks come back from search with the
structure a citation needs (section paths, slide numbers, rows)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.calls import DOCUMENTS, Json, assert_problem, document, ingest, search, total
from tests.api.test_upload import upload, uploaded
from tests.conftest import TenantClient
from tests.ingest.office import docx_bytes, epub_bytes, odt_bytes, pptx_bytes, xlsx_bytes
from tests.ingest.office_bombs import legacy_office

HEADER = "Animal | Count | Checked | Keeper notes"


async def _hit(tenant: TenantClient, word: str) -> Json:
    """The one chunk holding `word` (keyword search: exact presence)."""
    [hit] = await search(tenant, word, mode="keyword", max_results=20)
    return hit


async def _source_type(tenant: TenantClient, reply: Json) -> str:
    found: str = (await document(tenant, reply["document_id"]))["source_type"]
    return found


async def test_word_headings_are_the_section_paths_of_its_chunks(tenant_a: TenantClient) -> None:
    reply = await uploaded(tenant_a, "handbook.bin", docx_bytes())  # the name says nothing
    assert reply["title"] == "Field Handbook"
    assert await _source_type(tenant_a, reply) == "docx"
    tents = await _hit(tenant_a, "kg")
    assert (tents["section"], tents["page_number"]) == (["Equipment", "Tents"], None)
    # the table's rows stay with their section, under the sentence before them and the header
    assert tents["content"] == "The bumblebee tent sleeps four.\nItem | Weight\nTent | 4 kg"
    assert (await _hit(tenant_a, "chameleons"))["section"] == ["Safety"]


async def test_a_slides_number_is_its_page_and_its_title_its_section(
    tenant_a: TenantClient,
) -> None:
    reply = await uploaded(tenant_a, "review.pptx", pptx_bytes())
    assert (reply["title"], reply["chunks"]) == ("Quarterly Review", 2)
    assert await _source_type(tenant_a, reply) == "pptx"
    figures = await _hit(tenant_a, "chameleons")
    assert (figures["page_number"], figures["section"]) == (2, ["Regional Figures"])
    first = await _hit(tenant_a, "aardvark")
    assert (first["page_number"], first["section"]) == (1, ["Quarterly Review"])
    assert "Speaker notes: Thank the bumblebee team." in first["content"]
    body = {"query": "chameleons", "mode": "keyword", "max_results": 1}
    cited = await tenant_a.http.post("/api/rag/context", json=body, headers=tenant_a.headers)
    assert cited.status_code == 200, cited.text
    [citation] = cited.json()["citations"]
    assert citation["text"] == "[1] **Quarterly Review** (PowerPoint, Slide 2) _Regional Figures_"


async def test_a_sheets_chunks_say_which_rows_they_hold(tenant_a: TenantClient) -> None:
    reply = await uploaded(tenant_a, "stock.xlsx", xlsx_bytes(rows=120), title="Stock")
    assert await _source_type(tenant_a, reply) == "xlsx"
    chunks = await search(tenant_a, "bumblebee", mode="keyword", max_results=20)
    assert len(chunks) == reply["chunks"] - 1  # every Inventory chunk has a bumblebee row
    covered: list[int] = []
    for chunk in chunks:
        sheet, rows = chunk["section"]
        first, last = (int(n) for n in rows.removeprefix("rows ").split("\u2013"))
        lines = chunk["content"].split("\n")
        assert (sheet, lines[0], chunk["page_number"]) == ("Inventory", HEADER, None)
        assert [line.split(" | ")[0] for line in lines[1:]] == [
            f"Animal {row - 2}" for row in range(first, last + 1)
        ]
        covered += range(first, last + 1)
    assert sorted(covered) == list(range(2, 122))
    assert (await _hit(tenant_a, "enclosure"))["section"] == ["Notes", "row 3"]


async def test_epub_chapters_are_sections(tenant_a: TenantClient) -> None:
    reply = await uploaded(tenant_a, "guide.epub", epub_bytes())
    assert reply["title"] == "A Field Guide"
    assert await _source_type(tenant_a, reply) == "epub"
    assert (await _hit(tenant_a, "termites"))["section"] == ["Chapter 1: Aardvarks", "Diet"]
    assert (await _hit(tenant_a, "ears"))["section"] == ["Chapter 1: Aardvarks"]
    assert (await _hit(tenant_a, "clover"))["section"] == ["Chapter 2: Bumblebees"]


async def test_odt_headings_are_section_paths(tenant_a: TenantClient) -> None:
    reply = await uploaded(tenant_a, "burrows.odt", odt_bytes())
    assert reply["title"] == "Burrowing Animals"
    assert await _source_type(tenant_a, reply) == "odt"
    assert (await _hit(tenant_a, "north"))["section"] == ["Burrows", "Depth"]  # a table row
    assert await search(tenant_a, "footnote", mode="keyword") == []  # notes are left out


async def test_search_filters_on_the_new_source_types(tenant_a: TenantClient) -> None:
    await uploaded(tenant_a, "handbook.docx", docx_bytes())
    await uploaded(tenant_a, "review.pptx", pptx_bytes())
    filters: dict[str, Any] = {"source_types": ["pptx"]}
    hits = await search(tenant_a, "bumblebee", mode="keyword", filters=filters)
    assert [hit["source_type"] for hit in hits] == ["pptx"]


@pytest.mark.parametrize(
    ("name", "stream", "says"),
    [
        ("minutes.doc", "WordDocument", "save it as .docx"),
        ("budget.xls", "Workbook", "save it as .xlsx"),
        ("pitch.ppt", "PowerPoint Document", "save it as .pptx"),
    ],
)
async def test_legacy_office_files_are_415_saying_to_convert_them(
    tenant_a: TenantClient, name: str, stream: str, says: str
) -> None:
    problem = assert_problem(await upload(tenant_a, name, legacy_office(stream)), 415)
    assert says in problem["detail"]
    assert await total(tenant_a) == 0


async def test_an_office_type_sent_as_json_text_is_415(tenant_a: TenantClient) -> None:
    response = await ingest(tenant_a, content="not a file", source_type="docx")
    problem = assert_problem(response, 415)
    assert f"{DOCUMENTS}/upload" in problem["detail"]
