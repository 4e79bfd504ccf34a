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


@dataclass(frozen=True, slots=True)
class Section:
    """A run of text under one heading path (markdown, HTML) or on one page (PDF)."""

    text: str
    section_path: tuple[str, ...]
    page_number: int | None


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    title: str | None
    sections: list[Section]


def document(title: str | None, sections: list[Section]) -> ParsedDocument:
    """A ParsedDocument of the sections that hold text; 422 when none does."""
    kept = [section for section in sections if section.text.strip()]
    if not kept:
        raise Unprocessable("the document has no text")
    return ParsedDocument(title=title or None, sections=kept)
