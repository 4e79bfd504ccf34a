"""A document's vector: the normalised mean of its chunks' vectors, computed from the vectors
the writer already holds, with pgvector's arithmetic (`l2_normalize(avg(embedding))`: float4
elements summed in float8, the mean stored as float4, its norm taken in float8), so the value
equals what `store.refresh_document_vectors` computes in SQL for the same chunks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt


def document_vector(chunks: Sequence[dict[str, Any]]) -> npt.NDArray[np.float32] | None:
    """The vector of a version with these chunk rows (`embedding`, `embedding_model`); None
    when it has no chunk or they carry more than one model (as half-way through a reindex)."""
    if not chunks or len({chunk["embedding_model"] for chunk in chunks}) != 1:
        return None
    stored = np.asarray([chunk["embedding"] for chunk in chunks], dtype=np.float32)
    mean: npt.NDArray[np.float32] = (stored.astype(np.float64).sum(axis=0) / len(chunks)).astype(
        np.float32
    )
    wide = mean.astype(np.float64)
    norm = float(np.sqrt(np.dot(wide, wide)))
    if norm == 0.0:
        return mean  # pgvector's l2_normalize leaves a zero vector as it is
    normalised: npt.NDArray[np.float32] = (wide / norm).astype(np.float32)
    return normalised
