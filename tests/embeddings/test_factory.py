"""Choosing the embedder: local, openai, or auto with a probe; and the dimension guard."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from app.embeddings.base import Embedder, EmbeddingConfigError
from app.embeddings.cache import CachedEmbedder
from app.embeddings.factory import build_embedder, check_dimensions
from app.embeddings.local import LocalEmbedder
from app.embeddings.onnx_model import OnnxSentenceModel
from app.embeddings.openai_provider import OpenAIEmbedder
from app.settings import EmbeddingProvider, EmbeddingRuntime, Settings
from tests.embeddings.fakes import CountingEmbedder, FakeOpenAI


class LocalLoader:
    """Stands in for loading the local model; records the settings it was given."""

    def __init__(self) -> None:
        self.loaded: list[Settings] = []

    def __call__(self, settings: Settings) -> Embedder:
        self.loaded.append(settings)
        return CountingEmbedder(model_id="local:fake", dimensions=384)


def make_settings(**values: object) -> Settings:
    values.setdefault("openai_max_retries", 0)
    return Settings.model_validate(values)


async def test_auto_without_a_key_loads_local(caplog: pytest.LogCaptureFixture) -> None:
    loader = LocalLoader()
    caplog.set_level(logging.INFO, logger="app.embeddings")
    embedder = await build_embedder(make_settings(embedding_provider="auto"), local_loader=loader)
    assert isinstance(embedder, CachedEmbedder)
    assert embedder.model_id == "local:fake"
    assert len(loader.loaded) == 1
    assert "no RAG_OPENAI_API_KEY" in caplog.text


async def test_auto_with_a_key_and_a_live_server_uses_openai(
    fake_openai: FakeOpenAI, openai_url: str
) -> None:
    loader = LocalLoader()
    settings = make_settings(
        embedding_provider="auto", openai_api_key="test-key", openai_base_url=openai_url
    )
    embedder = await build_embedder(settings, local_loader=loader)
    try:
        assert embedder.model_id == "openai:text-embedding-3-small@384"
        assert isinstance(embedder.inner, OpenAIEmbedder)
        assert loader.loaded == []
        assert len(fake_openai.requests) == 1  # the probe
    finally:
        await embedder.aclose()


async def test_auto_with_a_key_and_the_server_down_falls_back_to_local(
    dead_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    loader = LocalLoader()
    settings = make_settings(
        embedding_provider="auto",
        openai_api_key="test-key",
        openai_base_url=dead_url,
        embedding_model="text-embedding-3-large",
    )
    embedder = await build_embedder(settings, local_loader=loader)
    assert embedder.model_id == "local:fake"
    [local_settings] = loader.loaded
    assert local_settings.embedding_model is None  # an OpenAI model name is not a local model
    assert "falling back to the local embedder" in caplog.text


async def test_auto_falls_back_when_the_server_is_too_slow(
    fake_openai: FakeOpenAI, openai_url: str
) -> None:
    fake_openai.delay = 1.0
    settings = make_settings(
        embedding_provider="auto", openai_api_key="test-key", openai_base_url=openai_url
    )
    embedder = await build_embedder(settings, local_loader=LocalLoader(), probe_timeout=0.2)
    assert embedder.model_id == "local:fake"


async def test_auto_passes_a_model_directory_to_local(tmp_path: Path) -> None:
    loader = LocalLoader()
    settings = make_settings(embedding_provider="auto", embedding_model=str(tmp_path))
    await build_embedder(settings, local_loader=loader)
    assert loader.loaded[0].embedding_model == str(tmp_path)


async def test_local_is_loaded_without_probing_openai(openai_url: str) -> None:
    loader = LocalLoader()
    settings = make_settings(
        embedding_provider="local",
        openai_api_key="test-key",
        openai_base_url=openai_url,
        query_cache_size=7,
    )
    embedder = await build_embedder(settings, local_loader=loader)
    assert embedder.model_id == "local:fake"
    assert embedder.capacity == 7


async def test_openai_that_is_down_at_start_is_kept(
    dead_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    loader = LocalLoader()
    settings = make_settings(
        embedding_provider="openai", openai_api_key="test-key", openai_base_url=dead_url
    )
    embedder = await build_embedder(settings, local_loader=loader)
    try:
        assert embedder.model_id == "openai:text-embedding-3-small@384"
        assert loader.loaded == []
        assert "not answering yet" in caplog.text
    finally:
        await embedder.aclose()


async def test_openai_with_a_rejected_key_stops_the_start(
    fake_openai: FakeOpenAI, openai_url: str
) -> None:
    settings = make_settings(
        embedding_provider="openai", openai_api_key="wrong", openai_base_url=openai_url
    )
    with pytest.raises(EmbeddingConfigError, match="RAG_OPENAI_API_KEY"):
        await build_embedder(settings)


def test_check_dimensions_accepts_a_matching_column() -> None:
    check_dimensions(CountingEmbedder(dimensions=384), 384)


def test_check_dimensions_explains_a_mismatch() -> None:
    embedder = CountingEmbedder(model_id="openai:text-embedding-3-small@1536", dimensions=1536)
    with pytest.raises(EmbeddingConfigError) as caught:
        check_dimensions(embedder, 384)
    detail = caught.value.detail
    assert "openai:text-embedding-3-small@1536" in detail
    assert "RAG_EMBEDDING_DIMENSIONS=1536" in detail
    assert "rag reindex" in detail


@pytest.mark.slow
@pytest.mark.parametrize("runtime", list(EmbeddingRuntime))
async def test_the_local_runtime_comes_from_the_environment(
    runtime: EmbeddingRuntime,
    tiny_model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAG_EMBEDDING_RUNTIME", runtime.value)
    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path))
    settings = Settings(
        _env_file=None,
        embedding_provider=EmbeddingProvider.LOCAL,
        embedding_model=str(tiny_model_dir),
        embedding_dimensions=32,
    )
    embedder = await build_embedder(settings)
    try:
        inner = embedder.inner
        assert isinstance(inner, LocalEmbedder)
        on_onnx = runtime is not EmbeddingRuntime.TORCH
        assert isinstance(inner.model, OnnxSentenceModel) is on_onnx
        assert (tmp_path / "onnx").is_dir() is on_onnx, "torch exports nothing"
        suffix = "+int8" if runtime is EmbeddingRuntime.ONNX_INT8 else ""
        assert inner.model_id == f"local:tiny-minilm{suffix}"
        assert len(await embedder.embed_query("vitamin d")) == 32
    finally:
        await embedder.aclose()


def test_the_openai_sdk_is_imported_only_when_its_embedder_is_built() -> None:
    """It takes about a second to import: every in-process `rag` command paid for it, and the
    local model never needs it (app/embeddings/factory.py `build_openai`)."""
    probe = "import sys, app.cli.local, app.main; print('openai' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
