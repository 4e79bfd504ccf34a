"""Paragraphs gathered under the headings above them: the sections of Word and ODT files."""

from __future__ import annotations

from app.ingest.parsing.limits import ParseLimits, too_many_chars
from app.ingest.parsing.model import Section


class Outline:
    """Feed headings (with their level, 1 the highest) and paragraphs in document order; a
    heading closes the section before it and replaces the headings at its level or below.
    Counts characters as they come: past `max_chars` it stops with a 413."""

    def __init__(self, limits: ParseLimits) -> None:
        self._limits = limits
        self._chars = 0
        self._path: list[tuple[int, str]] = []
        self._paragraphs: list[str] = []
        self._sections: list[Section] = []
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
        self._chars += len(paragraph)
        if self._chars > self._limits.max_chars:
            raise too_many_chars(self._limits)
        self._paragraphs.append(paragraph)

    def sections(self) -> list[Section]:
        self._end_section()
        return self._sections

    def _end_section(self) -> None:
        if self._paragraphs:
            path = tuple(text for _, text in self._path)
            self._sections.append(Section("\n\n".join(self._paragraphs), path, None))
        self._paragraphs = []
