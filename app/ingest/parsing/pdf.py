"""PDF: one section per page that has text, numbered from 1, with pypdf, under limits
(limits.py): pages, characters, inflated stream size. The wall-clock budget is the
sandbox's (sandbox.py), which can stop a page that never ends. Pages ruled for tables are
read again for their tables (pdftables.py): row sections of the same page."""

from __future__ import annotations

import io
import logging

from pypdf import PasswordType, PdfReader, apply_configuration
from pypdf.errors import DependencyError, LimitReachedError

from app.errors import PayloadTooLarge, Unprocessable
from app.ingest.parsing.limits import DEFAULT_LIMITS, ParseLimits, too_many_chars
from app.ingest.parsing.model import ParsedDocument, Section
from app.ingest.parsing.ocr import no_text_layer, scanned_pages
from app.ingest.parsing.pdftables import page_tables, ruled

logger = logging.getLogger(__name__)

_TITLE_MAX_CHARS = 120
_TITLE_MAX_WORDS = 16


def parse_pdf(data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    """The text layer of each page, as pypdf extracts it.

    A PDF locked with only an owner password (print/copy restrictions) opens with the empty
    user password, as in any viewer; one that needs a password to open is 422, and so is a
    corrupt file. Pages without text are left in `scanned_pages` for OCR (ocr.py); with OCR
    off, a PDF without any text layer is 422. More pages or characters than the limits allow,
    or a stream inflating past them, is 413.
    """
    inflated = limits.max_inflated_bytes
    with apply_configuration(
        zlib_maximum_output_length=inflated,
        lzw_maximum_output_length=inflated,
        run_length_maximum_output_length=inflated,
        brotli_maximum_output_length=inflated,
        array_based_stream_maximum_output_length=inflated,
        stream_decoding_work_maximum_length=4 * inflated,
    ):
        try:
            reader = _open(data, limits)
            texts = _page_texts(reader, limits)
            sections = _sections(data, reader, texts, limits)
        except LimitReachedError as exc:
            raise PayloadTooLarge(
                f"the PDF inflates beyond what one document may ({_describe(exc)}; "
                f"RAG_PARSE_MAX_INFLATED_BYTES is {inflated:,} bytes per stream)",
                extra={"limit": "max_inflated_bytes", "value": inflated},
            ) from exc
    sections = [s for s in sections if s.text.strip()]
    scanned = scanned_pages(texts, limits)  # read by OCR next (ocr.py), unless it is off
    if not sections and not scanned:
        raise no_text_layer(limits)
    title = _title(reader, sections[0].text if sections else "")
    return ParsedDocument(title or None, sections, scanned_pages=scanned)


def _open(data: bytes, limits: ParseLimits) -> PdfReader:
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
            raise Unprocessable("the PDF is encrypted: upload a copy without a password")
        pages = len(reader.pages)  # reads the page tree, where truncated files usually fail
    except (Unprocessable, DependencyError, LimitReachedError):
        raise
    except Exception as exc:  # pypdf raises many types (ValueError, KeyError …) on bad files
        raise Unprocessable(
            f"the PDF could not be read (corrupt or truncated?): {_describe(exc)}"
        ) from exc
    if pages > limits.max_pages:
        raise PayloadTooLarge(
            f"the PDF has {pages:,} pages, more than {limits.max_pages:,} "
            "(RAG_PARSE_MAX_PAGES): split it, or raise the limit",
            extra={"limit": "max_pages", "value": limits.max_pages},
        )
    return reader


def _page_texts(reader: PdfReader, limits: ParseLimits) -> list[str]:
    texts: list[str] = []
    chars = 0
    for number, page in enumerate(reader.pages, start=1):
        try:
            text = page.extract_text()
        except (DependencyError, LimitReachedError):
            raise
        except Exception as exc:
            raise Unprocessable(
                f"page {number} of the PDF could not be read: {_describe(exc)}"
            ) from exc
        texts.append(_clean(text))
        chars += len(texts[-1])
        if chars > limits.max_chars:  # stop reading: the rest cannot be kept anyway
            raise too_many_chars(limits)
    return texts


def _sections(
    data: bytes, reader: PdfReader, texts: list[str], limits: ParseLimits
) -> list[Section]:
    """Each page's text; on the pages whose tables were found, the text around them and the
    tables' rows."""
    candidates = [
        number
        for number, (page, text) in enumerate(zip(reader.pages, texts, strict=True), start=1)
        if text.strip() and ruled(page)
    ]
    tables = page_tables(data, candidates, limits) if candidates else {}
    sections: list[Section] = []
    for number, text in enumerate(texts, start=1):
        found = tables.get(number)
        sections.append(Section(_clean(found.text) if found else text, (), number))
        sections += found.rows if found else []
    return [section for section in sections if section.text.strip()]


def _clean(text: str) -> str:
    """Unix newlines without trailing spaces, minus what PostgreSQL text cannot hold."""
    text = text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return "\n".join(lines).strip()


def _title(reader: PdfReader, first_page: str) -> str | None:
    """The metadata title, else the first line of the first page with text if it looks like a
    heading: at most 120 characters and 16 words, containing a letter, not ending in a period.
    """
    try:
        metadata_title = reader.metadata.title if reader.metadata else None
    except Exception:  # a broken Info dictionary only costs the title
        logger.debug("unreadable PDF metadata", exc_info=True)
        metadata_title = None
    if isinstance(metadata_title, str) and metadata_title.strip():
        return " ".join(_clean(metadata_title).split())
    line = " ".join(first_page.split("\n", 1)[0].split())
    looks_like_heading = (
        len(line) <= _TITLE_MAX_CHARS
        and len(line.split()) <= _TITLE_MAX_WORDS
        and any(char.isalpha() for char in line)
        and not line.endswith(".")
    )
    return line if looks_like_heading else None


def _describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
