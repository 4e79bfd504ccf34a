"""PDF pages without a text layer (scans), read from their image: each page is rendered by
PDFium (pypdfium2) and read by Tesseract (tesserocr, in this process, with the language data of
Debian's tesseract-ocr-eng or any other tessdata directory).

It runs in the parse workers (sandbox.py) after the text layer has been read, as a call of its
own with its own budget (`ParseLimits.ocr_budget`): at most `ocr_max_pages` scanned pages
(413 past it, before any is read), `ocr_seconds_per_page` for each (the pages share it; a
worker past it is stopped: 422), the worker's memory cap, and `max_chars` for the text. A page
is rendered at 300 dpi, a large one at fewer pixels (at most `_MAX_PIXELS`). A page whose
words Tesseract reads with a mean confidence under `_MIN_CONFIDENCE` (noise, a photo) gives
no text, so an image of noise adds nothing. Each page read makes a section that says so
(`Section.ocr`: its chunks carry `"ocr": true` in their metadata) and keeps its page number.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from app.errors import PayloadTooLarge, Unprocessable
from app.ingest.parsing.limits import ParseLimits, too_many_chars
from app.ingest.parsing.model import ParsedDocument, Section

if TYPE_CHECKING:
    from PIL.Image import Image
    from pypdfium2 import PdfDocument
    from tesserocr import PyTessBaseAPI

logger = logging.getLogger(__name__)

_DPI = 300
_MAX_PIXELS = 12_000_000  # A4 at 300 dpi is 8.7 million; a larger page is rendered smaller
_MIN_CONFIDENCE = 40  # Tesseract's mean word confidence (0-100) below which a page is noise
# Where Debian (tesseract-ocr-eng), Fedora, Alpine and Homebrew put the language data.
_TESSDATA = (
    "/usr/share/tesseract-ocr/5/tessdata",
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",
    "/usr/local/share/tessdata",
    "/opt/homebrew/share/tessdata",
)
NO_TEXT_LAYER = "the PDF has no text layer (scanned pages?)"


def scanned_pages(texts: list[str], limits: ParseLimits) -> tuple[int, ...]:
    """The numbers (from 1) of the pages without text, for OCR to read; () when it is off."""
    if not limits.ocr:
        return ()
    return tuple(number for number, text in enumerate(texts, start=1) if not text.strip())


def no_text_layer(limits: ParseLimits) -> Unprocessable:
    """The 422 of a PDF with no text at all, when OCR did not run (RAG_OCR=off)."""
    hint = " OCR is off here (RAG_OCR=off):" if not limits.ocr else ""
    return Unprocessable(f"{NO_TEXT_LAYER}:{hint} run OCR on it first, then upload it again")


def missing(languages: str) -> str | None:
    """Why OCR cannot run here with `languages`, or None when it can."""
    try:
        import tesserocr  # noqa: F401
    except ImportError:
        return "its engine is not installed (the tesserocr package)"
    directory = tessdata()
    wanted = languages.split("+")
    lacking = [name for name in wanted if not (directory / f"{name}.traineddata").is_file()]
    if lacking:
        return (
            f"Tesseract's language data for {', '.join(lacking)} is not in {directory} "
            f"(Debian: apt-get install tesseract-ocr tesseract-ocr-{lacking[0]}; "
            "or set TESSDATA_PREFIX)"
        )
    return None


def tessdata() -> Path:
    """The language data directory: TESSDATA_PREFIX, else the first usual one that exists."""
    if prefix := os.environ.get("TESSDATA_PREFIX"):
        return Path(prefix)
    found = (Path(path) for path in _TESSDATA if Path(path).is_dir())
    return next(found, Path(_TESSDATA[0]))


def read_scanned(data: bytes, parsed: ParsedDocument, limits: ParseLimits) -> ParsedDocument:
    """`parsed` with its scanned pages read, in page order (a blocking call: a worker's)."""
    pages = parsed.scanned_pages
    if not pages:
        return parsed
    if len(pages) > limits.ocr_max_pages:
        raise PayloadTooLarge(
            f"the PDF has {len(pages):,} pages without a text layer to read by OCR, more than "
            f"{limits.ocr_max_pages:,} (RAG_OCR_MAX_PAGES): split it, or raise the limit",
            extra={"limit": "ocr_max_pages", "value": limits.ocr_max_pages},
        )
    if (reason := missing(limits.ocr_languages)) is not None:
        if not parsed.sections:
            raise Unprocessable(f"{NO_TEXT_LAYER} and OCR is not installed here: {reason}")
        logger.warning("%d scanned PDF pages left unread: OCR %s", len(pages), reason)
        return ParsedDocument(parsed.title, parsed.sections)
    read = [
        Section(text=text, section_path=(), page_number=number, ocr=True)
        for number, text in _recognized(data, pages, limits)
        if text
    ]
    sections = sorted([*parsed.sections, *read], key=lambda section: section.page_number or 0)
    if not sections:
        raise Unprocessable(
            f"{NO_TEXT_LAYER}, and OCR found no text on its {len(pages):,} page(s) "
            "(blank, a picture, or too faint to read)"
        )
    return ParsedDocument(parsed.title, sections)


def _recognized(data: bytes, pages: tuple[int, ...], limits: ParseLimits) -> list[tuple[int, str]]:
    """Each page's number and text, within the pages' shared time and `max_chars`."""
    deadline = time.monotonic() + limits.ocr_seconds_per_page * len(pages)
    texts: list[tuple[int, str]] = []
    chars = 0
    with _opened(data) as document, _tesseract(limits.ocr_languages) as api:
        for number in pages:
            _set_image(api, _rendered(document, number))
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0 or not api.Recognize(timeout=left_ms):
                raise _too_slow(len(pages), limits)
            text = _clean(api.GetUTF8Text()) if api.MeanTextConf() >= _MIN_CONFIDENCE else ""
            chars += len(text)
            if chars > limits.max_chars:
                raise too_many_chars(limits)
            texts.append((number, text))
    return texts


@contextmanager
def _opened(data: bytes) -> Iterator[PdfDocument]:
    import pypdfium2

    try:
        document = pypdfium2.PdfDocument(data)
    except pypdfium2.PdfiumError as exc:
        raise Unprocessable(f"the PDF could not be opened for OCR: {exc}") from exc
    try:
        yield document
    finally:
        document.close()


@contextmanager
def _tesseract(languages: str) -> Iterator[PyTessBaseAPI]:
    """Tesseract with `languages` loaded (single-threaded: the wheel's engine has no OpenMP)."""
    import tesserocr

    try:
        api = tesserocr.PyTessBaseAPI(path=str(tessdata()), lang=languages)
    except RuntimeError as exc:  # the language data is there but unreadable
        raise Unprocessable(f"OCR could not start here ({languages}): {exc}") from exc
    try:
        yield api
    finally:
        api.End()


def _set_image(api: PyTessBaseAPI, image: Image) -> None:
    """The page for Tesseract. Leptonica copying an image just rendered fails only when its
    allocation does (under the worker's memory cap): that is a MemoryError, 422 naming the
    limit, not an error of the file."""
    try:
        api.SetImage(image)
    except RuntimeError as exc:
        raise MemoryError(str(exc)) from exc


def _rendered(document: PdfDocument, number: int) -> Image:
    """Page `number` in shades of grey, at 300 dpi or at most `_MAX_PIXELS`."""
    page = None
    try:
        page = document[number - 1]
        width, height = page.get_size()  # in points, 72 per inch
        scale = min(_DPI / 72, (_MAX_PIXELS / max(width * height, 1.0)) ** 0.5)
        image: Image = page.render(scale=scale, grayscale=True).to_pil()
        return image
    except MemoryError:
        raise
    except Exception as exc:  # PDFium's PdfiumError (a RuntimeError) …: the file's fault
        raise Unprocessable(
            f"page {number} of the PDF could not be rendered for OCR: {exc}"
        ) from exc
    finally:
        if page is not None:
            page.close()


def _too_slow(pages: int, limits: ParseLimits) -> Unprocessable:
    budget = limits.ocr_seconds_per_page * pages
    return Unprocessable(
        f"reading the PDF's {pages:,} scanned page(s) by OCR took longer than {budget:g} s "
        f"(RAG_OCR_SECONDS_PER_PAGE {limits.ocr_seconds_per_page:g} s a page) and was stopped",
        extra={"limit": "ocr_seconds_per_page", "value": limits.ocr_seconds_per_page},
    )


def _clean(text: str) -> str:
    """Tesseract's text without form feeds and trailing spaces, minus what PostgreSQL text
    cannot hold."""
    text = text.replace("\x00", "").replace("\f", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()
