"""Embeddings: the Embedder protocol, local and OpenAI(-compatible) providers, a query cache.

Import providers from their modules; ``app.embeddings.local`` loads torch only when a model is
loaded, so this package imports quickly and without the ``local`` extra.
"""

from app.embeddings.base import Embedder, EmbeddingConfigError, EmbeddingError, WrappedEmbedder
from app.embeddings.cache import CachedEmbedder, CacheStats
from app.embeddings.factory import build_embedder, check_dimensions

__all__ = [
    "CacheStats",
    "CachedEmbedder",
    "Embedder",
    "EmbeddingConfigError",
    "EmbeddingError",
    "WrappedEmbedder",
    "build_embedder",
    "check_dimensions",
]
