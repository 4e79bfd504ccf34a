"""The two runtimes of the bundled MiniLM give the same vectors: ONNX Runtime (the default) and
PyTorch, within cosine 0.9999 and 1e-4 per component, on short, empty, unicode and long texts
(truncated at max_seq_length the same way), alone and in padded batches."""

from __future__ import annotations

import numpy as np
import pytest

from app.embeddings.local import LocalEmbedder
from app.embeddings.onnx_model import OnnxSentenceModel
from app.settings import EmbeddingProvider, EmbeddingRuntime, Settings

pytestmark = pytest.mark.slow

COSINE = 0.9999  # the stated tolerance: the same model id for both runtimes
COMPONENT = 1e-4

LONG = " ".join(f"cardiovascular outcome {i} of the randomized statin trial" for i in range(80))
TEXTS = [
    "How do I reset my password?",
    "",
    " ",
    "?!",
    "vitamin D",
    "Ünïcödé àccents, Straße, naïve café",
    "東京の天気は晴れです",
    "Привет, как дела?",
    "مرحبا بالعالم",
    "emoji 🙂🚀 and symbols ∑∫√ ≠ ≤",
    "x" * 3000,
    LONG,
    LONG + " and a tail past the 256 tokens the model reads, which changes nothing",
    "Tab\tseparated\nand\nnew lines",
    "1234567890 3.14159 2026-11-26",
]


@pytest.fixture(scope="module")
def torch_minilm() -> LocalEmbedder:
    settings = Settings(
        _env_file=None,
        embedding_provider=EmbeddingProvider.LOCAL,
        embedding_runtime=EmbeddingRuntime.TORCH,
    )
    return LocalEmbedder.load(settings)


def test_the_default_runtime_is_onnx(minilm: LocalEmbedder) -> None:
    assert Settings(_env_file=None).embedding_runtime is EmbeddingRuntime.ONNX
    assert isinstance(minilm.model, OnnxSentenceModel)


def test_both_runtimes_share_identity(minilm: LocalEmbedder, torch_minilm: LocalEmbedder) -> None:
    assert not isinstance(torch_minilm.model, OnnxSentenceModel)
    assert minilm.model_id == torch_minilm.model_id == "local:all-MiniLM-L6-v2"
    assert minilm.dimensions == torch_minilm.dimensions == 384
    assert minilm.max_input_tokens == torch_minilm.max_input_tokens == 256


@pytest.mark.parametrize("batched", [False, True], ids=["one at a time", "one padded batch"])
def test_both_runtimes_give_the_same_vectors(
    minilm: LocalEmbedder, torch_minilm: LocalEmbedder, batched: bool
) -> None:
    if batched:
        onnx = np.array(minilm.encode_blocking(TEXTS))
        reference = np.array(torch_minilm.encode_blocking(TEXTS))
    else:
        onnx = np.array([minilm.encode_blocking([t])[0] for t in TEXTS])
        reference = np.array([torch_minilm.encode_blocking([t])[0] for t in TEXTS])
    assert np.allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(onnx * reference, axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= COSINE, f"{TEXTS[worst][:40]!r}: cosine {cosines[worst]:.6f}"
    assert np.abs(onnx - reference).max() <= COMPONENT


def test_long_texts_are_truncated_alike(minilm: LocalEmbedder) -> None:
    long, longer = minilm.encode_blocking([LONG, TEXTS[-3]])
    assert np.allclose(long, longer, atol=1e-6), "words past max_seq_length must not count"


def test_padding_does_not_change_a_vector(minilm: LocalEmbedder) -> None:
    alone = np.array([minilm.encode_blocking([t])[0] for t in TEXTS])
    together = np.array(minilm.encode_blocking(TEXTS))
    assert np.abs(alone - together).max() <= 1e-5
