"""How good a context is: relevance, diversity, size.

- `avg_similarity`: mean `similarity` (1 - cosine distance) of the chunks used.
- `source_diversity`: distinct documents / chunks used, in (0, 1]; 1 when every chunk comes
  from a different document.
- `total_chars`, `total_tokens`: the size of the context string (tokens by the budget's counter).
- `quality_score` = 0.7 x relevance + 0.3 x source_diversity, where relevance is
  `avg_similarity` clamped to [0, 1]. So it lies in [0, 1]; relevance weighs more because an
  off-topic context is useless however varied, while repeated chunks of one relevant document
  still answer. An empty context scores 0 on everything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.citations.generator import CitableChunk

RELEVANCE_WEIGHT = 0.7
DIVERSITY_WEIGHT = 0.3


@dataclass(frozen=True, slots=True)
class ContextMetrics:
    avg_similarity: float
    source_diversity: float
    total_chars: int
    total_tokens: int
    quality_score: float
    chunks_used: int
    unique_documents: int


def context_metrics(
    chunks: Sequence[CitableChunk], context: str, *, total_tokens: int
) -> ContextMetrics:
    """The metrics of a context built from `chunks`, whose token count is `total_tokens`."""
    if not chunks:
        return ContextMetrics(0.0, 0.0, len(context), total_tokens, 0.0, 0, 0)
    avg_similarity = sum(chunk.similarity for chunk in chunks) / len(chunks)
    documents = len({chunk.document_id for chunk in chunks})
    diversity = documents / len(chunks)
    return ContextMetrics(
        avg_similarity=avg_similarity,
        source_diversity=diversity,
        total_chars=len(context),
        total_tokens=total_tokens,
        quality_score=quality_score(avg_similarity, diversity),
        chunks_used=len(chunks),
        unique_documents=documents,
    )


def quality_score(avg_similarity: float, source_diversity: float) -> float:
    """0.7 x clamp(avg_similarity, 0, 1) + 0.3 x clamp(source_diversity, 0, 1), in [0, 1]."""
    relevance = min(max(avg_similarity, 0.0), 1.0)
    diversity = min(max(source_diversity, 0.0), 1.0)
    return RELEVANCE_WEIGHT * relevance + DIVERSITY_WEIGHT * diversity
