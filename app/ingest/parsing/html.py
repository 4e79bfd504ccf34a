"""HTML: the page's main text, with h1-h6 as section paths; page furniture is dropped."""

from __future__ import annotations

from bs4 import BeautifulSoup, UnicodeDammit
from bs4.element import NavigableString, PageElement, Tag

from app.errors import Unprocessable
from app.ingest.parsing.model import ParsedDocument, Section, document
from app.ingest.parsing.text import clean_text, decode_text

# Never text a reader came for: code, styling, widgets, navigation, forms.
_DROPPED = [
    *("script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "canvas"),
    *("nav", "aside", "form", "button", "select", "textarea", "dialog"),
]
# Page banners and footers go too, but not an <article>'s own header (it often holds the h1).
_FURNITURE = ["header", "footer"]
_SECTIONING = ["article", "main", "section"]
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_BLOCKS = frozenset(
    {
        *("html", "body", "main", "article", "section", "header", "footer", "div", "p", "hr"),
        *("address", "blockquote", "details", "summary", "figure", "figcaption", "fieldset"),
        *("ul", "ol", "li", "dl", "dt", "dd", "table", "caption", "thead", "tbody", "tfoot", "tr"),
    }
)


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


def parse_html(markup: str) -> ParsedDocument:
    """Sections split at each heading; the title is <title>, else the first <h1>.

    Text inside <main> (else a lone <article>, else <body>) is kept; whitespace collapses as a
    browser would show it, except in <pre>; block elements become paragraphs.
    """
    soup = BeautifulSoup(markup, "lxml")
    _drop_furniture(soup)
    root = _main_content(soup)
    title_tag = soup.find("title")
    title = _words(title_tag) if title_tag else ""
    if not title and (h1 := root.find("h1")):
        title = _words(h1)
    return document(title or None, _Sections().collect(root))


def _drop_furniture(soup: BeautifulSoup) -> None:
    for tag in soup.find_all(_DROPPED):
        if not tag.decomposed:
            tag.decompose()
    for tag in soup.find_all(_FURNITURE):
        if not tag.decomposed and tag.find_parent(_SECTIONING) is None:
            tag.decompose()


def _main_content(soup: BeautifulSoup) -> Tag:
    if isinstance(main := soup.find("main"), Tag):
        return main
    if len(articles := soup.find_all("article")) == 1 and isinstance(articles[0], Tag):
        return articles[0]
    return soup.body or soup


def _words(tag: PageElement) -> str:
    return " ".join(tag.get_text().split())


class _Sections:
    """Walks the tree in document order, gathering paragraphs under the current heading path."""

    def __init__(self) -> None:
        self._sections: list[Section] = []
        self._path: list[tuple[int, str]] = []
        self._paragraphs: list[str] = []
        self._inline: list[str] = []

    def collect(self, root: Tag) -> list[Section]:
        stack: list[PageElement | None] = [root]  # None: the end of a block element
        while stack:
            node = stack.pop()
            if node is None:
                self._end_paragraph()
            elif type(node) is NavigableString:  # not comments, doctypes, CDATA …
                self._inline.append(str(node))
            elif isinstance(node, Tag):
                self._visit(node, stack)
        self._end_section()
        return self._sections

    def _visit(self, tag: Tag, stack: list[PageElement | None]) -> None:
        if tag.name in ("head", "title"):  # the title is the document's, not its text
            return
        if (level := _HEADINGS.get(tag.name)) is not None:
            self._end_section()
            while self._path and self._path[-1][0] >= level:
                self._path.pop()
            self._path.append((level, _words(tag)))
        elif tag.name == "pre":
            self._end_paragraph()
            if (code := tag.get_text().strip("\n")).strip():
                self._paragraphs.append(code)
        elif tag.name == "br":
            self._end_paragraph()
        else:
            if tag.name in ("td", "th"):
                self._inline.append(" ")
            elif tag.name in _BLOCKS:
                self._end_paragraph()
                stack.append(None)
            stack.extend(reversed(tag.contents))

    def _end_paragraph(self) -> None:
        if paragraph := " ".join("".join(self._inline).split()):
            self._paragraphs.append(paragraph)
        self._inline.clear()

    def _end_section(self) -> None:
        self._end_paragraph()
        if self._paragraphs:
            path = tuple(name for _, name in self._path if name)
            self._sections.append(Section("\n\n".join(self._paragraphs), path, None))
        self._paragraphs.clear()
