"""What one document may cost to parse, and the parser that holds every document to it.

A few kilobytes of PDF can hold work for minutes (one content stream of 100,000 operators
drawn by every page) or a stream that inflates to gigabytes. So PDFs are read under limits:
pages, characters of text, bytes a stream may inflate to, and a wall-clock budget that grows
with the file (`seconds` plus `seconds_per_mb` for each megabyte sent: work in proportion to
what was sent). With a sandbox (sandbox.py) the budget is enforced by killing the worker
process that overruns it; without one (the command line's own files) the other limits still
hold. Markdown and HTML of more than `inline_bytes` go to the same workers under the same
budget (their parsers are linear, but a megabyte is a tree of a few hundred thousand nodes,
seconds of CPU and tens of megabytes: that is the workers' to spend, not the API process's);
smaller ones, and plain text, are parsed in the calling thread. Everything is bounded by the
upload size and by `max_chars`.

Word, PowerPoint, Excel, EPUB and ODT files are ZIP containers of XML, read in the same
sandbox under the same budget: each member may inflate to `max_inflated_bytes`, all of them
together to `max_unzipped_bytes` (declared sizes checked before anything is inflated, actual
bytes counted while reading), no XML may nest deeper than `max_xml_depth` or declare entities,
slides count as pages, and a workbook's sheets may hold `max_rows` rows, empty ones included
(zipped.py, xmlsafe.py). A member the reader builds a tree of (all but a workbook's, which are
streamed) may hold `max_xml_elements` elements, counted as it streams in: a tree costs a
hundred-odd bytes an element, and 58 KB of ODT holding 3.4 million `<text:s/>` grew a reader
to 600 MB before it.

PDF pages without a text layer (scans) are read by OCR (ocr.py) after the rest of the file,
in a second call to the workers with a budget of its own: `seconds` plus
`ocr_seconds_per_page` for each scanned page, at most `ocr_max_pages` of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from app.errors import PayloadTooLarge
from app.ingest.parsing.model import ParsedDocument, SourceType

MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ParseLimits:
    seconds: float = 5.0
    seconds_per_mb: float = 10.0
    max_pages: int = 5_000
    max_chars: int = 10_000_000
    max_inflated_bytes: int = 32 * MB  # one PDF stream or one ZIP member, decompressed
    max_unzipped_bytes: int = 256 * MB  # every member of a ZIP container, together
    max_rows: int = 200_000  # rows of a workbook's sheets, empty ones included
    max_xml_depth: int = 128  # nesting of any XML inside a container
    max_xml_elements: int = 1_000_000  # elements of one XML member a reader builds a tree of
    inline_bytes: int = 32 * 1024  # markdown and HTML up to this size parse in the caller
    # PDF pages without a text layer are read from their image (ocr.py), under their own budget
    ocr: bool = True
    ocr_languages: str = "eng"  # Tesseract's names, "+" between two
    ocr_max_pages: int = 100  # scanned pages of one PDF
    ocr_seconds_per_page: float = 20.0

    def budget(self, size_bytes: int) -> float:
        """Wall-clock seconds a file of `size_bytes` may take to parse."""
        return self.seconds + self.seconds_per_mb * size_bytes / MB

    def ocr_budget(self, pages: int) -> float:
        """Wall-clock seconds the OCR of `pages` scanned pages may take (ocr.py)."""
        return self.seconds + self.ocr_seconds_per_page * min(pages, self.ocr_max_pages)


DEFAULT_LIMITS = ParseLimits()


def check_chars(parsed: ParsedDocument, limits: ParseLimits) -> ParsedDocument:
    """413 when the parsed text is longer than `limits.max_chars`."""
    total = sum(len(section.text) for section in parsed.sections)
    if total > limits.max_chars:
        raise too_many_chars(limits)
    return parsed


def too_many_chars(limits: ParseLimits) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the document's text is longer than {limits.max_chars:,} characters "
        "(RAG_PARSE_MAX_CHARS): split it, or raise the limit",
        extra={"limit": "max_chars", "value": limits.max_chars},
    )


class FileReading(Protocol):
    """Reads a binary file (PDF, Word, PowerPoint, Excel, EPUB, ODT), or markdown or HTML
    larger than `limits.inline_bytes`, into sections under the limits, in a sandbox or in
    process."""

    def __call__(
        self, content: str | bytes, source_type: SourceType, limits: ParseLimits
    ) -> ParsedDocument: ...
