"""Text, markdown and HTML, sent as a string (the JSON ingest path) or as uploaded bytes."""

from __future__ import annotations

from app.ingest.parsing.html import decode_html, parse_html
from app.ingest.parsing.limits import DEFAULT_LIMITS, ParseLimits
from app.ingest.parsing.markdown import parse_markdown
from app.ingest.parsing.model import ParsedDocument, SourceType
from app.ingest.parsing.text import clean_text, decode_text, parse_plain

MARKUP = frozenset({SourceType.MARKDOWN, SourceType.HTML})  # what a parser builds a tree of


def parse_markup(
    content: str | bytes, source_type: SourceType, limits: ParseLimits = DEFAULT_LIMITS
) -> ParsedDocument:
    """A text, markdown or HTML document: bytes are decoded (UTF-8, UTF-16 with a BOM, or an
    HTML page's declared charset), a string is checked for what PostgreSQL cannot store;
    `limits.max_rows` bounds the rows of its tables."""
    if isinstance(content, bytes):
        text = decode_html(content) if source_type is SourceType.HTML else decode_text(content)
    else:
        text = clean_text(content)
    if source_type is SourceType.HTML:
        return parse_html(text, limits)
    if source_type is SourceType.MARKDOWN:
        return parse_markdown(text, limits)
    return parse_plain(text)


def size_of(content: str | bytes) -> int:
    """Bytes sent: a string's as UTF-8 (what a budget per megabyte is counted on)."""
    return len(content) if isinstance(content, bytes) else len(content.encode("utf-8", "replace"))
