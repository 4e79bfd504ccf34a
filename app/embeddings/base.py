"""The Embedder protocol every provider satisfies, and the errors providers raise.

Model ids are stored with every vector and a search never mixes them:

- ``local:<name>``: a sentence-transformers model run in-process. ``<name>`` is the model's
  directory name (``all-MiniLM-L6-v2`` for the bundled default) or the hub id it was loaded by;
  never an absolute path, so the id survives moving the model or the virtualenv.
- ``openai:<model>@<dimensions>``: an OpenAI or OpenAI-compatible ``/embeddings`` endpoint.
  The dimensions are part of the id because text-embedding-3 vectors shortened with
  ``dimensions`` are different vectors from the full ones.

Prefixes (E5's ``query: ``/``passage: ``, BGE's instruction) are applied by the embedder, so
callers pass raw text; the exact text embedded is ``prefix + text``, which is what a text hash
deciding re-embedding must cover.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

from app.errors import ServiceUnavailable


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length vectors; one instance per process, owned by the lifespan."""

    @property
    def model_id(self) -> str:
        """Stable id stored with each vector, e.g. ``local:all-MiniLM-L6-v2``."""
        ...

    @property
    def dimensions(self) -> int:
        """Length of every vector this embedder returns."""
        ...

    @property
    def query_prefix(self) -> str: ...

    @property
    def passage_prefix(self) -> str: ...

    @property
    def max_input_tokens(self) -> int | None:
        """The most tokens the model reads of one text (None: no known limit); chunks are
        sized below it."""
        ...

    @property
    def tokenizer_file(self) -> Path | None:
        """The model's ``tokenizer.json``, for counting tokens as the model does (None: the
        configured or bundled one)."""
        ...

    async def embed_query(self, text: str) -> list[float]:
        """Embed one search query (``query_prefix`` applied)."""
        ...

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed passages (``passage_prefix`` applied), in order; batches internally."""
        ...

    async def check(self) -> None:
        """Return when the embedder works; raise ``EmbeddingError`` otherwise."""
        ...

    async def aclose(self) -> None: ...


class WrappedEmbedder:
    """An Embedder in front of another (`inner`): everything is delegated, and a subclass
    overrides what it adds (a cache, progress reports, a close that is not its to do)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    @property
    def query_prefix(self) -> str:
        return self.inner.query_prefix

    @property
    def passage_prefix(self) -> str:
        return self.inner.passage_prefix

    @property
    def max_input_tokens(self) -> int | None:
        return self.inner.max_input_tokens

    @property
    def tokenizer_file(self) -> Path | None:
        return self.inner.tokenizer_file

    async def embed_query(self, text: str) -> list[float]:
        return await self.inner.embed_query(text)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.inner.embed_documents(texts)

    async def check(self) -> None:
        await self.inner.check()

    async def aclose(self) -> None:
        await self.inner.aclose()


class EmbeddingError(ServiceUnavailable):
    """The embedding provider failed or is unreachable: 503 with ``Retry-After``."""

    title: ClassVar[str] = "Embedding provider unavailable"
    type_slug: ClassVar[str] = "embedding-unavailable"

    def __init__(
        self,
        detail: str,
        *,
        retry_after: float = 5.0,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        seconds = max(1, round(retry_after))
        super().__init__(detail, headers={"Retry-After": str(seconds)}, extra=extra)
        self.retry_after = seconds


class EmbeddingConfigError(EmbeddingError):
    """The embedder cannot work as configured (wrong dimensions, model, key)."""

    title: ClassVar[str] = "Embedding configuration error"
    type_slug: ClassVar[str] = "embedding-misconfigured"

    def __init__(self, detail: str, *, extra: Mapping[str, object] | None = None) -> None:
        super().__init__(detail, retry_after=60.0, extra=extra)


def with_prefix(prefix: str, texts: Sequence[str]) -> list[str]:
    """The exact texts a model sees: ``prefix + text`` for each."""
    return [prefix + text for text in texts]
