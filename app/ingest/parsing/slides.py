"""PowerPoint (.pptx): one section per slide, its number the page number, its title the section.

Read with python-pptx: the text of every shape (groups opened) in reading order, top to
bottom then left to right, and the speaker notes after it; the date, footer and slide-number
placeholders are page furniture and left out. A table becomes row sections of the same slide
(tables.py), after the slide's text; its caption is the line read just before it, else the
slide's title. Slides count as pages against `max_pages`.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Iterator

import pptx
from pptx.enum.shapes import MSO_SHAPE_TYPE, PP_PLACEHOLDER
from pptx.shapes.base import BaseShape
from pptx.shapes.graphfrm import GraphicFrame
from pptx.shapes.group import GroupShape
from pptx.slide import Slide
from pptx.table import Table

from app.errors import PayloadTooLarge, Unprocessable
from app.ingest.parsing.limits import ParseLimits, too_many_chars
from app.ingest.parsing.model import ParsedDocument, Section, document
from app.ingest.parsing.tables import TableRows
from app.ingest.parsing.zipped import vetted

_FURNITURE = {
    PP_PLACEHOLDER.DATE,
    PP_PLACEHOLDER.FOOTER,
    PP_PLACEHOLDER.SLIDE_NUMBER,
    PP_PLACEHOLDER.HEADER,
}


def parse_pptx(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Sections numbered by slide (1 is the first); a slide's title is its section path and,
    when it has no other text, its text. The document's title is the Title property, else the
    first slide's title."""
    vetted(data, limits).close()
    try:
        deck = pptx.Presentation(io.BytesIO(data))
        slides = list(deck.slides)
    except Exception as exc:  # python-pptx raises KeyError, ValueError … on broken packages
        raise Unprocessable(f"the PowerPoint file could not be read (corrupt?): {exc}") from None
    if len(slides) > limits.max_pages:
        raise PayloadTooLarge(
            f"the presentation has {len(slides):,} slides, more than {limits.max_pages:,} "
            "(RAG_PARSE_MAX_PAGES, a slide counts as a page): split it, or raise the limit",
            extra={"limit": "max_pages", "value": limits.max_pages},
        )
    sections: list[Section] = []
    chars = 0
    tables = TableRows(limits)
    for number, slide in enumerate(slides, start=1):
        for section in _slide(slide, number, tables):
            chars += len(section.text)
            if chars > limits.max_chars:
                raise too_many_chars(limits)
            sections.append(section)
    first_title = next((s.section_path[0] for s in sections if s.section_path), None)
    return document(deck.core_properties.title.strip() or first_title, sections)


def _slide(slide: Slide, number: int, tables: TableRows) -> list[Section]:
    """The slide's text, then its tables' rows."""
    title_shape = slide.shapes.title
    title = ""
    if title_shape is not None:
        title = " ".join(t for t in _shape_lines(title_shape) if isinstance(t, str)).strip()
    path = (" ".join(title.split()),) if title else ()
    lines: list[str] = []
    rows: list[Section] = []
    for shape in _reading_order(slide.shapes):
        if shape.shape_id == getattr(title_shape, "shape_id", None):
            continue
        for item in _shape_lines(shape):
            if isinstance(item, str):
                lines.append(item)
                continue
            caption = next((line for line in reversed(lines) if line.strip()), title)
            cells = [[c.text for c in row.cells if not c.is_spanned] for row in item.rows]
            header = True if item.first_row else None
            rows += tables.sections(cells, path=path, page=number, caption=caption, header=header)
    notes = slide.notes_slide.notes_text_frame if slide.has_notes_slide else None
    if notes is not None and (text := notes.text.replace("\v", "\n").strip()):
        lines.append(f"Speaker notes: {text}")
    body = "\n".join(line for line in lines if line.strip()) or ("" if rows else title)
    return [Section(body, path, number), *rows]


def _reading_order(shapes: Iterable[BaseShape]) -> list[BaseShape]:
    def position(shape: BaseShape) -> tuple[float, float]:
        top, left = shape.top, shape.left
        return (math.inf if top is None else top, math.inf if left is None else left)

    return sorted(shapes, key=position)


def _shape_lines(shape: BaseShape) -> Iterator[str | Table]:
    """A shape's lines of text, or its table."""
    if shape.is_placeholder and shape.placeholder_format.type in _FURNITURE:
        return
    if shape.shape_type == MSO_SHAPE_TYPE.GROUP and isinstance(shape, GroupShape):
        for inner in _reading_order(shape.shapes):
            yield from _shape_lines(inner)
    elif isinstance(shape, GraphicFrame) and shape.has_table:
        yield shape.table
    elif shape.has_text_frame:
        for paragraph in shape.text_frame.paragraphs:  # type: ignore[attr-defined]
            yield paragraph.text.replace("\v", "\n")
