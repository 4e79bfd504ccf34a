"""The exact comparison dedupe offers up to 5,000 documents, checked against the plain matrix."""

from __future__ import annotations

import uuid

import numpy as np

from app.retrieval.duplicates import EXACT_BLOCK, exact_pairs


def test_exact_pairs_in_row_blocks_equal_the_whole_matrix() -> None:
    rng = np.random.default_rng(3)
    count = 2 * EXACT_BLOCK + 300  # three blocks, the last one short
    vectors = rng.normal(size=(count, 16)).astype(np.float32)
    for copy, source in ((5, 2_000), (1_500, 7), (count - 1, 1_024), (1_023, 1_024)):
        vectors[copy] = vectors[source] * 3 + 0.01 * rng.normal(size=16)  # not unit length
    ids = [uuid.UUID(int=i) for i in range(count)]

    found = exact_pairs(ids, vectors, 0.99)

    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sims = unit @ unit.T
    expected = {
        tuple(sorted((ids[i], ids[j]), key=str))
        for i in range(count)
        for j in np.nonzero(sims[i] >= 0.99)[0]
        if j > i
    }
    assert set(found) == expected
    assert len(expected) == 5  # 1,023 and the last row are both copies of 1,024: three pairs
    assert all(0.99 <= similarity <= 1.0 + 1e-6 for similarity in found.values())
