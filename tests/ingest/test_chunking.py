"""Chunking parsed documents by the embedding model's tokens."""

from __future__ import annotations

import itertools
import random
import time
from pathlib import Path

import pytest
from semantic_text_splitter import TextSplitter
from tokenizers import Tokenizer

from app.embeddings.local import default_tokenizer_path
from app.ingest.chunking import (
    WINDOW_CHARS_PER_TOKEN,
    ChunkDraft,
    Chunker,
    embedded_text,
    load_tokenizer,
)
from app.ingest.parsing import ParsedDocument, Section, SourceType, parse_text

_WORDS = [
    *("river", "stone", "garden", "lantern", "quiet", "morning", "harbour", "window", "silver"),
    *("orchard", "meadow", "candle", "thunder", "pebble", "willow", "compass", "ferry", "granite"),
]


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return load_tokenizer(default_tokenizer_path())


def _sentences(count: int, *, seed: int) -> str:
    rng = random.Random(seed)
    sentences = (
        " ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 12))).capitalize() + "."
        for _ in range(count)
    )
    return " ".join(sentences)


def _document(*sections: Section, title: str | None = None) -> ParsedDocument:
    return ParsedDocument(title=title, sections=list(sections))


def _spans(text: str, chunks: list[ChunkDraft]) -> list[tuple[int, int]]:
    """Where each chunk sits in the text, found in order (chunks are trimmed slices of it)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for chunk in chunks:
        start = text.index(chunk.content, start)
        spans.append((start, start + len(chunk.content)))
        start += 1
    return spans


def test_long_text_gives_several_chunks_within_the_token_budget(tokenizer: Tokenizer) -> None:
    text = _sentences(120, seed=1)
    chunks = Chunker(tokenizer, chunk_tokens=64, overlap_tokens=16).split(
        parse_text(text, SourceType.TEXT)
    )
    assert len(chunks) >= 5
    for chunk in chunks:
        counted = len(tokenizer.encode(chunk.content, add_special_tokens=False).ids)
        assert chunk.token_count == counted
        assert 0 < chunk.token_count <= 64


def test_consecutive_chunks_overlap(tokenizer: Tokenizer) -> None:
    text = _sentences(120, seed=2)
    chunks = Chunker(tokenizer, chunk_tokens=64, overlap_tokens=16).split(
        _document(Section(text, (), None))
    )
    spans = _spans(text, chunks)
    assert len(spans) >= 5
    for (start, end), (next_start, next_end) in itertools.pairwise(spans):
        assert start < next_start < end < next_end
        shared = text[next_start:end]
        assert len(tokenizer.encode(shared, add_special_tokens=False).ids) <= 16
    assert spans[0][0] == 0
    assert spans[-1][1] == len(text)


def test_no_chunk_starts_or_ends_inside_a_word(tokenizer: Tokenizer) -> None:
    text = "\n\n".join(_sentences(8, seed=seed) for seed in range(10))
    chunks = Chunker(tokenizer, chunk_tokens=40, overlap_tokens=10).split(
        _document(Section(text, (), None))
    )
    for start, end in _spans(text, chunks):
        assert start == 0 or not (text[start - 1].isalnum() and text[start].isalnum())
        assert end == len(text) or not (text[end - 1].isalnum() and text[end].isalnum())


def test_chunks_keep_their_sections_page_and_path(tokenizer: Tokenizer) -> None:
    sections = [
        Section(_sentences(30, seed=3), (), 1),
        Section(_sentences(30, seed=4), (), 2),
        Section("Short third page.", (), 3),
    ]
    chunks = Chunker(tokenizer, chunk_tokens=50, overlap_tokens=10).split(_document(*sections))
    assert [chunk.chunk_index for chunk in chunks] == list(range(len(chunks)))
    pages = [chunk.page_number or 0 for chunk in chunks]
    assert pages == sorted(pages)
    assert set(pages) == {1, 2, 3}
    for chunk in chunks:
        assert chunk.page_number is not None
        assert chunk.content in sections[chunk.page_number - 1].text


def test_markdown_chunks_carry_section_paths_and_indexes_run_over_the_document(
    tokenizer: Tokenizer,
) -> None:
    markdown = (
        f"# Guide\n\n{_sentences(20, seed=5)}\n\n## Install\n\n{_sentences(20, seed=6)}\n\n"
        f"### Linux\n\n{_sentences(20, seed=7)}\n"
    )
    chunks = Chunker(tokenizer, chunk_tokens=60, overlap_tokens=10).split(
        parse_text(markdown, SourceType.MARKDOWN)
    )
    paths = [chunk.section_path for chunk in chunks]
    assert paths == sorted(paths, key=len)
    assert set(paths) == {("Guide",), ("Guide", "Install"), ("Guide", "Install", "Linux")}
    assert [chunk.chunk_index for chunk in chunks] == list(range(len(chunks)))
    assert all(chunk.page_number is None for chunk in chunks)


def test_empty_sections_make_no_chunks(tokenizer: Tokenizer) -> None:
    parsed = _document(
        Section("  \n ", ("Empty",), 1), Section("Real words.", ("Full",), 2), title="T"
    )
    chunks = Chunker(tokenizer).split(parsed)
    assert chunks == [
        ChunkDraft(
            content="Real words.",
            chunk_index=0,
            page_number=2,
            section_path=("Full",),
            token_count=3,
        )
    ]


def test_a_padding_tokenizer_still_counts_plain_tokens(tokenizer: Tokenizer) -> None:
    padded = Tokenizer.from_file(str(default_tokenizer_path()))  # pads to 128 as shipped
    assert padded.padding is not None
    [chunk] = Chunker(padded).split(_document(Section("hello world", (), None)))
    assert chunk.token_count == 2
    assert padded.padding is not None  # the caller's tokenizer is left alone


@pytest.mark.parametrize(("chunk_tokens", "overlap_tokens"), [(0, 0), (50, 50), (50, -1)])
def test_overlap_must_fit_in_a_chunk(
    tokenizer: Tokenizer, chunk_tokens: int, overlap_tokens: int
) -> None:
    with pytest.raises(ValueError, match="overlap_tokens"):
        Chunker(tokenizer, chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens)


def test_embedded_text_starts_with_title_and_section_path() -> None:
    text = embedded_text(title="Manual", section_path=("Install", "Linux"), content="apt")
    assert text == "Manual\nInstall → Linux\n\napt"


@pytest.mark.parametrize(
    ("title", "path", "expected"),
    [
        (None, ("Install",), "Install\n\nbody"),
        ("Manual", (), "Manual\n\nbody"),
        (None, (), "body"),
        ("Guide", ("Guide", "Install"), "Guide\nInstall\n\nbody"),
        ("Guide", ("Guide",), "Guide\n\nbody"),
    ],
)
def test_embedded_text_leaves_out_missing_and_repeated_parts(
    title: str | None, path: tuple[str, ...], expected: str
) -> None:
    assert embedded_text(title=title, section_path=path, content="body") == expected


def test_load_tokenizer_needs_an_existing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_tokenizer(tmp_path / "missing.json")


def test_default_tokenizer_is_minilms_and_counts_plainly(tokenizer: Tokenizer) -> None:
    assert default_tokenizer_path().name == "tokenizer.json"
    assert tokenizer.padding is None
    assert tokenizer.truncation is None
    assert len(tokenizer.encode("word " * 1000, add_special_tokens=False).ids) == 1000


def test_text_without_boundaries_is_chunked_in_linear_time(tokenizer: Tokenizer) -> None:
    chunker = Chunker(tokenizer, chunk_tokens=200, overlap_tokens=20)

    def cpu_seconds(size: int) -> float:
        # CPU time: what other work on the machine takes is not counted
        started = time.process_time()
        chunks = chunker.split(_document(Section("[" * size, (), None)))
        spent = time.process_time() - started
        assert "".join(chunk.content for chunk in chunks).count("[") >= size
        assert max(chunk.token_count for chunk in chunks) <= 200
        return spent

    small, large = cpu_seconds(25_000), cpu_seconds(100_000)
    # four times the text: about four times the time (the splitter alone: sixteen, and
    # minutes at 200,000 characters)
    assert large < 8 * small + 1.0, (small, large)


def test_chunks_fed_by_windows_are_the_splitters_own(tokenizer: Tokenizer) -> None:
    text = _sentences(600, seed=3)  # some 30,000 characters: a dozen windows of 16 tokens
    chunker = Chunker(tokenizer, chunk_tokens=16, overlap_tokens=4)
    whole = TextSplitter.from_huggingface_tokenizer(tokenizer, 16, overlap=4).chunks(text)
    assert len(text) > 10 * 16 * WINDOW_CHARS_PER_TOKEN
    assert [c.content for c in chunker.split(_document(Section(text, (), None)))] == whole
