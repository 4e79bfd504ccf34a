"""Chunker properties: every chunk fits the token budget, and the chunks cover the text in order.

What the chunker promises (app/ingest/chunking.py): each section is split on its own, chunks
hold at most `chunk_tokens` tokens and neighbours share at most `overlap_tokens`. Chunks are
trimmed slices of the section's stripped text, so the exact invariant is: the chunks can be
placed on the text at strictly increasing offsets such that neighbours overlap by at most the
overlap budget and everything outside them is whitespace (`str.isspace`). A section whose text
holds no token at all (only control or format characters) gives no chunk: `split` skips it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.embeddings.local import default_tokenizer_path
from app.ingest.chunking import ChunkDraft, Chunker, load_tokenizer
from app.ingest.parsing import ParsedDocument, Section, SourceType, parse_text
from tests.properties import examples
from tests.properties.texts import prose

# Small budgets, so that bounded texts split into several chunks (the service uses 300 / 50).
BUDGETS = [(24, 6), (16, 0), (40, 12)]


@cache
def tokenizer() -> Tokenizer:
    return load_tokenizer(default_tokenizer_path())


@cache
def chunker(chunk_tokens: int, overlap_tokens: int) -> Chunker:
    return Chunker(tokenizer(), chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens)


def tokens(text: str) -> int:
    return len(tokenizer().encode(text, add_special_tokens=False).ids)


def visible(text: str) -> str:
    """`text` without the characters the tokenizer gives no token (controls, U+200B, U+FFFD …)."""
    return "".join(char for char in text if char.isspace() or tokens(char))


def covers_in_order(text: str, chunks: Sequence[str], *, overlap_tokens: int) -> bool:
    """Whether the chunks sit on `text` at increasing offsets, neighbours sharing at most
    `overlap_tokens` tokens and only what has no tokens left outside them (whitespace, and
    characters the tokenizer ignores, such as U+200B or control characters).

    A chunk may occur several times in the text (repeated words), so every placement is tried;
    a state is (last chunk's start, its end, the end of the text covered so far).
    """
    states = {(-1, 0, 0)}
    for chunk in chunks:
        placed = set()
        for last_start, last_end, covered in states:
            start = text.find(chunk, last_start + 1)
            while start != -1:
                gap_is_blank = start <= covered or _no_tokens(text[covered:start])
                shared_fits = start >= last_end or tokens(text[start:last_end]) <= overlap_tokens
                if gap_is_blank and shared_fits:
                    end = start + len(chunk)
                    placed.add((start, end, max(covered, end)))
                start = text.find(chunk, start + 1)
        if not (states := placed):
            return False
    return any(_no_tokens(text[covered:]) for _, _, covered in states)


def _no_tokens(gap: str) -> bool:
    return not gap.strip() or tokens(gap) == 0


budgets = st.sampled_from(BUDGETS)
sections = st.lists(
    st.tuples(prose(), st.lists(st.sampled_from(["Intro", "Setup", "東京"]), max_size=2)),
    min_size=1,
    max_size=3,
)


def split(
    texts_and_paths: list[tuple[str, list[str]]], budget: tuple[int, int]
) -> list[ChunkDraft]:
    """The chunks of a document whose i-th section is on page i + 1."""
    parsed = ParsedDocument(
        title=None,
        sections=[
            Section(text, tuple(path), page)
            for page, (text, path) in enumerate(texts_and_paths, start=1)
        ],
    )
    return chunker(*budget).split(parsed)


@examples(80)
@given(sections, budgets)
def test_chunks_are_numbered_in_order_and_keep_their_sections_page_and_path(
    texts_and_paths: list[tuple[str, list[str]]], budget: tuple[int, int]
) -> None:
    chunks = split(texts_and_paths, budget)

    assert [chunk.chunk_index for chunk in chunks] == list(range(len(chunks)))
    pages = [chunk.page_number or 0 for chunk in chunks]
    assert pages == sorted(pages)
    for chunk in chunks:
        assert chunk.page_number is not None
        text, path = texts_and_paths[chunk.page_number - 1]
        assert chunk.section_path == tuple(path)
        assert chunk.content.strip()
        assert chunk.content in text
        assert chunk.token_count == tokens(chunk.content) <= budget[0]


@examples(80)
@given(prose().map(visible), budgets)
def test_chunks_of_visible_text_hold_between_one_token_and_the_budget(
    text: str, budget: tuple[int, int]
) -> None:
    chunks = split([(text, [])], budget)

    assert bool(chunks) == bool(text.strip())
    for chunk in chunks:
        assert 0 < chunk.token_count <= budget[0]


@examples(150)
@given(prose(), budgets)
def test_chunks_cover_the_section_in_order_losing_only_whitespace(
    text: str, budget: tuple[int, int]
) -> None:
    chunks = [chunk.content for chunk in split([(text, [])], budget)]
    source = text.strip()

    if tokens(source) == 0:  # nothing the model could read: `split` skips such sections
        assert chunks == []
        return
    assert chunks
    assert covers_in_order(source, chunks, overlap_tokens=budget[1]), chunks


@examples(15)
@given(st.lists(st.sampled_from(["river", "stone", "Garden", "東京"]), min_size=400, max_size=900))
def test_the_service_budget_splits_long_text_into_overlapping_chunks(words: list[str]) -> None:
    """The shipped budget (300 tokens, overlap 50) on text long enough to need it."""
    text = " ".join(words)
    chunks = [chunk.content for chunk in chunker(300, 50).split(parse_text(text, SourceType.TEXT))]

    assert len(chunks) >= 2
    assert all(tokens(chunk) <= 300 for chunk in chunks)
    assert covers_in_order(text, chunks, overlap_tokens=50)


def test_no_chunk_is_made_only_of_characters_the_tokenizer_ignores() -> None:
    text = "\u200b" + "a." * 151  # found by the coverage property with budget 24: "\x1b" + "a" * 50
    chunks = Chunker(tokenizer()).split(parse_text(text, SourceType.TEXT))

    assert [chunk.token_count > 0 for chunk in chunks] == [True] * len(chunks)
