"""Paragraphs and tables gathered under the headings above them: the sections of Word and ODT
files."""

from __future__ import annotations

from collections.abc import Sequence

from app.ingest.parsing.limits import ParseLimits, too_many_chars
from app.ingest.parsing.model import Section
from app.ingest.parsing.tables import TableRows


class Outline:
    """Feed headings (with their level, 1 the highest) and paragraphs in document order; a
    heading closes the section before it and replaces the headings at its level or below; a
    table closes it too and becomes row sections (tables.py) under the same headings, its
    caption the paragraph just before it when that is short. Counts characters as they come:
    past `max_chars` it stops with a 413."""

    def __init__(self, limits: ParseLimits) -> None:
        self._limits = limits
        self._chars = 0
        self._path: list[tuple[int, str]] = []
        self._paragraphs: list[str] = []
        self._sections: list[Section] = []
        self._tables = TableRows(limits)
        self.first_top_heading: str | None = None

    def heading(self, level: int, text: str) -> None:
        if not text:
            return  # an empty paragraph in a heading style is spacing, not a heading
        self._end_section()
        while self._path and self._path[-1][0] >= level:
            self._path.pop()
        self._path.append((level, text))
        if level == 1 and self.first_top_heading is None:
            self.first_top_heading = text

    def add(self, paragraph: str) -> None:
        if not paragraph.strip():
            return
        self._count(len(paragraph))
        self._paragraphs.append(paragraph)

    def table(self, rows: Sequence[Sequence[str]], *, header: bool | None = None) -> None:
        """A table's rows of cell texts; `header` True when the file marks its first row as
        the header, None to judge by its cells."""
        self._count(sum(len(cell) for row in rows for cell in row))
        caption = self._paragraphs[-1] if self._paragraphs else ""
        self._end_section()
        path = tuple(text for _, text in self._path)
        self._sections += self._tables.sections(rows, path=path, caption=caption, header=header)

    def _count(self, chars: int) -> None:
        self._chars += chars
        if self._chars > self._limits.max_chars:
            raise too_many_chars(self._limits)

    def sections(self) -> list[Section]:
        self._end_section()
        return self._sections

    def _end_section(self) -> None:
        if self._paragraphs:
            path = tuple(text for _, text in self._path)
            self._sections.append(Section("\n\n".join(self._paragraphs), path, None))
        self._paragraphs = []
