"""Hybrid fusion of a vector ranking and a BM25 ranking.

- `weighted` (the default; docs/BENCHMARKS.md has the measurements behind it): every candidate
  of either leg gets *both* its scores (the vector leg's chunks are scored by BM25 too, the
  keyword leg's get their cosine similarity), each on an absolute scale:
  score = w * max(cosine, 0) + (1 - w) * BM25 / ceiling, where the ceiling is the largest BM25
  score the query can reach in the tenant (the sum over its terms of idf * (k1 + 1)). So a
  chunk that matches only the query's common words adds little, however it ranks among the
  keyword candidates, and a candidate missing from one leg is not scored 0 there. The score is
  in [0, 1] and means the same from one query to the next.
- `rrf`: reciprocal rank fusion, score = sum over rankings of 1 / (k + rank), rank from 1. Uses
  ranks only, so it cannot tell a clear winner from a near tie.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.inputs.vocabulary import FusionMethod as FusionMethod

Ranking = Sequence[tuple[uuid.UUID, float]]


@dataclass(frozen=True, slots=True)
class BothScores:
    """A hybrid candidate's cosine similarity to the query and its BM25 score (0 when it holds
    none of the query's terms)."""

    cosine: float
    bm25: float


def fuse(rankings: Sequence[Ranking], *, k: int) -> list[tuple[uuid.UUID, float]]:
    """Reciprocal rank fusion: score = sum over rankings of 1 / (k + rank), rank from 1."""
    scores: dict[uuid.UUID, float] = {}
    for ranking in rankings:
        for rank, (chunk_id, _score) in enumerate(ranking, start=1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (k + rank)
    return _best_first(scores)


def weighted_fuse(
    candidates: Mapping[uuid.UUID, BothScores], *, ceiling: float, vector_weight: float
) -> list[tuple[uuid.UUID, float]]:
    """w * max(cosine, 0) + (1 - w) * BM25 / ceiling, per candidate, best first."""
    lexical = (1.0 - vector_weight) / ceiling if ceiling > 0 else 0.0
    scores = {
        chunk_id: vector_weight * max(both.cosine, 0.0) + lexical * both.bm25
        for chunk_id, both in candidates.items()
    }
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
