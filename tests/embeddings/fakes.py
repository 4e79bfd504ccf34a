"""Test doubles: a counting embedder, a fake sentence model, a fake OpenAI embeddings server."""

from __future__ import annotations

import asyncio
import hashlib
from base64 import b64encode
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import numpy.typing as npt
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.embeddings.base import EmbeddingError


def fake_vector(text: str, dimensions: int) -> npt.NDArray[np.float64]:
    """A deterministic, deliberately non-unit vector for ``text``."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    return np.random.default_rng(seed).normal(size=dimensions) * 3.0


def unit(vector: npt.NDArray[np.float64]) -> list[float]:
    rows: list[float] = (vector / np.linalg.norm(vector)).tolist()
    return rows


class CountingEmbedder:
    """A deterministic offline Embedder that counts its calls."""

    max_input_tokens: int | None = None  # no model limit, no tokenizer of its own
    tokenizer_file: Path | None = None

    def __init__(self, model_id: str = "fake:hash", dimensions: int = 8) -> None:
        self.model_id = model_id
        self.dimensions = dimensions
        self.query_prefix = ""
        self.passage_prefix = ""
        self.query_calls: list[str] = []
        self.document_calls: list[list[str]] = []
        self.checks = 0
        self.closed = False
        self.healthy = True

    async def embed_query(self, text: str) -> list[float]:
        self.query_calls.append(text)
        return unit(fake_vector(f"{self.model_id}|{text}", self.dimensions))

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.document_calls.append(list(texts))
        return [unit(fake_vector(f"{self.model_id}|{t}", self.dimensions)) for t in texts]

    async def check(self) -> None:
        self.checks += 1
        if not self.healthy:
            raise EmbeddingError("fake embedder is down")

    async def aclose(self) -> None:
        self.closed = True


class FakeSentenceModel:
    """Stands in for SentenceTransformer: records every encode call."""

    def __init__(self, dimensions: int = 4) -> None:
        self.dimensions = dimensions
        self.calls: list[list[str]] = []

    def encode(
        self,
        inputs: list[str],
        *,
        batch_size: int,
        normalize_embeddings: bool,
        convert_to_numpy: bool,
        show_progress_bar: bool,
    ) -> npt.NDArray[np.float32]:
        self.calls.append(list(inputs))
        rows = [unit(fake_vector(text, self.dimensions)) for text in inputs]
        return np.asarray(rows, dtype=np.float32)


@dataclass
class ScriptedReply:
    """One reply given as it is: ``body`` as JSON, or ``raw`` bytes when set."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, object] = field(
        default_factory=lambda: {"error": {"message": "scripted failure", "type": "server_error"}}
    )
    raw: bytes | None = None


@dataclass
class FakeOpenAI:
    """Speaks ``POST /v1/embeddings`` like OpenAI; scripted replies go first. ``floats_only``
    answers numbers whatever ``encoding_format`` asks, as some compatible servers do."""

    api_key: str = "test-key"
    native_dimensions: int = 1536
    force_dimensions: int | None = None
    reverse: bool = False
    floats_only: bool = False
    delay: float = 0.0
    scripted: deque[ScriptedReply] = field(default_factory=deque)
    requests: list[dict[str, object]] = field(default_factory=list)

    def reset(self) -> None:
        fresh = FakeOpenAI()
        for item in fields(self):
            setattr(self, item.name, getattr(fresh, item.name))

    async def embeddings(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        if self.delay:
            await asyncio.sleep(self.delay)
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            error = {"message": "Incorrect API key provided", "code": "invalid_api_key"}
            return JSONResponse({"error": error}, status_code=401)
        if self.scripted:
            reply = self.scripted.popleft()
            if reply.raw is not None:
                return Response(reply.raw, status_code=reply.status, headers=reply.headers)
            return JSONResponse(reply.body, status_code=reply.status, headers=reply.headers)
        return JSONResponse(self._answer(body))

    def _answer(self, body: dict[str, object]) -> dict[str, object]:
        inputs = body["input"]
        assert isinstance(inputs, list)
        dimensions = self.force_dimensions or body.get("dimensions") or self.native_dimensions
        assert isinstance(dimensions, int)
        data = [
            {
                "object": "embedding",
                "index": index,
                "embedding": self._encode(text, dimensions, base64=self._base64(body)),
            }
            for index, text in enumerate(inputs)
        ]
        if self.reverse:
            data.reverse()
        usage = {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}
        return {"object": "list", "data": data, "model": body["model"], "usage": usage}

    def _base64(self, body: dict[str, object]) -> bool:
        return body.get("encoding_format") == "base64" and not self.floats_only

    @staticmethod
    def _encode(text: str, dimensions: int, *, base64: bool) -> list[float] | str:
        vector = fake_vector(text, dimensions)
        if base64:
            return b64encode(vector.astype("<f4").tobytes()).decode()
        rows: list[float] = vector.tolist()
        return rows
