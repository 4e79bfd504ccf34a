"""The LRU query cache in front of any embedder."""

from __future__ import annotations

from app.embeddings.base import Embedder
from app.embeddings.cache import CachedEmbedder, CacheStats
from tests.embeddings.fakes import CountingEmbedder


async def test_repeated_queries_are_served_from_the_cache() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, size=10)
    assert isinstance(cached, Embedder)
    first = await cached.embed_query("vitamin d")
    second = await cached.embed_query("vitamin d")
    assert first == second
    assert inner.query_calls == ["vitamin d"]
    assert (cached.hits, cached.misses) == (1, 1)
    assert cached.stats() == CacheStats(hits=1, misses=1, size=1, capacity=10)
    assert cached.stats().hit_rate == 0.5


async def test_the_least_recently_used_query_is_evicted() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, size=2)
    await cached.embed_query("a")
    await cached.embed_query("b")
    await cached.embed_query("a")  # a is now the most recent
    await cached.embed_query("c")  # evicts b
    await cached.embed_query("a")
    await cached.embed_query("b")
    assert inner.query_calls == ["a", "b", "c", "b"]
    assert cached.stats() == CacheStats(hits=2, misses=4, size=2, capacity=2)


async def test_size_zero_disables_the_cache() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, size=0)
    await cached.embed_query("a")
    await cached.embed_query("a")
    assert inner.query_calls == ["a", "a"]
    assert cached.stats() == CacheStats(hits=0, misses=2, size=0, capacity=0)


async def test_documents_are_never_cached() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, size=10)
    await cached.embed_documents(["x", "y"])
    await cached.embed_documents(["x", "y"])
    await cached.embed_query("x")
    assert inner.document_calls == [["x", "y"], ["x", "y"]]
    assert inner.query_calls == ["x"]


async def test_keys_include_the_model() -> None:
    inner = CountingEmbedder(model_id="fake:one")
    cached = CachedEmbedder(inner, size=10)
    one = await cached.embed_query("q")
    inner.model_id = "fake:two"
    two = await cached.embed_query("q")
    assert one != two
    assert cached.misses == 2


async def test_a_caller_mutating_its_vector_does_not_corrupt_the_cache() -> None:
    cached = CachedEmbedder(CountingEmbedder(), size=10)
    vector = await cached.embed_query("q")
    original = list(vector)
    vector[0] = 42.0
    assert await cached.embed_query("q") == original


async def test_the_wrapper_passes_identity_check_and_close_through() -> None:
    inner = CountingEmbedder(model_id="fake:m", dimensions=5)
    cached = CachedEmbedder(inner, size=3)
    assert (cached.model_id, cached.dimensions) == ("fake:m", 5)
    assert (cached.query_prefix, cached.passage_prefix) == ("", "")
    await cached.embed_query("q")
    await cached.check()
    await cached.aclose()
    assert inner.checks == 1
    assert inner.closed
    assert cached.stats().size == 0
