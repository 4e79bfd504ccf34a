"""Generated documents, and what any parse of them must satisfy.

Markup soups mix HTML and markdown pieces (unbalanced tags, entities for NUL and surrogates,
deep nesting) with prose and arbitrary unicode; `outcome` runs a parser and keeps only the
documented refusals, so any other exception fails the property that called it.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import strategies as st

from app.errors import AppError, Unprocessable, UnsupportedMediaType
from app.ingest.parsing import ParsedDocument, SourceType
from app.storable import unstorable_reason
from tests.properties.texts import odd_text, prose

TEXT_TYPES = [SourceType.TEXT, SourceType.MARKDOWN, SourceType.HTML]
HTML_PIECES = [
    *("<!doctype html>", "<?xml version='1.0'?>", "<html>", "<head>", "<body>", "</body>"),
    *("<main>", "</main>", "<article>", "<section>", "<header>", "<footer>", "<div>", "</div>"),
    *("<p>", "</p>", "<h1>", "</h1>", "<h3 class=x>", "</h3>", "<h6>", "<pre>", "</pre>", "<br>"),
    *("<table><tr><td>", "</td><th>", "<ul><li>", "</li>", "<svg>", "<math>", "<frameset>"),
    *("<", ">", "</", "<!--", "-->", "<![CDATA[", "]]>", "<p class='", '"', "/>"),
    *("&amp;", "&lt;", "&nbsp;", "&#0;", "&#x0;", "&#xD800;", "&#1114112;", "&#128512;", "&#13;"),
    "&bogus;",
]
MARKDOWN_PIECES = [
    *("# ", "## ", "###### ", "####### ", "#", " #", "\n", "\n\n", "---\n", "...\n"),
    *("```\n", "~~~", "    ", "> ", "- ", "* ", "1. ", "===\n", "---", "| a | b |\n|---|---|\n"),
    *("*", "**", "_", "`", "[", "](", ")", "![", "<div>", "&#0;", "&#xD800;", "\\", "\ufeff"),
]
# What PostgreSQL cannot store, as the JSON ingest path can send it (`\u0000`, `\ud800`).
UNSTORABLE = ["\x00", "\ud800", "\udfff"]
nesting = st.integers(1, 60).flatmap(
    lambda depth: st.sampled_from(["> " * depth, "  " * depth + "- ", "#" * depth + " x\n"])
)
markup = st.lists(
    st.one_of(
        st.sampled_from(HTML_PIECES),
        st.sampled_from(MARKDOWN_PIECES),
        st.sampled_from(UNSTORABLE),
        nesting,
        odd_text(max_size=10),
    ),
    max_size=80,
).map("".join)
documents = st.one_of(prose(), markup, st.text(max_size=200))


def outcome(call: Callable[[], ParsedDocument]) -> ParsedDocument | AppError:
    """The parsed document, or the documented error it was refused with (others propagate)."""
    try:
        return call()
    except (Unprocessable, UnsupportedMediaType) as error:
        return error


def assert_storable(parsed: ParsedDocument) -> None:
    assert parsed.sections
    if parsed.title is not None:
        assert parsed.title == " ".join(parsed.title.split()) != ""
        assert unstorable_reason(parsed.title) is None
    for section in parsed.sections:
        assert section.text.strip()
        assert unstorable_reason(section.text) is None
        for name in section.section_path:
            assert name == " ".join(name.split()) != ""
            assert unstorable_reason(name) is None


def clean(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")
