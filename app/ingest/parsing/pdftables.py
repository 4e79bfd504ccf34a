"""Tables on PDF pages, found by pdfplumber (pdfminer.six) where pypdf's text loses them.

pypdf reads a table as lines of words with no cell boundaries. pdfplumber finds a table by its
ruling lines and reads it cell by cell, but it is slow (pure Python: ~0.1 s a page), so it runs
only on the pages whose content stream draws enough rectangles and lines to rule a table
(`ruled`), and only within half the file's parse budget: past it, the remaining pages keep
pypdf's text. A table without ruling lines stays pypdf's text. On a page with tables, the text
around them is pdfplumber's and each table becomes row sections of that page (tables.py): its
caption is the line just above it; a table that goes on from the previous page without a
header of its own gets that table's header and caption.
"""

from __future__ import annotations

import io
import itertools
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pypdf import PageObject

from app.ingest.parsing.limits import ParseLimits
from app.ingest.parsing.model import Section
from app.ingest.parsing.tables import CELL_SEPARATOR, TableRows, looks_like_header, row_text

if TYPE_CHECKING:
    from pdfplumber.page import Page

logger = logging.getLogger(__name__)

# A path operator drawing a rectangle (`x y w h re`) or a line (`x y l`): a ruled table of two
# rows and two columns draws at least 4 rectangles or 6 lines.
_DRAWING = re.compile(rb"-?[\d.]+\s+-?[\d.]+\s+(?:-?[\d.]+\s+-?[\d.]+\s+re|l)\b")
MIN_DRAWINGS = 4
CAPTION_POINTS = 40.0  # how far above a table its caption line may sit


@dataclass(slots=True)
class PageTables:
    """A page's text outside its tables, and its tables' row sections."""

    text: str
    rows: list[Section] = field(default_factory=list)


def ruled(page: PageObject) -> bool:
    """Whether the page's content stream draws enough to rule a table."""
    try:
        contents = page.get_contents()
        data = contents.get_data() if contents is not None else b""
    except Exception:  # an unreadable stream: pypdf's text of the page stands
        logger.debug("unreadable PDF content stream", exc_info=True)
        return False
    drawings = _DRAWING.finditer(data)
    return next(itertools.islice(drawings, MIN_DRAWINGS - 1, None), None) is not None


def page_tables(data: bytes, pages: Sequence[int], limits: ParseLimits) -> dict[int, PageTables]:
    """Page number (from 1) -> its text and table rows, for those of `pages` that hold a
    table, within half of the file's parse budget."""
    import pdfplumber  # imported by the first PDF with a ruled page: most processes never do

    deadline = time.monotonic() + limits.budget(len(data)) / 2
    reader = _Reader(TableRows(limits))
    found: dict[int, PageTables] = {}
    with pdfplumber.open(io.BytesIO(data)) as pdf:
        for number in pages:
            if time.monotonic() > deadline:
                logger.info("PDF table detection stopped at page %d: over its time", number)
                break
            page = pdf.pages[number - 1]
            try:
                if (result := reader.page(page, number)) is not None:
                    found[number] = result
            finally:
                page.close()  # its parsed objects: memory stays one page's
    return found


class _Reader:
    """Reads pages in order, carrying the last table's width, header row and caption to the
    next page."""

    def __init__(self, tables: TableRows) -> None:
        self._tables = tables
        self._carried: tuple[int, str, str] | None = None  # columns, header row, caption

    def page(self, page: Page, number: int) -> PageTables | None:
        try:
            detected = page.find_tables()
        except Exception:  # pdfminer chokes where pypdf did not: keep pypdf's text
            logger.debug("PDF table detection failed on page %d", number, exc_info=True)
            detected = []
        if not detected:
            self._carried = None
            return None
        outside = page
        result = PageTables("")
        for index, table in enumerate(detected):
            rows = [[_clean(cell or "") for cell in row] for row in table.extract()]
            caption = _clean(_caption(page, table.bbox))
            header: bool | None = None
            carried = self._carried if index == 0 and rows else None
            if carried and row_text(rows[0]) == carried[1]:
                caption = caption or carried[2]  # the header repeated on this page
            elif carried and _goes_on(rows[0], carried):
                rows.insert(0, carried[1].split(CELL_SEPARATOR))
                caption, header = caption or carried[2], True
            made = self._tables.sections(rows, path=(), page=number, caption=caption, header=header)
            result.rows += made
            outside = outside.outside_bbox(table.bbox)
            head = row_text(rows[0]) if made and made[0].row != 1 else ""  # its header row
            columns = max((len(row) for row in rows), default=0)
            self._carried = (columns, head, caption) if head else None
        result.text = _clean(outside.extract_text() or "")
        return result


def _caption(page: Page, bbox: tuple[float, float, float, float]) -> str:
    """The last line of text just above the table."""
    top = bbox[1]
    if top <= 1:
        return ""
    above = page.crop((0, max(0.0, top - CAPTION_POINTS), page.width, top), strict=False)
    lines = [line for line in (above.extract_text() or "").split("\n") if line.strip()]
    return lines[-1] if lines else ""


def _clean(text: str) -> str:
    """Without what PostgreSQL text cannot hold."""
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def _goes_on(first: list[str], carried: tuple[int, str, str]) -> bool:
    """A table whose first row is data, as wide as the previous page's last table."""
    columns, header, _ = carried
    return len(first) == columns and not looks_like_header(first) and row_text(first) != header
