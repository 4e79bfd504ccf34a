"""Text, markdown and HTML, sent as a string (the JSON ingest path) or as uploaded bytes.

The HTML and markdown parsers (Beautiful Soup's decoder, lxml, markdown-it: about 0.1 s of
CPU) are imported by the first document that needs them, not by every `rag` command.
"""

from __future__ import annotations

from app.ingest.parsing.limits import DEFAULT_LIMITS, ParseLimits
from app.ingest.parsing.model import ParsedDocument, SourceType
from app.ingest.parsing.text import clean_text, decode_text, parse_plain

MARKUP = frozenset({SourceType.MARKDOWN, SourceType.HTML})  # what a parser builds a tree of


def parse_markup(
    content: str | bytes, source_type: SourceType, limits: ParseLimits = DEFAULT_LIMITS
) -> ParsedDocument:
    """A text, markdown or HTML document: bytes are decoded (UTF-8, UTF-16 with a BOM, or an
    HTML page's declared charset), a string is checked for what PostgreSQL cannot store;
    `limits.max_rows` bounds the rows of its tables."""
    if source_type is SourceType.HTML:
        from app.ingest.parsing.html import decode_html, parse_html

        text = decode_html(content) if isinstance(content, bytes) else clean_text(content)
        return parse_html(text, limits)
    text = decode_text(content) if isinstance(content, bytes) else clean_text(content)
    if source_type is SourceType.MARKDOWN:
        from app.ingest.parsing.markdown import parse_markdown

        return parse_markdown(text, limits)
    return parse_plain(text)


def size_of(content: str | bytes) -> int:
    """Bytes sent: a string's as UTF-8 (what a budget per megabyte is counted on)."""
    return len(content) if isinstance(content, bytes) else len(content.encode("utf-8", "replace"))
