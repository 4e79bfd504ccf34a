"""Markdown: top-level headings give each section its path; bodies keep their markdown source."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from app.ingest.parsing.model import ParsedDocument, Section, document

_MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])
# The blocks alone find the headings: inline markup (links, emphasis) is parsed only in a
# heading's own text, cut to HEADING_CHARS. A whole document's inline pass cost ~20 µs per
# character of some punctuation (unclosed brackets): a megabyte took tens of seconds.
_BLOCKS = MarkdownIt("commonmark").disable("inline")  # no heading is in a table
HEADING_CHARS = 1_000
_FRONT_MATTER_ENDS = ("---", "...")


@dataclass(frozen=True, slots=True)
class _Heading:
    level: int
    text: str
    first_line: int  # where the heading starts in the source
    body_line: int  # the first line after it


def parse_markdown(text: str) -> ParsedDocument:
    """Sections between top-level headings (not those in quotes or lists, nor `#` in code).

    Each section's text is its source, code blocks included, without its heading line: the
    heading is in the section path, e.g. ("Install", "Linux"). The title is the first level-1
    heading. A YAML front matter block (`---` … `---` at the very top) is dropped.
    """
    lines = _without_front_matter(text.split("\n"))
    headings = list(_headings(_BLOCKS.parse("\n".join(lines))))
    sections: list[Section] = []
    path: list[tuple[int, str]] = []  # (level, text) of the enclosing headings
    start = 0
    for heading in [*headings, None]:
        end = heading.first_line if heading else len(lines)
        body = "\n".join(lines[start:end]).strip("\n")
        sections.append(Section(body, tuple(name for _, name in path if name), None))
        if heading is None:
            break
        while path and path[-1][0] >= heading.level:
            path.pop()
        path.append((heading.level, heading.text))
        start = heading.body_line
    title = next((h.text for h in headings if h.level == 1 and h.text), None)
    return document(title, sections)


def _headings(tokens: list[Token]) -> Iterator[_Heading]:
    for opening, inline in itertools.pairwise(tokens):
        if opening.type == "heading_open" and opening.level == 0 and opening.map:
            first, after = opening.map
            yield _Heading(int(opening.tag[1:]), _plain(inline), first, after)


def _plain(inline: Token) -> str:
    """A heading's text without its markup: `**Bold** [link](x)` reads "Bold link"."""
    [parsed] = _MARKDOWN.parseInline(inline.content[:HEADING_CHARS]) or [inline]
    parts = [
        " " if child.type in ("softbreak", "hardbreak") else child.content
        for child in parsed.children or []
        if child.type in ("text", "code_inline", "softbreak", "hardbreak")
    ]
    return " ".join("".join(parts).split())


def _without_front_matter(lines: list[str]) -> list[str]:
    if not lines or lines[0].strip() != "---":
        return lines
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() in _FRONT_MATTER_ENDS:
            return lines[index + 1 :]
    return lines
