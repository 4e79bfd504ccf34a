"""Real Word, PowerPoint, Excel, EPUB and ODT files, made in the tests: the first three with the
libraries people write them with, EPUB and ODT as the ZIPs of XML their specifications
describe (a `mimetype` member first, stored)."""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from collections.abc import Sequence

import docx
import openpyxl
import pptx
from pptx.util import Inches


def docx_bytes(*, title: str = "") -> bytes:
    """A handbook: a Title paragraph, text before any heading, nested headings, a table."""
    word = docx.Document()
    word.core_properties.title = title
    word.add_paragraph("Field Handbook", style="Title")
    word.add_paragraph("Read this before the first expedition.")
    word.add_heading("Equipment", level=1)
    word.add_paragraph("Pack the aardvark lantern and spare batteries.")
    word.add_heading("Tents", level=2)
    word.add_paragraph("The bumblebee tent sleeps four.")
    table = word.add_table(rows=2, cols=2)
    for (row, column), text in {(0, 0): "Item", (0, 1): "Weight", (1, 0): "Tent"}.items():
        table.cell(row, column).text = text
    table.cell(1, 1).text = "4 kg"
    word.add_heading("Safety", level=1)
    word.add_paragraph("Chameleons bite when cornered.")
    out = io.BytesIO()
    word.save(out)
    return out.getvalue()


def pptx_bytes(*, slides: Sequence[tuple[str, str]] | None = None) -> bytes:
    """A deck: each (title, body) a slide; the default has notes and a table on slide 2."""
    deck = pptx.Presentation()
    default = slides is None
    for title, body in slides or [("Quarterly Review", "Aardvark sales doubled.")]:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        assert slide.shapes.title is not None
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    if default:
        notes = deck.slides[0].notes_slide.notes_text_frame
        assert notes is not None
        notes.text = "Thank the bumblebee team."
        slide = deck.slides.add_slide(deck.slide_layouts[5])
        assert slide.shapes.title is not None
        slide.shapes.title.text = "Regional Figures"
        shape = slide.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(6), Inches(1))
        for (row, column), text in {(0, 0): "Region", (0, 1): "Chameleons"}.items():
            shape.table.cell(row, column).text = text
        shape.table.cell(1, 0).text = "North"
        shape.table.cell(1, 1).text = "42"
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def xlsx_bytes(*, rows: int = 60) -> bytes:
    """Two sheets: "Inventory" with a header row and `rows` data rows (row 2 onwards), and
    "Notes" with one note in B3."""
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Inventory"
    sheet.append(["Animal", "Count", "Checked", "Keeper notes"])
    for number in range(rows):
        note = f"animal {number} is a {'aardvark' if number % 2 else 'bumblebee'}"
        sheet.append([f"Animal {number}", number, dt.date(2024, 1, 1 + number % 28), note])
    notes = book.create_sheet("Notes")
    notes["B3"] = "The chameleon enclosure closes in May."
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def zip_of(members: Sequence[tuple[str, bytes]], *, stored_first: bool = True) -> bytes:
    """A ZIP of these members in order; the first stored (EPUB and ODF want `mimetype` so)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for index, (name, data) in enumerate(members):
            stored = stored_first and index == 0
            archive.writestr(name, data, zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED)
    return out.getvalue()


_CONTAINER = b"""<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles><rootfile full-path="OEBPS/content.opf"
    media-type="application/oebps-package+xml"/></rootfiles>
</container>"""

_OPF = b"""<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:identifier id="id">urn:uuid:1</dc:identifier><dc:title>A Field Guide</dc:title>
  </metadata>
  <manifest>
    <item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
    <item id="c1" href="text/ch1.xhtml" media-type="application/xhtml+xml"/>
    <item id="c1b" href="text/ch1b.xhtml" media-type="application/xhtml+xml"/>
    <item id="c2" href="text/ch2.xhtml" media-type="application/xhtml+xml"/>
    <item id="css" href="style.css" media-type="text/css"/>
  </manifest>
  <spine><itemref idref="c1"/><itemref idref="c1b"/><itemref idref="c2"/></spine>
</package>"""

_NAV = b"""<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">
<head><title>Contents</title></head><body>
<nav epub:type="toc"><ol>
  <li><a href="text/ch1.xhtml">Chapter 1: Aardvarks</a></li>
  <li><a href="text/ch2.xhtml#start">Chapter 2: Bumblebees</a></li>
</ol></nav></body></html>"""


def _xhtml(body: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>A Field Guide</title>'
        f'<script src="x.js"/></head><body>{body}</body></html>'
    ).encode()


def epub_bytes(*, chapter_body: str | None = None) -> bytes:
    """An EPUB 3 book of two chapters named by its navigation document; the first chapter
    goes on in a second file the contents do not name."""
    ch1 = chapter_body or (
        "<h1>Chapter 1: Aardvarks</h1><p>Aardvarks dig&nbsp;burrows at night.</p>"
        "<h2>Diet</h2><p>They eat termites.</p>"
    )
    return zip_of(
        [
            ("mimetype", b"application/epub+zip"),
            ("META-INF/container.xml", _CONTAINER),
            ("OEBPS/content.opf", _OPF),
            ("OEBPS/nav.xhtml", _NAV),
            ("OEBPS/text/ch1.xhtml", _xhtml(ch1)),
            ("OEBPS/text/ch1b.xhtml", _xhtml("<p>More about aardvark ears.</p>")),
            ("OEBPS/text/ch2.xhtml", _xhtml('<p id="start">Bumblebees hum in clover.</p>')),
            ("OEBPS/style.css", b"p { margin: 0 }"),
        ]
    )


_ODF_OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
_ODF_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_ODF_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"


def odt_bytes(*, body: str | None = None) -> bytes:
    """An ODT with nested headings, a list, a table, a note and a table of contents."""
    text = body or (
        "<text:table-of-content><text:index-body><text:p>Contents 1</text:p>"
        "</text:index-body></text:table-of-content>"
        '<text:h text:outline-level="1">Burrows</text:h>'
        '<text:p>Aardvarks<text:s text:c="2"/>dig.<text:note><text:note-body><text:p>'
        "a footnote</text:p></text:note-body></text:note></text:p>"
        '<text:h text:outline-level="2">Depth</text:h>'
        "<text:list><text:list-item><text:p>Two metres deep.</text:p></text:list-item>"
        "</text:list>"
        "<table:table><table:table-row><table:table-cell><text:p>Site</text:p>"
        "</table:table-cell><table:table-cell><text:p>Depth</text:p></table:table-cell>"
        "</table:table-row><table:table-row><table:table-cell><text:p>North</text:p>"
        "</table:table-cell><table:table-cell><text:p>2 m</text:p></table:table-cell>"
        '<table:table-cell table:number-columns-repeated="1000"/></table:table-row>'
        "</table:table>"
        '<text:h text:outline-level="1">Bees</text:h><text:p>Bumblebees hum.</text:p>'
    )
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-content '
        f'xmlns:office="{_ODF_OFFICE}" xmlns:text="{_ODF_TEXT}" xmlns:table="{_ODF_TABLE}" '
        f'office:version="1.3"><office:body><office:text>{text}</office:text></office:body>'
        "</office:document-content>"
    )
    meta = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-meta xmlns:office="{_ODF_OFFICE}"'
        ' xmlns:dc="http://purl.org/dc/elements/1.1/"><office:meta><dc:title>Burrowing Animals'
        "</dc:title></office:meta></office:document-meta>"
    )
    manifest = (
        '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest='
        '"urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"><manifest:file-entry '
        'manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/>'
        "</manifest:manifest>"
    )
    return zip_of(
        [
            ("mimetype", b"application/vnd.oasis.opendocument.text"),
            ("content.xml", content.encode()),
            ("meta.xml", meta.encode()),
            ("META-INF/manifest.xml", manifest.encode()),
        ]
    )
