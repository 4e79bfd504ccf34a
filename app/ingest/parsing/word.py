"""Word (.docx): headings become section paths, tables become rows of cells (tables.py).

python-docx opens the package (relationships, the main part's type) and resolves styles, so a
heading is found by its style ("Heading 2", a custom style based on one, or any style or
paragraph with an outline level); the body is then walked as XML, so that text in tracked
insertions, content controls and text boxes is kept and a table of contents is not. Headers,
footers, comments and footnotes are not read. Word keeps no page numbers in the file: chunks
carry none.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

import docx
from docx.styles.style import BaseStyle, CharacterStyle
from lxml import etree

from app.errors import Unprocessable
from app.ingest.parsing.limits import ParseLimits
from app.ingest.parsing.model import ParsedDocument, document
from app.ingest.parsing.outline import Outline
from app.ingest.parsing.zipped import vetted

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_NS = {"w": _W, "mc": "http://schemas.openxmlformats.org/markup-compatibility/2006"}
_P, _TBL, _SDT, _TR, _TC = (f"{{{_W}}}{tag}" for tag in ("p", "tbl", "sdt", "tr", "tc"))
_WRAPPERS = {f"{{{_W}}}{tag}" for tag in ("ins", "customXml", "smartTag", "sdtContent")}
_RUN_TEXT = etree.XPath(
    "(.//w:t | .//w:tab | .//w:br | .//w:cr | .//w:p)[not(ancestor::mc:Fallback)]",
    namespaces=_NS,
)
_STYLE_ID = etree.XPath("string(w:pPr/w:pStyle/@w:val)", namespaces=_NS)
_OUTLINE = etree.XPath("string(w:pPr/w:outlineLvl/@w:val)", namespaces=_NS)
_REPEATED_HEADER = etree.XPath(
    "w:trPr/w:tblHeader[not(@w:val='0' or @w:val='false')]", namespaces=_NS
)
_TOC_PART = etree.XPath(
    "w:sdtPr/w:docPartObj/w:docPartGallery[starts-with(@w:val, 'Table of Contents')]",
    namespaces=_NS,
)
_HEADING_NAME = re.compile(r"heading\s*([1-9])$", re.IGNORECASE)
_SKIPPED_STYLES = re.compile(r"^(toc\s*\d|toc heading)$", re.IGNORECASE)


def parse_docx(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Sections between headings, each with the path of headings above it; the title is the
    document's Title property, else its Title-styled paragraph, else its first Heading 1."""
    vetted(data, limits).close()
    try:
        word = docx.Document(io.BytesIO(data))
    except Exception as exc:  # python-docx raises KeyError, ValueError … on broken packages
        raise Unprocessable(f"the Word file could not be read (corrupt?): {exc}") from None
    styles = _Styles(word)
    outline = Outline(limits)
    title_paragraph = None
    for block in _blocks(word.element.body):
        if block.tag == _TBL:
            rows = list(block.iterchildren(_TR))
            header = True if rows and _REPEATED_HEADER(rows[0]) else None
            outline.table([_cells(row) for row in rows], header=header)
            continue
        style = styles.of(block)
        text = _text(block).strip()
        if style.is_title:
            title_paragraph = title_paragraph or " ".join(text.split()) or None
        elif style.skipped:
            continue
        elif (level := _outline_level(block) or style.level) is not None:
            outline.heading(level, " ".join(text.split()))
        else:
            outline.add(text)
    title = word.core_properties.title.strip() or title_paragraph or outline.first_top_heading
    return document(title, outline.sections())


def _blocks(parent: Any) -> Iterator[Any]:
    """Paragraphs and tables in document order, looking inside content controls and tracked
    insertions; a table of contents repeats the headings and is skipped."""
    for child in parent.iterchildren():
        if child.tag in (_P, _TBL):
            yield child
        elif child.tag == _SDT:
            if not _TOC_PART(child):
                yield from _blocks(child)
        elif child.tag in _WRAPPERS:
            yield from _blocks(child)


def _text(element: Any) -> str:
    """Text as Word shows it: tabs, line breaks; a nested paragraph (a text box) on its own
    line; the fallback copy of a text box left out."""
    parts: list[str] = []
    for node in _RUN_TEXT(element):
        name = etree.QName(node).localname
        if name == "t":
            parts.append(node.text or "")
        else:
            parts.append({"tab": "\t", "p": "\n"}.get(name, "\n"))
    return "".join(parts)


def _cells(row: Any) -> list[str]:
    """A row's cell texts (a merged cell once; a nested table's text inside its cell)."""
    return [" ".join(_text(cell).split()) for cell in row.iterchildren(_TC)]


def _outline_level(paragraph: Any) -> int | None:
    value = _OUTLINE(paragraph)
    return int(value) + 1 if value.isdigit() and int(value) < 9 else None


class _Style:
    def __init__(self, style: BaseStyle | None) -> None:
        self.level: int | None = None
        self.is_title = self.skipped = False
        for _ in range(10):  # a style and those it is based on, nearest first
            if style is None:
                break
            name = style.name or ""
            if style.name == "Title":
                self.is_title = True
            self.skipped = self.skipped or bool(_SKIPPED_STYLES.match(name))
            if match := _HEADING_NAME.match(name):
                self.level = int(match[1])
            elif (outline := _outline_level(style.element)) is not None:
                self.level = outline
            if self.level is not None or self.is_title:
                break
            style = style.base_style if isinstance(style, CharacterStyle) else None


class _Styles:
    """Paragraph styles by id, resolved once each."""

    def __init__(self, word: Any) -> None:
        self._by_id = {style.style_id: style for style in word.styles}
        self._resolved: dict[str, _Style] = {}

    def of(self, paragraph: Any) -> _Style:
        style_id = _STYLE_ID(paragraph)
        if style_id not in self._resolved:
            self._resolved[style_id] = _Style(self._by_id.get(style_id))
        return self._resolved[style_id]
