"""Citation properties: for any titles, sections, pages and URLs, citations are one per
document, numbered by first appearance, in the exact formats app/citations/generator.py and
docs/CITATIONS.md give, and a numbered citation's source is a Markdown link.
"""

from __future__ import annotations

import itertools
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from app.citations import SECTION_SEPARATOR, Citation, CitationGenerator, CitationStyle
from tests.citations import Chunk
from tests.properties import examples
from tests.properties.hits import accepted_url, first_seen, ranked_chunks, url_texts

TYPE_LABELS = {
    **{"pdf": "PDF", "html": "HTML", "markdown": "Markdown", "text": "Text"},
    **{"docx": "Word", "pptx": "PowerPoint", "xlsx": "Excel", "epub": "EPUB", "odt": "ODT"},
}


def collapsed(text: str) -> str:
    return " ".join(text.split())


def common_prefix(paths: list[tuple[str, ...]]) -> tuple[str, ...]:
    prefix = paths[0]
    for path in paths[1:]:
        while path[: len(prefix)] != prefix:
            prefix = prefix[:-1]
    return prefix


@examples(150)
@given(ranked_chunks(), st.sampled_from(list(CitationStyle)))
def test_one_citation_per_document_numbered_by_first_appearance_with_merged_fields(
    chunks: list[Chunk], style: CitationStyle
) -> None:
    citations = CitationGenerator(style).generate(chunks)

    documents = list(dict.fromkeys(chunk.document_id for chunk in chunks))
    assert [(c.number, c.document_id) for c in citations] == list(enumerate(documents, 1))
    for citation in citations:
        own = [c for c in first_seen(chunks) if c.document_id == citation.document_id]
        assert citation.chunk_ids == tuple(c.chunk_id for c in own)
        assert citation.title == (collapsed(own[0].title) or "Untitled")
        pages = {c.page_number for c in own if c.page_number is not None}
        assert citation.pages == tuple(sorted(pages))
        cleaned = [tuple(collapsed(p) for p in c.section if collapsed(p)) for c in own]
        assert citation.section == common_prefix(cleaned)
        assert citation.source_url == ((own[0].source_url or "").strip() or None)
        assert citation.reference.startswith(f"[{citation.number}] ")


def pages_text(pages: tuple[int, ...], source_type: str) -> str:
    """A presentation's pages are its slides."""
    if not pages:
        return ""
    word = "Slide" if source_type.strip().lower() == "pptx" else "Page"
    return (f"{word} " if len(pages) == 1 else f"{word}s ") + ", ".join(map(str, pages))


def one_line(text: str) -> bool:
    return "".join(text.splitlines()) == text


def link_target(url: str) -> str:
    """The documented encoding: spaces, parentheses, backslash, angle brackets and control
    characters percent-encoded, everything else as it is."""
    unsafe = set(" ()\\<>") | {chr(n) for n in range(0x20)} | {"\x7f"}
    return "".join(f"%{ord(c):02X}" if c in unsafe else c for c in url)


def web(url: str | None) -> bool:
    """Only http(s) URLs become links (docs/CITATIONS.md)."""
    return bool(url) and str(url).lower().startswith(("http://", "https://"))


def assert_numbered_shape(citation: Citation, source_type: str) -> None:
    """``[1] **Title** (PDF, Pages 3, 5) [Source](url) _A → B_``, missing parts left out; the
    type and pages only when there are pages or no URL."""
    label = TYPE_LABELS.get(source_type.strip().lower(), source_type.strip().upper())
    pages = pages_text(citation.pages, source_type)
    locator = ", ".join(part for part in (label, pages) if part)
    parts = [f"**{citation.title}**"]
    url = citation.source_url if web(citation.source_url) else None
    if locator and (citation.pages or not url):
        parts.append(f"({locator})")
    if url:
        parts.append(f"[Source]({link_target(url)})")
    if citation.section:
        parts.append(f"_{SECTION_SEPARATOR.join(citation.section)}_")
    assert citation.text == f"[{citation.number}] " + " ".join(parts)


def assert_inline_shape(citation: Citation, source_type: str) -> None:
    """``Title: Page 3; A → B (url)``."""
    section = SECTION_SEPARATOR.join(citation.section)
    pages = pages_text(citation.pages, source_type)
    details = "; ".join(part for part in (pages, section) if part)
    text = f"{citation.title}: {details}" if details else citation.title
    if citation.source_url:
        text += f" ({link_target(citation.source_url)})"
    assert citation.text == text


def assert_compact_shape(citation: Citation) -> None:
    """``[Title, p.3]``, ``[Title, pp.3,5]`` or ``[Title]``."""
    pages = ",".join(map(str, citation.pages))
    if len(citation.pages) > 1:
        pages = f", pp.{pages}"
    elif citation.pages:
        pages = f", p.{pages}"
    assert citation.text == f"[{citation.title}{pages}]"


@examples(150)
@given(ranked_chunks(), st.sampled_from(list(CitationStyle)))
def test_citation_texts_keep_the_documented_shape_on_one_line(
    chunks: list[Chunk], style: CitationStyle
) -> None:
    citations = CitationGenerator(style).generate(chunks)

    for citation in citations:
        first = next(c for c in chunks if c.document_id == citation.document_id)
        if one_line((first.source_url or "") + first.source_type):  # the API lets no break in
            assert one_line(citation.text)
        if style is CitationStyle.NUMBERED:
            assert_numbered_shape(citation, first.source_type)
            assert citation.reference == citation.text
        elif style is CitationStyle.INLINE:
            assert_inline_shape(citation, first.source_type)
        else:
            assert_compact_shape(citation)


@examples(100)
@given(ranked_chunks(max_chunks=1).filter(bool), st.sampled_from(list(CitationStyle)))
def test_a_chunks_label_is_its_own_citation_without_the_number(
    chunks: list[Chunk], style: CitationStyle
) -> None:
    generator = CitationGenerator(style)
    chunk = chunks[0]
    [citation] = generator.generate([chunk])

    expected = (
        citation.text.removeprefix("[1] ") if style is CitationStyle.NUMBERED else citation.text
    )
    assert generator.label(chunk) == expected


class CommonMarkSyntax(MarkdownIt):
    """CommonMark without markdown-it's safety policy, which drops file: and data: links."""

    def validateLink(self, url: str) -> bool:
        return True


def links(markdown: str) -> list[tuple[str, str]]:
    """(target, text) of each link CommonMark finds in one line of markdown."""
    found = []
    for token in CommonMarkSyntax("commonmark").parseInline(markdown):
        children = token.children or []
        for opening, text in itertools.pairwise(children):
            if opening.type == "link_open":
                found.append((str(opening.attrGet("href")), text.content))
    return found


plain_urls = url_texts(st.characters())


@examples(150)
@given(
    st.lists(st.sampled_from(["Ops", "Guide", "東京", "2024", "v1.2"]), max_size=3).map(" ".join),
    plain_urls.filter(accepted_url),
    st.none() | st.integers(1, 999),
)
def test_the_source_link_of_a_numbered_citation_is_a_markdown_link(
    title: str, url: str, page: int | None
) -> None:
    """As documented: what would end or break a link destination is percent-encoded; only an
    http(s) URL is a link at all."""
    chunk = Chunk(UUID(int=1), UUID(int=2), title, "text", source_url=url, page_number=page)
    [citation] = CitationGenerator().generate([chunk])

    assert [text for _, text in links(citation.text)] == (["Source"] if web(url) else [])


@pytest.mark.parametrize(
    ("url", "linked"), [("file://server/share\\", False), ("https://x.org/\x1b", True)]
)
def test_a_source_url_the_api_accepts_gives_a_markdown_link_when_it_is_web(
    url: str, linked: bool
) -> None:
    assert accepted_url(url)
    chunk = Chunk(UUID(int=1), UUID(int=2), "Guide", "text", source_url=url)
    [citation] = CitationGenerator().generate([chunk])

    assert [text for _, text in links(citation.text)] == (["Source"] if linked else [])
