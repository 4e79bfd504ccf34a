"""What every parser returns: a title and the document's text as sections."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from app.errors import Unprocessable


class SourceType(StrEnum):
    TEXT = "text"
    MARKDOWN = "markdown"
    HTML = "html"
    PDF = "pdf"
    DOCX = "docx"
    PPTX = "pptx"
    XLSX = "xlsx"
    EPUB = "epub"
    ODT = "odt"

    @property
    def file_only(self) -> bool:
        """Binary formats: they come as uploaded files, never as text in a JSON body."""
        return self not in _TEXT_TYPES

    @property
    def label(self) -> str:
        """What a person calls a file of this type: "PDF", "Word document" …"""
        return _LABELS[self]

    @property
    def suffixes(self) -> tuple[str, ...]:
        """The file name endings of this type, the usual one first."""
        return _SUFFIXES[self]


# The registry of what ingest reads: every door (API, console, CLI) lists formats from here.
_TEXT_TYPES = frozenset({SourceType.TEXT, SourceType.MARKDOWN, SourceType.HTML})
_LABELS = {
    SourceType.TEXT: "Plain text",
    SourceType.MARKDOWN: "Markdown",
    SourceType.HTML: "HTML",
    SourceType.PDF: "PDF",
    SourceType.DOCX: "Word document",
    SourceType.PPTX: "PowerPoint presentation",
    SourceType.XLSX: "Excel workbook",
    SourceType.EPUB: "EPUB book",
    SourceType.ODT: "OpenDocument text",
}
_SUFFIXES = {
    SourceType.TEXT: (".txt", ".text"),
    SourceType.MARKDOWN: (".md", ".markdown", ".mdown", ".mkd"),
    SourceType.HTML: (".html", ".htm", ".xhtml"),
    SourceType.PDF: (".pdf",),
    SourceType.DOCX: (".docx",),
    SourceType.PPTX: (".pptx",),
    SourceType.XLSX: (".xlsx",),
    SourceType.EPUB: (".epub",),
    SourceType.ODT: (".odt",),
}


@dataclass(frozen=True, slots=True)
class Section:
    """A run of text under one heading path (markdown, HTML, Word, EPUB, ODT), on one page
    (PDF) or slide (PowerPoint), or one row of a table (`row` is its number). The chunker
    packs a table's consecutive rows into chunks, whole rows, each chunk starting with the
    table's `header`. A sheet's rows (Excel, `table` None) are numbered as Excel numbers them
    and their chunks say which rows they hold; a document's table (`table` its number, from 1)
    keeps the page, slide or headings of the text around it."""

    text: str
    section_path: tuple[str, ...]
    page_number: int | None
    row: int | None = None
    header: str = ""  # the table's caption and header row, repeated atop each chunk of its rows
    table: int | None = None
    ocr: bool = False  # read from the page's image (ocr.py): the page had no text layer


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    title: str | None
    sections: list[Section]
    # PDF pages without a text layer, left for OCR to read (ocr.py); () once it has
    scanned_pages: tuple[int, ...] = ()


def document(title: str | None, sections: list[Section]) -> ParsedDocument:
    """A ParsedDocument of the sections that hold text; 422 when none does."""
    kept = [section for section in sections if section.text.strip()]
    if not kept:
        raise Unprocessable("the document has no text")
    return ParsedDocument(title=title or None, sections=kept)
