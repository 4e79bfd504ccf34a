"""Splitting parsed documents into chunks sized in the embedding model's tokens."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from semantic_text_splitter import TextSplitter
from tokenizers import Tokenizer

from app.ingest.parsing import ParsedDocument, Section
from app.ingest.parsing.tables import CELL_SEPARATOR

RANGE_DASH = "\N{EN DASH}"
# The metadata key set (to true) on a chunk whose text was read by OCR (parsing/ocr.py); kept
# when the document's metadata is changed (catalog.py).
OCR_FLAG = "ocr"
# The splitter is fed windows of at most this many characters per chunk token: on text with
# no boundary to cut at (a run of punctuation) its cost grows with the square of what it is
# given (80,000 brackets took 33 s, 20,000 took 1 s), on windows it stays linear.
WINDOW_CHARS_PER_TOKEN = 64
# A row longer than a chunk is cut between cells where it can: the splitter is shown each
# separator as the end of a line (same length, so its cuts map back onto the row).
_CELL_BREAK = CELL_SEPARATOR.rstrip() + "\n"


@dataclass(frozen=True, slots=True)
class _Piece:
    text: str
    tokens: int
    page_number: int | None
    section_path: tuple[str, ...]
    ocr: bool = False


@dataclass(slots=True)
class _Group:
    """Rows of one table on their way into a chunk, under the table's header."""

    header: str
    tokens: int
    rows: list[Section] = field(default_factory=list)

    def add(self, row: Section, tokens: int) -> None:
        self.rows.append(row)
        self.tokens += tokens + 1

    def piece(self) -> list[_Piece]:
        if not self.rows:
            return []
        text = "\n".join([self.header] * bool(self.header) + [r.text.strip() for r in self.rows])
        return [
            _Piece(text, self.tokens, self.rows[0].page_number, _path(self.rows[0], self.rows[-1]))
        ]


def _path(first: Section, last: Section) -> tuple[str, ...]:
    """A sheet's name and the rows a chunk holds; a document table's page and headings."""
    if first.table is not None:
        return first.section_path
    return (*first.section_path, row_label(first, last))


@dataclass(frozen=True, slots=True)
class ChunkDraft:
    content: str
    chunk_index: int
    page_number: int | None
    section_path: tuple[str, ...]
    token_count: int
    ocr: bool = False  # its text was read from a page's image (parsing/ocr.py)


class Chunker:
    """Splits each section on its own, so a chunk has exactly one page and one section path.

    Chunks hold at most `chunk_tokens` tokens (no special tokens) and neighbours share up to
    `overlap_tokens`; cuts fall between paragraphs, else sentences, else words, never inside a
    word unless a single word is longer than a chunk. A table's rows (a sheet's, or a table in
    a document) are the exception: they are packed together, whole rows, into chunks that each
    start with the table's header. CPU-bound: call it from a worker thread.
    """

    def __init__(
        self, tokenizer: Tokenizer, *, chunk_tokens: int = 300, overlap_tokens: int = 50
    ) -> None:
        if chunk_tokens < 1 or not 0 <= overlap_tokens < chunk_tokens:
            raise ValueError("need chunk_tokens >= 1 and 0 <= overlap_tokens < chunk_tokens")
        self._chunk_tokens = chunk_tokens
        self._window = chunk_tokens * WINDOW_CHARS_PER_TOKEN
        self._tokenizer = _without_padding_or_truncation(tokenizer)
        self._overlap = overlap_tokens
        self._splitter = self._splitter_of(chunk_tokens)
        self._row_splitters: dict[int, TextSplitter] = {chunk_tokens: self._splitter}

    def _splitter_of(self, capacity: int) -> TextSplitter:
        overlap = self._overlap if self._overlap < capacity else 0
        return TextSplitter.from_huggingface_tokenizer(self._tokenizer, capacity, overlap=overlap)

    def split(self, parsed: ParsedDocument) -> list[ChunkDraft]:
        sections = parsed.sections
        texts = [section.text.strip() for section in sections]
        sizes = self._count(texts)
        pieces: list[_Piece] = []
        start = 0
        while start < len(sections):
            end = start + 1
            if sections[start].row is not None:  # a run of one table's rows: packed together
                while end < len(sections) and _same_table(sections[start], sections[end]):
                    end += 1
                pieces += self._rows(sections[start:end], sizes[start:end])
            else:
                pieces += self._pieces(sections[start], texts[start], sizes[start])
            start = end
        return [
            ChunkDraft(
                piece.text, index, piece.page_number, piece.section_path, piece.tokens, piece.ocr
            )
            for index, piece in enumerate(pieces)
        ]

    def _pieces(
        self, section: Section, text: str, size: int, *, path: tuple[str, ...] | None = None
    ) -> list[_Piece]:
        """One section's text as one piece, or cut by the splitter when it is too long;
        `path` replaces the section's own."""
        path = section.section_path if path is None else path
        if 0 < size <= self._chunk_tokens:  # most sections: no need for the slow splitter
            return [_Piece(text, size, section.page_number, path, section.ocr)]
        if not size:
            return []
        chunks = [chunk for chunk in self._split(text) if chunk.strip()]
        return [  # a piece of only what the tokenizer ignores (U+200B …) is no chunk
            _Piece(c, n, section.page_number, path, section.ocr)
            for c, n in zip(chunks, self._count(chunks), strict=True)
            if n
        ]

    def _split(self, text: str, splitter: TextSplitter | None = None) -> list[str]:
        """The splitter's chunks of the text, fed a window at a time: each window's chunks but
        its last are kept, and the next window starts where that last one did, so the chunks
        and their overlaps are those of the whole text, at a cost linear in its length."""
        splitter = splitter or self._splitter
        chunks: list[str] = []
        start = 0
        while len(text) - start > self._window:
            found = splitter.chunk_indices(text[start : start + self._window])
            if len(found) < 2:  # a window holds one chunk only when it is one long grapheme
                chunks += [chunk for _, chunk in found]
                start += self._window
                continue
            chunks += [chunk for _, chunk in found[:-1]]
            start += found[-1][0]
        return chunks + splitter.chunks(text[start:])

    def _rows(self, rows: list[Section], sizes: list[int]) -> list[_Piece]:
        """Whole rows packed into chunks under the table's header. A sheet's chunk's path is
        the sheet's with the rows it holds (`row_label`), a document table's that of the text
        around it. A header too long to repeat (over half a chunk) is a chunk of its own.
        A chunk's tokens are its rows' and its header's counts plus one per line break: the
        budget it was packed to (the model's tokenizer counts a line break as none or one)."""
        header = rows[0].header
        [header_size] = self._count([header]) if header else [0]
        pieces: list[_Piece] = []
        if header_size > self._chunk_tokens // 2:
            pieces += self._pieces(rows[0], header, header_size, path=(*rows[0].section_path,))
            header, header_size = "", 0
        group = _Group(header, header_size)
        for row, size in zip(rows, sizes, strict=True):
            if size + 1 + header_size > self._chunk_tokens:  # + 1: the line break before it
                pieces += group.piece()
                group = _Group(header, header_size)
                pieces += self._long_row(row, header, header_size)
            elif size:
                if group.tokens + size + 1 > self._chunk_tokens:
                    pieces += group.piece()
                    group = _Group(header, header_size)
                group.add(row, size)
        return pieces + group.piece()

    def _long_row(self, row: Section, header: str, header_size: int) -> list[_Piece]:
        """A row longer than a chunk, cut alone ("row 7" in a sheet): between cells where a
        run of whole cells fits, else between sentences or words inside a cell; each piece
        under the header (its size taken off the piece's)."""
        capacity = self._chunk_tokens - header_size - bool(header)
        if capacity not in self._row_splitters:
            self._row_splitters[capacity] = self._splitter_of(capacity)
        shown = row.text.strip().replace(CELL_SEPARATOR, _CELL_BREAK)
        cuts = [
            cut.replace(_CELL_BREAK, CELL_SEPARATOR).removesuffix(CELL_SEPARATOR.rstrip())
            for cut in self._split(shown, self._row_splitters[capacity])
        ]
        cuts = [cut.strip() for cut in cuts if cut.strip()]
        texts = [f"{header}\n{cut}" if header else cut for cut in cuts]
        path = _path(row, row)
        return [
            _Piece(text, n, row.page_number, path)
            for text, n in zip(texts, self._count(texts), strict=True)
            if n > header_size
        ]

    def fewest_chunks(self, parsed: ParsedDocument) -> int:
        """The fewest chunks the document can make: its tokens over the chunk size (one
        tokenizer pass; splitting costs many)."""
        tokens = sum(self._count([section.text.strip() for section in parsed.sections]))
        return tokens // self._chunk_tokens

    def _count(self, texts: list[str]) -> list[int]:
        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        return [len(encoding.ids) for encoding in encodings]


def row_label(first: Section, last: Section) -> str:
    """ "row 7", or "rows 2", an en dash and "41": a range as it is printed."""
    if first.row == last.row:
        return f"row {first.row}"
    return f"rows {first.row}{RANGE_DASH}{last.row}"


def _same_table(a: Section, b: Section) -> bool:
    return b.row is not None and (a.section_path, a.page_number, a.header, a.table) == (
        b.section_path,
        b.page_number,
        b.header,
        b.table,
    )


def embedded_text(*, title: str | None, section_path: tuple[str, ...], content: str) -> str:
    """What gets embedded for a chunk: "Title\\nSection → Subsection\\n\\ncontent".

    Missing parts are left out, and so is a first path element that repeats the title (a
    markdown document's `# Title` heading is both). The stored content stays the chunk alone.
    """
    path = section_path[1:] if title and section_path[:1] == (title,) else section_path
    header = [part for part in (title, " → ".join(path)) if part]
    return "\n".join(header) + "\n\n" + content if header else content


def load_tokenizer(path: Path) -> Tokenizer:
    """A tokenizer.json, for counting: no padding, no truncation."""
    if not path.is_file():
        raise FileNotFoundError(f"no tokenizer file at {path}")
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def _without_padding_or_truncation(tokenizer: Tokenizer) -> Tokenizer:
    """The tokenizer itself when it counts plainly, else a copy that does (padding would make
    every chunk count as the pad length; the caller's tokenizer is left as it was)."""
    if tokenizer.padding is None and tokenizer.truncation is None:
        return tokenizer
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.no_padding()
    copy.no_truncation()
    return copy
