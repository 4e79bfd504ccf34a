"""Markdown: top-level headings give each section its path; bodies keep their markdown source.

A top-level pipe table (GitHub's: a header row, a delimiter row of dashes, then rows until a
blank line) becomes row sections under the same path (tables.py): its header row repeated atop
each chunk of its rows, after the short paragraph that introduces it. Cells keep their
markdown source. Tables are found in the paragraphs of the block pass and split by hand:
markdown-it's own table rule made ~30 tokens per row (a 100,000-row table took half a
gigabyte and 15 s).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from app.ingest.parsing.limits import DEFAULT_LIMITS, ParseLimits
from app.ingest.parsing.model import ParsedDocument, Section, document
from app.ingest.parsing.tables import TableRows

_MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])
# The blocks alone find the headings: inline markup (links, emphasis) is parsed only in a
# heading's own text, cut to HEADING_CHARS. A whole document's inline pass cost ~20 µs per
# character of some punctuation (unclosed brackets): a megabyte took tens of seconds.
_BLOCKS = MarkdownIt("commonmark").disable("inline")  # no heading is in a table
_DELIMITER_ROW = re.compile(r"\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*")
_PIPE = re.compile(r"(?<!\\)\|")
HEADING_CHARS = 1_000
_FRONT_MATTER_ENDS = ("---", "...")


@dataclass(frozen=True, slots=True)
class _Heading:
    level: int
    text: str
    first_line: int  # where the heading starts in the source
    body_line: int  # the first line after it


@dataclass(frozen=True, slots=True)
class _Table:
    first_line: int
    end_line: int  # the first line after it
    rows: list[list[str]]


def parse_markdown(text: str, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    """Sections between top-level headings (not those in quotes or lists, nor `#` in code).

    Each section's text is its source, code blocks included, without its heading line: the
    heading is in the section path, e.g. ("Install", "Linux"). The title is the first level-1
    heading. A YAML front matter block (`---` … `---` at the very top) is dropped.
    """
    lines = _without_front_matter(text.split("\n"))
    tokens = _BLOCKS.parse("\n".join(lines))
    headings = list(_headings(tokens))
    tables = list(_tables(tokens, lines))
    rows = TableRows(limits)
    sections: list[Section] = []
    path: list[tuple[int, str]] = []  # (level, text) of the enclosing headings
    start = 0
    for heading in [*headings, None]:
        end = heading.first_line if heading else len(lines)
        names = tuple(name for _, name in path if name)
        for table in (t for t in tables if start <= t.first_line < end):
            body = "\n".join(lines[start : table.first_line]).strip("\n")
            sections.append(Section(body, names, None))
            intro = body.rsplit("\n\n", 1)[-1]
            sections += rows.sections(table.rows, path=names, caption=intro, header=True)
            start = table.end_line
        body = "\n".join(lines[start:end]).strip("\n")
        sections.append(Section(body, names, None))
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


def _tables(tokens: list[Token], lines: list[str]) -> Iterator[_Table]:
    """The top-level tables, each row's cells as their source: a table starts at a line with
    a pipe followed by a delimiter row of as many cells, and runs to its paragraph's end."""
    for token in tokens:
        if token.type != "paragraph_open" or token.level != 0 or not token.map:
            continue
        first, end = token.map
        for line in range(first, end - 1):
            if "|" not in lines[line] or not _DELIMITER_ROW.fullmatch(lines[line + 1]):
                continue
            header = _cells(lines[line])
            if len(header) == len(_cells(lines[line + 1])):
                rows = [header, *(_cells(row) for row in lines[line + 2 : end])]
                yield _Table(line, end, rows)
                break


def _cells(line: str) -> list[str]:
    """A table row's cells, split at the pipes that are not escaped; the outer pipes are
    optional."""
    text = line.strip()
    text = text[1:] if text.startswith("|") else text
    text = text[:-1] if text.endswith("|") and not text.endswith("\\|") else text
    return [cell.strip().replace("\\|", "|") for cell in _PIPE.split(text)]


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
