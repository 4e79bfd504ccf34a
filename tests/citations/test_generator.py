"""CitationGenerator: exact text in each style, numbering, merging, missing fields."""

from __future__ import annotations

import pytest

from app.citations import CitationGenerator, CitationStyle
from tests.citations import Chunk, chunk_uuid, doc_id, make_chunk

REPORT = "Rapport annuel — Société Générale"
URL = "https://example.com/guide"


def fixed_chunks() -> list[Chunk]:
    """Unicode titles, a PDF cited twice (pages 5 then 3), an HTML page, a bare text file."""
    return [
        make_chunk(1, 1, REPORT, source_type="pdf", page=5, section=("Résumé", "Risques")),
        make_chunk(2, 2, "Web Guide", source_type="html", source_url=URL, section=("Install",)),
        make_chunk(3, 1, REPORT, source_type="pdf", page=3, section=("Résumé", "Contexte")),
        make_chunk(4, 3, "東京ガイド", source_type="markdown", section=("Setup", "Linux")),
        make_chunk(5, 4, "notes.txt", source_type="text"),
        make_chunk(6, 1, REPORT, source_type="pdf", page=5, section=("Résumé",)),
    ]


EXPECTED = {
    CitationStyle.NUMBERED: [
        f"[1] **{REPORT}** (PDF, Pages 3, 5) _Résumé_",
        f"[2] **Web Guide** [Source]({URL}) _Install_",
        "[3] **東京ガイド** (Markdown) _Setup → Linux_",
        "[4] **notes.txt** (Text)",
    ],
    CitationStyle.INLINE: [
        f"{REPORT}: Pages 3, 5; Résumé",
        f"Web Guide: Install ({URL})",
        "東京ガイド: Setup → Linux",
        "notes.txt",
    ],
    CitationStyle.COMPACT: [
        f"[{REPORT}, pp.3,5]",
        "[Web Guide]",
        "[東京ガイド]",
        "[notes.txt]",
    ],
}


@pytest.mark.parametrize("style", list(CitationStyle))
def test_each_style_formats_fixed_chunks_exactly(style: CitationStyle) -> None:
    citations = CitationGenerator(style).generate(fixed_chunks())

    assert [citation.text for citation in citations] == EXPECTED[style]


@pytest.mark.parametrize(
    "url", ["javascript:alert(1)//x", "JavaScript://%0aalert(1)", "data:text/html,<b>x</b>"]
)
def test_only_web_urls_become_markdown_links(url: str) -> None:
    """A source URL of another scheme would be a clickable script in a rendered answer: the
    numbered style leaves it out of the text, the citation still carries it."""
    [citation] = CitationGenerator().generate(
        [make_chunk(1, 1, "Page", source_type="html", source_url=url)]
    )
    assert citation.text == "[1] **Page** (HTML)"
    assert citation.source_url == url


def test_citations_are_numbered_by_first_appearance_one_per_document() -> None:
    citations = CitationGenerator().generate(fixed_chunks())

    assert [(c.number, c.document_id) for c in citations] == [
        (1, doc_id(1)),
        (2, doc_id(2)),
        (3, doc_id(3)),
        (4, doc_id(4)),
    ]


def test_chunks_of_one_document_merge_pages_and_keep_every_chunk_id() -> None:
    [report, *_] = CitationGenerator().generate(fixed_chunks())

    assert report.pages == (3, 5)
    assert report.chunk_ids == (chunk_uuid(1), chunk_uuid(3), chunk_uuid(6))
    assert report.section == ("Résumé",)
    assert (report.title, report.source_type, report.source_url) == (REPORT, "pdf", None)


def test_single_page_pdf_has_full_numbered_form() -> None:
    chunk = make_chunk(1, 1, "Document Title", source_type="pdf", page=3, section=("S", "Sub"))

    [citation] = CitationGenerator().generate([chunk])

    assert citation.text == "[1] **Document Title** (PDF, Page 3) _S → Sub_"
    assert CitationGenerator(CitationStyle.INLINE).generate([chunk])[0].text == (
        "Document Title: Page 3; S → Sub"
    )
    assert CitationGenerator(CitationStyle.COMPACT).generate([chunk])[0].text == (
        "[Document Title, p.3]"
    )


def test_url_with_a_page_keeps_the_page_and_the_link() -> None:
    chunk = make_chunk(1, 1, "Spec", source_type="pdf", page=2, source_url="https://x.org/a.pdf")

    [citation] = CitationGenerator().generate([chunk])

    assert citation.text == "[1] **Spec** (PDF, Page 2) [Source](https://x.org/a.pdf)"


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        (CitationStyle.NUMBERED, "[1] **Untitled** [Source](https://x.org/a%20b%28c%29)"),
        (CitationStyle.INLINE, "Untitled (https://x.org/a%20b%28c%29)"),
        (CitationStyle.COMPACT, "[Untitled]"),
    ],
)
def test_blank_title_and_awkward_url_stay_well_formed(style: CitationStyle, expected: str) -> None:
    chunk = make_chunk(1, 1, " \n ", source_type="html", source_url=" https://x.org/a b(c) ")

    [citation] = CitationGenerator(style).generate([chunk])

    assert citation.text == expected
    assert citation.source_url == "https://x.org/a b(c)"


def test_missing_page_url_and_section_are_left_out() -> None:
    chunk = make_chunk(1, 1, "Plain\nTitle", source_type="text", section=("", "  "))

    texts = [CitationGenerator(style).generate([chunk])[0].text for style in CitationStyle]

    assert texts == ["[1] **Plain Title** (Text)", "Plain Title", "[Plain Title]"]


def test_unknown_source_type_is_upper_cased_and_empty_one_left_out() -> None:
    rtf = make_chunk(1, 1, "A", source_type="rtf")
    untyped = make_chunk(2, 2, "B", source_type="", page=4)

    texts = [c.text for c in CitationGenerator().generate([rtf, untyped])]

    assert texts == ["[1] **A** (RTF)", "[2] **B** (Page 4)"]


def test_office_types_are_named_and_slides_are_slides() -> None:
    chunks = [
        make_chunk(1, 1, "Handbook", source_type="docx", section=("Safety",)),
        make_chunk(2, 2, "Deck", source_type="pptx", page=3, section=("Roadmap",)),
        make_chunk(3, 2, "Deck", source_type="pptx", page=5),
        make_chunk(4, 3, "Stock", source_type="xlsx", section=("Inventory", "rows 2\u201341")),
    ]

    numbered = [c.text for c in CitationGenerator().generate(chunks)]
    inline = [c.text for c in CitationGenerator(CitationStyle.INLINE).generate(chunks[1:2])]

    assert numbered == [
        "[1] **Handbook** (Word) _Safety_",
        "[2] **Deck** (PowerPoint, Slides 3, 5)",
        "[3] **Stock** (Excel) _Inventory \u2192 rows 2\u201341_",
    ]
    assert inline == ["Deck: Slide 3; Roadmap"]


def test_sections_without_common_prefix_give_no_section() -> None:
    chunks = [
        make_chunk(1, 1, "Guide", section=("Install", "Linux")),
        make_chunk(2, 1, "Guide", section=("Usage",)),
    ]

    [citation] = CitationGenerator().generate(chunks)

    assert citation.text == "[1] **Guide** (Text)"
    assert citation.section == ()


def test_same_chunk_twice_is_counted_once() -> None:
    chunk = make_chunk(1, 1, "Guide", page=2)

    [citation] = CitationGenerator().generate([chunk, chunk])

    assert citation.chunk_ids == (chunk_uuid(1),)


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        (CitationStyle.NUMBERED, f"**{REPORT}** (PDF, Page 3) _Résumé → Contexte_"),
        (CitationStyle.INLINE, f"{REPORT}: Page 3; Résumé → Contexte"),
        (CitationStyle.COMPACT, f"[{REPORT}, p.3]"),
    ],
)
def test_label_is_one_chunks_own_source_without_number(style: CitationStyle, expected: str) -> None:
    assert CitationGenerator(style).label(fixed_chunks()[2]) == expected


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        (CitationStyle.NUMBERED, "[2] **Web Guide** [Source](https://example.com/guide) _Install_"),
        (CitationStyle.INLINE, "[2] Web Guide: Install (https://example.com/guide)"),
        (CitationStyle.COMPACT, "[2] [Web Guide]"),
    ],
)
def test_reference_is_numbered_in_every_style(style: CitationStyle, expected: str) -> None:
    citations = CitationGenerator(style).generate(fixed_chunks())

    assert citations[1].reference == expected


def test_style_can_be_given_by_name() -> None:
    generator = CitationGenerator(CitationStyle("compact"))

    assert generator.style is CitationStyle.COMPACT


def test_generation_is_deterministic() -> None:
    runs = [
        CitationGenerator(style).generate(fixed_chunks())
        for style in [*CitationStyle, *CitationStyle]
    ]

    assert runs[:3] == runs[3:]


def test_no_chunks_no_citations() -> None:
    assert CitationGenerator().generate([]) == []
