"""Context quality metrics: relevance, diversity, size, and the documented quality score."""

from __future__ import annotations

import pytest

from app.citations import (
    ApproxTokenCounter,
    ContextMetrics,
    build_context_with_citations,
    context_metrics,
    load_token_counter,
    quality_score,
)
from tests.citations import make_chunk


def test_metrics_of_three_chunks_from_two_documents() -> None:
    chunks = [
        make_chunk(1, 1, similarity=0.9),
        make_chunk(2, 2, similarity=0.6),
        make_chunk(3, 1, similarity=0.75),
    ]

    metrics = context_metrics(chunks, "ab\ncd", total_tokens=7)

    assert metrics.avg_similarity == pytest.approx(0.75)
    assert metrics.source_diversity == pytest.approx(2 / 3)
    assert (metrics.total_chars, metrics.total_tokens) == (5, 7)
    assert metrics.quality_score == pytest.approx(0.7 * 0.75 + 0.3 * 2 / 3)
    assert (metrics.chunks_used, metrics.unique_documents) == (3, 2)


def test_empty_context_scores_zero() -> None:
    assert context_metrics([], "", total_tokens=0) == ContextMetrics(0.0, 0.0, 0, 0, 0.0, 0, 0)


@pytest.mark.parametrize(
    ("avg_similarity", "diversity", "expected"),
    [
        (1.0, 1.0, 1.0),
        (0.0, 1.0, 0.3),
        (1.0, 0.25, 0.775),
        (-0.4, 0.5, 0.15),  # negative cosine similarity counts as no relevance
        (1.3, 2.0, 1.0),  # out-of-range inputs are clamped
    ],
)
def test_quality_score_weighs_relevance_then_diversity(
    avg_similarity: float, diversity: float, expected: float
) -> None:
    assert quality_score(avg_similarity, diversity) == pytest.approx(expected)


def test_quality_prefers_varied_sources_at_equal_relevance() -> None:
    same_doc = [make_chunk(n, 1, similarity=0.8) for n in range(4)]
    varied = [make_chunk(n, n, similarity=0.8) for n in range(4)]

    one = context_metrics(same_doc, "", total_tokens=0)
    many = context_metrics(varied, "", total_tokens=0)

    assert (one.source_diversity, many.source_diversity) == (0.25, 1.0)
    assert one.quality_score < many.quality_score


def test_context_metrics_describe_only_the_chunks_used() -> None:
    chunks = [
        make_chunk(1, 1, content="short", similarity=0.9),
        make_chunk(2, 2, content="x" * 400, similarity=0.1),
    ]

    result = build_context_with_citations(chunks, ApproxTokenCounter(), max_tokens=20)

    assert result.metrics.avg_similarity == pytest.approx(0.9)
    assert result.metrics.source_diversity == 1.0
    assert result.metrics.total_chars == len(result.context)
    assert result.metrics.total_tokens == ApproxTokenCounter().count(result.context)


def test_total_tokens_are_counted_by_the_real_tokenizer() -> None:
    counter = load_token_counter()
    chunk = make_chunk(1, 1, "Guide", content="Hello world, tenants!")

    result = build_context_with_citations([chunk], counter)

    assert result.context == "[1] Hello world, tenants!\nSource: **Guide** (Text)"
    assert result.metrics.total_tokens == counter.count(result.context)
    assert 0 < result.metrics.quality_score <= 1
