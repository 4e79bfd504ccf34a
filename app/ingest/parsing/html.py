"""HTML: the page's main text, with h1-h6 as section paths; page furniture is dropped.

The page is parsed by lxml (libxml2's HTML parser, in C) into its element tree and walked
once, iteratively, in document order: the cost is linear in the page's size. (A
BeautifulSoup tree of the same page cost a Python object per element and a full pass per
search: a megabyte of `<p>` took seconds and hundreds of megabytes.)

A `<table>` becomes row sections (tables.py) under the headings above it: its first row is the
header when it sits in `<thead>` or is all `<th>`, else when it looks like one; its caption is
its `<caption>`, else the short paragraph just before it. A table nested in a cell is that
cell's text.
"""

from __future__ import annotations

from collections.abc import Iterator

from bs4 import UnicodeDammit
from lxml import etree

from app.errors import Unprocessable
from app.ingest.parsing.limits import DEFAULT_LIMITS, ParseLimits
from app.ingest.parsing.model import ParsedDocument, Section, document
from app.ingest.parsing.tables import TableRows
from app.ingest.parsing.text import clean_text, decode_text

# Never text a reader came for: code, styling, widgets, navigation, forms.
_DROPPED = frozenset(
    {
        *("script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "canvas"),
        *("nav", "aside", "form", "button", "select", "textarea", "dialog"),
    }
)
# Page banners and footers go too, but not an <article>'s own header (it often holds the h1).
_FURNITURE = frozenset({"header", "footer"})
_SECTIONING = frozenset({"article", "main", "section"})
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_BLOCKS = frozenset(
    {
        *("html", "body", "main", "article", "section", "header", "footer", "div", "p", "hr"),
        *("address", "blockquote", "details", "summary", "figure", "figcaption", "fieldset"),
        *("ul", "ol", "li", "dl", "dt", "dd", "table", "caption", "thead", "tbody", "tfoot", "tr"),
    }
)
_CELLS = ("td", "th")
_SPACED = _BLOCKS | {*_CELLS, "br"}  # inside a cell, what stands apart from its neighbours
_Element = etree._Element


def decode_html(data: bytes) -> str:
    """UTF-8 (or UTF-16 with a BOM), else the charset the page declares in <meta>."""
    try:
        return decode_text(data)
    except Unprocessable:
        if b"\x00" in data and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise  # a NUL is no charset question: a detector would guess UTF-16 into mojibake
        markup = UnicodeDammit(data, is_html=True).unicode_markup
        if markup is None:
            raise
        return clean_text(markup)


def parse_html(markup: str, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    """Sections split at each heading; the title is <title>, else the first <h1>.

    Text inside <main> (else a lone <article>, else <body>) is kept; whitespace collapses as a
    browser would show it, except in <pre>; block elements become paragraphs.
    """
    root = _tree(markup)
    if root is None:
        raise Unprocessable("the document has no text")
    found = _Landmarks.of(root)
    content = found.content(root)
    title = _words(found.title) if found.title is not None else ""
    if not title and (h1 := next(_kept(content, "h1"), None)) is not None:
        title = _words(h1)
    return document(title or None, _Sections(limits).collect(content))


def _tree(markup: str) -> _Element | None:
    """The page's root element; None when there is none. Fed as UTF-8 with that encoding
    imposed: the text is decoded already, whatever a <meta> or an XML declaration says."""
    parser = etree.HTMLParser(
        encoding="utf-8",
        remove_comments=True,
        remove_pis=True,
        no_network=True,
        default_doctype=False,
    )
    try:
        return etree.fromstring(markup.encode("utf-8"), parser)
    except etree.XMLSyntaxError as exc:
        if any(error.type_name == "ERR_NO_MEMORY" for error in exc.error_log):
            raise MemoryError from None  # libxml2 under the parse worker's memory cap
        raise Unprocessable(f"the HTML could not be parsed: {exc}") from None


def _name(element: _Element) -> str:
    """The element's tag in lower case; "" for what is not an element (comment, entity)."""
    tag = element.tag
    return tag.lower() if isinstance(tag, str) else ""


def _removed(element: _Element) -> bool:
    """Dropped itself, furniture outside any sectioning element, or inside one of those."""
    chain = [element, *element.iterancestors()]
    names = [_name(e) for e in chain]
    for index, name in enumerate(names):
        if name in _DROPPED:
            return True
        if name in _FURNITURE and not _SECTIONING.intersection(names[index + 1 :]):
            return True
    return False


def _kept(root: _Element, tag: str) -> Iterator[_Element]:
    return (element for element in root.iter(tag) if not _removed(element))


class _Landmarks:
    """The first <main>, the <article>s and the <title> the reader would see."""

    def __init__(self) -> None:
        self.main: _Element | None = None
        self.articles: list[_Element] = []
        self.title: _Element | None = None

    @classmethod
    def of(cls, root: _Element) -> _Landmarks:
        found = cls()
        found.main = next(_kept(root, "main"), None)
        found.articles = list(_kept(root, "article"))
        found.title = next(_kept(root, "title"), None)
        return found

    def content(self, root: _Element) -> _Element:
        if self.main is not None:
            return self.main
        if len(self.articles) == 1:
            return self.articles[0]
        body = root.find("body")
        return body if body is not None else root


def _strings(element: _Element, *, spaced: frozenset[str] = frozenset()) -> Iterator[str]:
    """The text inside the element, in order, without what is dropped (not its tail); a space
    around each element named in `spaced`."""
    stack: list[_Element | str] = [element]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
            continue
        if item is not element and item.tail:
            stack.append(item.tail)
        name = _name(item)
        if not name or name in _DROPPED:
            continue
        if name in spaced:
            stack.append(" ")
        stack.extend(reversed(item))
        if item.text:
            stack.append(item.text)
        if name in spaced:
            stack.append(" ")


def _marked_header(row: _Element, cells: list[_Element]) -> bool:
    """A first row the page marks as the header: in <thead>, or all <th>."""
    parent = row.getparent()
    in_head = parent is not None and _name(parent) == "thead"
    return in_head or all(_name(cell) == "th" for cell in cells)


def _words(element: _Element) -> str:
    return " ".join("".join(_strings(element)).split())


class _Sections:
    """Walks the tree in document order, gathering paragraphs under the current heading path."""

    def __init__(self, limits: ParseLimits) -> None:
        self._sections: list[Section] = []
        self._path: list[tuple[int, str]] = []
        self._paragraphs: list[str] = []
        self._inline: list[str] = []
        self._tables = TableRows(limits)

    def collect(self, root: _Element) -> list[Section]:
        walker = etree.iterwalk(root, events=("start", "end"))
        skipped: _Element | None = None  # its end comes next: nothing inside it is walked
        for event, element in walker:
            name = _name(element)
            if event == "start":
                if not self._opened(element, name):
                    skipped = element
                    walker.skip_subtree()
                continue
            if element is skipped:
                skipped = None
            elif name in _BLOCKS:
                self._end_paragraph()
            if element is not root and element.tail:
                self._inline.append(element.tail)
        self._end_section()
        return self._sections

    def _opened(self, tag: _Element, name: str) -> bool:
        """Take in what the element starts with; False when nothing inside it is to be
        walked (dropped, or read whole here: a heading, <pre>)."""
        if not name or name in _DROPPED or name in ("head", "title"):
            return False  # the title is the document's, not its text
        if name in _FURNITURE and not any(True for _ in tag.iterancestors(*_SECTIONING)):
            return False
        if (level := _HEADINGS.get(name)) is not None:
            self._end_section()
            while self._path and self._path[-1][0] >= level:
                self._path.pop()
            self._path.append((level, _words(tag)))
            return False
        if name == "pre":
            self._end_paragraph()
            if (code := "".join(_strings(tag)).strip("\n")).strip():
                self._paragraphs.append(code)
            return False
        if name == "br":
            self._end_paragraph()
            return False
        if name == "table":
            self._table(tag)
            return False
        if name in ("td", "th"):
            self._inline.append(" ")
        elif name in _BLOCKS:
            self._end_paragraph()
        if tag.text:
            self._inline.append(tag.text)
        return True

    def _table(self, table: _Element) -> None:
        """The table's own rows (not those of a table nested in a cell) as row sections."""
        rows = [row for row in table.iter("tr") if next(row.iterancestors("table")) is table]
        cells = [[cell for cell in row if _name(cell) in _CELLS] for row in rows]
        header = True if cells and cells[0] and _marked_header(rows[0], cells[0]) else None
        self._end_paragraph()
        caption = next((c for c in table if _name(c) == "caption"), None)
        intro = _words(caption) if caption is not None else "\n".join(self._paragraphs[-1:])
        self._end_section()
        texts = [[" ".join("".join(_strings(c, spaced=_SPACED)).split()) for c in r] for r in cells]
        path = tuple(name for _, name in self._path if name)
        self._sections += self._tables.sections(texts, path=path, caption=intro, header=header)

    def _end_paragraph(self) -> None:
        if not self._inline:
            return
        if paragraph := " ".join("".join(self._inline).split()):
            self._paragraphs.append(paragraph)
        self._inline.clear()

    def _end_section(self) -> None:
        self._end_paragraph()
        if self._paragraphs:
            path = tuple(name for _, name in self._path if name)
            self._sections.append(Section("\n\n".join(self._paragraphs), path, None))
        self._paragraphs.clear()
