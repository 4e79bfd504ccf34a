"""Search, then the cited context block of an LLM prompt within a token budget.

The assembly (citations/, pure CPU work) runs on a worker thread so a large budget never
stalls the event loop; `context_ms` is its own time (and the neighbours' read, when asked
for), beside the search's timings.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import anyio

from app.citations import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_TOKENS,
    CitationStyle,
    ContextResult,
    TokenCounter,
    build_context_with_citations,
)
from app.db.tenancy import SessionMaker
from app.embeddings import Embedder
from app.retrieval.hits import Hit, SearchOutcome
from app.retrieval.neighbours import neighbours_of
from app.retrieval.requests import SearchRequest
from app.retrieval.rerank import Reranker
from app.retrieval.returns import ReturnCounter
from app.retrieval.search import search


@dataclass(frozen=True, slots=True)
class ContextOutcome:
    found: SearchOutcome
    built: ContextResult[Hit]
    context_ms: float


async def retrieve_context(
    sessions: SessionMaker,
    embedder: Embedder,
    counter: TokenCounter,
    *,
    tenant_id: str,
    request: SearchRequest,
    style: CitationStyle = CitationStyle.NUMBERED,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    max_chars: int = DEFAULT_MAX_CHARS,
    returns: ReturnCounter | None = None,
    neighbors: int = 0,
    reranker: Reranker | None = None,
) -> ContextOutcome:
    """The tenant's best chunks for `request`, as numbered context blocks with citations;
    each hit widened by `neighbors` chunks on either side in its document."""
    found = await search(
        sessions, embedder, tenant_id=tenant_id, request=request, returns=returns, reranker=reranker
    )
    started = time.perf_counter()
    around = await neighbours_of(sessions, tenant_id=tenant_id, hits=found.hits, reach=neighbors)
    built = await anyio.to_thread.run_sync(
        lambda: build_context_with_citations(
            found.hits,
            counter,
            style=style,
            max_tokens=max_tokens,
            max_chars=max_chars,
            neighbours=around,
        )
    )
    elapsed = round((time.perf_counter() - started) * 1000, 3)
    return ContextOutcome(found=found, built=built, context_ms=elapsed)
