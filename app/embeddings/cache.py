"""An LRU cache of query embeddings in front of any Embedder (documents are never cached).

Every provider the service builds sits behind it, so it is also where calls to the provider
are counted and timed (rag_embedding_calls_total, rag_embedding_call_seconds)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from app.embeddings.base import Embedder, WrappedEmbedder
from app.observability.metrics import QUERY_CACHE, embedding_call

_HITS, _MISSES = QUERY_CACHE.labels("hit"), QUERY_CACHE.labels("miss")


@dataclass(frozen=True, slots=True)
class CacheStats:
    hits: int
    misses: int
    size: int
    capacity: int

    @property
    def hit_rate(self) -> float:
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0


class CachedEmbedder(WrappedEmbedder):
    """Wraps ``inner``; remembers the ``size`` most recently used query vectors (0: none).

    Keys are ``(model_id, text)``. Two concurrent misses on the same text both embed it;
    the second result simply replaces the first.
    """

    def __init__(self, inner: Embedder, size: int) -> None:
        super().__init__(inner)
        self.capacity = max(0, size)
        self.hits = 0
        self.misses = 0
        self._vectors: OrderedDict[tuple[str, str], tuple[float, ...]] = OrderedDict()

    async def embed_query(self, text: str) -> list[float]:
        key = (self.inner.model_id, text)
        if (cached := self._vectors.get(key)) is not None:
            self._vectors.move_to_end(key)
            self.hits += 1
            _HITS.inc()
            return list(cached)
        self.misses += 1
        _MISSES.inc()
        with embedding_call("query", 1):
            vector = await self.inner.embed_query(text)
        if self.capacity:
            self._vectors[key] = tuple(vector)
            self._vectors.move_to_end(key)
            while len(self._vectors) > self.capacity:
                self._vectors.popitem(last=False)
        return vector

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        with embedding_call("documents", len(texts)):
            return await self.inner.embed_documents(texts)

    async def aclose(self) -> None:
        self._vectors.clear()
        await self.inner.aclose()

    def stats(self) -> CacheStats:
        return CacheStats(self.hits, self.misses, len(self._vectors), self.capacity)

    def clear(self) -> None:
        self._vectors.clear()
