"""A document's table as row sections: one line per row, cells separated by " | ", under a
header made of the table's caption (or the short paragraph that introduces it) and its header
row. The chunker (chunking.py) packs consecutive rows into chunks, whole rows, each starting
with that header, as it does a sheet's rows (sheets.py).

Word, PowerPoint, ODT, EPUB, HTML, markdown and PDF tables come here as rows of cell texts.
A merged cell's text is read once, in its first row and column (so what is read is never more
than what the file holds); a table nested in a cell is that cell's text, its cells separated
by spaces. Rows count against `max_rows`, across the document's tables, like a workbook's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.errors import PayloadTooLarge
from app.ingest.parsing.limits import ParseLimits
from app.ingest.parsing.model import Section

CELL_SEPARATOR = " | "
HEADER_MAX_CHARS = 400  # a longer first row is data, not a header to repeat
CAPTION_MAX_CHARS = 300  # a longer paragraph before a table is text, not its caption
_NUMBER = re.compile(r"[-+(]?[$€£¥]?\d[\d.,:/%\s]*\)?[a-zA-Z%]{0,3}")


def row_text(cells: Sequence[str]) -> str:
    """The row's cells, whitespace collapsed, trailing empty ones dropped, joined by " | "."""
    texts = [" ".join(cell.split()) for cell in cells]
    while texts and not texts[-1]:
        texts.pop()
    return CELL_SEPARATOR.join(texts)


def looks_like_header(cells: Sequence[str]) -> bool:
    """Two or more cells, none of them a number, short enough to repeat above every chunk:
    the first row of a table that does not mark its header (Word, ODT, PowerPoint, PDF)."""
    filled = [" ".join(cell.split()) for cell in cells if cell.strip()]
    short = sum(len(cell) for cell in filled) <= HEADER_MAX_CHARS
    return short and len(filled) > 1 and not any(_NUMBER.fullmatch(cell) for cell in filled)


def caption_of(paragraph: str | None) -> str:
    """A paragraph as the caption of the table after it: when it is short enough."""
    text = " ".join((paragraph or "").split())
    return text if 0 < len(text) <= CAPTION_MAX_CHARS else ""


class TableRows:
    """Turns a document's tables into row sections, numbering them and counting their rows
    against `limits.max_rows` (413 past it)."""

    def __init__(self, limits: ParseLimits) -> None:
        self._limits = limits
        self.tables = 0
        self.rows = 0

    def sections(
        self,
        rows: Sequence[Sequence[str]],
        *,
        path: tuple[str, ...],
        page: int | None = None,
        caption: str = "",
        header: bool | None = None,
    ) -> list[Section]:
        """Row sections of one table; its first row is the header when `header` says so, or,
        when it is None, when it `looks_like_header`. A table of a header alone is that row."""
        lines = [(number, row_text(cells), cells) for number, cells in enumerate(rows, 1)]
        lines = [(number, text, cells) for number, text, cells in lines if text]
        if not lines:
            return []
        self.rows += len(lines)
        if self.rows > self._limits.max_rows:
            raise too_many_rows(self._limits)
        self.tables += 1
        first_is_header = lines[0][0] == 1 and (
            looks_like_header(lines[0][2]) if header is None else header
        )
        head = lines[0][1] if first_is_header and len(lines) > 1 else ""
        body = lines[1:] if head else lines
        top = "\n".join(part for part in (caption_of(caption), head) if part)
        return [Section(text, path, page, number, top, self.tables) for number, text, _ in body]


def too_many_rows(limits: ParseLimits) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the document's tables have more than {limits.max_rows:,} rows "
        "(RAG_PARSE_MAX_ROWS): split the document, or raise the limit",
        extra={"limit": "max_rows", "value": limits.max_rows},
    )
