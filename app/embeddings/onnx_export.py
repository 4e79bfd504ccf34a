"""The local model as an ONNX graph, exported once from its own weights into a cache directory.

``cached_export`` returns ``<cache>/<model>-<variant>-<key>/`` holding ``model.onnx`` (the whole
sentence-transformers pipeline: transformer, pooling, normalisation), ``tokenizer.json`` (the
model's tokenizer, truncating at its ``max_seq_length`` and padding to the longest text) and
``manifest.json`` (written last: every file's size and SHA-256, the dimensions, the versions).

- The key hashes the export format, the torch / onnxruntime / sentence-transformers versions,
  the variant and every model file's path, size and modification time: another model or
  another runtime version exports again, into another directory.
- The export is written into a temporary directory beside the target and renamed into place,
  under a file lock: workers starting at once export once, and none ever sees a half-written
  directory. A directory whose files do not match its manifest (truncated, damaged) is removed
  and exported again, as are the temporary directories of an export that crashed.
- Nothing is downloaded: the weights are the installed model's (the caller loads them).

The export uses torch's TorchScript exporter with eager attention, then ONNX Runtime's BERT
fusions (attention, embedding and skip layer norms, bias GELU), as Optimum's O2 level does;
Optimum itself needs transformers < 4.58 and cannot be installed beside sentence-transformers 6.
``int8`` quantises the weights of every MatMul per channel (dynamic quantisation).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

log = logging.getLogger(__name__)

FORMAT = 1  # bump when the export recipe changes: every cached graph is exported again
MANIFEST = "manifest.json"
GRAPH = "model.onnx"
TOKENIZER = "tokenizer.json"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "sentence_embedding"
OPSET = 17
FUSED_MODEL_TYPES = frozenset({"bert"})  # architectures ONNX Runtime's fusions are known for

Variant = Literal["fp32", "int8"]
# Loads the sentence-transformers model (a torch module) from the model directory.
ModelLoader = Callable[[Path], Any]


class ExportError(Exception):
    """The model could not be exported (a model the exporter cannot trace, a missing package)."""


def cached_export(
    model_dir: Path, cache_root: Path, *, name: str, variant: Variant, load_model: ModelLoader
) -> Path:
    """The verified export directory for this model, variant and versions; export if needed.

    ``name`` (the model's name, e.g. ``all-MiniLM-L6-v2``) only makes the directory readable.
    """
    key = export_key(model_dir, variant)
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    target = cache_root / f"{slug}-{variant}-{key[:16]}"
    if verify(target):
        return target
    from filelock import FileLock

    cache_root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if verify(target):  # another worker exported it while this one waited
            return target
        if target.exists():
            log.warning(
                "the cached ONNX export %s is damaged or incomplete: exporting again", target
            )
            _remove(target)
        for stale in cache_root.glob(f".{target.name}.*"):  # left by a crashed export
            shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=cache_root))
        try:
            started = time.perf_counter()
            export(model_dir, staging, variant=variant, key=key, load_model=load_model)
            staging.chmod(0o755)  # mkdtemp's 0700 would hide it from other users
            os.replace(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    log.info(
        "exported %s to ONNX (%s) in %s in %.1f s",
        name,
        variant,
        target,
        time.perf_counter() - started,
    )
    return target


def export_key(model_dir: Path, variant: Variant) -> str:
    """What the export depends on, hashed: format, versions, variant, the model's files."""
    digest = hashlib.sha256()
    parts: list[object] = [FORMAT, variant, OPSET, *(_version(p) for p in _PACKAGES)]
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        stat = path.stat()
        parts += [path.relative_to(model_dir).as_posix(), stat.st_size, stat.st_mtime_ns]
    digest.update(json.dumps(parts).encode())
    return digest.hexdigest()


def verify(directory: Path) -> bool:
    """True when the directory's manifest exists and every file it lists matches it."""
    try:
        manifest = read_manifest(directory)
        files = manifest["files"]
        for name in (GRAPH, TOKENIZER):
            expected = files[name]
            path = directory / name
            if path.stat().st_size != expected["size"] or _sha256(path) != expected["sha256"]:
                return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True


def read_manifest(directory: Path) -> dict[str, Any]:
    manifest = json.loads((directory / MANIFEST).read_text())
    if not isinstance(manifest, dict):
        raise ValueError(f"{directory / MANIFEST} is not an object")
    return manifest


def export(
    model_dir: Path, out: Path, *, variant: Variant, key: str, load_model: ModelLoader
) -> None:
    """Write graph, tokenizer and manifest (last) into ``out``. Blocking; imports torch."""
    try:
        import torch
    except ImportError as error:
        raise ExportError("exporting the model to ONNX needs torch (the 'local' extra)") from error
    model = load_model(model_dir)
    model.eval()
    prepare = getattr(model, "preprocess", None) or model.tokenize  # preprocess: ST >= 6
    examples = prepare(["an example sentence", "a second, longer one"])
    features = {name: value for name, value in examples.items() if name in INPUTS}
    names = [name for name in INPUTS if name in features]
    raw = out / "exported.onnx"
    try:
        # The tracer's notes (constants folded from shapes, the legacy exporter's deprecation)
        # are about this recipe, checked by tests/embeddings, not for whoever starts a server.
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _pipeline(model, names),
                tuple(features[name] for name in names),
                str(raw),
                input_names=names,
                output_names=[OUTPUT],
                dynamic_axes={
                    **{name: {0: "batch", 1: "sequence"} for name in names},
                    OUTPUT: {0: "batch"},
                },
                opset_version=OPSET,
                dynamo=False,
            )
    except (RuntimeError, TypeError, ValueError) as error:
        raise ExportError(f"torch.onnx.export failed for {model_dir}: {error}") from error
    _optimize(raw, out / GRAPH, config=_config(model_dir))
    raw.unlink()
    if variant == "int8":
        _quantize(out / GRAPH)
    tokenizer = model.tokenizer
    backend = tokenizer.backend_tokenizer
    backend.enable_truncation(max_length=int(model.max_seq_length))
    backend.enable_padding(pad_id=int(tokenizer.pad_token_id), pad_token=str(tokenizer.pad_token))
    backend.save(str(out / TOKENIZER))
    dimensions = _dimension(model)
    manifest = {
        "format": FORMAT,
        "key": key,
        "variant": variant,
        "model_dir": str(model_dir),
        "inputs": names,
        "dimensions": dimensions,
        "max_seq_length": int(model.max_seq_length),
        "versions": {p: _version(p) for p in _PACKAGES},
        "files": {name: _describe(out / name) for name in (GRAPH, TOKENIZER)},
    }
    _write_synced(out / MANIFEST, json.dumps(manifest, indent=2).encode())


def _pipeline(model: Any, names: list[str]) -> Any:
    """Positional tensors in, ``sentence_embedding`` out: the module the exporter traces."""
    import torch

    class Pipeline(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.model(dict(zip(names, tensors, strict=True)))[OUTPUT]
            return out

    return Pipeline().eval()


def _config(model_dir: Path) -> dict[str, Any]:
    """The transformer's config.json (architecture, heads, width); empty when unreadable."""
    try:
        config = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def _optimize(source: Path, target: Path, *, config: dict[str, Any]) -> None:
    """ONNX Runtime's transformer fusions where it knows the architecture, else a copy."""
    model_type = config.get("model_type")
    heads, hidden = config.get("num_attention_heads"), config.get("hidden_size")
    if model_type not in FUSED_MODEL_TYPES or not isinstance(heads, int):
        shutil.copyfile(source, target)
        return
    from onnxruntime.transformers.optimizer import optimize_model

    optimized = optimize_model(
        str(source),
        model_type=str(model_type),
        num_heads=heads,
        hidden_size=hidden if isinstance(hidden, int) else 0,
        opt_level=1,
    )
    fused = {op: n for op, n in optimized.get_fused_operator_statistics().items() if n}
    log.info("ONNX graph fusions: %s", fused)
    optimized.save_model_to_file(str(target))


def _quantize(graph: Path) -> None:
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantized = graph.with_name("quantized.onnx")
    quantize_dynamic(
        graph,
        quantized,
        weight_type=QuantType.QInt8,
        per_channel=True,  # per tensor lost up to 0.11 cosine on NFCorpus texts
        op_types_to_quantize=["MatMul"],
        extra_options={"DefaultTensorType": TensorProto.FLOAT},  # fused ops lack shape info
    )
    os.replace(quantized, graph)


def _dimension(model: Any) -> int:
    for method in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
        if callable(getter := getattr(model, method, None)) and isinstance(size := getter(), int):
            return size
    raise ExportError("the model does not report its embedding dimension")


def _describe(path: Path) -> dict[str, object]:
    _fsync(path)
    return {"size": path.stat().st_size, "sha256": _sha256(path)}


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _remove(directory: Path) -> None:
    """Move aside, then delete: a reader never finds a half-deleted directory at the name."""
    doomed = directory.with_name(f".{directory.name}.removing-{os.getpid()}")
    try:
        os.replace(directory, doomed)
    except OSError:
        return
    shutil.rmtree(doomed, ignore_errors=True)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


_PACKAGES = ("torch", "onnxruntime", "onnx", "sentence-transformers", "transformers")
