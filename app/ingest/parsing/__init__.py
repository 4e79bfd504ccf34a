"""Parsing uploaded or posted documents into titled sections, one module per format."""

from __future__ import annotations

from dataclasses import dataclass

from app.errors import UnsupportedMediaType
from app.ingest.parsing.files import read_file
from app.ingest.parsing.limits import DEFAULT_LIMITS, FileReading, ParseLimits, check_chars
from app.ingest.parsing.markup import MARKUP, parse_markup, size_of
from app.ingest.parsing.model import ParsedDocument, Section, SourceType
from app.ingest.parsing.sniffing import sniff_source_type

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


def parse_text(
    text: str, source_type: SourceType, *, limits: ParseLimits = DEFAULT_LIMITS
) -> ParsedDocument:
    """A text, markdown or HTML document sent as a string (the JSON ingest path)."""
    source_type = SourceType(source_type)
    if source_type.file_only:
        raise UnsupportedMediaType(
            f"{source_type.label} files are uploaded as files (POST /api/rag/documents/upload), "
            "never sent as text"
        )
    return parse_markup(text, source_type, limits)


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
    return parse_markup(data, source_type, limits)


@dataclass(frozen=True, slots=True)
class Parser:
    """Parses what ingest receives under `limits` (limits.py); `read_file` (PDF, Word,
    PowerPoint, Excel, EPUB, ODT, and markdown or HTML larger than `limits.inline_bytes`) is
    a sandbox (sandbox.py) in the service, in process otherwise."""

    limits: ParseLimits = DEFAULT_LIMITS
    read_file: FileReading = read_file

    def parse(self, content: str | bytes, source_type: SourceType) -> ParsedDocument:
        kind = SourceType(source_type)
        if kind in MARKUP and size_of(content) > self.limits.inline_bytes:
            parsed = self.read_file(content, kind, self.limits)
        elif isinstance(content, bytes):
            parsed = parse_bytes(content, kind, limits=self.limits, read=self.read_file)
        else:
            parsed = parse_text(content, kind, limits=self.limits)
        return check_chars(parsed, self.limits)
