"""Reading a document under the parse limits (limits.py): the formats that only come as files,
and markdown and HTML of more than `ParseLimits.inline_bytes`. The service calls `read_file`
in a killable worker process (sandbox.py).

A format's module is imported when a file of it is first read (`_reader`): pypdf, python-docx,
python-pptx and openpyxl take about half a second of CPU to import, which every `rag` command
paid, reading a file or not, and so did each sandbox worker for the formats it never read.
"""

from __future__ import annotations

from collections.abc import Callable

from app.errors import UnsupportedMediaType
from app.ingest.parsing.limits import DEFAULT_LIMITS, ParseLimits
from app.ingest.parsing.markup import parse_markup
from app.ingest.parsing.model import ParsedDocument, SourceType
from app.ingest.parsing.ocr import read_scanned

Reader = Callable[[bytes, ParseLimits], ParsedDocument]


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
    return _reader(kind)(content, limits)


def _reader(kind: SourceType) -> Reader:
    """The reader of a format that only comes as a file, its module imported now."""
    match kind:
        case SourceType.PDF:
            from app.ingest.parsing.pdf import parse_pdf

            return parse_pdf
        case SourceType.DOCX:
            from app.ingest.parsing.word import parse_docx

            return parse_docx
        case SourceType.PPTX:
            from app.ingest.parsing.slides import parse_pptx

            return parse_pptx
        case SourceType.XLSX:
            from app.ingest.parsing.sheets import parse_xlsx

            return parse_xlsx
        case SourceType.EPUB:
            from app.ingest.parsing.epub import parse_epub

            return parse_epub
        case SourceType.ODT:
            from app.ingest.parsing.odt import parse_odt

            return parse_odt
    raise ValueError(f"{kind} is markup, read by parse_markup")
