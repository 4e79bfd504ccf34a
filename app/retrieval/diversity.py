"""Diversity on request: maximal marginal relevance over the candidates' stored vectors.

With `diversity` = λ in (0, 1], the top_k are picked greedily from the ranked candidates:
each step takes the candidate with the best

    (1 - λ) * relevance - λ * (highest cosine similarity to a chunk already picked)

where relevance is the candidate's ranking score min-max normalised over the candidates (so
vector, keyword and hybrid scores weigh the same). λ 0 keeps the ranking as it is; λ 1 only
spreads. The first pick is always the best-ranked candidate. A context then holds fewer
near-identical chunks of one document (its `source_diversity` shows it).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

import numpy as np

from app.retrieval.fusion import normalised


def mmr(
    ranked: Sequence[tuple[uuid.UUID, float]],
    vectors: Mapping[uuid.UUID, Sequence[float]],
    *,
    diversity: float,
    top_k: int,
) -> list[tuple[uuid.UUID, float]]:
    """`top_k` of `ranked` (id, score) in MMR order, each with its original score."""
    pool = [(chunk_id, score) for chunk_id, score in ranked if chunk_id in vectors]
    if not pool:
        return []
    relevance = np.array([value for _id, value in normalised(pool)])
    matrix = np.array([vectors[chunk_id] for chunk_id, _ in pool], dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = matrix / np.where(norms == 0, 1.0, norms)
    closest = np.full(len(pool), -np.inf)  # highest similarity to any pick so far
    picked: list[int] = []
    available = np.ones(len(pool), dtype=bool)
    while len(picked) < min(top_k, len(pool)):
        penalty = np.where(np.isinf(closest), 0.0, closest)
        value = (1.0 - diversity) * relevance - diversity * penalty
        value[~available] = -np.inf
        best = int(np.argmax(value)) if picked else 0
        picked.append(best)
        available[best] = False
        closest = np.maximum(closest, matrix @ matrix[best])
    return [pool[i] for i in picked]
