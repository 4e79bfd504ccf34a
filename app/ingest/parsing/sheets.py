"""Excel (.xlsx): each sheet's rows, one section per row, numbered as Excel numbers them.

The workbook is read from the vetted ZIP by workbook.py (lxml, with openpyxl's number formats
and calendar): cells keep their types, dates read as ISO dates, and a formula reads as the
value Excel last computed (which a file written by a program that never calculated lacks). A
sheet's first non-empty row is its header when every cell in it is text: it is not a row
section of its own but repeated at the top of each chunk of that sheet. The chunker packs
consecutive rows into chunks whose section path is the sheet's name and the rows they hold
(e.g. "Sales" and "rows 2-41", with an en dash). A workbook's sheets may run to `max_rows`
rows together, empty rows included (a sheet's last row number is how far it runs): one that
reaches a millionth row is refused as soon as the row is read, not walked. Rows are also
counted as elements, and first cheaply: while the ZIP is inflated and vetted, its XML's `row`
start tags are counted by a regular expression (C speed), so a workbook of a million empty
row elements is refused at the 200,001st (in a tenth of a second) instead of being vetted and
walked whole, and rows that repeat one number still count. Chart sheets hold no rows and are
skipped.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Sequence

from lxml import etree

from app.errors import PayloadTooLarge, Unprocessable
from app.ingest.parsing.limits import ParseLimits, too_many_chars
from app.ingest.parsing.model import ParsedDocument, Section, document
from app.ingest.parsing.tables import CELL_SEPARATOR, HEADER_MAX_CHARS
from app.ingest.parsing.workbook import Value, Workbook, open_workbook, rows
from app.ingest.parsing.zipped import vetted

_ROW_TAG = re.compile(rb"<(?:[A-Za-z_][\w.-]{0,31}:)?row[\s/>]")
_LONGEST_TAG = 40  # bytes a row start tag may span, prefix included


class _RowTags:
    """Counts `row` start tags in the XML a workbook inflates to; 413 past `max_rows`."""

    def __init__(self, limits: ParseLimits) -> None:
        self.limits, self.count, self._tail = limits, 0, b""

    def __call__(self, chunk: bytes) -> None:
        text = self._tail + chunk
        cut = max(len(text) - _LONGEST_TAG, 0)  # a tag starting past it may be cut short
        self.count += sum(1 for found in _ROW_TAG.finditer(text) if found.start() < cut)
        self._tail = text[cut:]
        if self.count > self.limits.max_rows:
            raise _too_many_rows(self.limits)


def _streamed(name: str) -> bool:
    """The members a workbook's reader streams (workbook.py): its sheets and shared strings,
    where Excel and openpyxl write them. Others are read as trees, their elements counted."""
    return name.startswith("xl/worksheets/") or name.endswith("sharedStrings.xml")


def parse_xlsx(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Row sections of every worksheet, in the workbook's order; the title is the workbook's
    Title property (none otherwise: the first chunk's text would be a header row)."""
    with vetted(data, limits, watch=_RowTags(limits), streams=_streamed) as archive:
        try:
            book = open_workbook(archive, limits)
            sections = list(_sections(book, limits))
        except (etree.XMLSyntaxError, KeyError, ValueError) as exc:
            raise Unprocessable(f"the Excel file could not be read (corrupt?): {exc}") from None
    if not sections:
        raise Unprocessable("the workbook has no text: every sheet is empty")
    return document(book.title, sections)


class _Budget:
    """Rows the sheets run to and characters kept, across the workbook."""

    def __init__(self, limits: ParseLimits) -> None:
        self.limits, self.rows_before, self.chars = limits, 0, 0

    def reached(self, row: int) -> None:
        if self.rows_before + row > self.limits.max_rows:
            raise _too_many_rows(self.limits)

    def text(self, text: str) -> None:
        self.chars += len(text)
        if self.chars > self.limits.max_chars:
            raise too_many_chars(self.limits)


def _sections(book: Workbook, limits: ParseLimits) -> Iterator[Section]:
    budget = _Budget(limits)
    for name, member in book.sheets:
        yield from _sheet(book, name, member, budget)


def _sheet(book: Workbook, name: str, member: str, budget: _Budget) -> Iterator[Section]:
    header: tuple[int, str] | None = None
    data_rows = last = count = 0
    for count, (last, values) in enumerate(rows(book, member), start=1):
        budget.reached(max(last, count))  # rows that repeat a number still count
        if not (text := row_text(values)):
            continue
        budget.text(text)
        if header is None and not data_rows and _is_header(values):
            header = (last, text)
            continue
        data_rows += 1
        yield Section(text, (name,), None, last, header[1] if header else "")
    budget.rows_before += max(last, count)
    if header is not None and not data_rows:  # a sheet of headings alone: that is its text
        yield Section(header[1], (name,), None, header[0])


def row_text(values: Sequence[Value]) -> str:
    """The row's cells, trailing empty ones dropped, separated by " | "."""
    cells = [_cell(value) for value in values]
    while cells and not cells[-1]:
        cells.pop()
    return CELL_SEPARATOR.join(cells)


def _is_header(values: Sequence[Value]) -> bool:
    """Two or more cells, all text, short enough to repeat above every chunk."""
    filled = [value for value in values if value is not None and value != ""]
    short = sum(len(str(value)) for value in filled) <= HEADER_MAX_CHARS
    return short and len(filled) > 1 and all(isinstance(value, str) for value in filled)


def _cell(value: Value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return format(value, ".15g")
    if isinstance(value, dt.datetime):
        if value.time() == dt.time():
            return value.date().isoformat()
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return " ".join(str(value).split())


def _too_many_rows(limits: ParseLimits) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the workbook's sheets run to more than {limits.max_rows:,} rows, empty rows included "
        "(RAG_PARSE_MAX_ROWS): delete the unused rows below the data, split the workbook, or "
        "raise the limit",
        extra={"limit": "max_rows", "value": limits.max_rows},
    )
