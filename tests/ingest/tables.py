"""A fleet register (vessel, home port, length, crew) as a long table in every format that has
tables, made here: Word, PowerPoint and PDF with the libraries people write them with, ODT and
EPUB as the ZIPs of XML their specifications describe, HTML and markdown as text."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from html import escape

import docx
import pptx
from fpdf import FPDF
from pptx.util import Inches

from tests.ingest.office import epub_bytes, odt_bytes

HEADER = ("Vessel", "Home port", "Length", "Crew")
INTRO = "The fleet register lists every vessel of the northern harbour."
_SYLLABLES = ("quor", "voz", "ir", "ux", "tal", "mek", "dra", "sil", "bon", "fey", "gar", "lum")

Rows = Sequence[Sequence[str]]


def vessel(number: int) -> str:
    """A made-up vessel name, one per number (words no model has seen together)."""
    parts = []
    for _ in range(3):
        number, digit = divmod(number, len(_SYLLABLES))
        parts.append(_SYLLABLES[digit])
    return "".join(parts) + _SYLLABLES[number % len(_SYLLABLES)]


def fleet(rows: int = 90) -> list[list[str]]:
    """The register's rows: vessel, home port, length in metres, crew."""
    return [
        [vessel(n * 7 + 3), f"Port {n % 9 + 1}", str(20 + (n * 13) % 80), str(4 + (n * 5) % 31)]
        for n in range(rows)
    ]


def docx_table(rows: Rows, header: Sequence[str] = HEADER, intro: str = INTRO) -> bytes:
    word = docx.Document()
    word.add_heading("Fleet", level=1)
    word.add_paragraph(intro)
    table = word.add_table(rows=0, cols=len(header))
    for cells in [header, *rows]:
        for cell, text in zip(table.add_row().cells, cells, strict=False):
            cell.text = text
    word.add_paragraph("Vessels are inspected each spring.")
    out = io.BytesIO()
    word.save(out)
    return out.getvalue()


def pptx_table(rows: Rows, header: Sequence[str] = HEADER, intro: str = INTRO) -> bytes:
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    assert slide.shapes.title is not None
    slide.shapes.title.text = "Fleet register"
    box = slide.shapes.add_textbox(Inches(1), Inches(1.4), Inches(8), Inches(0.5))
    box.text_frame.text = intro
    shape = slide.shapes.add_table(
        len(rows) + 1, len(header), Inches(1), Inches(2), Inches(8), Inches(5)
    )
    for r, cells in enumerate([header, *rows]):
        for c, text in enumerate(cells):
            shape.table.cell(r, c).text = text
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def html_table(rows: Rows, header: Sequence[str] = HEADER, intro: str = INTRO) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>\n" for cells in rows
    )
    return (
        f"<html><head><title>Fleet</title></head><body><h1>Fleet</h1><p>{escape(intro)}</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>"
        "<p>Vessels are inspected each spring.</p></body></html>"
    )


def markdown_table(rows: Rows, header: Sequence[str] = HEADER, intro: str = INTRO) -> str:
    lines = ["| " + " | ".join(cells) + " |" for cells in rows]
    return (
        f"# Fleet\n\n{intro}\n\n| {' | '.join(header)} |\n|{'---|' * len(header)}\n"
        + "\n".join(lines)
        + "\n\nVessels are inspected each spring.\n"
    )


def epub_table(rows: Rows, header: Sequence[str] = HEADER, intro: str = INTRO) -> bytes:
    page = html_table(rows, header, intro)
    body = page.split("<body>", 1)[1].split("</body>", 1)[0]
    return epub_bytes(chapter_body=body.replace("<h1>Fleet</h1>", "<h1>Chapter 1: Aardvarks</h1>"))


def odt_table(rows: Rows, header: Sequence[str] = HEADER, intro: str = INTRO) -> bytes:
    def row(cells: Sequence[str]) -> str:
        return (
            "<table:table-row>"
            + "".join(
                f"<table:table-cell><text:p>{escape(c)}</text:p></table:table-cell>" for c in cells
            )
            + "</table:table-row>"
        )

    return odt_bytes(
        body=f'<text:h text:outline-level="1">Fleet</text:h><text:p>{escape(intro)}</text:p>'
        "<table:table><table:table-header-rows>"
        + row(header)
        + "</table:table-header-rows>"
        + "".join(row(cells) for cells in rows)
        + "</table:table><text:p>Vessels are inspected each spring.</text:p>"
    )


def pdf_table(
    rows: Rows, header: Sequence[str] = HEADER, intro: str = INTRO, *, repeat_header: bool = True
) -> bytes:
    """A ruled table, its header row repeated atop each page unless `repeat_header` is False."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    pdf.add_page()
    pdf.multi_cell(0, 6, "Fleet", new_x="LMARGIN", new_y="NEXT")
    pdf.multi_cell(0, 6, intro, new_x="LMARGIN", new_y="NEXT")
    with pdf.table(repeat_headings=1 if repeat_header else 0) as table:
        for cells in [header, *rows]:
            line = table.row()
            for text in cells:
                line.cell(text)
    pdf.multi_cell(0, 6, "Vessels are inspected each spring.", new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


# format -> (file name, builder): what an upload of that format is
BUILDERS: dict[str, tuple[str, Callable[..., bytes | str]]] = {
    "docx": ("fleet.docx", docx_table),
    "pptx": ("fleet.pptx", pptx_table),
    "odt": ("fleet.odt", odt_table),
    "epub": ("fleet.epub", epub_table),
    "html": ("fleet.html", html_table),
    "markdown": ("fleet.md", markdown_table),
    "pdf": ("fleet.pdf", pdf_table),
}


def table_file(kind: str, rows: Rows, header: Sequence[str] = HEADER) -> tuple[str, bytes]:
    """(file name, bytes) of the register in a format of `BUILDERS`."""
    name, build = BUILDERS[kind]
    made = build(rows, header)
    return name, made.encode() if isinstance(made, str) else made
