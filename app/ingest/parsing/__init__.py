"""Parsing uploaded or posted documents into titled sections, one module per format."""

from __future__ import annotations

from dataclasses import dataclass

from app.errors import UnsupportedMediaType
from app.ingest.parsing.files import read_file
from app.ingest.parsing.html import decode_html, parse_html
from app.ingest.parsing.limits import DEFAULT_LIMITS, FileReading, ParseLimits, check_chars
from app.ingest.parsing.markdown import parse_markdown
from app.ingest.parsing.model import ParsedDocument, Section, SourceType
from app.ingest.parsing.sniffing import sniff_source_type
from app.ingest.parsing.text import clean_text, decode_text, parse_plain

__all__ = [
    "ParseLimits",
    "ParsedDocument",
    "Parser",
    "Section",
    "SourceType",
    "parse_bytes",
    "parse_text",
    "sniff_source_type",
]


def parse_text(text: str, source_type: SourceType) -> ParsedDocument:
    """A text, markdown or HTML document sent as a string (the JSON ingest path)."""
    source_type = SourceType(source_type)
    if source_type.file_only:
        raise UnsupportedMediaType(
            f"{source_type.label} files are uploaded as files (POST /api/rag/documents/upload), "
            "never sent as text"
        )
    text = clean_text(text)
    if source_type is SourceType.HTML:
        return parse_html(text)
    if source_type is SourceType.MARKDOWN:
        return parse_markdown(text)
    return parse_plain(text)


def parse_bytes(
    data: bytes,
    source_type: SourceType,
    *,
    limits: ParseLimits = DEFAULT_LIMITS,
    read: FileReading = read_file,
) -> ParsedDocument:
    """An uploaded file of any source type (see `sniff_source_type` to choose it); the binary
    formats go to `read`."""
    source_type = SourceType(source_type)
    if source_type.file_only:
        return read(data, source_type, limits)
    if source_type is SourceType.HTML:
        return parse_html(decode_html(data))
    return parse_text(decode_text(data), source_type)


@dataclass(frozen=True, slots=True)
class Parser:
    """Parses what ingest receives under `limits` (limits.py); `read_file` (PDF, Word,
    PowerPoint, Excel, EPUB, ODT) is a sandbox (sandbox.py) in the service, in process
    otherwise."""

    limits: ParseLimits = DEFAULT_LIMITS
    read_file: FileReading = read_file

    def parse(self, content: str | bytes, source_type: SourceType) -> ParsedDocument:
        if isinstance(content, bytes):
            parsed = parse_bytes(content, source_type, limits=self.limits, read=self.read_file)
        else:
            parsed = parse_text(content, source_type)
        return check_chars(parsed, self.limits)
