"""A context widened by the chunks around its hits: merged runs, document order, the budget."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.citations import build_context_with_citations
from app.citations.context import _joined
from app.citations.tokens import TokenizerCounter, load_token_counter
from tests.citations import Chunk, chunk_uuid, doc_id


@pytest.fixture(scope="module")
def counter() -> TokenizerCounter:
    return load_token_counter()


def part(document: int, index: int, *, page: int | None = None, score: float = 0.0) -> Chunk:
    """Chunk `index` of `document`, its text naming both (so the tests can read the order)."""
    return Chunk(
        chunk_id=chunk_uuid(document * 100 + index),
        document_id=doc_id(document),
        title=f"Doc {document}",
        content=f"D{document}C{index} says its piece.",
        similarity=score,
        score=score,
        page_number=page,
        chunk_index=index,
    )


def neighbours(document: int, count: int, hits: set[int]) -> list[Chunk]:
    return [part(document, i, page=i + 1) for i in range(count) if i not in hits]


def test_touching_hits_merge_into_one_block_in_document_order(counter: TokenizerCounter) -> None:
    hits = [part(1, 4, page=5, score=0.9), part(1, 2, page=3, score=0.8)]
    around = [part(1, i, page=i + 1) for i in (1, 3, 5)]  # reach 1, as the service reads it
    built = build_context_with_citations(hits, counter, neighbours=around, max_tokens=4000)
    # chunks 1..5 in one block, in document order, under the document's one number
    assert built.context.count("[1]") == 1
    assert "[2]" not in built.context
    text = built.context
    order = [text.index(f"D1C{i}") for i in (1, 2, 3, 4, 5)]
    assert order == sorted(order)
    assert text.endswith("Source: **Doc 1** (Text, Pages 2, 3, 4, 5, 6)")
    [citation] = built.citations
    assert citation.pages == (2, 3, 4, 5, 6)
    assert [h.chunk_index for h in built.used] == [4, 2]
    assert sorted(n.chunk_index for n in built.neighbours) == [1, 3, 5]


def test_blocks_follow_the_best_hit_and_neighbours_never_displace_a_hit(
    counter: TokenizerCounter,
) -> None:
    first, second = part(2, 5, score=0.9), part(3, 0, score=0.7)
    around = neighbours(2, 11, {5}) + neighbours(3, 4, {0})
    alone = build_context_with_citations([first, second], counter, max_tokens=4000)
    budget = counter.count(alone.context) + 5  # room for the hits, not for their neighbours
    built = build_context_with_citations(
        [first, second], counter, neighbours=around, max_tokens=budget
    )
    assert [h.chunk_id for h in built.used] == [first.chunk_id, second.chunk_id]
    assert built.neighbours == []
    assert built.context == alone.context
    roomy = build_context_with_citations(
        [first, second], counter, neighbours=around, max_tokens=4000
    )
    assert roomy.context.index("D2C5") < roomy.context.index("D3C0")  # best hit's block first
    assert counter.count(roomy.context) <= 4000
    cut = build_context_with_citations(
        [first, second], counter, neighbours=around, max_tokens=budget + 25
    )
    assert counter.count(cut.context) <= budget + 25
    # what fits is the nearest: never a chunk two away while the one between is out
    indexes = {n.chunk_index for n in cut.neighbours if n.document_id == doc_id(2)}
    for index in indexes:
        step = 1 if index > 5 else -1
        assert index - step == 5 or index - step in indexes


def test_the_overlap_the_chunker_repeats_is_shown_once() -> None:
    assert _joined(["one two three four five six seven", "three four five six seven eight"]) == (
        "one two three four five six seven eight"
    )
    assert _joined(["first part here", "second part"]) == "first part here\nsecond part"


def test_without_neighbours_nothing_changes(counter: TokenizerCounter) -> None:
    hits = [part(1, 3, score=0.9)]
    plain = build_context_with_citations(hits, counter)
    assert plain.neighbours == []
    assert build_context_with_citations(hits, counter, neighbours=()).context == plain.context
    assert replace(hits[0]).content in plain.context
