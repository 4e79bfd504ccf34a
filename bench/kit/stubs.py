"""Embedders that return vectors known in advance: the service's work without the model's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.kit.corpus import CachingEmbedder


class StubEmbedder:
    """Query vectors known in advance: the service's search without the model. A query's
    vector is looked up by its text in `vectors` when given, else it is `current`, which the
    caller sets before each search."""

    def __init__(
        self, model_id: str, dimensions: int, vectors: dict[str, list[float]] | None = None
    ) -> None:
        self.model_id = model_id
        self.dimensions = dimensions
        self.query_prefix = ""
        self.passage_prefix = ""
        self.max_input_tokens: int | None = None
        self.tokenizer_file: Path | None = None
        self.vectors = vectors or {}
        self.current: list[float] = []

    async def embed_query(self, text: str) -> list[float]:
        return self.vectors[text] if self.vectors else self.current

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        raise NotImplementedError("the benchmark's chunks arrive with their embeddings")

    async def check(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


class LookupEmbedder:
    """Vectors looked up by text (filled before timing, from the real model through the disk
    cache): embedding costs ~nothing, and the HNSW index sees the vectors it would in use."""

    def __init__(self, dimensions: int, model_id: str) -> None:
        self.model_id = model_id
        self.dimensions = dimensions
        self.query_prefix = ""
        self.passage_prefix = ""
        self.max_input_tokens: int | None = None
        self.tokenizer_file: Path | None = None
        self.vectors: dict[str, list[float]] = {}

    async def add(self, texts: Sequence[str], source: CachingEmbedder) -> None:
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        for text, vector in zip(missing, await source.embed_documents(missing), strict=True):
            self.vectors[text] = vector
        source.save()

    def varied(self, seed: int, noise: float = 0.02) -> LookupEmbedder:
        """The same texts with vectors moved by a little gaussian noise (renormalized): each
        stage inserts vectors the index has not seen, as real new documents would be.
        Re-inserting identical vectors makes HNSW inserts cheaper than they are."""
        rng = np.random.default_rng(seed)
        other = LookupEmbedder(self.dimensions, self.model_id)
        for text, vector in self.vectors.items():
            moved = np.asarray(vector) + rng.normal(scale=noise, size=self.dimensions)
            other.vectors[text] = (moved / np.linalg.norm(moved)).tolist()
        return other

    async def embed_query(self, text: str) -> list[float]:
        return self.vectors[text]

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]

    async def check(self) -> None:
        return None

    async def aclose(self) -> None:
        return None
