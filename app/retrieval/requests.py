"""A search as a door asks for it (`SearchRequest`), with the service's limits and defaults
applied.

Every door (POST /api/rag/search and /context, the MCP tools, `rag search`) builds its
`SearchRequest` here, so the same inputs give the same search: the query-length limit, the
per-model default threshold (beside the embedders), keyword mode ignoring thresholds, and the
configured index and fusion parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.embeddings.thresholds import default_threshold
from app.errors import Unprocessable
from app.inputs.vocabulary import FusionMethod, SearchMode
from app.retrieval.bm25 import Bm25Params
from app.retrieval.filters import SearchFilters
from app.settings import RerankProvider, Settings

__all__ = ["SearchMode", "SearchRequest", "search_request"]


@dataclass(frozen=True, slots=True)
class SearchRequest:
    query: str
    mode: SearchMode = SearchMode.VECTOR
    top_k: int = 5
    threshold: float | None = None
    filters: SearchFilters = field(default_factory=SearchFilters)
    ef_search: int | None = None  # None: by the size of the tenant's index (planning.py)
    rrf_k: int = 60
    candidates: int = 40  # over-fetch per ranking, at least top_k
    bm25: Bm25Params = field(default_factory=Bm25Params)
    fusion: FusionMethod = FusionMethod.WEIGHTED
    vector_weight: float = 0.6  # weighted fusion: the vector leg's share
    diversity: float | None = None  # MMR's lambda in (0, 1]; None or 0: ranking order
    rerank: bool = False  # a second stage orders `rerank_candidates` first-stage hits
    rerank_candidates: int = 50

    @property
    def fetch(self) -> int:
        """Candidates per ranking: `candidates`, at least `top_k`."""
        return max(self.candidates, self.top_k)


def search_request(
    settings: Settings,
    model_id: str,
    *,
    query: str,
    mode: SearchMode = SearchMode.VECTOR,
    top_k: int = 5,
    threshold: float | None = None,
    filters: SearchFilters | None = None,
    ef_search: int | None = None,
    fusion: FusionMethod | None = None,
    vector_weight: float | None = None,
    diversity: float | None = None,
    rerank: bool | None = None,
) -> SearchRequest:
    """The request for `query`; 422 (Unprocessable) when the query is too long, or reranking
    is asked for where no reranker is configured. `rerank` None: when one is."""
    configured = settings.rerank_provider is not RerankProvider.NONE
    if rerank and not configured:
        raise Unprocessable(
            "rerank: no reranker is configured (RAG_RERANK_PROVIDER)",
            extra={"errors": [{"field": "rerank", "message": "no reranker is configured"}]},
        )
    if len(query) > settings.query_max_chars:
        raise Unprocessable(
            f"query is longer than {settings.query_max_chars} characters",
            extra={"errors": [{"field": "query", "message": "too long"}]},
        )
    if threshold is None:
        threshold = default_threshold(settings, model_id)
    return SearchRequest(
        query=query,
        mode=mode,
        top_k=top_k,
        threshold=threshold if mode is not SearchMode.KEYWORD else None,
        filters=filters or SearchFilters(),
        ef_search=ef_search or settings.search_ef_search_default,
        rrf_k=settings.search_rrf_k,
        candidates=settings.search_candidates,
        bm25=Bm25Params(
            k1=settings.search_bm25_k1,
            b=settings.search_bm25_b,
            max_terms=settings.search_keyword_max_terms,
        ),
        fusion=fusion or FusionMethod(settings.search_fusion),
        vector_weight=(
            settings.search_fusion_vector_weight if vector_weight is None else vector_weight
        ),
        diversity=diversity or None,
        rerank=configured if rerank is None else rerank,
        rerank_candidates=settings.rerank_candidates,
    )
