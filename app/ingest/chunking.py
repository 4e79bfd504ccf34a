"""Splitting parsed documents into chunks sized in the embedding model's tokens."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from semantic_text_splitter import TextSplitter
from tokenizers import Tokenizer

from app.ingest.parsing import ParsedDocument, Section


@dataclass(frozen=True, slots=True)
class ChunkDraft:
    content: str
    chunk_index: int
    page_number: int | None
    section_path: tuple[str, ...]
    token_count: int


class Chunker:
    """Splits each section on its own, so a chunk has exactly one page and one section path.

    Chunks hold at most `chunk_tokens` tokens (no special tokens) and neighbours share up to
    `overlap_tokens`; cuts fall between paragraphs, else sentences, else words, never inside a
    word unless a single word is longer than a chunk. CPU-bound: call it from a worker thread.
    """

    def __init__(
        self, tokenizer: Tokenizer, *, chunk_tokens: int = 300, overlap_tokens: int = 50
    ) -> None:
        if chunk_tokens < 1 or not 0 <= overlap_tokens < chunk_tokens:
            raise ValueError("need chunk_tokens >= 1 and 0 <= overlap_tokens < chunk_tokens")
        self._chunk_tokens = chunk_tokens
        self._tokenizer = _without_padding_or_truncation(tokenizer)
        self._splitter = TextSplitter.from_huggingface_tokenizer(
            self._tokenizer, chunk_tokens, overlap=overlap_tokens
        )

    def split(self, parsed: ParsedDocument) -> list[ChunkDraft]:
        texts = [section.text.strip() for section in parsed.sections]
        pieces: list[tuple[Section, str, int]] = []
        for section, text, size in zip(parsed.sections, texts, self._count(texts), strict=True):
            if 0 < size <= self._chunk_tokens:  # most sections: no need for the slow splitter
                pieces.append((section, text, size))
            elif size:
                chunks = [chunk for chunk in self._splitter.chunks(text) if chunk.strip()]
                pieces += [  # a piece of only what the tokenizer ignores (U+200B …) is no chunk
                    (section, c, n) for c, n in zip(chunks, self._count(chunks), strict=True) if n
                ]
        return [
            ChunkDraft(
                content=text,
                chunk_index=index,
                page_number=section.page_number,
                section_path=section.section_path,
                token_count=count,
            )
            for index, (section, text, count) in enumerate(pieces)
        ]

    def _count(self, texts: list[str]) -> list[int]:
        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        return [len(encoding.ids) for encoding in encodings]


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
