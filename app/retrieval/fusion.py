"""Hybrid fusion of a vector ranking and a BM25 ranking.

- `rrf`: reciprocal rank fusion, score = sum over rankings of 1 / (k + rank), rank from 1. Uses
  ranks only, so it cannot tell a clear winner from a near tie.
- `weighted` (the default; docs/BENCHMARKS.md has the measurements behind it): each leg's
  scores are min-max normalised over its own candidates (best 1, worst 0; a lone candidate
  1), then score = w * vector + (1 - w) * keyword, a leg that did not return a chunk giving it
  0. BM25 scores have no fixed scale (they grow with the query's length and its terms'
  rarity) and cosine similarities of one model crowd into a narrow band, so both are brought
  to [0, 1] per query before they are weighed.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from enum import StrEnum


class FusionMethod(StrEnum):
    RRF = "rrf"
    WEIGHTED = "weighted"


Ranking = Sequence[tuple[uuid.UUID, float]]


def fuse(rankings: Sequence[Ranking], *, k: int) -> list[tuple[uuid.UUID, float]]:
    """Reciprocal rank fusion: score = sum over rankings of 1 / (k + rank), rank from 1."""
    scores: dict[uuid.UUID, float] = {}
    for ranking in rankings:
        for rank, (chunk_id, _score) in enumerate(ranking, start=1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (k + rank)
    return _best_first(scores)


def weighted_fuse(
    vector: Ranking, keyword: Ranking, *, vector_weight: float
) -> list[tuple[uuid.UUID, float]]:
    """w * min-max(vector) + (1 - w) * min-max(keyword), per chunk."""
    scores: dict[uuid.UUID, float] = {}
    for ranking, weight in ((vector, vector_weight), (keyword, 1.0 - vector_weight)):
        for chunk_id, value in normalised(ranking):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + weight * value
    return _best_first(scores)


def normalised(ranking: Ranking) -> list[tuple[uuid.UUID, float]]:
    """Min-max over the ranking's own scores: best 1, worst 0; all equal (or one) gives 1."""
    if not ranking:
        return []
    values = [score for _id, score in ranking]
    low, high = min(values), max(values)
    if high <= low:
        return [(chunk_id, 1.0) for chunk_id, _score in ranking]
    return [(chunk_id, (score - low) / (high - low)) for chunk_id, score in ranking]


def _best_first(scores: dict[uuid.UUID, float]) -> list[tuple[uuid.UUID, float]]:
    return sorted(scores.items(), key=lambda item: (-item[1], str(item[0])))
