"""Excel (.xlsx): each sheet's rows, one section per row, numbered as Excel numbers them.

Read with openpyxl in read-only mode (rows stream from the sheet's XML; formulas give the value
Excel last computed, which a file written by a program that never calculated lacks). A sheet's
first non-empty row is its header when every cell in it is text: it is not a row section of
its own but repeated at the top of each chunk of that sheet. The chunker packs consecutive rows
into chunks whose section path is the sheet's name and the rows they hold (e.g. "Sales" and
"rows 2-41", with an en dash). Every row the reader walks counts against `max_rows`, empty
ones included: a sheet that runs to a millionth row is refused, not walked. Chart sheets hold
no rows and are skipped.
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Iterator, Sequence

import openpyxl
from openpyxl.worksheet._read_only import ReadOnlyWorksheet

from app.errors import PayloadTooLarge, Unprocessable
from app.ingest.parsing.limits import ParseLimits, too_many_chars
from app.ingest.parsing.model import ParsedDocument, Section, document
from app.ingest.parsing.zipped import vetted

CELL_SEPARATOR = " | "
HEADER_MAX_CHARS = 400  # a longer first row is data, not a header to repeat
Value = object


def parse_xlsx(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Row sections of every worksheet, in the workbook's order; the title is the workbook's
    Title property (none otherwise: the first chunk's text would be a header row)."""
    vetted(data, limits).close()
    try:
        book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises KeyError, ValueError … on broken packages
        raise Unprocessable(f"the Excel file could not be read (corrupt?): {exc}") from None
    try:
        sections = list(_sections(book.worksheets, limits))
        title = (book.properties.title or "").strip()
    except (Unprocessable, PayloadTooLarge):
        raise
    except Exception as exc:
        raise Unprocessable(f"the Excel file could not be read (corrupt?): {exc}") from None
    finally:
        book.close()
    if not sections:
        raise Unprocessable("the workbook has no text: every sheet is empty")
    return document(title or None, sections)


class _Budget:
    """Rows walked and characters kept, across the workbook."""

    def __init__(self, limits: ParseLimits) -> None:
        self.limits, self.rows, self.chars = limits, 0, 0

    def row(self) -> None:
        self.rows += 1
        if self.rows > self.limits.max_rows:
            raise _too_many_rows(self.limits)

    def text(self, text: str) -> None:
        self.chars += len(text)
        if self.chars > self.limits.max_chars:
            raise too_many_chars(self.limits)


def _sections(sheets: Sequence[object], limits: ParseLimits) -> Iterator[Section]:
    budget = _Budget(limits)
    for sheet in sheets:
        if isinstance(sheet, ReadOnlyWorksheet):  # chart sheets hold no rows
            yield from _sheet(sheet, budget)


def _sheet(sheet: ReadOnlyWorksheet, budget: _Budget) -> Iterator[Section]:
    sheet.reset_dimensions()  # never trust the declared size: it can claim a million rows
    header: tuple[int, str] | None = None
    data_rows = 0
    for number, values in enumerate(sheet.values, start=1):  # padded: gaps are rows too
        budget.row()
        if not (text := row_text(values)):
            continue
        budget.text(text)
        if header is None and not data_rows and _is_header(values):
            header = (number, text)
            continue
        data_rows += 1
        yield Section(text, (sheet.title,), None, number, header[1] if header else "")
    if header is not None and not data_rows:  # a sheet of headings alone: that is its text
        yield Section(header[1], (sheet.title,), None, header[0])


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
