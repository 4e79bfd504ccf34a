"""Parser properties for text: a document PostgreSQL can store, or a documented refusal.

`parse_text` returns a `ParsedDocument` or raises `Unprocessable` (422), and
`UnsupportedMediaType` (415) for the PDF type; nothing else may escape, whatever the text:
NUL, lone surrogates, control characters, CRLF, U+2028, unbalanced markup, deep nesting. What
is parsed holds text in every section, titles and section names with their whitespace
collapsed, and nothing the database refuses. Bytes, sniffing and PDFs: test_uploads.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.errors import AppError, Unprocessable, UnsupportedMediaType
from app.ingest.parsing import ParsedDocument, Section, SourceType, parse_text
from app.storable import unstorable_reason
from tests.properties import examples
from tests.properties.documents import assert_storable, clean, documents, markup, outcome

# bs4 warns about input that looks like a file name, a URL or XML: generated input often does.
pytestmark = [
    pytest.mark.filterwarnings("ignore::bs4.MarkupResemblesLocatorWarning"),
    pytest.mark.filterwarnings("ignore::bs4.XMLParsedAsHTMLWarning"),
]


@examples(300)
@given(documents, st.sampled_from(list(SourceType)))
def test_any_text_parses_into_storable_sections_or_is_refused(
    text: str, source_type: SourceType
) -> None:
    result = outcome(lambda: parse_text(text, source_type))

    if source_type.file_only:  # PDF, Word …: uploaded as files
        assert isinstance(result, UnsupportedMediaType)
    elif isinstance(result, ParsedDocument):
        assert_storable(result)
        assert all(section.page_number is None for section in result.sections)
        if source_type is not SourceType.HTML:  # in HTML, a <pre> may hold &#13;
            assert "\r" not in "".join(section.text for section in result.sections)
    else:
        assert isinstance(result, Unprocessable)


@examples(200)
@given(documents)
def test_plain_text_is_one_section_of_its_stripped_text_with_unix_newlines(text: str) -> None:
    result = outcome(lambda: parse_text(text, SourceType.TEXT))

    storable = unstorable_reason(text) is None
    if storable and text.strip():
        assert result == ParsedDocument(None, [Section(clean(text).strip(), (), None)])
    else:
        assert isinstance(result, Unprocessable)


@examples(200)
@given(documents.map(lambda text: text.replace("\x00", "")))
def test_markdown_sections_are_slices_of_the_source_in_order(text: str) -> None:
    result = outcome(lambda: parse_text(text, SourceType.MARKDOWN))

    if isinstance(result, AppError):
        return
    source, start = clean(text), 0
    # a table's rows are its cells joined by " | ", each cell's whitespace made single spaces
    # and its escaped pipes unescaped: their words are in the source, in order
    cells, cell_start = source.replace("\\|", "|"), 0
    for section in result.sections:
        if section.table is not None:
            for word in (w for cell in section.text.split(" | ") for w in cell.split()):
                found = cells.find(word, cell_start)
                assert found >= 0, (section.text, word)
                cell_start = found + len(word)
            continue
        found = source.find(section.text, start)
        assert found >= 0, section.text
        start = found + len(section.text)


# An outline (headings and paragraphs) rendered as markdown and as HTML parses the same way.

OUTLINE_WORDS = ["river", "stone", "Garden", "lantern", "résumé", "東京", "Straße", "x", "42"]
FURNITURE = [
    "<nav><ul><li>navword</li></ul></nav>",
    "<script>var scriptword = 1;</script>",
    "<style>.styleword { color: red }</style>",
    "<aside>asideword</aside>",
    "<footer>footerword</footer>",
    "<form><button>formword</button></form>",
    "<!-- commentword -->",
]


@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True, slots=True)
class Paragraph:
    text: str


@dataclass(frozen=True, slots=True)
class Furniture:
    """Page furniture: HTML only, and never part of a section."""

    markup: str


Block = Heading | Paragraph | Furniture
phrases = st.lists(st.sampled_from(OUTLINE_WORDS), min_size=1, max_size=6).map(" ".join)
blocks = st.lists(
    st.one_of(
        st.builds(Heading, st.integers(1, 6), phrases),
        st.builds(Paragraph, phrases),
        st.builds(Furniture, st.sampled_from(FURNITURE)),
    ),
    max_size=16,
)


def expected_sections(outline: list[Block]) -> Iterator[tuple[tuple[str, ...], str]]:
    """(section path, text) as the parsers' docstrings describe them."""
    path: list[Heading] = []
    paragraphs: list[str] = []
    for block in [*outline, Heading(0, "")]:  # a level-0 heading ends the last section
        if isinstance(block, Paragraph):
            paragraphs.append(block.text)
        elif isinstance(block, Heading):
            if paragraphs:
                yield tuple(heading.text for heading in path), "\n\n".join(paragraphs)
            paragraphs = []
            while path and path[-1].level >= block.level:
                path.pop()
            path.append(block)


def as_markdown(outline: list[Block], style: int) -> str:
    """Style 0: `## Heading`, 1: setext for levels 1 and 2, 2 and 3: closing `#`s."""
    lines = []
    for block in outline:
        if isinstance(block, Paragraph):
            lines.append(block.text)
        elif isinstance(block, Heading) and style == 1 and block.level <= 2:
            lines.append(f"{block.text}\n{'=-'[block.level - 1] * 3}")
        elif isinstance(block, Heading):
            closing = " " + "#" * style if style > 1 else ""
            lines.append(f"{'#' * block.level} {block.text}{closing}")
    return "\n\n".join(lines)


def as_html(outline: list[Block]) -> str:
    def element(block: Block) -> str:
        if isinstance(block, Paragraph):
            return f"<p>{block.text}</p>"
        if isinstance(block, Heading):
            return f"<h{block.level}>{block.text}</h{block.level}>"
        return block.markup

    return "<!doctype html><html><body>" + "\n".join(map(element, outline)) + "</body></html>"


@examples(200)
@given(blocks, st.integers(0, 3))
def test_markdown_and_html_outlines_give_the_documented_sections(
    outline: list[Block], markdown_style: int
) -> None:
    sections = list(expected_sections(outline))
    title = next((b.text for b in outline if isinstance(b, Heading) and b.level == 1), None)

    for result in (
        outcome(lambda: parse_text(as_markdown(outline, markdown_style), SourceType.MARKDOWN)),
        outcome(lambda: parse_text(as_html(outline), SourceType.HTML)),
    ):
        if not sections:
            assert isinstance(result, Unprocessable)
            continue
        assert isinstance(result, ParsedDocument)
        assert [(s.section_path, s.text) for s in result.sections] == sections
        assert result.title == title


# Not footers: one inside <main>, <article> or <section> is content (see parsing/html.py).
FURNITURE_WORD = re.compile(r"(nav|script|style|aside|form|comment)word")


@examples(200)
@given(st.lists(st.one_of(st.sampled_from(FURNITURE).map(">".__add__), markup), max_size=12))
def test_html_furniture_never_reaches_the_sections(pieces: list[str]) -> None:
    """Scripts, styles, navigation, asides, forms and comments are dropped, however broken the
    markup around them. Each follows a `>`: after `</`, `<!` or `<?` a browser reads a bogus
    comment up to the next `>` and shows what follows as text, and so does the parser."""
    result = outcome(lambda: parse_text("".join(pieces), SourceType.HTML))

    if isinstance(result, ParsedDocument):
        assert_storable(result)
        text = "\n".join(section.text for section in result.sections)
        assert FURNITURE_WORD.search(text) is None
