"""The exported sentence-transformers pipeline run by ONNX Runtime (no torch at run time).

``OnnxSentenceModel`` has the ``encode`` of ``SentenceTransformer`` that ``LocalEmbedder`` uses,
so the lanes, sub-batches and worker threads of local.py stay as they are: ``session.run``
releases the GIL, and a query runs beside a document batch in progress.

Threads: ``intra_op`` threads per inference (``RAG_EMBEDDING_THREADS``, default the cores this
process may use), one inter-op thread, and no spinning. ONNX Runtime's pool threads spin
waiting for work by default, as torch's OpenMP threads do (local.py sets OMP_WAIT_POLICY=PASSIVE
for those): on cores shared with PostgreSQL and the requests, spinning threads starve them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from app.embeddings.onnx_export import GRAPH, OUTPUT, TOKENIZER, read_manifest

# Texts per inference. ONNX Runtime's arena keeps the largest inference's buffers (attention
# grows with texts x tokens^2): 64 passages of 256 tokens left 1.3 GB resident, 16 about a
# quarter of that, at the same texts/s (11.8 against 10.7 on NFCorpus passages); without the
# arena, fresh pages for every inference cost a third of the throughput.
MAX_BATCH = 16

if TYPE_CHECKING:
    from onnxruntime import InferenceSession, SessionOptions
    from tokenizers import Tokenizer


class OnnxSentenceModel:
    """Tokenizer + ONNX session over an export directory (onnx_export.cached_export)."""

    def __init__(
        self,
        session: InferenceSession,
        tokenizer: Tokenizer,
        *,
        dimensions: int,
        max_seq_length: int,
    ) -> None:
        self.session = session
        self._tokenizer = tokenizer  # private: not the callable tokenizer of transformers
        self.max_seq_length = max_seq_length
        self._dimensions = dimensions
        self._inputs = {i.name: _numpy_type(i.type) for i in session.get_inputs()}

    @classmethod
    def load(cls, directory: Path, *, threads: int = 0) -> OnnxSentenceModel:
        """Open an export directory; ``threads`` 0: the cores this process may use."""
        import onnxruntime
        from tokenizers import Tokenizer

        manifest = read_manifest(directory)
        session = onnxruntime.InferenceSession(
            str(directory / GRAPH),
            session_options(threads),
            providers=["CPUExecutionProvider"],
        )
        return cls(
            session,
            Tokenizer.from_file(str(directory / TOKENIZER)),
            dimensions=int(manifest["dimensions"]),
            max_seq_length=int(manifest["max_seq_length"]),
        )

    def get_sentence_embedding_dimension(self) -> int:
        return self._dimensions

    def encode(
        self,
        inputs: list[str],
        *,
        batch_size: int,
        normalize_embeddings: bool,
        convert_to_numpy: Literal[True],
        show_progress_bar: bool,
    ) -> npt.NDArray[np.float32]:
        """Vectors for ``inputs`` in order, ``batch_size`` (at most MAX_BATCH) per inference."""
        del convert_to_numpy, show_progress_bar  # always numpy, never a progress bar
        step = max(1, min(batch_size, MAX_BATCH))
        batches = [self._run(inputs[start : start + step]) for start in range(0, len(inputs), step)]
        if not batches:
            return np.zeros((0, self._dimensions), dtype=np.float32)
        vectors = np.concatenate(batches)
        if normalize_embeddings:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.maximum(norms, 1e-12)
        return vectors

    def _run(self, texts: list[str]) -> npt.NDArray[np.float32]:
        encodings = self._tokenizer.encode_batch(texts)
        columns = {
            "input_ids": [e.ids for e in encodings],
            "attention_mask": [e.attention_mask for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
        }
        feed = {name: np.asarray(columns[name], dtype=kind) for name, kind in self._inputs.items()}
        return np.asarray(self.session.run([OUTPUT], feed)[0], dtype=np.float32)


def session_options(threads: int) -> SessionOptions:
    """CPU options: ``threads`` intra-op threads that sleep when idle, never spin."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads or available_cores()
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    options.log_severity_level = 3  # errors only: fused-graph notices are not for operators
    return options


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _numpy_type(onnx_type: str) -> Any:
    return {"tensor(int32)": np.int32, "tensor(int64)": np.int64}.get(onnx_type, np.int64)
