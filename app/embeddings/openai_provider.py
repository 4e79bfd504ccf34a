"""OpenAI and OpenAI-compatible (Ollama, vLLM, TEI, Azure) embeddings over the official SDK.

The SDK's own retries are off (``max_retries=0``): this module retries 408/409/429/5xx and
connection errors itself, with exponential backoff and jitter, honouring ``Retry-After`` /
``retry-after-ms``, for at most ``openai_max_retries`` retries, then raises ``EmbeddingError``
(503 with ``Retry-After``). Requests carry at most ``embedding_batch_size`` (≤ 2048) inputs and
``max_request_chars`` characters, a conservative stand-in for OpenAI's 300k-token budget.

``dimensions`` is sent to text-embedding-3 models only, and only when it differs from the
model's native size, so servers that reject the parameter keep working; ``send_dimensions``
forces it either way. Vectors are returned in input order (by ``index``), checked against the
configured dimensions and normalised to unit length (not every compatible server does).

Vectors are asked for as base64 float32 (``openai_encoding_format``; ``float`` asks for JSON
numbers) and read from the raw reply by ``openai_reply``, in a worker thread when the reply is
large: the SDK's own parsing of JSON numbers took ~5 ms of event-loop CPU a 1536-dimension
vector. A server that answers numbers to a base64 request is read all the same.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from functools import partial
from pathlib import Path
from typing import Literal

import anyio
from openai import (
    NOT_GIVEN,
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AsyncOpenAI,
    NotGiven,
    Omit,
    omit,
)

from app.embeddings import openai_reply
from app.embeddings.base import EmbeddingConfigError, EmbeddingError, with_prefix
from app.errors import Unprocessable
from app.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_MODEL = "text-embedding-3-small"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
NATIVE_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
MAX_INPUTS_PER_REQUEST = 2048
DEFAULT_MAX_REQUEST_CHARS = 100_000
RETRYABLE_STATUSES = frozenset({408, 409, 429})

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``attempts`` in all (≥ 1); waits grow as base·2ⁿ up to ``max_delay``, with jitter."""

    attempts: int
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0

    def backoff(self, failures: int) -> float:
        ceiling = min(self.max_delay, self.base_delay * 2 ** (failures - 1))
        return random.uniform(ceiling / 2, ceiling)


class OpenAIEmbedder:
    """Embeds through ``POST {base_url}/embeddings``; build it with ``from_settings``."""

    def __init__(
        self,
        client: AsyncOpenAI,
        *,
        model: str,
        dimensions: int,
        retry: RetryPolicy,
        query_prefix: str = "",
        passage_prefix: str = "",
        batch_size: int = MAX_INPUTS_PER_REQUEST,
        max_request_chars: int = DEFAULT_MAX_REQUEST_CHARS,
        send_dimensions: bool | None = None,
        concurrency: int = 4,
        encoding_format: Literal["base64", "float"] = "base64",
        check_timeout: float = 5.0,
        check_ttl: float = 30.0,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        self._client = client
        self._model = model
        self._dimensions = dimensions
        self._retry = retry
        self._query_prefix = query_prefix
        self._passage_prefix = passage_prefix
        self._batch_size = min(batch_size, MAX_INPUTS_PER_REQUEST)
        self._max_request_chars = max_request_chars
        if send_dimensions is None:
            native = NATIVE_DIMENSIONS.get(model)
            send_dimensions = model.startswith("text-embedding-3") and native != dimensions
        self._dimensions_param: int | Omit = dimensions if send_dimensions else omit
        self._concurrency = concurrency
        self._encoding_format = encoding_format
        self._check_timeout = check_timeout
        self._check_ttl = check_ttl
        self._checked_at: float | None = None
        self._sleep = sleep

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        retry: RetryPolicy | None = None,
        sleep: Sleep = anyio.sleep,
        send_dimensions: bool | None = None,
    ) -> OpenAIEmbedder:
        key = settings.openai_api_key
        if key is None and settings.openai_base_url is None:
            raise EmbeddingConfigError(
                "the OpenAI embedder needs RAG_OPENAI_API_KEY (or RAG_OPENAI_BASE_URL for an "
                "OpenAI-compatible server that takes no key)"
            )
        client = AsyncOpenAI(
            api_key=key.get_secret_value() if key is not None else "no-key",
            base_url=settings.openai_base_url or DEFAULT_BASE_URL,
            timeout=settings.openai_timeout_seconds,
            max_retries=0,
        )
        return cls(
            client,
            model=settings.embedding_model or DEFAULT_MODEL,
            dimensions=settings.embedding_dimensions,
            retry=retry or RetryPolicy(attempts=settings.openai_max_retries + 1),
            query_prefix=settings.embedding_query_prefix,
            passage_prefix=settings.embedding_passage_prefix,
            batch_size=settings.embedding_batch_size,
            send_dimensions=send_dimensions,
            encoding_format=settings.openai_encoding_format,
            sleep=sleep,
        )

    # No tokenizer of the remote model here: chunks are sized by the configured tokenizer.
    max_input_tokens: int | None = None
    tokenizer_file: Path | None = None

    @property
    def model_id(self) -> str:
        return f"openai:{self._model}@{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def query_prefix(self) -> str:
        return self._query_prefix

    @property
    def passage_prefix(self) -> str:
        return self._passage_prefix

    async def embed_query(self, text: str) -> list[float]:
        [vector] = await self._embed(with_prefix(self._query_prefix, [text]))
        return vector

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed(with_prefix(self._passage_prefix, texts))

    async def check(self) -> None:
        """One tiny request, no retries, short timeout; a success is trusted for ``check_ttl``."""
        if self._checked_at is not None and time.monotonic() - self._checked_at < self._check_ttl:
            return
        try:
            body = await self._create(["ping"], request_timeout=self._check_timeout)
        except APIError as error:
            raise self._failure(error, attempts=1) from error
        await self._vectors(body, expected=1)
        self._checked_at = time.monotonic()

    async def aclose(self) -> None:
        await self._client.close()

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        if any(not text.strip() for text in texts):
            raise Unprocessable("cannot embed an empty text")
        batches = plan_batches(
            texts, max_inputs=self._batch_size, max_chars=self._max_request_chars
        )
        if len(batches) <= 1:
            return [vector for batch in batches for vector in await self._request(batch)]
        results: list[list[list[float]]] = [[] for _ in batches]
        failures: list[EmbeddingError] = []
        limiter = anyio.CapacityLimiter(self._concurrency)

        async def run(number: int, batch: list[str]) -> None:
            async with limiter:
                try:
                    results[number] = await self._request(batch)
                except EmbeddingError as error:
                    failures.append(error)
                    group.cancel_scope.cancel()

        async with anyio.create_task_group() as group:
            for number, batch in enumerate(batches):
                group.start_soon(run, number, batch)
        if failures:
            raise failures[0]
        return [vector for batch_vectors in results for vector in batch_vectors]

    async def _request(self, inputs: list[str]) -> list[list[float]]:
        for attempt in range(1, self._retry.attempts + 1):
            try:
                body = await self._create(inputs)
            except APIError as error:
                delay = self._retry_delay(error, attempt)
                if delay is None:
                    raise self._failure(error, attempts=attempt) from error
                log.warning(
                    "embedding request failed (%s), retry %d/%d in %.2f s",
                    _describe(error),
                    attempt,
                    self._retry.attempts - 1,
                    delay,
                )
                await self._sleep(delay)
            else:
                return await self._vectors(body, expected=len(inputs))
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _create(
        self, inputs: list[str], *, request_timeout: float | NotGiven = NOT_GIVEN
    ) -> bytes:
        """The reply's body, unparsed; error statuses raise as from ``embeddings.create``."""
        response = await self._client.embeddings.with_raw_response.create(
            input=inputs,
            model=self._model,
            dimensions=self._dimensions_param,
            encoding_format=self._encoding_format,
            timeout=request_timeout,
        )
        return response.content

    async def _vectors(self, body: bytes, *, expected: int) -> list[list[float]]:
        read = partial(
            openai_reply.unit_vectors,
            body,
            expected=expected,
            dimensions=self._dimensions,
            model=self._model,
        )
        if len(body) <= openai_reply.INLINE_MAX_BYTES:
            return read()
        return await anyio.to_thread.run_sync(read)

    def _retry_delay(self, error: APIError, attempt: int) -> float | None:
        """Seconds to wait before the next attempt, or None when retrying is pointless."""
        if attempt >= self._retry.attempts or not _transient(error):
            return None
        if isinstance(error, APIStatusError):
            hinted = retry_after_seconds(error.response.headers)
            if hinted is not None:
                return hinted if hinted <= self._retry.max_retry_after else None
        return self._retry.backoff(attempt)

    def _failure(self, error: APIError, *, attempts: int) -> EmbeddingError:
        log.error("embedding provider %s failed: %s", self._client.base_url, _describe(error))
        self._checked_at = None  # the next readiness check asks the provider again
        if isinstance(error, APITimeoutError):
            return EmbeddingError(
                f"the embedding provider did not answer within its timeout "
                f"(RAG_OPENAI_TIMEOUT_SECONDS) in {attempts} attempt(s)"
            )
        if not isinstance(error, APIStatusError):
            return EmbeddingError(
                f"the embedding provider is unreachable after {attempts} attempt(s)"
            )
        status = error.status_code
        if status in (401, 403):
            return EmbeddingConfigError(
                f"the embedding provider rejected the credentials (HTTP {status}): "
                "check RAG_OPENAI_API_KEY"
            )
        if status == 404:
            return EmbeddingConfigError(
                f"the embedding provider does not know model {self._model!r} (HTTP 404): "
                "check RAG_EMBEDDING_MODEL and RAG_OPENAI_BASE_URL"
            )
        hinted = retry_after_seconds(error.response.headers)
        return EmbeddingError(
            f"the embedding provider failed (HTTP {status}) after {attempts} attempt(s)",
            retry_after=hinted if hinted is not None else 5.0,
        )


def plan_batches(texts: Sequence[str], *, max_inputs: int, max_chars: int) -> list[list[str]]:
    """Consecutive batches of at most ``max_inputs`` texts and ``max_chars`` characters
    (a longer single text goes alone)."""
    batches: list[list[str]] = []
    current: list[str] = []
    size = 0
    for text in texts:
        if current and (len(current) >= max_inputs or size + len(text) > max_chars):
            batches.append(current)
            current, size = [], 0
        current.append(text)
        size += len(text)
    if current:
        batches.append(current)
    return batches


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """``retry-after-ms``, else ``Retry-After`` as seconds or an HTTP date."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            pass
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None
    return None


def _transient(error: APIError) -> bool:
    if isinstance(error, APIConnectionError):
        return True
    if not isinstance(error, APIStatusError):
        return False
    if error.code == "insufficient_quota":
        return False  # a 429 that waiting will not fix
    return error.status_code in RETRYABLE_STATUSES or error.status_code >= 500


def _describe(error: APIError) -> str:
    if isinstance(error, APIStatusError):
        return f"HTTP {error.status_code}: {error.message}"
    return f"{type(error).__name__}: {error.message}"
