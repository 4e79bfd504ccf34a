"""Reading a document under the parse limits (limits.py): the formats that only come as files,
and markdown and HTML of more than `ParseLimits.inline_bytes`. The service calls `read_file`
in a killable worker process (sandbox.py)."""

from __future__ import annotations

from collections.abc import Callable

from app.errors import UnsupportedMediaType
from app.ingest.parsing.epub import parse_epub
from app.ingest.parsing.limits import DEFAULT_LIMITS, ParseLimits
from app.ingest.parsing.markup import parse_markup
from app.ingest.parsing.model import ParsedDocument, SourceType
from app.ingest.parsing.ocr import read_scanned
from app.ingest.parsing.odt import parse_odt
from app.ingest.parsing.pdf import parse_pdf
from app.ingest.parsing.sheets import parse_xlsx
from app.ingest.parsing.slides import parse_pptx
from app.ingest.parsing.word import parse_docx

_READERS: dict[SourceType, Callable[[bytes, ParseLimits], ParsedDocument]] = {
    SourceType.PDF: parse_pdf,
    SourceType.DOCX: parse_docx,
    SourceType.PPTX: parse_pptx,
    SourceType.XLSX: parse_xlsx,
    SourceType.EPUB: parse_epub,
    SourceType.ODT: parse_odt,
}


def read_file(
    content: str | bytes, source_type: SourceType, limits: ParseLimits = DEFAULT_LIMITS
) -> ParsedDocument:
    """A `FileReading` in this process, scanned PDF pages read by OCR: the wall-clock budget
    is the sandbox's to enforce."""
    parsed = read_text(content, source_type, limits)
    if parsed.scanned_pages and isinstance(content, bytes):
        return read_scanned(content, parsed, limits)
    return parsed


def read_text(
    content: str | bytes, source_type: SourceType, limits: ParseLimits = DEFAULT_LIMITS
) -> ParsedDocument:
    """The file's text, a PDF's pages without text left in `scanned_pages` (for OCR)."""
    kind = SourceType(source_type)
    if not kind.file_only:
        return parse_markup(content, kind, limits)
    if isinstance(content, str):
        raise UnsupportedMediaType(f"{kind.label} files are uploaded as files, never as text")
    return _READERS[kind](content, limits)
