"""The local sentence-transformers embedder: the real MiniLM model, and a fake for the plumbing."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import numpy as np
import pytest

from app.embeddings.base import Embedder, EmbeddingConfigError, EmbeddingError
from app.embeddings.local import LocalEmbedder, local_model_id
from app.settings import EmbeddingProvider, Settings
from tests.embeddings.fakes import FakeSentenceModel

VOCABULARY = (
    "vitamin deficiency cohort randomized trial cardiovascular outcome dietary fiber intake "
    "cholesterol statin mortality breast cancer risk plasma concentration inflammation"
)
WORDS = VOCABULARY.split()


def long_texts(count: int, *, words: int = 150) -> list[str]:
    return [
        f"study {i}: " + " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(words))
        for i in range(count)
    ]


def sibling(
    minilm: LocalEmbedder, *, batch_size: int = 64, query_prefix: str = "", passage_prefix: str = ""
) -> LocalEmbedder:
    """Another embedder over the same loaded model (own lanes, closable)."""
    return LocalEmbedder(
        minilm.model,
        model_id=minilm.model_id,
        dimensions=minilm.dimensions,
        batch_size=batch_size,
        query_prefix=query_prefix,
        passage_prefix=passage_prefix,
    )


def cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b))


def test_minilm_reports_its_identity(minilm: LocalEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert minilm.model_id == "local:all-MiniLM-L6-v2"
    assert minilm.dimensions == 384
    assert minilm.max_input_tokens == 256
    assert minilm.tokenizer_file is not None
    assert minilm.tokenizer_file.is_file()


async def test_vectors_are_unit_length_and_384_wide(minilm: LocalEmbedder) -> None:
    vectors = await minilm.embed_documents(["short", "a somewhat longer sentence here", ""])
    vectors.append(await minilm.embed_query("what causes scurvy?"))
    assert [len(v) for v in vectors] == [384] * 4
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


async def test_paraphrase_is_closer_than_unrelated_text(minilm: LocalEmbedder) -> None:
    query = await minilm.embed_query("How do I reset my password?")
    paraphrase, unrelated = await minilm.embed_documents(
        ["Steps to change a forgotten account password", "The recipe needs two cups of flour"]
    )
    assert cosine(query, paraphrase) > cosine(query, unrelated) + 0.3


async def test_prefixes_are_applied_inside(minilm: LocalEmbedder) -> None:
    e5_style = sibling(minilm, query_prefix="query: ", passage_prefix="passage: ")
    assert await e5_style.embed_query("vitamin d") == pytest.approx(
        await minilm.embed_query("query: vitamin d"), abs=1e-5
    )
    [passage] = await e5_style.embed_documents(["bone density"])
    [expected] = await minilm.embed_documents(["passage: bone density"])
    assert passage == pytest.approx(expected, abs=1e-5)
    assert cosine(passage, await minilm.embed_query("bone density")) < 0.999


async def test_documents_are_split_into_sub_batches_with_prefixes() -> None:
    model = FakeSentenceModel()
    embedder = LocalEmbedder(
        model, model_id="local:fake", dimensions=4, batch_size=3, passage_prefix="p: "
    )
    texts = [f"t{i}" + "x" * length for i, length in enumerate([0, 5, 1, 6, 2, 4, 3])]
    vectors = await embedder.embed_documents(texts)
    # Longest first, so each sub-batch holds texts of similar length and pads little.
    assert model.calls == [
        ["p: t3xxxxxx", "p: t1xxxxx", "p: t5xxxx"],
        ["p: t6xxx", "p: t4xx", "p: t2x"],
        ["p: t0"],
    ]
    alone = [await embedder.embed_documents([text]) for text in texts]
    assert vectors == [vector for [vector] in alone], "vectors come back in the input's order"
    assert await embedder.embed_documents([]) == []


async def test_a_wrong_width_model_is_a_configuration_error() -> None:
    embedder = LocalEmbedder(FakeSentenceModel(dimensions=5), model_id="local:f", dimensions=4)
    with pytest.raises(EmbeddingConfigError, match="5-dimensional"):
        await embedder.embed_query("x")


async def test_the_event_loop_keeps_ticking_while_a_big_batch_embeds(
    minilm: LocalEmbedder,
) -> None:
    # One sub-batch: a blocked loop would show one gap as long as the whole batch.
    embedder = sibling(minilm, batch_size=24)
    gaps: list[float] = []
    done = anyio.Event()

    async def tick() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await anyio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        started = time.perf_counter()
        vectors = await embedder.embed_documents(long_texts(24))
        elapsed = time.perf_counter() - started
        done.set()
    assert len(vectors) == 24
    assert max(gaps) < elapsed / 2, "the loop stalled for most of the batch"
    assert len(gaps) > elapsed / 0.05


async def test_a_query_does_not_wait_for_a_document_batch(minilm: LocalEmbedder) -> None:
    embedder = sibling(minilm, batch_size=12)
    finished: dict[str, float] = {}

    async def ingest() -> None:
        await embedder.embed_documents(long_texts(12))
        finished["documents"] = time.perf_counter()

    async with anyio.create_task_group() as group:
        group.start_soon(ingest)
        await anyio.sleep(0.05)  # the single 12-document batch is under way
        asked = time.perf_counter()
        await embedder.embed_query("statin and breast cancer mortality")
        finished["query"] = time.perf_counter()
    assert finished["query"] < finished["documents"]
    assert finished["query"] - asked < 1.5


async def test_check_passes_and_a_closed_embedder_refuses(minilm: LocalEmbedder) -> None:
    embedder = sibling(minilm)
    await embedder.check()
    await embedder.aclose()
    with pytest.raises(EmbeddingError, match="closed"):
        await embedder.embed_query("x")
    with pytest.raises(EmbeddingError):
        await embedder.check()


def test_loading_a_missing_model_is_a_clear_configuration_error(
    minilm: LocalEmbedder, tmp_path: Path
) -> None:
    settings = Settings(
        _env_file=None,
        embedding_provider=EmbeddingProvider.LOCAL,
        embedding_model=str(tmp_path / "no-such-model"),
    )
    with pytest.raises(EmbeddingConfigError, match="RAG_EMBEDDING_MODEL"):
        LocalEmbedder.load(settings)


def test_model_ids_never_hold_absolute_paths(tmp_path: Path) -> None:
    snapshot = tmp_path / "models--BAAI--bge-small-en-v1.5" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    plain = tmp_path / "e5-small-v2"
    plain.mkdir()
    assert local_model_id(str(snapshot)) == "local:BAAI/bge-small-en-v1.5"
    assert local_model_id(str(plain)) == "local:e5-small-v2"
    assert local_model_id("intfloat/e5-small-v2") == "local:intfloat/e5-small-v2"
