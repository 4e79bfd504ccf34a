"""Word, PowerPoint, Excel, EPUB and ODT files: what each becomes (sections, paths, pages,
rows), how a ZIP is recognised by its members, and the containers built to hurt a reader."""

from __future__ import annotations

import datetime as dt
import io
import time

import openpyxl
import pytest

from app.embeddings.local import default_tokenizer_path
from app.errors import AppError, PayloadTooLarge, Unprocessable, UnsupportedMediaType
from app.ingest.chunking import Chunker, load_tokenizer
from app.ingest.parsing import ParsedDocument, SourceType, parse_bytes, sniff_source_type
from app.ingest.parsing.limits import ParseLimits
from tests.conftest import small_chunker
from tests.ingest import office_bombs as bombs
from tests.ingest.office import (
    docx_bytes,
    epub_bytes,
    odt_bytes,
    pptx_bytes,
    xlsx_bytes,
    zip_of,
)

MB = 1024 * 1024
SMALL = ParseLimits(max_inflated_bytes=MB, max_unzipped_bytes=4 * MB)


def _parsed(data: bytes, limits: ParseLimits = SMALL) -> ParsedDocument:
    return parse_bytes(data, _sniff(data), limits=limits)


def _sniff(data: bytes, filename: str | None = None) -> SourceType:
    return sniff_source_type(data, filename=filename, declared=None)


def _refused(error: type[AppError], data: bytes, limits: ParseLimits = SMALL) -> AppError:
    with pytest.raises(error) as caught:
        _parsed(data, limits)
    return caught.value


def _outline(parsed: ParsedDocument) -> list[tuple[tuple[str, ...], int | None, str]]:
    return [(s.section_path, s.page_number, s.text) for s in parsed.sections]


def _headers(parsed: ParsedDocument) -> list[tuple[int | None, str]]:
    """Each table row's number and the header above it."""
    return [(s.row, s.header) for s in parsed.sections if s.row is not None]


# Sniffing


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (docx_bytes(), SourceType.DOCX),
        (pptx_bytes(), SourceType.PPTX),
        (xlsx_bytes(rows=2), SourceType.XLSX),
        (epub_bytes(), SourceType.EPUB),
        (odt_bytes(), SourceType.ODT),
    ],
    ids=["docx", "pptx", "xlsx", "epub", "odt"],
)
def test_containers_are_known_by_their_members_whatever_the_name(
    data: bytes, expected: SourceType
) -> None:
    assert _sniff(data, "notes.txt") is expected
    assert _sniff(data) is expected


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (zip_of([("notes.txt", b"hello")]), "ZIP archive, not a document"),
        (
            zip_of([("mimetype", b"application/vnd.oasis.opendocument.spreadsheet")]),
            "OpenDocument spreadsheet",
        ),
        (
            bombs.replaced(
                docx_bytes(),
                "[Content_Types].xml",
                b'<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                b'<Override PartName="/word/document.xml" ContentType="application/'
                b'vnd.ms-word.document.macroEnabled.main+xml"/></Types>',
            ),
            "macro-enabled Word file: save it as a Word document (.docx)",
        ),
        (bombs.legacy_office("WordDocument"), "legacy Word document (.doc): save it as .docx"),
        (bombs.legacy_office("Workbook"), "legacy Excel workbook (.xls): save it as .xlsx"),
        (bombs.legacy_office("PowerPoint Document"), "(.ppt): save it as .pptx"),
        (bombs.legacy_office("EncryptedPackage"), "password-protected"),
        (bombs.legacy_office("Other"), "legacy binary Microsoft Office file"),
    ],
    ids=["plain-zip", "ods", "docm", "doc", "xls", "ppt", "encrypted-ooxml", "ole"],
)
def test_other_zips_and_legacy_office_files_are_415_saying_what_to_do(
    data: bytes, says: str
) -> None:
    with pytest.raises(UnsupportedMediaType, match=r"supported: PDF, Word") as caught:
        _sniff(data, "report.docx")
    assert says in caught.value.detail


def test_a_truncated_zip_is_corrupt() -> None:
    with pytest.raises(Unprocessable, match="truncated"):
        _sniff(docx_bytes()[:600], "report.docx")


# Word


def test_word_headings_become_section_paths_and_tables_rows() -> None:
    parsed = _parsed(docx_bytes())
    assert parsed.title == "Field Handbook"  # the Title paragraph, not a section of its own
    assert _outline(parsed) == [
        ((), None, "Read this before the first expedition."),
        (("Equipment",), None, "Pack the aardvark lantern and spare batteries."),
        (("Equipment", "Tents"), None, "The bumblebee tent sleeps four."),
        (("Equipment", "Tents"), None, "Tent | 4 kg"),
        (("Safety",), None, "Chameleons bite when cornered."),
    ]
    # the paragraph introducing the table, and its header row
    assert _headers(parsed) == [(2, "The bumblebee tent sleeps four.\nItem | Weight")]


def test_word_title_property_wins() -> None:
    assert _parsed(docx_bytes(title="Expedition Manual")).title == "Expedition Manual"


_W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
_MC = 'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'


def test_word_reads_insertions_controls_and_text_boxes_once_and_skips_the_contents() -> None:
    body = (
        f"<w:document {_W} {_MC}><w:body>"
        '<w:sdt><w:sdtPr><w:docPartObj><w:docPartGallery w:val="Table of Contents"/>'
        "</w:docPartObj></w:sdtPr><w:sdtContent><w:p><w:r><w:t>Contents 1</w:t></w:r></w:p>"
        "</w:sdtContent></w:sdt>"
        '<w:p><w:pPr><w:outlineLvl w:val="0"/></w:pPr><w:r><w:t>Outlined</w:t></w:r></w:p>'
        "<w:p><w:r><w:t>kept </w:t></w:r><w:ins><w:r><w:t>inserted</w:t></w:r></w:ins>"
        "<w:del><w:r><w:delText>deleted</w:delText></w:r></w:del></w:p>"
        "<w:sdt><w:sdtContent><w:p><w:r><w:t>in a control</w:t></w:r></w:p></w:sdtContent>"
        "</w:sdt>"
        "<w:p><w:r><mc:AlternateContent><mc:Choice><w:drawing><w:txbxContent><w:p><w:r>"
        "<w:t>boxed</w:t></w:r></w:p></w:txbxContent></w:drawing></mc:Choice><mc:Fallback>"
        "<w:pict><w:txbxContent><w:p><w:r><w:t>boxed</w:t></w:r></w:p></w:txbxContent>"
        "</w:pict></mc:Fallback></mc:AlternateContent></w:r></w:p>"
        "</w:body></w:document>"
    )
    parsed = _parsed(bombs.replaced(docx_bytes(), "word/document.xml", body.encode()))
    assert _outline(parsed) == [
        (("Outlined",), None, "kept inserted\n\nin a control\n\nboxed"),
    ]


# PowerPoint


def test_slides_are_pages_and_their_titles_sections() -> None:
    parsed = _parsed(pptx_bytes())
    assert parsed.title == "Quarterly Review"
    assert _outline(parsed) == [
        (
            ("Quarterly Review",),
            1,
            "Aardvark sales doubled.\nSpeaker notes: Thank the bumblebee team.",
        ),
        (("Regional Figures",), 2, "North | 42"),  # the slide's text is its table's
    ]
    assert _headers(parsed) == [(2, "Regional Figures\nRegion | Chameleons")]


def test_slides_past_the_page_limit_are_413() -> None:
    deck = pptx_bytes(slides=[(f"Slide {n}", "text") for n in range(4)])
    error = _refused(PayloadTooLarge, deck, ParseLimits(max_pages=3))
    assert error.extra == {"limit": "max_pages", "value": 3}
    assert "4 slides" in error.detail


# Excel


def test_sheet_rows_are_numbered_as_excel_numbers_them_under_their_header() -> None:
    parsed = _parsed(xlsx_bytes(rows=3))
    assert parsed.title is None
    assert [(s.section_path, s.row, s.header, s.text) for s in parsed.sections] == [
        (
            ("Inventory",),
            number + 2,
            "Animal | Count | Checked | Keeper notes",
            f"Animal {number} | {number} | 2024-01-0{number + 1} | animal {number} is a "
            + ("aardvark" if number % 2 else "bumblebee"),
        )
        for number in range(3)
    ] + [(("Notes",), 3, "", " | The chameleon enclosure closes in May.")]


def test_cells_read_as_excel_shows_them() -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Types"
    moment = dt.datetime(2024, 5, 2, 13, 30)
    sheet.append([True, 1.5, 3, moment, dt.time(8, 15), "=1+1", "two\nlines", None, None])
    sheet["B3"] = 2.0
    out = io.BytesIO()
    book.save(out)
    [first, second] = _parsed(out.getvalue()).sections
    # a formula read without Excel has no value yet: an empty cell
    assert first.text == "TRUE | 1.5 | 3 | 2024-05-02 13:30:00 | 08:15:00 |  | two lines"
    assert (second.text, second.row) == (" | 2", 3)


def test_chunks_of_a_sheet_hold_whole_rows_and_say_which() -> None:
    chunker: Chunker = small_chunker()
    drafts = chunker.split(_parsed(xlsx_bytes(rows=120)))
    inventory = [d for d in drafts if d.section_path[0] == "Inventory"]
    assert len(inventory) > 2
    covered: list[int] = []
    for draft in inventory:
        _, rows = draft.section_path
        first, last = (int(n) for n in rows.removeprefix("rows ").split("\u2013"))
        lines = draft.content.split("\n")
        assert lines[0] == "Animal | Count | Checked | Keeper notes"  # the header, each time
        assert [line.split(" | ")[0] for line in lines[1:]] == [
            f"Animal {row - 2}" for row in range(first, last + 1)
        ]
        assert draft.token_count <= 200
        covered += range(first, last + 1)
    assert covered == list(range(2, 122))  # every row once, in order
    [notes] = [d for d in drafts if d.section_path[0] == "Notes"]
    assert notes.section_path == ("Notes", "row 3")


def test_a_header_too_long_to_repeat_is_a_chunk_of_its_own() -> None:
    parsed = _parsed(xlsx_bytes(rows=3))
    tiny = Chunker(load_tokenizer(default_tokenizer_path()), chunk_tokens=14, overlap_tokens=0)
    drafts = [d for d in tiny.split(parsed) if d.section_path[0] == "Inventory"]
    assert drafts[0].section_path == ("Inventory",)  # 8 tokens: more than half of 14
    assert drafts[0].content == "Animal | Count | Checked | Keeper notes"
    rows = [d.section_path[1] for d in drafts[1:]]  # each row longer than a chunk: cut alone
    assert sorted(set(rows)) == ["row 2", "row 3", "row 4"]
    assert rows == sorted(rows)
    assert not any(d.content.startswith("Animal |") for d in drafts[1:])


@pytest.mark.parametrize(
    "data",
    [bombs.spaced_odt(), bombs.crowded_runs_docx(), bombs.crowded_styles_xlsx()],
    ids=["odt-spaces", "docx-runs", "xlsx-styles"],
)
def test_millions_of_tiny_xml_elements_are_413_before_a_tree_is_built(data: bytes) -> None:
    """Counted while the member streams in: refused in seconds, in tens of megabytes."""
    started = time.monotonic()
    error = _refused(PayloadTooLarge, data, ParseLimits(max_xml_elements=500_000))
    assert error.extra == {"limit": "max_xml_elements", "value": 500_000}
    assert "RAG_PARSE_MAX_XML_ELEMENTS" in error.detail
    assert time.monotonic() - started < 10


def test_a_workbook_is_streamed_so_its_elements_are_not_counted() -> None:
    """A sheet's cells are not a tree: its rows are its bound (max_rows), not its elements."""
    data = xlsx_bytes(rows=400)  # a header and 400 rows of cells: more elements than the limit
    parsed = _parsed(data, ParseLimits(max_xml_elements=1_000))
    assert "Animal 399" in " ".join(section.text for section in parsed.sections)


@pytest.mark.parametrize(
    "data", [bombs.empty_rows_xlsx(), bombs.far_row_xlsx()], ids=["million-rows", "far-row"]
)
def test_a_sheet_running_to_a_million_rows_is_413_not_walked(data: bytes) -> None:
    started = time.monotonic()
    error = _refused(PayloadTooLarge, data, ParseLimits(max_rows=50_000))
    assert error.extra == {"limit": "max_rows", "value": 50_000}
    assert "empty rows included" in error.detail
    assert time.monotonic() - started < 10


# EPUB and ODT


def test_epub_chapters_are_sections_named_by_the_contents() -> None:
    parsed = _parsed(epub_bytes())
    assert parsed.title == "A Field Guide"
    assert _outline(parsed) == [
        (("Chapter 1: Aardvarks",), None, "Aardvarks dig burrows at night."),
        (("Chapter 1: Aardvarks", "Diet"), None, "They eat termites."),
        (("Chapter 1: Aardvarks",), None, "More about aardvark ears."),  # goes on
        (("Chapter 2: Bumblebees",), None, "Bumblebees hum in clover."),
    ]


def test_epub_under_drm_is_refused() -> None:
    encryption = (
        b'<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        b'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
        b'<enc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/>'
        b'<enc:CipherData><enc:CipherReference URI="OEBPS/text/ch1.xhtml"/></enc:CipherData>'
        b"</enc:EncryptedData></encryption>"
    )
    data = bombs.replaced(epub_bytes(), "META-INF/encryption.xml", encryption)
    assert "DRM" in _refused(Unprocessable, data).detail


def test_odt_headings_lists_and_tables_without_notes_or_contents() -> None:
    parsed = _parsed(odt_bytes())
    assert parsed.title == "Burrowing Animals"
    assert _outline(parsed) == [
        (("Burrows",), None, "Aardvarks  dig."),
        (("Burrows", "Depth"), None, "Two metres deep."),
        (("Burrows", "Depth"), None, "North | 2 m"),
        (("Bees",), None, "Bumblebees hum."),
    ]
    assert _headers(parsed) == [(2, "Two metres deep.\nSite | Depth")]


# Hostile containers


@pytest.mark.parametrize(
    ("data", "limit"),
    [
        (bombs.inflating_docx(8 * MB), "max_inflated_bytes"),
        (bombs.spread_docx(6, 900_000), "max_unzipped_bytes"),
        (bombs.crowded_docx(10_001), "max_members"),
    ],
    ids=["one-member", "all-members", "members"],
)
def test_a_container_declaring_too_much_is_413_before_inflating(data: bytes, limit: str) -> None:
    started = time.monotonic()
    error = _refused(PayloadTooLarge, data)
    assert error.extra["limit"] == limit
    assert time.monotonic() - started < 5


def test_a_member_inflating_past_its_declared_size_is_corrupt() -> None:
    error = _refused(Unprocessable, bombs.lying_docx(8 * MB), ParseLimits())
    assert "could not be inflated" in error.detail


@pytest.mark.parametrize(
    "data",
    [
        bombs.deep_docx(10_000),
        epub_bytes(chapter_body="<div>" * 10_000 + "deep"),  # unclosed: lenient XHTML too
    ],
    ids=["docx", "epub"],
)
def test_deeply_nested_xml_is_422_naming_the_depth(data: bytes) -> None:
    error = _refused(Unprocessable, data)
    assert error.extra == {"limit": "max_xml_depth", "value": 128}
    assert "RAG_PARSE_MAX_XML_DEPTH" in error.detail


def test_entities_expanding_a_thousandfold_are_refused() -> None:
    error = _refused(Unprocessable, bombs.laughing_docx())
    assert "amplification" in error.detail
