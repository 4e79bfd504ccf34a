"""OpenDocument text (.odt): headings become section paths, tables become rows of cells
(tables.py; a table's `table:table-header-rows` mark its header).

An ODT is a ZIP whose `content.xml` states each heading's outline level (`text:h
text:outline-level`), so lxml reads the structure directly; no ODF library is needed. Lists
and sections are opened, notes, comments, tracked deletions and generated indexes (a table of
contents) are left out, and the text of a text box joins its paragraph on a line of its own.
The title is `meta.xml`'s dc:title, else the first level-1 heading.
"""

from __future__ import annotations

from collections.abc import Iterator

from lxml import etree

from app.ingest.parsing.limits import ParseLimits
from app.ingest.parsing.model import ParsedDocument, document
from app.ingest.parsing.outline import Outline
from app.ingest.parsing.xmlsafe import parse
from app.ingest.parsing.zipped import read_member, vetted

_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
_H, _P, _S, _TAB, _BREAK = (f"{{{_TEXT}}}{t}" for t in ("h", "p", "s", "tab", "line-break"))
_LIST, _SECTION = f"{{{_TEXT}}}list", f"{{{_TEXT}}}section"
_OPENED = {_LIST, _SECTION, *(f"{{{_TEXT}}}{t}" for t in ("list-item", "list-header"))}
_OPENED |= {f"{{{_TABLE}}}{t}" for t in ("table-header-rows", "table-rows", "table-row-group")}
_TABLE_TAG, _ROW = f"{{{_TABLE}}}table", f"{{{_TABLE}}}table-row"
_HEADER_ROWS = f"{{{_TABLE}}}table-header-rows"
_CELLS = {f"{{{_TABLE}}}table-cell", f"{{{_TABLE}}}covered-table-cell"}
_LEFT_OUT = {
    *(f"{{{_TEXT}}}{t}" for t in ("note", "tracked-changes", "deletion", "sequence-decls")),
    f"{{{_OFFICE}}}annotation",
}
_BODY = etree.XPath(
    "/office:document-content/office:body/office:text", namespaces={"office": _OFFICE}
)
_META_TITLE = "{http://purl.org/dc/elements/1.1/}title"


def parse_odt(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Sections between headings, each with the path of headings above it."""
    with vetted(data, limits) as archive:
        content = parse(read_member(archive, "content.xml", limits), name="content.xml")
        meta = None
        if "meta.xml" in archive.namelist():
            meta = parse(read_member(archive, "meta.xml", limits), name="meta.xml")
    bodies = _BODY(content)
    outline = Outline(limits)
    for block in _blocks(bodies[0]) if isinstance(bodies, list) and bodies else ():
        if block.tag == _H:
            level = block.get(f"{{{_TEXT}}}outline-level") or "1"
            outline.heading(int(level) if level.isdigit() else 1, " ".join(_inline(block).split()))
        elif block.tag == _P:
            outline.add(_inline(block).strip())
        else:
            header = block.find(_HEADER_ROWS) is not None or None
            outline.table([_cells(row) for row in _rows(block)], header=header)
    title = None
    if meta is not None:
        title = next((" ".join(t.itertext()).strip() for t in meta.iter(_META_TITLE)), None)
    return document(title or outline.first_top_heading, outline.sections())


def _blocks(parent: etree._Element) -> Iterator[etree._Element]:
    """Headings, paragraphs and tables in document order; indexes and notes left out."""
    for child in parent.iterchildren(etree.Element):
        if child.tag in (_H, _P, _TABLE_TAG):
            yield child
        elif child.tag in _OPENED:
            yield from _blocks(child)


def _inline(element: etree._Element) -> str:
    parts = [element.text or ""]
    for child in element.iterchildren():
        if child.tag == _S:
            count = child.get(f"{{{_TEXT}}}c") or "1"
            parts.append(" " * min(int(count) if count.isdigit() else 1, 100))
        elif child.tag == _TAB:
            parts.append("\t")
        elif child.tag == _BREAK:
            parts.append("\n")
        elif child.tag in (_P, _H):  # inside a text box
            parts.append("\n" + _inline(child) + "\n")
        elif child.tag not in _LEFT_OUT and isinstance(child.tag, str):
            parts.append(_inline(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _cells(row: etree._Element) -> list[str]:
    """A row's cell texts; a cell repeated N times is read once, a nested table's text is
    inside its cell."""
    return [
        " ".join(_cell_text(cell).split())
        for cell in row.iterchildren(etree.Element)
        if cell.tag in _CELLS
    ]


def _cell_text(cell: etree._Element) -> str:
    parts = []
    for block in _blocks(cell):
        if block.tag == _TABLE_TAG:
            parts += [_cell_text(inner) for row in _rows(block) for inner in row.iterchildren()]
        else:
            parts.append(_inline(block))
    return " ".join(parts)


def _rows(table: etree._Element) -> Iterator[etree._Element]:
    for child in table.iterchildren(etree.Element):
        if child.tag == _ROW:
            yield child
        elif child.tag in _OPENED:
            yield from _rows(child)
