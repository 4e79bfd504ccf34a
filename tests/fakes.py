"""Offline test doubles for the embedder (the real model is tested in tests/embeddings)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

import anyio
import numpy as np

from app.embeddings import EmbeddingError

WORD = re.compile(r"[a-z0-9]+")


class WordHashEmbedder:
    """Bag-of-words vectors: each word hashes to a fixed random direction. Texts that share
    words are similar, so ranking tests stay meaningful without loading a model."""

    max_input_tokens: int | None = None  # no model limit, no tokenizer of its own
    tokenizer_file: Path | None = None

    def __init__(self, dimensions: int = 384, model_id: str = "test:word-hash") -> None:
        self.model_id = model_id
        self.dimensions = dimensions
        self.query_prefix = ""
        self.passage_prefix = ""
        self.documents_embedded = 0
        self.document_calls = 0

    def vector(self, text: str) -> list[float]:
        total = np.zeros(self.dimensions)
        for word in WORD.findall(text.lower()):
            seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big")
            total += np.random.default_rng(seed).normal(size=self.dimensions)
        norm = np.linalg.norm(total)
        unit: list[float] = (
            total / norm if norm else np.ones(self.dimensions) / np.sqrt(self.dimensions)
        ).tolist()
        return unit

    async def embed_query(self, text: str) -> list[float]:
        return self.vector(text)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.documents_embedded += len(texts)
        self.document_calls += 1
        return [self.vector(text) for text in texts]

    async def check(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


class PacedEmbedder(WordHashEmbedder):
    """Embeds documents `batch` texts at a time with a pause after each batch, as a model or a
    provider does: a large document takes seconds, and `documents_embedded` grows as it goes."""

    def __init__(self, dimensions: int = 384, *, batch: int = 8, pause: float = 0.05) -> None:
        super().__init__(dimensions)
        self.batch, self.pause = batch, pause

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.document_calls += 1
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch):
            await anyio.sleep(self.pause)
            vectors += [self.vector(text) for text in texts[start : start + self.batch]]
            self.documents_embedded += len(texts[start : start + self.batch])
        return vectors


class FailingEmbedder(WordHashEmbedder):
    """Embeds queries, but fails every document batch: an embedder that dies mid-ingest."""

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        raise EmbeddingError("the embedding provider went away")
