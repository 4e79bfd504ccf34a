"""Unit vectors from the body of an OpenAI ``/embeddings`` reply, without the SDK's parsing.

Each item's ``embedding`` is read as it comes: a base64 string of little-endian float32s (what
the embedder asks for) or a list of numbers (what some compatible servers send whatever was
asked). A reply that is not one raises ``EmbeddingError`` saying what is wrong with it; vectors
of another length than configured raise ``EmbeddingConfigError`` naming the setting.

Reading 64 vectors of 1536 JSON numbers costs ~60 ms of CPU, their base64 under 10 ms
(docs/BENCHMARKS.md, "OpenAI embeddings: base64 off the event loop"): the embedder runs this
module in a worker thread for replies over ``INLINE_MAX_BYTES``, on the event loop for smaller
ones (one query's vector), where a thread's hand-off would cost more than it saves.
"""

from __future__ import annotations

import binascii
import json

import numpy as np
import numpy.typing as npt

from app.embeddings.base import EmbeddingConfigError, EmbeddingError

# a query's vector in base64 stays on the loop (1536 dimensions ~8 KB, 3072 ~16 KB); as JSON
# numbers, a 1536-dimension one (~32 KB, ~1 ms to read) goes to a thread
INLINE_MAX_BYTES = 24_000

Vector = npt.NDArray[np.float32] | npt.NDArray[np.float64]


def unit_vectors(body: bytes, *, expected: int, dimensions: int, model: str) -> list[list[float]]:
    """``expected`` vectors of ``dimensions`` in input order (by ``index``), unit length."""
    array = np.empty((expected, dimensions), dtype=np.float64)
    for row, embedding in enumerate(_embeddings(body, expected=expected)):
        vector = _vector(embedding)
        if vector.shape[0] != dimensions:
            raise EmbeddingConfigError(
                f"model {model!r} returned {vector.shape[0]}-dimensional vectors but "
                f"RAG_EMBEDDING_DIMENSIONS is {dimensions}: set RAG_EMBEDDING_DIMENSIONS="
                f"{vector.shape[0]} (then `rag reindex`) or choose a model with "
                f"{dimensions} dimensions"
            )
        array[row] = vector
    if not np.isfinite(array).all():
        raise _unreadable("a vector holds values that are not finite")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    array /= np.where(norms == 0, 1.0, norms)
    rows: list[list[float]] = array.tolist()
    return rows


def _embeddings(body: bytes, *, expected: int) -> list[object]:
    """Each item's ``embedding``, in ``index`` order, checked to be one per input."""
    try:
        reply = json.loads(body)
    except ValueError:
        raise _unreadable("it is not JSON") from None
    data = reply.get("data") if isinstance(reply, dict) else None
    if not isinstance(data, list):
        raise _unreadable("it has no `data` list")
    by_index: dict[int, object] = {}
    for item in data:
        index = item.get("index") if isinstance(item, dict) else None
        if not isinstance(index, int) or "embedding" not in item:
            raise _unreadable("an item of `data` lacks an integer `index` or an `embedding`")
        by_index[index] = item["embedding"]
    if len(data) != expected or sorted(by_index) != list(range(expected)):
        raise EmbeddingError(
            f"the embedding provider answered {len(data)} vectors for {expected} inputs"
        )
    return [by_index[index] for index in range(expected)]


def _vector(embedding: object) -> Vector:
    if isinstance(embedding, str):
        try:
            packed = binascii.a2b_base64(embedding, strict_mode=True)
        except (binascii.Error, ValueError) as error:
            raise _unreadable(f"an embedding is not valid base64 ({error})") from None
        if len(packed) % 4:
            raise _unreadable(f"an embedding has {len(packed)} bytes, not whole float32s")
        return np.frombuffer(packed, dtype="<f4")
    if isinstance(embedding, list):
        try:
            vector = np.asarray(embedding, dtype=np.float64)
        except (TypeError, ValueError):
            raise _unreadable("an embedding is not a list of numbers") from None
        if vector.ndim != 1:
            raise _unreadable("an embedding is not a list of numbers")
        return vector
    raise _unreadable("an embedding is neither a base64 string nor a list of numbers")


def _unreadable(reason: str) -> EmbeddingError:
    return EmbeddingError(f"the embedding provider sent an unreadable reply: {reason}")
