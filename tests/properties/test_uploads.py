"""Upload properties: bytes are sniffed and parsed into a storable document, or refused with
the documented errors (415 from sniffing, 422 from parsing), never anything else: arbitrary
bytes, text in every encoding the decoder knows or refuses, binary magic numbers, damaged PDFs.
"""

from __future__ import annotations

import codecs
from functools import cache

import pytest
from fpdf import FPDF
from hypothesis import assume, given
from hypothesis import strategies as st

from app.errors import AppError, PayloadTooLarge, Unprocessable, UnsupportedMediaType
from app.ingest.parsing import (
    ParsedDocument,
    SourceType,
    parse_bytes,
    parse_text,
    sniff_source_type,
)
from tests.properties import examples
from tests.properties.documents import TEXT_TYPES, assert_storable, documents, outcome

ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")

# bs4 warns about input that looks like a file name, a URL or XML: generated input often does.
pytestmark = [
    pytest.mark.filterwarnings("ignore::bs4.MarkupResemblesLocatorWarning"),
    pytest.mark.filterwarnings("ignore::bs4.XMLParsedAsHTMLWarning"),
]

# Text in the encodings the decoder knows or refuses (UTF-16 without a BOM has NUL bytes),
# lone surrogates kept as bytes, arbitrary bytes, and binary formats' magic numbers.
ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be"]
encoded = st.one_of(
    st.binary(max_size=300),
    st.builds(
        lambda text, encoding: text.encode(encoding, "surrogatepass"),
        documents,
        st.sampled_from(ENCODINGS),
    ),
    st.builds(
        b"".join,
        st.tuples(
            st.sampled_from([b"%PDF-1.7\n", b"PK\x03\x04", b"\x89PNG\r\n\x1a\n"]), st.binary()
        ),
    ),
)


@examples(300)
@given(encoded, st.sampled_from(list(SourceType)))
def test_any_bytes_parse_into_storable_sections_or_are_a_422(
    data: bytes, source_type: SourceType
) -> None:
    result = outcome(lambda: parse_bytes(data, source_type))

    if isinstance(result, ParsedDocument):
        assert_storable(result)
    else:
        assert isinstance(result, Unprocessable)


@examples(200)
@given(
    documents.filter(lambda text: not text.startswith("\ufeff")),
    st.sampled_from(TEXT_TYPES),
    st.sampled_from(["utf-8", "utf-8-sig", "utf-16"]),
)
def test_encoded_text_parses_as_the_text_itself(
    text: str, source_type: SourceType, encoding: str
) -> None:
    """UTF-8 (with or without a BOM) and UTF-16 with a BOM decode transparently."""
    # HTML bytes with a NUL are refused before any charset guess (the test at the end)
    assume(source_type is not SourceType.HTML or "\x00" not in text)
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError:  # a lone surrogate, which test_parsing.py covers
        return
    from_bytes = outcome(lambda: parse_bytes(data, source_type))
    from_text = outcome(lambda: parse_text(text, source_type))

    if isinstance(from_text, AppError):
        assert type(from_bytes) is type(from_text)
    else:
        assert from_bytes == from_text


@examples(300)
@given(
    encoded,
    st.sampled_from([None, "notes.txt", "page.HTML", "guide.md", "scan.pdf", "", ".md"]),
    st.sampled_from([None, "text/html", "text/markdown; charset=utf-8", "application/pdf", ""]),
)
def test_sniffed_uploads_parse_or_are_refused_with_the_documented_errors(
    data: bytes, filename: str | None, declared: str | None
) -> None:
    try:
        source_type = sniff_source_type(data, filename=filename, declared=declared)
    except UnsupportedMediaType:
        assert not data.startswith(b"%PDF-")
        return
    except (Unprocessable, PayloadTooLarge):  # a ZIP is judged by its directory and members
        assert data.startswith(ZIP_MAGIC)
        return
    assert (source_type is SourceType.PDF) == data.startswith(b"%PDF-")
    if not source_type.file_only:  # text with NUL bytes is binary, unless UTF-16
        head = data[:8192]
        assert b"\x00" not in head or head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
    result = outcome(lambda: parse_bytes(data, source_type))
    if isinstance(result, ParsedDocument):
        assert_storable(result)
    else:  # the type was right: only the content can be refused
        assert isinstance(result, Unprocessable)


def test_html_bytes_with_a_nul_are_refused_whatever_encoding_a_detector_guesses() -> None:
    """Uploads cannot reach it today (sniffing refuses NUL bytes in the first 8 KiB); the guess
    comes from charset_normalizer, which UnicodeDammit uses when installed (requests needs it)."""
    data = b"0" * 15 + b"\x00"  # found by the property above; "〰〰〰〰〰〰〰" as UTF-16-BE

    assert isinstance(outcome(lambda: parse_bytes(data, SourceType.HTML)), Unprocessable)


@cache
def sample_pdf() -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    pdf.set_title("Quarterly (draft) \\ figures")
    for text in ["Aardvark lives here.", "", "Chameleon (lives) here \\ too.\nSecond line."]:
        pdf.add_page()
        if text:
            pdf.multi_cell(0, 10, text)
    return bytes(pdf.output())


@st.composite
def damaged_pdfs(draw: st.DrawFn) -> bytes:
    """A real PDF with up to four bytes changed, runs inserted or deleted, or its tail cut."""
    data = bytearray(sample_pdf())
    for _ in range(draw(st.integers(0, 4))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        change = draw(st.sampled_from(["set", "cut", "insert", "delete"]))
        if change == "set":
            data[at] = draw(st.integers(0, 255))
        elif change == "cut":
            del data[max(at, 5) :]
        elif change == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            del data[at : at + draw(st.integers(1, 16))]
    return bytes(data)


@examples(100)
@given(damaged_pdfs())
def test_damaged_pdfs_give_numbered_pages_or_a_422(data: bytes) -> None:
    result = outcome(lambda: parse_bytes(data, SourceType.PDF))

    if isinstance(result, AppError):
        assert isinstance(result, Unprocessable)
        return
    assert_storable(result)
    pages = [section.page_number or 0 for section in result.sections]
    assert all(page >= 1 for page in pages)
    assert pages == sorted(set(pages))
    assert all(section.section_path == () for section in result.sections)
