"""Citations for ranked chunks: one per document, numbered by first appearance.

Formats (exact; a missing page, URL or section is simply left out):

numbered  ``[1] **Title** (PDF, Page 3) _Section → Subsection_``
          ``[1] **Title** (PDF, Pages 3, 5)``            several chunks of one document
          ``[2] **Title** [Source](https://example.com/a)``  a URL and no page: the link alone
          ``[2] **Title** (PDF, Page 3) [Source](https://example.com/a.pdf)``
          ``[3] **Title** (Markdown) _Setup_``           no page, no URL: the type alone
inline    ``Title: Page 3; Section → Subsection (https://example.com/a)``
          ``Title: Pages 3, 5``, ``Title: Setup``, ``Title``
compact   ``[Title, p.3]``, ``[Title, pp.3,5]``, ``[Title]`` (no section, no URL: token-efficient)

Rules:
- Numbers follow the first appearance of each document in the ranked input (1, 2, …).
- Pages are the sorted, unique page numbers of the document's chunks ("Page 3", "Pages 3, 5");
  a PowerPoint file's pages are its slides ("Slide 3", "Slides 3, 5"; compact keeps "p.3").
- The section is the section path the document's chunks have in common (their longest common
  prefix), joined with " → "; chunks from unrelated sections give no section.
- Source type labels: pdf → PDF, html → HTML, markdown → Markdown, text → Text, docx → Word,
  pptx → PowerPoint, xlsx → Excel, epub → EPUB, odt → ODT; any other type is upper-cased, an
  empty one is left out.
- Titles have their whitespace collapsed (a newline would break the line); an empty title
  reads "Untitled". In a URL, spaces and parentheses are percent-encoded so the Markdown link
  holds.
- `label(chunk)` is one chunk's own source in the same style, without a number: the "Source:"
  line of a context block (``**Title** (PDF, Page 3) _Intro_``, ``Title: Page 3``,
  ``[Title, p.3]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol
from uuid import UUID

from app.inputs.vocabulary import CitationStyle as CitationStyle

SECTION_SEPARATOR = " → "
SOURCE_TYPE_LABELS = {
    **{"pdf": "PDF", "html": "HTML", "markdown": "Markdown", "text": "Text"},
    **{"docx": "Word", "pptx": "PowerPoint", "xlsx": "Excel", "epub": "EPUB", "odt": "ODT"},
}
SLIDES = "pptx"  # the source type whose page numbers are slide numbers
UNTITLED = "Untitled"


class CitableChunk(Protocol):
    """What a citation needs from a retrieved chunk (retrieval's `Hit` satisfies it)."""

    @property
    def chunk_id(self) -> UUID: ...
    @property
    def document_id(self) -> UUID: ...
    @property
    def title(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def similarity(self) -> float: ...
    @property
    def score(self) -> float: ...
    @property
    def source_type(self) -> str: ...
    @property
    def source_url(self) -> str | None: ...
    @property
    def page_number(self) -> int | None: ...
    @property
    def section(self) -> tuple[str, ...]: ...
    @property
    def chunk_index(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Citation:
    """One cited document; `text` is the formatted citation in `style`."""

    number: int
    document_id: UUID
    title: str
    text: str
    pages: tuple[int, ...]
    source_url: str | None
    section: tuple[str, ...]
    source_type: str
    chunk_ids: tuple[UUID, ...]
    style: CitationStyle

    @property
    def reference(self) -> str:
        """The citation as a line of a numbered source list: ``[n] …`` in every style."""
        if self.style is CitationStyle.NUMBERED:
            return self.text
        return f"[{self.number}] {self.text}"


@dataclass(slots=True)
class _Source:
    """What the chunks of one document say about it, gathered in rank order."""

    first: CitableChunk
    pages: set[int] = field(default_factory=set)
    section: tuple[str, ...] = ()
    source_url: str | None = None
    chunk_ids: list[UUID] = field(default_factory=list)

    def add(self, chunk: CitableChunk) -> None:
        if chunk.chunk_id in self.chunk_ids:
            return
        if chunk.page_number is not None:
            self.pages.add(chunk.page_number)
        self.source_url = self.source_url or _clean_url(chunk.source_url)
        section = _clean_section(chunk.section)
        self.section = section if not self.chunk_ids else _common_prefix(self.section, section)
        self.chunk_ids.append(chunk.chunk_id)


class CitationGenerator:
    """Formats citations in one style; holds no other state, so one instance can be shared."""

    def __init__(self, style: CitationStyle = CitationStyle.NUMBERED) -> None:
        self.style = CitationStyle(style)

    def generate(self, chunks: Iterable[CitableChunk]) -> list[Citation]:
        """One citation per document of `chunks` (ranked best first), numbered from 1."""
        sources: dict[UUID, _Source] = {}
        for chunk in chunks:
            sources.setdefault(chunk.document_id, _Source(chunk)).add(chunk)
        return [self._citation(number, src) for number, src in enumerate(sources.values(), 1)]

    def label(self, chunk: CitableChunk) -> str:
        """One chunk's own source, unnumbered: the "Source:" line of a context block."""
        pages = () if chunk.page_number is None else (chunk.page_number,)
        return self._format(
            None,
            title=clean_title(chunk.title),
            pages=pages,
            source_type=chunk.source_type,
            source_url=_clean_url(chunk.source_url),
            section=_clean_section(chunk.section),
        )

    def run_label(self, run: Sequence[CitableChunk]) -> str:
        """The "Source:" line of consecutive chunks of one document shown as one block: the
        pages they cover and the section they share."""
        first = run[0]
        pages = tuple(sorted({c.page_number for c in run if c.page_number is not None}))
        section = _clean_section(first.section)
        for chunk in run[1:]:
            section = _common_prefix(section, _clean_section(chunk.section))
        return self._format(
            None,
            title=clean_title(first.title),
            pages=pages,
            source_type=first.source_type,
            source_url=next((u for c in run if (u := _clean_url(c.source_url))), None),
            section=section,
        )

    def _citation(self, number: int, src: _Source) -> Citation:
        title, pages = clean_title(src.first.title), tuple(sorted(src.pages))
        first = src.first
        text = self._format(
            number,
            title=title,
            pages=pages,
            source_type=first.source_type,
            source_url=src.source_url,
            section=src.section,
        )
        return Citation(
            number=number,
            document_id=first.document_id,
            title=title,
            text=text,
            pages=pages,
            source_url=src.source_url,
            section=src.section,
            source_type=first.source_type,
            chunk_ids=tuple(src.chunk_ids),
            style=self.style,
        )

    def _format(
        self,
        number: int | None,
        *,
        title: str,
        pages: Sequence[int],
        source_type: str,
        source_url: str | None,
        section: tuple[str, ...],
    ) -> str:
        if self.style is CitationStyle.COMPACT:
            return format_compact(title, pages)
        if self.style is CitationStyle.INLINE:
            return format_inline(
                title, pages, section=section, source_url=source_url, source_type=source_type
            )
        text = format_numbered(
            title, pages, source_type=source_type, source_url=source_url, section=section
        )
        return text if number is None else f"[{number}] {text}"


def format_numbered(
    title: str,
    pages: Sequence[int],
    *,
    source_type: str,
    source_url: str | None,
    section: tuple[str, ...],
) -> str:
    """``**Title** (PDF, Page 3) [Source](url) _A → B_``, without the leading number. Only an
    http(s) URL becomes a link: a markdown renderer would make a `javascript:` or `data:` one
    clickable, so those are left out of the text (they stay in the citation's `source_url`)."""
    parts = [f"**{title}**"]
    type_label = source_type_label(source_type)
    source_url = source_url if source_url and _is_web_url(source_url) else None
    if pages or not source_url:
        locator = [
            part for part in (type_label, pages_text(pages, source_type=source_type)) if part
        ]
        if locator:
            parts.append(f"({', '.join(locator)})")
    if source_url:
        parts.append(f"[Source]({_link_target(source_url)})")
    if section:
        parts.append(f"_{SECTION_SEPARATOR.join(section)}_")
    return " ".join(parts)


def format_inline(
    title: str,
    pages: Sequence[int],
    *,
    section: tuple[str, ...],
    source_url: str | None,
    source_type: str = "",
) -> str:
    """``Title: Page 3; A → B (url)``."""
    located = pages_text(pages, source_type=source_type)
    details = [part for part in (located, SECTION_SEPARATOR.join(section)) if part]
    text = f"{title}: {'; '.join(details)}" if details else title
    return f"{text} ({_link_target(source_url)})" if source_url else text


def format_compact(title: str, pages: Sequence[int]) -> str:
    """``[Title, p.3]``, ``[Title, pp.3,5]`` or ``[Title]``."""
    if not pages:
        return f"[{title}]"
    if len(pages) == 1:
        return f"[{title}, p.{pages[0]}]"
    return f"[{title}, pp.{','.join(map(str, pages))}]"


def pages_text(pages: Sequence[int], *, source_type: str = "") -> str:
    """``Page 3``, ``Pages 3, 5`` (``Slide 3`` … for a presentation) or ``""``."""
    if not pages:
        return ""
    word = "Slide" if source_type.strip().lower() == SLIDES else "Page"
    word += "" if len(pages) == 1 else "s"
    return f"{word} {', '.join(map(str, pages))}"


def source_type_label(source_type: str) -> str:
    kind = source_type.strip()
    return SOURCE_TYPE_LABELS.get(kind.lower(), kind.upper())


def clean_title(title: str) -> str:
    return " ".join(title.split()) or UNTITLED


def _clean_section(section: Sequence[str]) -> tuple[str, ...]:
    return tuple(cleaned for part in section if (cleaned := " ".join(part.split())))


def _common_prefix(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    length = 0
    for left, right in zip(a, b, strict=False):
        if left != right:
            break
        length += 1
    return a[:length]


def _clean_url(url: str | None) -> str | None:
    return (url or "").strip() or None


def _is_web_url(url: str) -> bool:
    return url.lower().startswith(("http://", "https://"))


def _link_target(url: str) -> str:
    """The URL as a CommonMark link destination: what would end or break it percent-encoded
    (spaces, parentheses, a backslash that would escape the closing parenthesis, control
    characters)."""
    return "".join(
        f"%{ord(c):02X}" if c in " ()\\<>" or ord(c) < 0x20 or ord(c) == 0x7F else c for c in url
    )
