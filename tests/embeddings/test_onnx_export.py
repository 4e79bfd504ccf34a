"""The ONNX export on a tiny model: made once and reused, re-made when damaged, one export when
workers start at once, a new one when the model or the versions change."""

from __future__ import annotations

import os
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from app.embeddings.local import LocalEmbedder, load_for_export
from app.embeddings.onnx_export import (
    GRAPH,
    MANIFEST,
    TOKENIZER,
    cached_export,
    export_key,
    verify,
)
from app.embeddings.onnx_model import OnnxSentenceModel
from app.settings import EmbeddingProvider, EmbeddingRuntime, Settings

pytestmark = pytest.mark.slow

TEXTS = ["short", "", "ünïcödé 東京 🙂", "a longer sentence " * 40]


class CountingLoader:
    """The export's model loader, counting its calls (optionally slowed down)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.calls = 0
        self.delay = delay
        self._lock = threading.Lock()

    def __call__(self, model_dir: Path) -> object:
        with self._lock:
            self.calls += 1
        time.sleep(self.delay)
        return load_for_export(model_dir)


class RefusingLoader:
    def __call__(self, model_dir: Path) -> object:
        raise AssertionError("the model was exported again")


@pytest.fixture(scope="module")
def exported(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model exported once for this module (fp32)."""
    cache = tmp_path_factory.mktemp("onnx-cache")
    loader = CountingLoader()
    directory = cached_export(
        tiny_model_dir, cache, name="tiny-minilm", variant="fp32", load_model=loader
    )
    assert loader.calls == 1
    return directory


def copy_cache(exported: Path, tmp_path: Path) -> Path:
    """A cache root holding a copy of the module's export (same name: same model, versions)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copytree(exported, cache / exported.name)
    return cache


def encode(directory: Path, texts: list[str]) -> np.ndarray:
    model = OnnxSentenceModel.load(directory, threads=1)
    return np.asarray(
        model.encode(
            texts,
            batch_size=len(texts),
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
    )


def test_the_export_matches_the_torch_model(exported: Path, tiny_model_dir: Path) -> None:
    assert verify(exported)
    assert {p.name for p in exported.iterdir()} == {GRAPH, TOKENIZER, MANIFEST}
    torch_model = load_for_export(tiny_model_dir)
    expected = torch_model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)  # type: ignore[attr-defined]
    got = encode(exported, TEXTS)
    assert got.shape == (len(TEXTS), 32)
    assert np.sum(got * expected, axis=1) == pytest.approx([1.0] * len(TEXTS), abs=1e-4)


def test_an_export_is_reused_not_made_again(exported: Path, tiny_model_dir: Path) -> None:
    again = cached_export(
        tiny_model_dir,
        exported.parent,
        name="tiny-minilm",
        variant="fp32",
        load_model=RefusingLoader(),
    )
    assert again == exported


@pytest.mark.parametrize(
    "damage",
    ["truncated graph", "one byte changed", "no manifest", "empty directory"],
)
def test_a_damaged_export_is_made_again(
    exported: Path, tiny_model_dir: Path, tmp_path: Path, damage: str
) -> None:
    cache = copy_cache(exported, tmp_path)
    target = cache / exported.name
    graph = target / GRAPH
    if damage == "truncated graph":
        graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])
    elif damage == "one byte changed":
        data = bytearray(graph.read_bytes())
        data[len(data) // 2] ^= 0xFF
        graph.write_bytes(bytes(data))
    elif damage == "no manifest":
        (target / MANIFEST).unlink()
    else:
        shutil.rmtree(target)
        target.mkdir()
    assert not verify(target)
    (cache / f".{target.name}.crashed").mkdir()  # the staging directory of a killed export
    loader = CountingLoader()
    directory = cached_export(
        tiny_model_dir, cache, name="tiny-minilm", variant="fp32", load_model=loader
    )
    assert loader.calls == 1
    assert directory == target
    assert verify(directory)
    np.testing.assert_allclose(encode(directory, TEXTS), encode(exported, TEXTS), atol=1e-6)
    assert [p.name for p in cache.iterdir() if p.is_dir()] == [target.name], "no leftovers"


def test_workers_starting_at_once_export_once(tiny_model_dir: Path, tmp_path: Path) -> None:
    loader = CountingLoader(delay=0.5)  # the others arrive while the first exports
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [
            pool.submit(
                cached_export,
                tiny_model_dir,
                tmp_path,
                name="tiny-minilm",
                variant="fp32",
                load_model=loader,
            )
            for _ in range(3)
        ]
        directories = {future.result() for future in futures}
    assert loader.calls == 1
    [directory] = directories
    assert verify(directory)
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == [directory.name]


def test_another_model_or_variant_gets_another_export(tiny_model_dir: Path, tmp_path: Path) -> None:
    model_dir = tmp_path / "tiny-minilm"
    shutil.copytree(tiny_model_dir, model_dir)  # modification times kept
    before = export_key(model_dir, "fp32")
    assert export_key(model_dir, "fp32") == before
    assert export_key(model_dir, "int8") != before
    config = (model_dir / "config.json").stat()
    os.utime(model_dir / "config.json", ns=(config.st_atime_ns, config.st_mtime_ns + 10**9))
    assert export_key(model_dir, "fp32") != before


def local_settings(model_dir: Path, cache_dir: Path, runtime: EmbeddingRuntime) -> Settings:
    return Settings(
        _env_file=None,
        embedding_provider=EmbeddingProvider.LOCAL,
        embedding_model=str(model_dir),
        embedding_dimensions=32,
        embedding_runtime=runtime,
        cache_dir=cache_dir,
    )


def test_the_int8_variant_has_its_own_model_id(tiny_model_dir: Path, tmp_path: Path) -> None:
    fp32 = LocalEmbedder.load(local_settings(tiny_model_dir, tmp_path, EmbeddingRuntime.ONNX))
    int8 = LocalEmbedder.load(local_settings(tiny_model_dir, tmp_path, EmbeddingRuntime.ONNX_INT8))
    assert fp32.model_id == "local:tiny-minilm"
    assert int8.model_id == "local:tiny-minilm+int8"
    assert isinstance(int8.model, OnnxSentenceModel)
    assert sorted(p.name.split("-")[2] for p in (tmp_path / "onnx").iterdir() if p.is_dir()) == [
        "fp32",
        "int8",
    ]
    vectors = np.array(int8.encode_blocking(TEXTS))
    reference = np.array(fp32.encode_blocking(TEXTS))
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.sum(vectors * reference, axis=1).min() > 0.9  # close, not the same vectors
