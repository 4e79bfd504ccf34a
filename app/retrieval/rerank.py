"""A second stage: a rerank API orders the first stage's candidates by relevance to the query.

Three wire formats, so any server that speaks one works (Cohere, Jina, Hugging Face
text-embeddings-inference, and vLLM, Infinity or Xinference, which speak them too):

- `cohere`: POST {url}/v2/rerank `{model, query, documents, top_n}` ->
  `{results: [{index, relevance_score}]}`;
- `jina`: POST {url}/v1/rerank, the same shape;
- `tei`: POST {url}/rerank `{query, texts}` -> `[{index, score}]`.

One deadline, RAG_RERANK_TIMEOUT_SECONDS, bounds the whole call (connection, request and every
byte of the reply): a server trickling its reply cannot hold a search past it. The reply is
read as it comes and dropped past a bound (app/retrieval/rerank_reply.py): a failed rerank.

A reranker that fails (timeout, connection refused, 5xx, a reply of another shape or that
cannot be decoded at all) or refuses (4xx: most often its key) never fails the search: the
search answers in the first stage's order with a note saying why reranking was skipped. A
429 is a skip like a failure (a warning); another 4xx is a refusal, logged as an error, and
`rag_rerank_refusing` is 1 until a call succeeds again. The reranker is optional: nothing it
does makes /readyz fail. `rag_rerank_total{outcome}` counts each call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from app.observability.metrics import RERANK_REFUSING, RERANKS
from app.retrieval.rerank_reply import ReplyEncoded, ReplyTooLarge, post_for_reply, reply_bound
from app.settings import RerankProvider, Settings

_log = logging.getLogger(__name__)

DEFAULT_URLS = {
    RerankProvider.COHERE: "https://api.cohere.com",
    RerankProvider.JINA: "https://api.jina.ai",
}
PATHS = {
    RerankProvider.COHERE: "/v2/rerank",
    RerankProvider.JINA: "/v1/rerank",
    RerankProvider.TEI: "/rerank",
}


class RerankSkipped(Exception):
    """Reranking did not happen; `note` says why, in words for the caller."""

    def __init__(self, note: str, *, refused: bool = False) -> None:
        super().__init__(note)
        self.note = note
        self.refused = refused


@dataclass(frozen=True, slots=True)
class Ranked:
    index: int  # into the documents sent
    score: float


class Reranker:
    """One rerank API, through one kept-alive HTTP client."""

    def __init__(
        self,
        provider: RerankProvider,
        url: str,
        *,
        api_key: str | None,
        model: str | None,
        timeout_seconds: float,
    ) -> None:
        self.provider, self.model, self.timeout_seconds = provider, model, timeout_seconds
        self.endpoint = url.rstrip("/") + PATHS[provider]
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(headers=headers, timeout=timeout_seconds)
        self.refusal: str | None = None  # the last refusal, until a call succeeds

    @classmethod
    def from_settings(cls, settings: Settings) -> Reranker | None:
        """None without a provider; ValueError when the settings cannot work."""
        provider = settings.rerank_provider
        if provider is RerankProvider.NONE:
            return None
        url = settings.rerank_url or DEFAULT_URLS.get(provider)
        if url is None:
            raise ValueError(f"RAG_RERANK_URL is required for RAG_RERANK_PROVIDER={provider}")
        if provider is not RerankProvider.TEI and not settings.rerank_model:
            raise ValueError(f"RAG_RERANK_MODEL is required for RAG_RERANK_PROVIDER={provider}")
        key = settings.rerank_api_key.get_secret_value() if settings.rerank_api_key else None
        return cls(
            provider,
            url,
            api_key=key,
            model=settings.rerank_model,
            timeout_seconds=settings.rerank_timeout_seconds,
        )

    async def rerank(self, query: str, documents: Sequence[str]) -> list[Ranked]:
        """`documents` ordered best first (indexes into them, with scores); RerankSkipped
        when the reranker fails or refuses."""
        if not documents:
            return []
        bound = reply_bound(documents)
        try:
            async with asyncio.timeout(self.timeout_seconds):  # the whole call, body included
                status, content = await post_for_reply(
                    self._client, self.endpoint, body=self._body(query, documents), bound=bound
                )
        except (TimeoutError, httpx.TimeoutException):
            raise self._skipped("the reranker did not answer in time") from None
        except ReplyTooLarge:
            raise self._skipped(
                f"the reranker's reply was too large (over {bound} bytes)"
            ) from None
        except ReplyEncoded as encoding:
            note = f"the reranker's reply was not understood (compressed: {encoding})"
            raise self._skipped(note) from None
        except httpx.HTTPError as error:
            note = f"the reranker could not be reached ({type(error).__name__})"
            raise self._skipped(note) from None
        if status == 429:
            raise self._skipped("the reranker is rate limiting (429)")
        if 400 <= status < 500:
            raise self._refused(status, content)
        if status >= 300:
            raise self._skipped(f"the reranker failed ({status})")
        try:
            ranked = self._parse(json.loads(content), len(documents))
        except Exception:  # whatever the reply: RecursionError (deep nesting), OverflowError...
            raise self._skipped("the reranker's reply was not understood") from None
        self._set_refusal(None)
        RERANKS.labels(outcome="reranked").inc()
        return ranked

    async def aclose(self) -> None:
        await self._client.aclose()

    def _body(self, query: str, documents: Sequence[str]) -> dict[str, Any]:
        if self.provider is RerankProvider.TEI:
            return {"query": query, "texts": list(documents)}
        return {
            "model": self.model,
            "query": query,
            "documents": list(documents),
            "top_n": len(documents),
        }

    def _parse(self, payload: Any, count: int) -> list[Ranked]:
        rows = payload if self.provider is RerankProvider.TEI else payload["results"]
        key = "score" if self.provider is RerankProvider.TEI else "relevance_score"
        ranked = [Ranked(int(row["index"]), float(row[key])) for row in rows]
        if any(not 0 <= r.index < count for r in ranked):
            raise ValueError("an index out of range")
        if not all(math.isfinite(r.score) for r in ranked):
            raise ValueError("a score that is not a number")
        ranked.sort(key=lambda r: -r.score)
        first: dict[int, Ranked] = {}
        for r in ranked:
            first.setdefault(r.index, r)
        return list(first.values())

    def _refused(self, status: int, content: bytes) -> RerankSkipped:
        reason = f"the reranker refused the request ({status})"
        self._set_refusal(f"{reason}: {content[:200].decode(errors='replace')}")
        _log.error("rerank refused: %s (check RAG_RERANK_API_KEY and RAG_RERANK_MODEL)",
                   self.refusal)  # fmt: skip
        RERANKS.labels(outcome="refused").inc()
        return RerankSkipped(reason, refused=True)

    def _set_refusal(self, refusal: str | None) -> None:
        self.refusal = refusal
        RERANK_REFUSING.set(0 if refusal is None else 1)

    def _skipped(self, note: str) -> RerankSkipped:
        _log.warning("rerank skipped: %s", note)
        RERANKS.labels(outcome="skipped").inc()
        return RerankSkipped(note)
