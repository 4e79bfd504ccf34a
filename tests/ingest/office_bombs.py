"""Hostile Office containers, built member by member: small ZIPs that would cost a reader
gigabytes or minutes, and files that only look like documents."""

from __future__ import annotations

import io
import struct
import zipfile

from tests.ingest.office import docx_bytes, odt_bytes, xlsx_bytes, zip_of

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def members(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return [(info.filename, archive.read(info)) for info in archive.infolist()]


def replaced(data: bytes, name: str, content: bytes) -> bytes:
    """The same package with one member's content replaced (or added)."""
    kept = [(n, c) for n, c in members(data) if n != name]
    return zip_of([*kept, (name, content)], stored_first=False)


def inflating_docx(inflated_bytes: int) -> bytes:
    """A real Word file carrying a picture that inflates from kilobytes to `inflated_bytes`."""
    return replaced(docx_bytes(), "word/media/image1.png", b"\0" * inflated_bytes)


def spread_docx(members_count: int, each_bytes: int) -> bytes:
    """Many members, each under the per-member limit, too many bytes together."""
    out = members(docx_bytes())
    out += [(f"word/media/image{n}.png", b"\0" * each_bytes) for n in range(members_count)]
    return zip_of(out, stored_first=False)


def crowded_docx(members_count: int) -> bytes:
    """A Word file among `members_count` empty members."""
    out = members(docx_bytes()) + [(f"customXml/x{n}.bin", b"") for n in range(members_count)]
    return zip_of(out, stored_first=False)


def lying_docx(inflated_bytes: int, declared_bytes: int = 1000) -> bytes:
    """A picture member whose headers declare `declared_bytes` while its data inflates to
    `inflated_bytes`: the declared sizes pass, the data does not."""
    data = bytearray(inflating_docx(inflated_bytes))
    name = b"word/media/image1.png"
    central = 0
    while True:  # find the member's central directory entry, then its local header
        central = data.index(b"PK\x01\x02", central)
        (name_length,) = struct.unpack_from("<H", data, central + 28)
        if data[central + 46 : central + 46 + name_length] == name:
            break
        central += 4
    struct.pack_into("<I", data, central + 24, declared_bytes)  # uncompressed size
    (local,) = struct.unpack_from("<I", data, central + 42)
    struct.pack_into("<I", data, local + 22, declared_bytes)
    return bytes(data)


def deep_docx(depth: int) -> bytes:
    """A Word body nesting content controls `depth` deep: a few kilobytes zipped."""
    opening = "<w:sdt><w:sdtContent>" * depth
    closing = "</w:sdtContent></w:sdt>" * depth
    body = f'<w:document xmlns:w="{_W}"><w:body>{opening}<w:p/>{closing}</w:body></w:document>'
    return replaced(docx_bytes(), "word/document.xml", body.encode())


def laughing_docx() -> bytes:
    """The "billion laughs": entities of entities, a few hundred bytes expanding to gigabytes."""
    entities = '<!ENTITY lol0 "lol">' + "".join(
        f'<!ENTITY lol{n} "{f"&lol{n - 1};" * 10}">' for n in range(1, 10)
    )
    body = (
        f'<?xml version="1.0"?><!DOCTYPE w:document [{entities}]><w:document xmlns:w="{_W}">'
        "<w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>"
    )
    return replaced(docx_bytes(), "word/document.xml", body.encode())


def spaced_odt(elements: int = 3_400_000) -> bytes:
    """An ODT paragraph of `elements` space elements (`<text:s/>`): 58 KB zipped, 29 MB of
    XML, 3.4 million nodes as a tree (issue 47: a parse worker grew to 600 MB on it)."""
    return odt_bytes(body="<text:p>" + "<text:s/>" * elements + "</text:p>")


def crowded_runs_docx(elements: int = 3_000_000) -> bytes:
    """A Word paragraph of `elements` empty runs: the same attack on document.xml."""
    body = f'<w:document xmlns:w="{_W}"><w:body><w:p>{"<w:r/>" * elements}</w:p></w:body>'
    return replaced(docx_bytes(), "word/document.xml", (body + "</w:document>").encode())


_SHEET_NS = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"


def crowded_styles_xlsx(elements: int = 3_000_000) -> bytes:
    """A workbook whose styles (read as a tree, unlike its streamed sheets) are millions of
    empty elements."""
    styles = f'<styleSheet xmlns="{_SHEET_NS}"><fonts>{"<font/>" * elements}</fonts></styleSheet>'
    return replaced(xlsx_bytes(), "xl/styles.xml", styles.encode())


def empty_rows_xlsx(rows: int = 1_000_000) -> bytes:
    """A workbook whose first sheet holds `rows` empty rows (a dimension that says one cell,
    so no reader has to scan it first)."""
    empty = "".join(f'<row r="{n}"/>' for n in range(1, rows + 1))
    sheet = (
        f'<worksheet xmlns="{_SHEET_NS}"><dimension ref="A1"/><sheetData>{empty}</sheetData>'
        "</worksheet>"
    )
    return replaced(xlsx_bytes(rows=1), "xl/worksheets/sheet1.xml", sheet.encode())


def one_row_number_xlsx(rows: int = 1_000_000) -> bytes:
    """A million empty row elements that all say they are row 1 (28 KB sent): a reader that
    counts rows by their numbers never stops, one that parses the whole sheet first overruns
    the parse budget of so small a file."""
    sheet = (
        f'<worksheet xmlns="{_SHEET_NS}"><dimension ref="A1"/><sheetData>'
        + '<row r="1"/>' * rows
        + "</sheetData></worksheet>"
    )
    return replaced(xlsx_bytes(rows=1), "xl/worksheets/sheet1.xml", sheet.encode())


def far_row_xlsx(row: int = 1_048_576) -> bytes:
    """One cell in the sheet's last row and a dimension claiming the whole sheet: a reader
    that trusts either walks a million rows (of 16,384 columns)."""
    sheet = (
        f'<worksheet xmlns="{_SHEET_NS}"><dimension ref="A1:XFD{row}"/><sheetData>'
        f'<row r="{row}"><c r="A{row}" t="inlineStr"><is><t>far</t></is></c></row>'
        "</sheetData></worksheet>"
    )
    return replaced(xlsx_bytes(rows=1), "xl/worksheets/sheet1.xml", sheet.encode())


def legacy_office(stream: str) -> bytes:
    """The start of an OLE compound file holding a stream of this name (.doc: WordDocument,
    .xls: Workbook, .ppt: PowerPoint Document)."""
    header = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 504
    return header + stream.encode("utf-16-le") + b"\0" * 1024
