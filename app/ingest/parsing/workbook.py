"""The parts of an Excel workbook that its values need, read with lxml from a vetted ZIP.

The sheets in the workbook's order (`workbook.xml` and its relationships), the shared strings,
which cell styles show dates (`styles.xml`, judged by openpyxl's table of built-in number
formats and its date-format test) and the date system (1900 or 1904); then each sheet's rows,
streamed (`iterparse`, every row cleared once read, so a sheet costs memory for one row).

openpyxl's own read-only reader walks the same XML through ElementTree, parses each sheet twice
when it has no dimension element and pads every gap with empty rows: it read about a third as
fast, and a 2 MB workbook of 50,000 rows overran the default parse budget on a busy machine.
This reader uses openpyxl for what it knows (number formats, Excel's calendars) and lxml for
the walk (docs/BENCHMARKS.md, "Parsing the file formats"). Elements are matched by local name
or by the sheet's own namespace: Strict OOXML files use other namespaces than transitional.
"""

from __future__ import annotations

import datetime as dt
import posixpath
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from lxml import etree
from openpyxl.styles.numbers import BUILTIN_FORMATS, is_date_format, is_timedelta_format
from openpyxl.utils.datetime import MAC_EPOCH, WINDOWS_EPOCH, from_excel

from app.errors import Unprocessable
from app.ingest.parsing.limits import ParseLimits
from app.ingest.parsing.xmlsafe import parse
from app.ingest.parsing.zipped import read_member

Value = str | int | float | bool | dt.datetime | dt.date | dt.time | dt.timedelta | None
MAX_COLUMNS = 16_384  # XFD, Excel's last column
_OFFICE_DOCUMENT = "/officeDocument"


@dataclass(frozen=True, slots=True)
class Workbook:
    archive: zipfile.ZipFile
    sheets: list[tuple[str, str]]  # (name, member) in the workbook's order
    strings: list[str]
    dates: frozenset[int]  # cell style indices that show dates or times
    durations: frozenset[int]  # … that show elapsed time ([h]:mm)
    epoch: dt.datetime
    title: str | None


def open_workbook(archive: zipfile.ZipFile, limits: ParseLimits) -> Workbook:
    main = _main_part(archive, limits)
    root = parse(read_member(archive, main, limits), name=main)
    relations = _relations(archive, main, limits)
    sheets = [
        (sheet.get("name") or f"Sheet {n}", relations[rid])
        for n, sheet in enumerate(_named(root, "sheet"), start=1)
        if (rid := _relationship_id(sheet)) in relations
    ]
    properties = next(iter(_named(root, "workbookPr")), None)
    mac = properties is not None and properties.get("date1904") in ("1", "true")
    styles, durations = _date_styles(archive, relations, limits)
    return Workbook(
        archive=archive,
        sheets=[(name, path) for name, path in sheets if path in archive.namelist()],
        strings=_shared_strings(archive, relations),
        dates=styles,
        durations=durations,
        epoch=MAC_EPOCH if mac else WINDOWS_EPOCH,
        title=_title(archive, limits),
    )


def rows(book: Workbook, member: str) -> Iterator[tuple[int, list[Value]]]:
    """(row number as Excel shows it, its cells from column A) of each row element."""
    number = 0
    cells: _Cells | None = None
    for row in _streamed(book.archive, member, "row"):
        given = row.get("r") or ""
        number = int(given) if given.isdigit() else number + 1
        if cells is None:  # the sheet's namespace, from its first row
            namespace = etree.QName(row).namespace
            cells = _Cells(book, f"{{{namespace}}}" if namespace else "")
        yield number, cells.of(row)


def _streamed(archive: zipfile.ZipFile, member: str, localname: str) -> Iterator[etree._Element]:
    """Each element of this name once it is complete; then it and those before it are freed."""
    with archive.open(member) as stream:
        for _, element in etree.iterparse(
            stream,
            events=("end",),
            tag=f"{{*}}{localname}",
            resolve_entities=False,
            load_dtd=False,
            no_network=True,
            huge_tree=False,
        ):
            yield element
            element.clear(keep_tail=False)
            parent = element.getparent()
            while parent is not None and (previous := element.getprevious()) is not None:
                parent.remove(previous)


class _Cells:
    """A row's cell elements as values (the hot loop: a cell costs a few microseconds)."""

    def __init__(self, book: Workbook, namespace: str) -> None:
        self.book = book
        self.cell, self.value, self.inline = (namespace + tag for tag in ("c", "v", "is"))

    def of(self, row: etree._Element) -> list[Value]:
        values: list[Value] = []
        for cell in row.iterchildren(self.cell):
            reference = cell.get("r")
            column = _column(reference) if reference else len(values) + 1
            if column <= len(values):  # out of order or repeated: keep the first
                continue
            values.extend([None] * (column - 1 - len(values)))
            values.append(self._value(cell))
        return values

    def _value(self, cell: etree._Element) -> Value:
        kind = cell.get("t")
        if kind == "inlineStr":
            inline = cell.find(self.inline)
            return _rich_text(inline) if inline is not None else None
        raw = cell.findtext(self.value)
        if raw is None:
            return None
        if kind is None or kind == "n":
            return _number(raw, cell.get("s"), self.book)
        if kind == "s":
            strings = self.book.strings
            index = int(raw) if raw.isdigit() else -1
            return strings[index] if 0 <= index < len(strings) else None
        if kind == "b":
            return raw.strip() in ("1", "true")
        return raw  # str (a formula's text), e (an error such as #N/A), d (an ISO date)


@lru_cache(maxsize=4096)
def _column_of(letters: str) -> int:
    index = 0
    for letter in letters.upper():
        index = index * 26 + ord(letter) - 64
    return index


def _column(reference: str) -> int:
    """A1 -> 1, AB7 -> 28; 422 past Excel's last column."""
    letters = reference.rstrip("0123456789")
    index = _column_of(letters) if letters.isalpha() and len(letters) <= 3 else 0
    if not 0 < index <= MAX_COLUMNS:
        raise Unprocessable(f"a cell of the workbook has no valid column ({reference}): corrupt")
    return index


def _number(raw: str, style: str | None, book: Workbook) -> Value:
    try:
        number = float(raw)
    except ValueError:
        return raw
    index = int(style) if style and style.isdigit() else 0
    if index in book.dates or index in book.durations:
        try:
            converted: Value = from_excel(number, book.epoch, timedelta=index in book.durations)
        except (OverflowError, ValueError):
            return number
        return converted
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


def _rich_text(element: etree._Element) -> str:
    """A string item's text: its runs' `t`, not the phonetic guides (`rPh`)."""
    parts = []
    for child in element.iterchildren():
        name = etree.QName(child).localname
        if name == "t":
            parts.append(child.text or "")
        elif name == "r":
            parts += [t.text or "" for t in child.iterchildren("{*}t")]
    return "".join(parts)


def _shared_strings(archive: zipfile.ZipFile, relations: dict[str, str]) -> list[str]:
    member = _related(relations, "/sharedStrings")
    if member is None or member not in archive.namelist():
        return []
    return [_rich_text(item) for item in _streamed(archive, member, "si")]


def _date_styles(
    archive: zipfile.ZipFile, relations: dict[str, str], limits: ParseLimits
) -> tuple[frozenset[int], frozenset[int]]:
    member = _related(relations, "/styles")
    if member is None or member not in archive.namelist():
        return frozenset(), frozenset()
    root = parse(read_member(archive, member, limits), name=member)
    formats: dict[int, str] = dict(BUILTIN_FORMATS)
    for custom in _named(root, "numFmt"):
        if (number := custom.get("numFmtId") or "").isdigit():
            formats[int(number)] = custom.get("formatCode") or ""
    cell_formats = next(iter(_named(root, "cellXfs")), None)
    ids = [
        int(xf.get("numFmtId") or 0) if (xf.get("numFmtId") or "0").isdigit() else 0
        for xf in (cell_formats.iterchildren("{*}xf") if cell_formats is not None else ())
    ]
    durations = {i for i, f in enumerate(ids) if is_timedelta_format(formats.get(f))}
    dates = {i for i, f in enumerate(ids) if is_date_format(formats.get(f))} - durations
    return frozenset(dates), frozenset(durations)


def _main_part(archive: zipfile.ZipFile, limits: ParseLimits) -> str:
    relations = _relations_of(archive, "_rels/.rels", base="", limits=limits)
    return _related(relations, _OFFICE_DOCUMENT) or "xl/workbook.xml"


def _relations(archive: zipfile.ZipFile, part: str, limits: ParseLimits) -> dict[str, str]:
    """Relationship id (and type, under "type:…") -> member, for the part's relationships."""
    folder, name = posixpath.split(part)
    rels = posixpath.join(folder, "_rels", f"{name}.rels")
    return _relations_of(archive, rels, base=folder, limits=limits)


def _relations_of(
    archive: zipfile.ZipFile, member: str, *, base: str, limits: ParseLimits
) -> dict[str, str]:
    if member not in archive.namelist():
        return {}
    found: dict[str, str] = {}
    for relation in _named(
        parse(read_member(archive, member, limits), name=member), "Relationship"
    ):
        target = relation.get("Target") or ""
        path = target.lstrip("/") if target.startswith("/") else posixpath.join(base, target)
        path = posixpath.normpath(path)
        found[relation.get("Id") or ""] = path
        found.setdefault(f"type:{relation.get('Type') or ''}", path)
    return found


def _related(relations: dict[str, str], type_suffix: str) -> str | None:
    """The member of the first relationship whose type ends so ("/styles" …)."""
    for key, path in relations.items():
        if key.startswith("type:") and key.endswith(type_suffix):
            return path
    return None


def _relationship_id(sheet: etree._Element) -> str:
    return next((v for k, v in sheet.attrib.items() if etree.QName(k).localname == "id"), "")


def _title(archive: zipfile.ZipFile, limits: ParseLimits) -> str | None:
    if "docProps/core.xml" not in archive.namelist():
        return None
    root = parse(read_member(archive, "docProps/core.xml", limits), name="docProps/core.xml")
    return next((" ".join("".join(t.itertext()).split()) for t in _named(root, "title")), None)


def _named(root: etree._Element, localname: str) -> list[etree._Element]:
    return [e for e in root.iter(etree.Element) if etree.QName(e).localname == localname]
