"""Tables in every format: rows with cell separators, split only between rows, each chunk of a
table starting with its caption and header row, cited by its page, slide or section; and the
tables built to hurt a reader (100,000 rows, 1,000 columns, megabyte cells, merged and nested
cells)."""

from __future__ import annotations

import time

import pytest

from app.errors import PayloadTooLarge, Unprocessable
from app.ingest.chunking import ChunkDraft
from app.ingest.parsing import ParsedDocument, ParseLimits, Parser, SourceType, sniff_source_type
from app.ingest.parsing.files import read_file
from tests.conftest import small_chunker
from tests.ingest import office_bombs as bombs
from tests.ingest.office import docx_bytes
from tests.ingest.tables import (
    BUILDERS,
    HEADER,
    INTRO,
    fleet,
    html_table,
    markdown_table,
    pdf_table,
    table_file,
    vessel,
)

HEADER_LINE = " | ".join(HEADER)
# Where each format's chunks of the register are cited: (page or slide, section path)
CITED = {
    "docx": (None, ("Fleet",)),
    "pptx": (1, ("Fleet register",)),
    "odt": (None, ("Fleet",)),
    "epub": (None, ("Chapter 1: Aardvarks",)),
    "html": (None, ("Fleet",)),
    "markdown": (None, ("Fleet",)),
}


def _parsed(name: str, data: bytes, limits: ParseLimits | None = None) -> ParsedDocument:
    kind = sniff_source_type(data, filename=name, declared=None)
    return Parser(limits or ParseLimits(), read_file).parse(data, kind)


def _table_chunks(drafts: list[ChunkDraft]) -> list[ChunkDraft]:
    return [d for d in drafts if HEADER_LINE in d.content]


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_each_chunk_of_a_long_table_starts_with_its_caption_and_header(kind: str) -> None:
    rows = fleet(90)
    parsed = _parsed(*table_file(kind, rows))
    drafts = small_chunker().split(parsed)
    chunks = _table_chunks(drafts)
    assert len(chunks) >= 3  # 90 rows of ~12 tokens: split, each part under the header
    held: list[str] = []
    for chunk in chunks:
        lines = chunk.content.split("\n")
        assert lines[:2] == [INTRO, HEADER_LINE]  # the sentence introducing it, the header
        held += lines[2:]
        assert chunk.token_count <= 200
        if kind == "pdf":
            assert chunk.page_number in (1, 2, 3)  # the page the rows are on
            assert chunk.section_path == ()
        else:
            assert (chunk.page_number, chunk.section_path) == CITED[kind]
    # every row once, whole, in order, its cells separated: never cut between chunks
    assert held == [" | ".join(row) for row in rows]
    # the text before the table stays text
    assert any(INTRO in d.content for d in drafts if d not in chunks)


def test_a_pdf_table_going_on_to_later_pages_keeps_its_header_and_caption_there() -> None:
    parsed = _parsed(*table_file("pdf", fleet(90)))
    rows = [s for s in parsed.sections if s.row is not None]
    assert {s.page_number for s in rows} == {1, 2, 3}  # 90 rows do not fit one page
    assert {s.header for s in rows} == {f"{INTRO}\n{HEADER_LINE}"}


def test_a_pdf_table_going_on_without_its_header_gets_the_header_of_the_page_before() -> None:
    rows = fleet(90)
    parsed = _parsed("fleet.pdf", pdf_table(rows, repeat_header=False))
    table = [s for s in parsed.sections if s.row is not None]
    assert {s.page_number for s in table} == {1, 2, 3}
    assert {s.header for s in table} == {f"{INTRO}\n{HEADER_LINE}"}
    assert [s.text for s in table] == [" | ".join(row) for row in rows]


def test_pdf_table_detection_stops_at_half_the_parse_budget() -> None:
    rows = fleet(90)
    parsed = _parsed(*table_file("pdf", rows), ParseLimits(seconds=0.0, seconds_per_mb=0.0))
    assert all(s.row is None for s in parsed.sections)  # every page as pypdf reads it
    assert f"{rows[80][0]} {rows[80][1]}" in "\n".join(s.text for s in parsed.sections)


def test_a_pdf_without_ruled_tables_is_read_as_before() -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 6, "Vessel Home port Length Crew\nquorvoz Port 1 20 4")
    parsed = _parsed("plain.pdf", bytes(pdf.output()))
    assert [(s.text, s.row) for s in parsed.sections] == [
        ("Vessel Home port Length Crew\nquorvoz Port 1 20 4", None)
    ]


def test_a_table_whose_first_row_is_data_has_no_header() -> None:
    html = "<p>Readings.</p><table>" + "".join(
        f"<tr><td>{n}</td><td>{n * 2}</td></tr>" for n in range(3)
    )
    parsed = Parser().parse(html + "</table>", SourceType.HTML)
    assert [(s.row, s.header, s.text) for s in parsed.sections[1:]] == [
        (1, "Readings.", "0 | 0"),
        (2, "Readings.", "1 | 2"),
        (3, "Readings.", "2 | 4"),
    ]


def test_an_html_caption_wins_over_the_paragraph_before() -> None:
    html = (
        "<p>Some long introduction.</p><table><caption>Fleet register</caption>"
        "<tr><th>Vessel</th><th>Crew</th></tr><tr><td>Quorvoz</td><td>4</td></tr></table>"
    )
    [_, row] = Parser().parse(html, SourceType.HTML).sections
    assert (row.header, row.text) == ("Fleet register\nVessel | Crew", "Quorvoz | 4")


# Bad input


@pytest.mark.parametrize("kind", ["html", "markdown"])
def test_a_table_of_100000_rows_parses_in_bounded_time_and_past_max_rows_is_413(
    kind: str,
) -> None:
    rows = [[vessel(n), f"Port {n % 9}", str(n % 80), str(n % 31)] for n in range(100_000)]
    name, data = table_file(kind, rows)
    started = time.monotonic()
    parsed = _parsed(name, data)
    assert time.monotonic() - started < 60  # ~5 s alone
    assert sum(s.row is not None for s in parsed.sections) == 100_000
    with pytest.raises(PayloadTooLarge) as caught:
        _parsed(name, data, ParseLimits(max_rows=50_000))
    assert caught.value.extra == {"limit": "max_rows", "value": 50_000}
    assert "tables have more than 50,000 rows" in caught.value.detail


def test_a_word_table_past_max_rows_is_413() -> None:
    rows = "".join(
        f"<w:tr><w:tc><w:p><w:r><w:t>v{n}</w:t></w:r></w:p></w:tc></w:tr>" for n in range(2_001)
    )
    body = f"<w:document {_W}><w:body><w:tbl>{rows}</w:tbl></w:body></w:document>"
    data = bombs.replaced(docx_bytes(), "word/document.xml", body.encode())
    with pytest.raises(PayloadTooLarge) as caught:
        _parsed("big.docx", data, ParseLimits(max_rows=2_000))
    assert caught.value.extra == {"limit": "max_rows", "value": 2_000}


def test_a_row_of_1000_columns_is_cut_between_cells() -> None:
    header = [f"column {c}" for c in range(1_000)]
    rows = [[f"r{r}c{c}" for c in range(1_000)] for r in range(3)]
    parsed = Parser().parse(html_table(rows, header), SourceType.HTML)
    drafts = small_chunker().split(parsed)
    assert all(d.token_count <= 200 for d in drafts)
    # the header, far over half a chunk, is its own chunks; each row's cells all kept, whole
    cells = [cell for d in drafts for cell in d.content.split(" | ") if cell.startswith("r")]
    for r in range(3):
        assert {c for c in cells if c.startswith(f"r{r}c")} == {f"r{r}c{c}" for c in range(1_000)}


def test_a_cell_of_half_a_megabyte_is_cut_between_words_under_the_header() -> None:
    words = " ".join(f"word{n}" for n in range(50_000))  # ~0.5 MB in one cell
    text = markdown_table([["Quorvoz", words], ["Talmek", "short"]], ("Vessel", "Notes"))
    started = time.monotonic()
    drafts = small_chunker().split(Parser().parse(text, SourceType.MARKDOWN))
    assert time.monotonic() - started < 90  # the splitter's pace on any text: ~1,200 chunks
    rows = [d for d in drafts if d.content.startswith(f"{INTRO}\nVessel | Notes\n")]
    assert len(rows) > 500
    assert all(d.token_count <= 200 for d in rows)
    # cut between cells first: the vessel alone, then the cell's words
    assert rows[0].content.split("\n")[2] == "Quorvoz"
    assert rows[1].content.split("\n")[2].startswith("word0 word1")
    assert rows[-1].content.endswith("Talmek | short")
    for draft in rows[1:-1]:  # cut between words, never inside one
        assert draft.content.split("\n")[2].startswith("word")


_W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def _cell(text: str, props: str = "") -> str:
    return f"<w:tc>{props}<w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:tc>"


def test_merged_and_nested_word_cells_are_read_once_inside_their_row() -> None:
    nested = (
        "<w:tc><w:tbl><w:tr>" + _cell("inner a") + _cell("inner b") + "</w:tr></w:tbl><w:p/></w:tc>"
    )
    body = (
        f"<w:document {_W}><w:body><w:p><w:r><w:t>Crews by port.</w:t></w:r></w:p><w:tbl>"
        "<w:tr><w:trPr><w:tblHeader/></w:trPr>" + _cell("Port") + _cell("Vessel") + "</w:tr>"
        "<w:tr>"
        + _cell("Port 1", '<w:tcPr><w:vMerge w:val="restart"/></w:tcPr>')
        + _cell("Quorvoz")
        + "</w:tr>"
        "<w:tr>" + _cell("", "<w:tcPr><w:vMerge/></w:tcPr>") + nested + "</w:tr>"
        "<w:tr>" + _cell("both", '<w:tcPr><w:gridSpan w:val="2"/></w:tcPr>') + "</w:tr>"
        "</w:tbl></w:body></w:document>"
    )
    data = bombs.replaced(docx_bytes(), "word/document.xml", body.encode())
    rows = [s for s in _parsed("merged.docx", data).sections if s.row is not None]
    assert [(s.row, s.header, s.text) for s in rows] == [
        (2, "Crews by port.\nPort | Vessel", "Port 1 | Quorvoz"),
        (3, "Crews by port.\nPort | Vessel", " | inner a inner b"),
        (4, "Crews by port.\nPort | Vessel", "both"),
    ]


def test_merged_and_nested_html_cells_are_read_once_inside_their_row() -> None:
    html = (
        "<table><tr><th>Port</th><th>Vessel</th><th>Crew</th></tr>"
        '<tr><td rowspan="65534">Port 1</td><td colspan="1000">Quorvoz</td></tr>'
        "<tr><td><table><tr><td>inner a</td><td>inner b</td></tr></table></td><td>4</td></tr>"
        "</table>"
    )
    rows = Parser().parse(html, SourceType.HTML).sections
    assert [(s.row, s.header, s.text) for s in rows] == [
        (2, "Port | Vessel | Crew", "Port 1 | Quorvoz"),
        (3, "Port | Vessel | Crew", "inner a inner b | 4"),
    ]


def test_tables_nested_deep_are_read_once_or_refused_in_bounded_time() -> None:
    def nested(depth: int) -> str:
        return "<table><tr><td>" * depth + "deep" + "</td></tr></table>" * depth

    started = time.monotonic()
    [row] = Parser().parse(nested(80), SourceType.HTML).sections  # the outer table read once
    assert (row.row, row.text) == (1, "deep")
    with pytest.raises(Unprocessable):  # past the HTML parser's depth (256 elements): no text
        Parser().parse(nested(1_000), SourceType.HTML)
    assert time.monotonic() - started < 10
